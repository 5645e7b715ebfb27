"""Host processes seen through /proc: a sandbox's runner, its state, and killing a whole sandbox; and the
trusted side's own helper processes (their environment, their end with their parent).

Read by the trusted side only; the parsing is ``guest/procfs.py``'s, which
never raises for a process that ends meanwhile.
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Optional

from .guest import procfs


def kill_tree(proc: subprocess.Popen, timeout: float = 5.0, foreign: bool = False) -> None:
    """SIGKILL the sandbox and everything in it, and wait until it is gone.

    Killing the pid namespace's init (bwrap's child) makes the kernel kill
    every process inside; the process group covers the fallback mode.  Only
    a pid nobody has reaped is signalled: a reaped one may be another
    process's by now.  `foreign`: `proc` was started by this process's
    parent (a worker's zygote, ``ForkServer.release``), so it cannot be
    waited for here; its pid stays its own (alive or a zombie) until the
    parent reaps it, which the parent does only once this process is gone.
    """
    inits = []
    if _unreaped(proc, foreign):
        inits = children(proc.pid)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in inits:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.wait()
    deadline = time.monotonic() + timeout
    while any(_alive(pid) for pid in inits) and time.monotonic() < deadline:
        time.sleep(0.005)


def _unreaped(proc: subprocess.Popen, foreign: bool) -> bool:
    """Whether `proc`'s pid is still its own: running, or exited and not reaped (checked without reaping)."""
    if proc.returncode is not None:
        return False
    if foreign:
        return True
    try:
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # reaped elsewhere
        return False
    return True


def task_count(uid: int) -> int:
    """Tasks (threads) of `uid` on the host: RLIMIT_NPROC counts them all."""
    count = 0
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and os.stat(f"/proc/{name}").st_uid == uid:
                count += len(os.listdir(f"/proc/{name}/task"))
        except OSError:
            pass
    return count


def children(pid: int) -> list[int]:
    """Host pids whose parent is `pid`."""
    return [p for p in procfs.pids() if procfs.parent(p) == pid]


def _alive(pid):
    return procfs.state(pid) not in ("", "Z")


def process_state(pid: int) -> str:
    """The one-letter state of a host process ('R', 'S', 'T' stopped, 'Z'...), '' if it is gone."""
    return procfs.state(pid)


def runner_pid(proc: subprocess.Popen) -> int | None:
    """Host pid of the runner a just-started sandbox runs (below bwrap and its init), or None.

    Call it before untrusted code runs: it follows the only child down from
    `proc`.  Below bwrap's init, pid 2 of the sandbox is the process that
    forked the runner and waits for it (``zygote.serve_fresh``); the runner
    is init's other child.
    """
    pid = proc.pid
    for _ in range(3):
        kids = children(pid)
        if len(kids) == 2 and namespace_pid(pid) == 1:
            kids = [kid for kid in kids if namespace_pid(kid) != 2]
        if len(kids) != 1:
            break
        pid = kids[0]
    return pid if process_state(pid) else None


def namespace_pid(pid: int) -> int | None:
    """`pid`'s pid in its own (innermost) pid namespace, from the kernel's NSpid line; None if unknown."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError):
        pass
    return None


def python_child_env() -> dict:
    """The environment of a Python child started with ``-m autograder...``: this one, with the directory
    holding the `autograder` package first on its path (wherever the child starts)."""
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def die_with_parent(parent: Optional[int] = None) -> None:
    """Linux: SIGKILL this process when its parent dies (its runners follow: bwrap --die-with-parent).
    `parent`: the pid expected as parent; if it has ended already (before the request took effect), exit now."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if parent is not None and os.getppid() != parent:
        os._exit(0)
