"""Inside one sandbox: warm up once, then fork one fresh runner per student.

This is the guest's one program: started on a runner's pipes instead of a
control socket, it warms up and forks the same way, just once, and waits
for that runner (`serve_fresh`), so the two kinds of runner look alike to
student code.

A fresh runner spends seconds of CPU before it has done anything for its
student: the interpreter, IPython, ``import torch`` and matplotlib, the
font cache, and torch._dynamo + sympy (imported by the first meta-device
op).  The zygote pays that once.  It is started by the grader
(``forkserver.py``) through the same `launcher.sandboxed_popen` as a fresh
runner, so it has the same mounts, namespaces and limits, and it never runs
student code itself.  For each student it forks a child that becomes an
ordinary runner (``runner.serve``) on pipes the grader passed in.

One student at a time, and nothing of one student reaches the next:

* A child is forked from the zygote, whose memory no student code ever
  touched; the zygote is non-dumpable, so no student process can ptrace it,
  read or write its memory, or open its descriptors through /proc.  The
  child closes the control socket at once, so it cannot talk to the grader
  in the zygote's name; replies carry the grader's nonce anyway.
* As root (``launcher.ZYGOTE_CAPS``), each child hands the writable places
  to a new random uid, drops to it (no capability left, checked) and sets
  RLIMIT_NPROC for it, before any student code runs: a runner cannot
  signal, prlimit, renice, reschedule or pin the zygote, and its fork bomb
  counts only its own tasks.  Without root all share one uid, hence:
* The zygote records its own process state after warm-up (rlimits, nice,
  scheduling, affinity, I/O priority, oom_score_adj, ids, capabilities)
  and before each fork and in each reset puts back what it may and compares;
  a difference means "dirty" (or a refused fork), and the grader throws the
  sandbox away rather than hand a runner a changed inheritance.
* ``reset`` (after every runner, and before a replay) kills every process
  in the sandbox's pid namespace but bwrap's init and the zygote, removes
  System V IPC objects, and restores scratch (the cwd and HOME), /tmp and
  /dev/shm -- their contents and each top's own mode and owner -- to what
  they held after warm-up.  It replies "clean" only when it has checked all
  of that; otherwise the grader throws the whole sandbox away.  Keys and
  POSIX message queues need no reset: the syscall filter refuses them.
* The child looks like a fresh runner: its parent is bwrap's init (the
  zygote forks twice), the session and process group of bwrap's init, fresh seeds for
  the global RNGs of Python, numpy and torch (a fresh process seeds each
  from the OS), the dumpable flag a fresh process has, warm-up warnings not
  "already shown".

The zygote refuses to run outside its own pid namespace (it would kill
processes it does not own); the grader only uses it under bubblewrap.

This module serves; the steps live beside it: ``warmup.py`` (the warm-up),
``reset.py`` (the writable places, processes and IPC laid back),
``selfcheck.py`` (the inherited process state) and ``uids.py`` (a uid per
runner).

Control messages (SOCK_SEQPACKET on fd 0, one JSON object each)::

    grader -> zygote   {"op": "fork", "nonce": N}  + fds (stdin, stdout, stderr)
                       {"op": "reset", "nonce": N}
    zygote -> grader   {"op": "ready", "cpu": s}   once warmed up
                       {"op": "forked", "nonce": N} | {"op": "dirty", ...} (fork refused)
                       {"op": "clean", "nonce": N, "cpu": s} | {"op": "dirty", "nonce": N, "detail": "..."}
"""
import gc

# Until the warm-up has frozen what it imported (`warmup.warm_up`, which turns the collector back on):
# imports allocate millions of objects that live as long as the zygote, and every collection among
# them walks them all again (a large share of the warm-up's CPU: python -m benchmarks fresh-runner-cost).
gc.disable()

import ctypes  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import select  # noqa: E402
import socket  # noqa: E402
import stat  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Callable, NoReturn, Optional, Sequence  # noqa: E402

# `python -I` leaves this directory off sys.path; the guest files import each other by name.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import runner as sandbox_runner  # noqa: E402
from reset import kill_others, remove_ipc, restore, snapshot  # noqa: E402
from selfcheck import check_state, process_state  # noqa: E402
from uids import UIDS, new_uid, switch_uid, switches_uids  # noqa: E402
from warmup import warm_up  # noqa: E402

RUNNER_PATH = os.path.abspath(sandbox_runner.__file__)
PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3

_libc = ctypes.CDLL(None, use_errno=True)


def become_runner(runner: sandbox_runner.Runner, control: Optional[socket.socket], fds: Sequence[int], dumpable: int,
                  uid: Optional[int], taken: dict[str, dict], nproc: int, structure: dict[str, dict]) -> NoReturn:
    """In the forked child: take the grader's pipes and serve as a fresh runner. Never returns."""
    try:
        if control is not None:
            control.close()
        stdin, stdout, stderr = fds
        if uid is not None:
            switch_uid(uid, taken, nproc, structure)
        _libc.prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0)  # after the uid switch, which resets it
        for source, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(source, target)
            os.close(source)
        random.seed()  # a fresh process seeds these from the OS
        sys.modules["numpy"].random.seed()
        sys.modules["torch"].seed()
        sys.argv = [RUNNER_PATH]
        sandbox_runner.serve(runner, *sandbox_runner.take_stdio())
    finally:
        os._exit(70)


