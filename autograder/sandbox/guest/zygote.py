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

Control messages (SOCK_SEQPACKET on fd 0, one JSON object each)::

    grader -> zygote   {"op": "fork", "nonce": N}  + fds (stdin, stdout, stderr)
                       {"op": "reset", "nonce": N}
    zygote -> grader   {"op": "ready", "cpu": s}   once warmed up
                       {"op": "forked", "nonce": N} | {"op": "dirty", ...} (fork refused)
                       {"op": "clean", "nonce": N, "cpu": s} | {"op": "dirty", "nonce": N, "detail": "..."}
"""
import ctypes
import functools
import gc
import json
import os
import random
import resource
import select
import shutil
import signal
import socket
import stat
import sys
import time
from typing import Callable, NoReturn, Optional, Sequence

# `python -I` leaves this directory off sys.path; the guest files import each other by name.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import procfs  # noqa: E402
import runner as sandbox_runner  # noqa: E402

RUNNER_PATH = os.path.abspath(sandbox_runner.__file__)
PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3
CAP_SETUID = 7
IPC_RMID = 0
SNAPSHOT_MAX_BYTES = 16 * 2**20
KILL_SECONDS = 5.0
UIDS = (0x5A000000, 1 << 20)  # (base, span) of the runners' uids when no arguments say (launcher.UID_BASE/SPAN)

_libc = ctypes.CDLL(None, use_errno=True)


def warm_up(restore_files: bool = True) -> tuple[sandbox_runner.Runner, dict[str, dict]]:
    """Import and run, once, what every runner needs; returns (runner, snapshot of its files).

    The snapshot is taken after the imports of the release's first cell (which
    every runner executes, e.g. matplotlib's font cache in /tmp/mpl) and laid
    back down after the rest of the warm-up (`restore_files`), as are the
    environment variables: a runner starts as it would stand after that first
    cell had it imported nothing before.
    """
    import io
    import warnings

    runner = sandbox_runner.new_runner()
    import matplotlib.pyplot  # noqa: F401 - after the shell exists, as the release's first cell does
    import numpy  # noqa: F401
    import torch
    import torch.nn.functional  # noqa: F401
    from matplotlib.figure import Figure

    taken, environment = snapshot() if restore_files else {}, dict(os.environ)
    odd = [rel for entries in taken.values() for rel, entry in entries.items() if entry[1] == "other"]
    if odd:
        raise RuntimeError(f"cannot snapshot links or special files in scratch or /tmp: {odd[:3]}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for device in ("cpu", "meta"):  # meta: the first op imports torch._dynamo and sympy
            for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
                q = torch.arange(24, dtype=dtype, device=device).reshape(2, 3, 4)
                k = torch.arange(40, dtype=dtype, device=device).reshape(2, 5, 4)
                scores = (q @ k.transpose(-2, -1)) / 2.0
                mask = torch.ones(3, 5, dtype=torch.bool, device=device).triu(1)
                scores = scores.masked_fill(mask, float("-inf"))
                scores = scores - scores.amax(dim=-1, keepdim=True)
                weights = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)
                torch.where(mask, torch.zeros((), dtype=dtype), weights) @ k
        # An off-screen figure (not pyplot's: nothing may wait to be shown) loads the fonts.
        fig = Figure(figsize=(3, 3))
        ax = fig.subplots()
        ax.set_title("注意力权重 attention")
        fig.colorbar(ax.imshow(torch.arange(16.0).reshape(4, 4).numpy()), ax=ax)
        ax.text(0, 0, "0.25")
        fig.savefig(io.BytesIO(), format="png")
    os.environ.clear()
    os.environ.update(environment)  # e.g. TORCHINDUCTOR_CACHE_DIR, set by importing torch._dynamo
    problem = restore(taken) if restore_files else ""
    if problem:
        raise RuntimeError(problem)
    # Everything so far lives as long as the zygote: out of the collector's sight, a runner's first
    # full collection does not walk torch's and matplotlib's objects (about 0.1 s each) nor copy
    # the pages that hold them.
    gc.collect()
    gc.freeze()
    return runner, taken


# -- the writable places, restored on every reset ------------------------------

def writable_places() -> tuple[str, str, str]:
    """Scratch (the cwd and HOME) and the private tmpfs mounts: all a runner can write."""
    return (os.getcwd(), "/tmp", "/dev/shm")


def snapshot() -> dict[str, dict]:
    """{top: {relative path: (mode, bytes or None for a directory, uid, gid)}} of the writable places.

    The top itself is the entry "" (a runner may chmod its scratch dir).
    Only the place's own filesystem counts: read-only binds inside it (the
    grader's files under /tmp, say) are not the runner's to change.
    """
    taken, total = {}, 0
    for top in writable_places():
        info = os.lstat(top)
        entries, dev = {"": (stat.S_IMODE(info.st_mode), None, info.st_uid, info.st_gid)}, info.st_dev
        for rel, info in _walk(top, dev):
            path, owner = os.path.join(top, rel), (info.st_uid, info.st_gid)
            if stat.S_ISDIR(info.st_mode):
                entries[rel] = (stat.S_IMODE(info.st_mode), None, *owner)
            elif stat.S_ISREG(info.st_mode):
                with open(path, "rb") as f:
                    data = f.read()
                total += len(data)
                entries[rel] = (stat.S_IMODE(info.st_mode), data, *owner)
            else:  # a symlink, fifo...: recorded by kind, so that a restore notices it
                entries[rel] = (stat.S_IFMT(info.st_mode), "other", *owner)
        taken[top] = entries
    if total > SNAPSHOT_MAX_BYTES:
        raise RuntimeError(f"warm-up left {total} bytes in scratch and /tmp")
    return taken


def _walk(top, dev, unlock=False):
    """(relative path, lstat) of everything under `top` on device `dev`, parents first.

    A directory is entered only if it is still there once the caller has seen
    it (so the caller may remove it); `unlock` first opens locked ones.
    """
    stack = [""]
    while stack:
        rel = stack.pop()
        path = os.path.join(top, rel)
        if unlock and rel:
            _unlock(path)
        for name in sorted(os.listdir(path)):
            child = os.path.join(rel, name)
            child_path = os.path.join(top, child)
            info = os.lstat(child_path)
            if info.st_dev != dev:
                continue
            yield child, info
            if stat.S_ISDIR(info.st_mode) and os.path.isdir(child_path) and not os.path.islink(child_path):
                stack.append(child)


def _unlock(path):
    """Let us list and empty a directory the student locked (chmod 000)."""
    try:
        if not os.path.islink(path):
            os.chmod(path, 0o700)
    except OSError:
        pass


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        _unlock(path)
        for root, dirs, _files in os.walk(path):
            for name in dirs:
                _unlock(os.path.join(root, name))
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _own(path, mode, uid, gid):
    """Give `path` its recorded owner, then its mode (a chown may clear set-id bits)."""
    info = os.lstat(path)
    if (info.st_uid, info.st_gid) != (uid, gid):
        os.lchown(path, uid, gid)
        info = os.lstat(path)
    if stat.S_IMODE(info.st_mode) != mode:
        os.chmod(path, mode)


def _sync(top, entries):
    """Make `top` hold what `entries` says again: remove the rest, rewrite what changed."""
    _own(top, *entries[""][:1], *entries[""][2:])  # first: the runner may have locked the top itself
    for rel, info in _walk(top, os.lstat(top).st_dev, unlock=True):
        want = entries.get(rel)
        kept = want is not None and (stat.S_ISDIR(info.st_mode) if want[1] is None else
                                     isinstance(want[1], bytes) and stat.S_ISREG(info.st_mode))
        if not kept:
            _remove(os.path.join(top, rel))  # new, or of another kind than before (warm-up makes no symlinks)
    for rel, (mode, data, uid, gid) in sorted(entries.items()):  # parents before children
        if not rel:
            continue
        path = os.path.join(top, rel)
        if data is None:
            if not os.path.lexists(path):
                os.mkdir(path, mode)
        elif isinstance(data, bytes):
            current = None
            if os.path.lexists(path):
                with open(path, "rb") as f:
                    current = f.read()
            if current != data:
                with open(path, "wb") as f:
                    f.write(data)
        else:
            continue
        _own(path, mode, uid, gid)


def restore(taken: dict[str, dict]) -> str:
    """Put every writable place back as in the snapshot, and check that; '' if it worked."""
    try:
        for top, entries in taken.items():
            _sync(top, entries)
        if snapshot() != taken:
            return "scratch or /tmp differ from the snapshot after restoring it"
    except OSError as exc:
        return f"cannot restore scratch and /tmp: {exc}"
    return ""


# -- processes and IPC --------------------------------------------------------

def _others():
    """Live processes of this pid namespace other than its init and us."""
    me, found = os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (1, me):
            continue
        if procfs.state(name) not in ("", "Z"):  # '' : gone meanwhile
            found.append(int(name))
    return found


def _reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_others() -> bool:
    """SIGKILL every other process in the namespace until none is left; False if that fails."""
    deadline = time.monotonic() + KILL_SECONDS
    while True:
        try:
            os.kill(-1, signal.SIGKILL)  # all we may signal here, except init and ourselves
        except ProcessLookupError:
            pass
        _reap()
        if not _others():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)


def remove_ipc() -> str:
    """Delete System V shared memory, semaphores and message queues; '' if none is left.

    Only an object's owner (or CAP_SYS_ADMIN, which the zygote lacks) may
    remove it: as root the zygote takes the runner's uid as effective uid
    for that.  (POSIX message queues and keys are refused by the syscall
    filter of ``launcher.py``, so there are none to remove.)
    """
    removers = {"shm": lambda i: _libc.shmctl(i, IPC_RMID, None),
                "sem": lambda i: _libc.semctl(i, 0, IPC_RMID),
                "msg": lambda i: _libc.msgctl(i, IPC_RMID, None)}
    for kind, remove in removers.items():
        for ident, owner in _ipc_ids(kind):
            me = os.geteuid()
            if owner == me or me != 0:
                remove(ident)
                continue
            os.seteuid(owner)  # permitted capabilities stay (real and saved uid are 0)
            try:
                remove(ident)
            finally:
                os.seteuid(me)
        if _ipc_ids(kind):
            return f"System V {kind} objects remain"
    return ""


def _ipc_ids(kind):
    """[(id, owner uid)] of the System V objects of `kind` in this IPC namespace."""
    try:
        with open(f"/proc/sysvipc/{kind}") as f:
            header, *rows = f.read().splitlines()
    except OSError:
        return []
    column = header.split().index("uid")
    return [(int(row.split()[1]), int(row.split()[column])) for row in rows if row.strip()]


# -- what the runners inherit from the zygote's process -------------------------

_STATUS_KEYS = ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
                "NoNewPrivs", "Seccomp", "Seccomp_filters")
_SYSCALLS = {"x86_64": {"ioprio_set": 251, "ioprio_get": 252, "sched_getattr": 315},
             "aarch64": {"ioprio_set": 30, "ioprio_get": 31, "sched_getattr": 275}}.get(os.uname().machine, {})
IOPRIO_WHO_PROCESS = 1


def _status():
    with open("/proc/self/status") as f:
        fields = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
    return {key: fields[key].strip() for key in _STATUS_KEYS if key in fields}


def process_state() -> dict:
    """Everything of the zygote's process that its runners inherit and a runner of the same uid could change.

    (A runner could call prlimit, setpriority, sched_setscheduler,
    sched_setaffinity, ioprio_set or write /proc/2/oom_score_adj on the
    zygote, and every later runner would inherit it.)
    """
    state = {"rlimits": {name: resource.getrlimit(getattr(resource, name))
                         for name in sorted(dir(resource)) if name.startswith("RLIMIT_")},
             "nice": os.getpriority(os.PRIO_PROCESS, 0),
             "scheduler": (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority),
             "affinity": sorted(os.sched_getaffinity(0)),
             "ids": (os.getresuid(), os.getresgid(), os.getgroups()),
             "status": _status(), "dumpable": _libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)}
    with open("/proc/self/oom_score_adj") as f:
        state["oom_score_adj"] = int(f.read())
    if "ioprio_get" in _SYSCALLS:
        state["ioprio"] = _libc.syscall(_SYSCALLS["ioprio_get"], IOPRIO_WHO_PROCESS, 0)
    if "sched_getattr" in _SYSCALLS:  # also uclamp and the reset-on-fork flag
        attr = ctypes.create_string_buffer(56)
        if _libc.syscall(_SYSCALLS["sched_getattr"], 0, attr, 56, 0) == 0:
            state["sched_attr"] = attr.raw.hex()
    return state


def check_state(want: dict) -> str:
    """Put back what may be put back of the recorded `process_state`, then compare; '' if equal."""
    def attempt(fn: Callable, *args) -> None:
        try:
            fn(*args)
        except OSError:
            pass  # raising a limit back needs privileges the zygote lacks: the comparison says so

    for name, limits in want["rlimits"].items():
        if resource.getrlimit(getattr(resource, name)) != limits:
            attempt(resource.setrlimit, getattr(resource, name), limits)
    if os.getpriority(os.PRIO_PROCESS, 0) != want["nice"]:
        attempt(os.setpriority, os.PRIO_PROCESS, 0, want["nice"])
    policy, priority = want["scheduler"]
    if (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority) != want["scheduler"]:
        attempt(os.sched_setscheduler, 0, policy, os.sched_param(priority))
    if sorted(os.sched_getaffinity(0)) != want["affinity"]:
        attempt(os.sched_setaffinity, 0, want["affinity"])
    if "ioprio" in want:
        _libc.syscall(_SYSCALLS["ioprio_set"], IOPRIO_WHO_PROCESS, 0, want["ioprio"])
    with open("/proc/self/oom_score_adj") as f:
        if int(f.read()) != want["oom_score_adj"]:
            attempt(_write_text, "/proc/self/oom_score_adj", str(want["oom_score_adj"]))
    try:
        now = process_state()
    except OSError as exc:
        return f"cannot read the zygote's own state: {exc}"
    changed = sorted(key for key in want if now.get(key) != want[key])
    return f"the zygote's process was changed: {', '.join(changed)}" if changed else ""


def _write_text(path, text):
    with open(path, "w") as f:
        f.write(text)


# -- the zygote and its children ---------------------------------------------

def switch_uid(uid: int, taken: dict[str, dict], nproc: int, structure: dict[str, dict]) -> None:
    """As root, in the child: hand the writable places to `uid`, become it, drop every capability.

    As in a fresh sandbox, scratch and what the runner's own start-up left in
    /tmp and /dev/shm belong to the runner; /tmp and /dev/shm themselves, and
    the directories bwrap made there (`structure`), stay root's.
    """
    scratch = os.getcwd()
    for top, entries in taken.items():
        made_by_bwrap = structure.get(top, {}) if top != scratch else {}
        for rel in entries:
            if top == scratch or (rel and rel not in made_by_bwrap):
                os.lchown(os.path.join(top, rel) if rel else top, uid, uid)
    caps = (ctypes.c_uint32 * 8)(0x20080522, 0)  # capget header (v3) + 2 x (eff, prm, inh)
    if _libc.capget(caps, ctypes.byref(caps, 8)) == 0:
        caps[4] = caps[7] = 0  # inheritable: empty, as in a fresh runner
        _libc.capset(caps, ctypes.byref(caps, 8))
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)  # from uid 0 to none: the kernel clears every capability
    status = _status()
    if (os.getresuid(), os.getresgid(), os.getgroups()) != ((uid,) * 3, (uid,) * 3, []) or any(
            int(status.get(key, "1"), 16) for key in ("CapInh", "CapPrm", "CapEff", "CapAmb")):
        raise RuntimeError(f"the runner kept privileges: {status}")
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    if nproc >= 0:
        nproc = nproc if hard == resource.RLIM_INFINITY else min(nproc, hard)
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))  # now counts this runner's uid alone


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


def _switches_uids():
    """Root with CAP_SETUID (root mode, ``launcher.ZYGOTE_CAPS``): each runner gets a uid of its own."""
    return os.getuid() == 0 and int(_status().get("CapEff", "0"), 16) & (1 << CAP_SETUID) != 0


def _new_uid(uids, last):
    base, span = uids
    while True:
        uid = base + int.from_bytes(os.urandom(4), "little") % span
        if uid != last:
            return uid


def serve(control: socket.socket, nproc: int = -1, uids: tuple[int, int] = UIDS) -> None:
    if not in_own_sandbox():
        _send(control, {"op": "refused", "detail": "the zygote needs a pid namespace of its own (bwrap)"})
        os._exit(2)
    dumpable = _libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    structure = snapshot()  # what bwrap made in /tmp (the grader's mount points): never the runner's
    runner, taken = warm_up()
    state, switch, uid = process_state(), _switches_uids(), None
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
            uid = _new_uid(uids, uid) if switch else None
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
    """A runner started on its own (stock nbgrader, no fork server): a zygote that forks just one runner.

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
    uid = _new_uid(uids, None) if _switches_uids() else None
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
    grader that looks for it (`launcher.runner_pid`, ``forkserver.py``)
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