def serve(control: socket.socket, nproc: int = -1, uids: tuple[int, int] = UIDS) -> None:
    if not in_own_sandbox():
        _send(control, {"op": "refused", "detail": "the zygote needs a pid namespace of its own (bwrap)"})
        os._exit(2)
    dumpable = _libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    structure = snapshot()  # what bwrap made in /tmp (the grader's mount points): never the runner's
    runner, taken = warm_up()
    state, switch, uid = process_state(), switches_uids(), None
    _send(control, {"op": "ready", "cpu": time.process_time()})
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(control, 4096, 3)
        except (ConnectionError, OSError):
            return
        if not data:
            return  # the grader closed its end
        msg = json.loads(data)
        op, nonce = msg.get("op"), msg.get("nonce")
        if op == "fork" and len(fds) == 3:
            problem = check_state(state)
            if problem:  # refuse: the grader throws this sandbox away
                for fd in fds:
                    os.close(fd)
                _send(control, {"op": "dirty", "nonce": nonce, "detail": problem})
                continue
            uid = new_uid(uids, uid) if switch else None
            fork_runner(functools.partial(become_runner, runner, control, fds, dumpable, uid, taken, nproc, structure))
            for fd in fds:
                os.close(fd)
            _send(control, {"op": "forked", "nonce": nonce})
        elif op == "reset":
            for fd in fds:
                os.close(fd)
            problem = "" if kill_others() else "processes survive SIGKILL"
            problem = problem or remove_ipc() or restore(taken) or check_state(state)
            if problem:
                _send(control, {"op": "dirty", "nonce": nonce, "detail": problem})
            else:
                _send(control, {"op": "clean", "nonce": nonce, "cpu": time.process_time()})
        else:
            for fd in fds:
                os.close(fd)
            _send(control, {"op": "unknown", "nonce": nonce})


def _send(control, msg):
    control.send(json.dumps(msg).encode())


def serve_fresh(nproc: int = -1, uids: tuple[int, int] = UIDS) -> NoReturn:
    """A runner started on its own (the fallback where no fork server can run): a zygote that forks just one.

    It is launched, warms up and forks exactly as `serve` does (as root: the
    runner gets a uid of its own and this process keeps uid 0), so student
    code finds the same process in both kinds of runner (program, modules,
    frozen objects, open files, what at-fork handlers reset, parent, uids,
    what it may signal) and a notebook cannot earn a different grade from
    ``sdpa-course`` than from stock nbgrader.  This process then only waits
    for its runner and ends with it.  Outside bubblewrap (the unisolated
    fallback, whose /tmp is the host's) it serves as the runner itself and
    lays back no files.
    """
    fds = [os.dup(0), os.dup(1), os.dup(2)]  # the grader's pipes, out of the warm-up's reach
    _stdio_to_devnull()
    dumpable = _libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)
    if not in_own_sandbox():
        runner, _ = warm_up(restore_files=False)
        become_runner(runner, None, fds, dumpable, None, {}, -1, {})
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    structure = snapshot()
    runner, taken = warm_up()
    uid = new_uid(uids, None) if switches_uids() else None
    child = fork_runner(functools.partial(become_runner, runner, None, fds, dumpable, uid, taken, nproc, structure))
    for fd in fds:
        os.close(fd)
    try:
        waiter = select.poll()
        waiter.register(os.pidfd_open(child), select.POLLIN)
        waiter.poll()  # until the runner has ended; bwrap's init then ends the sandbox with us
    except OSError:
        pass  # the runner is gone already
    os._exit(0)


def fork_runner(start: Callable[[], NoReturn]) -> int:
    """Fork the runner (`start`) twice over, so that its parent is bwrap's init; returns its pid.

    The middle process is reaped before this returns and before the runner
    starts: until then the runner would be its child, not init's, and the
    grader that looks for it (`procs.runner_pid`, ``forkserver.py``)
    would find the middle one.
    """
    go_r, go_w = os.pipe()
    report_r, report_w = os.pipe()
    middle = os.fork()
    if middle == 0:
        try:  # the middle process never returns into the caller's loop, even if this fork fails
            child = os.fork()
            if child == 0:
                for fd in (report_r, report_w, go_w):
                    os.close(fd)
                os.read(go_r, 1)  # end of file once the middle process is reaped
                os.close(go_r)
                start()
            os.write(report_w, str(child).encode())
        finally:
            os._exit(0)
    os.close(report_w)
    os.close(go_r)
    os.waitpid(middle, 0)
    os.close(go_w)
    with os.fdopen(report_r, "rb") as report:
        return int(report.read(32) or 0)


def in_own_sandbox() -> bool:
    """pid 2 of a pid namespace whose init is bubblewrap's: only then are scratch, /tmp and /dev/shm ours
    to lay back and every other process ours to kill (a grader that is a container's init is not bwrap)."""
    try:
        with open("/proc/1/comm", "rb") as f:
            init = f.read().strip()
    except OSError:
        return False
    return os.getpid() == 2 and os.getppid() == 1 and init == b"bwrap"


def _stdio_to_devnull() -> None:
    """fds 0 and 1 on /dev/null: nothing the warm-up prints reaches the grader (its channels are dup'ed away)."""
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)


def main() -> None:
    """argv: [max_processes uid_base uid_span] (``runners.runner_command``): the runners' RLIMIT_NPROC and uids.

    A control socket on fd 0 makes this a zygote (``forkserver.py``); a pipe, a fresh runner.
    """
    numbers = [int(arg) for arg in sys.argv[1:4]]
    nproc, uids = (numbers[0], (numbers[1], numbers[2])) if len(numbers) == 3 else (-1, UIDS)
    if not stat.S_ISSOCK(os.fstat(0).st_mode):
        serve_fresh(nproc, uids)
    control = socket.socket(fileno=os.dup(0))
    _stdio_to_devnull()
    serve(control, nproc, uids)


if __name__ == "__main__":
    main()
