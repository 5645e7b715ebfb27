"""Inside one sandbox: warm up once, then fork one fresh runner per student.

A fresh runner spends about 2.5 s of CPU before it has done anything for
its student: the interpreter, IPython, ``import torch`` and matplotlib, the
font cache, and torch._dynamo + sympy (imported by the first meta-device
op).  The zygote pays that once.  It is started by the grader
(``forkserver.py``) through the same `sandbox.sandboxed_popen` as a fresh
runner, so it has the same mounts, namespaces and limits, and it never runs
student code itself.  For each student it forks a child that becomes an
ordinary runner (``sandbox_runner.serve``) on pipes the grader passed in.

One student at a time, and nothing of one student reaches the next:

* A child is forked from the zygote, whose memory no student code ever
  touched; the zygote is non-dumpable, so no student process can ptrace it,
  read or write its memory, or open its descriptors through /proc.  The
  child closes the control socket at once, so it cannot talk to the grader
  in the zygote's name; replies carry the grader's nonce anyway.
* ``reset`` (after every runner, and before a replay) kills every process
  in the sandbox's pid namespace but bwrap's init and the zygote, removes
  System V IPC objects, and restores scratch (the cwd and HOME), /tmp and
  /dev/shm to what they held after warm-up.  It replies "clean" only when
  it has checked all of that; otherwise the grader throws the whole sandbox
  away.
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
                       {"op": "forked", "nonce": N}
                       {"op": "clean", "nonce": N, "cpu": s} | {"op": "dirty", "nonce": N, "detail": "..."}
"""
import ctypes
import json
import os
import random
import shutil
import signal
import socket
import stat
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sandbox_runner  # noqa: E402

RUNNER_PATH = os.path.abspath(sandbox_runner.__file__)
PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3
IPC_RMID = 0
SNAPSHOT_MAX_BYTES = 16 * 2**20
KILL_SECONDS = 5.0

_libc = ctypes.CDLL(None, use_errno=True)


def warm_up():
    """Import and run, once, what every runner needs; returns (runner, snapshot of its files).

    The snapshot is taken after the imports of the release's first cell (which
    every runner executes, e.g. matplotlib's font cache in /tmp/mpl) and laid
    back down after the rest of the warm-up, as are the environment variables:
    a child starts as a fresh runner stands after that first cell.
    """
    import io
    import warnings

    runner = sandbox_runner.new_runner()
    import matplotlib.pyplot  # noqa: F401 - after the shell exists, as the release's first cell does
    import numpy  # noqa: F401
    import torch
    import torch.nn.functional  # noqa: F401
    from matplotlib.figure import Figure

    taken, environment = snapshot(), dict(os.environ)
    odd = [rel for entries in taken.values() for rel, (_, data) in entries.items() if data == "other"]
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
    problem = restore(taken)
    if problem:
        raise RuntimeError(problem)
    return runner, taken


# -- the writable places, restored on every reset ------------------------------

def writable_places():
    """Scratch (the cwd and HOME) and the private tmpfs mounts: all a runner can write."""
    return (os.getcwd(), "/tmp", "/dev/shm")


def snapshot():
    """{top: {relative path: (mode, bytes, or None for a directory)}} of the writable places.

    Only the place's own filesystem counts: read-only binds inside it (the
    grader's files under /tmp, say) are not the runner's to change.
    """
    taken, total = {}, 0
    for top in writable_places():
        entries, dev = {}, os.lstat(top).st_dev
        for rel, info in _walk(top, dev):
            path = os.path.join(top, rel)
            if stat.S_ISDIR(info.st_mode):
                entries[rel] = (stat.S_IMODE(info.st_mode), None)
            elif stat.S_ISREG(info.st_mode):
                with open(path, "rb") as f:
                    data = f.read()
                total += len(data)
                entries[rel] = (stat.S_IMODE(info.st_mode), data)
            else:  # a symlink, fifo...: recorded by kind, so that a restore notices it
                entries[rel] = (stat.S_IFMT(info.st_mode), "other")
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


def _sync(top, entries):
    """Make `top` hold what `entries` says again: remove the rest, rewrite what changed."""
    for rel, info in _walk(top, os.lstat(top).st_dev, unlock=True):
        want = entries.get(rel)
        kept = want is not None and (stat.S_ISDIR(info.st_mode) if want[1] is None else
                                     isinstance(want[1], bytes) and stat.S_ISREG(info.st_mode))
        if not kept:
            _remove(os.path.join(top, rel))  # new, or of another kind than before (warm-up makes no symlinks)
    for rel, (mode, data) in sorted(entries.items()):  # parents before children
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
        if stat.S_IMODE(os.lstat(path).st_mode) != mode:
            os.chmod(path, mode)


def restore(taken):
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
        try:
            with open(f"/proc/{name}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(name))
        except (OSError, IndexError):
            pass  # gone meanwhile
    return found


def _reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_others():
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


def remove_ipc():
    """Delete System V shared memory, semaphores and message queues; '' if none is left."""
    removers = {"shm": lambda i: _libc.shmctl(i, IPC_RMID, None),
                "sem": lambda i: _libc.semctl(i, 0, IPC_RMID),
                "msg": lambda i: _libc.msgctl(i, IPC_RMID, None)}
    for kind, remove in removers.items():
        for ident in _ipc_ids(kind):
            remove(ident)
        if _ipc_ids(kind):
            return f"System V {kind} objects remain"
    return ""


def _ipc_ids(kind):
    try:
        with open(f"/proc/sysvipc/{kind}") as f:
            return [int(line.split()[1]) for line in f.read().splitlines()[1:] if line.strip()]
    except OSError:
        return []


# -- the zygote and its children ---------------------------------------------

def become_runner(runner, control, fds, dumpable):
    """In the forked child: take the grader's pipes and serve as a fresh runner. Never returns."""
    try:
        control.close()
        stdin, stdout, stderr = fds
        _libc.prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0)
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


def serve(control):
    if not (os.getpid() == 2 and os.getppid() == 1):
        _send(control, {"op": "refused", "detail": "the zygote needs a pid namespace of its own (bwrap)"})
        os._exit(2)
    dumpable = _libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    runner, taken = warm_up()
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
            middle = os.fork()
            if middle == 0:
                # Fork twice: the runner's parent becomes bwrap's init (pid 1), as a fresh runner's is.
                if os.fork() == 0:
                    become_runner(runner, control, fds, dumpable)
                os._exit(0)
            for fd in fds:
                os.close(fd)
            os.waitpid(middle, 0)
            _send(control, {"op": "forked", "nonce": nonce})
        elif op == "reset":
            for fd in fds:
                os.close(fd)
            problem = "" if kill_others() else "processes survive SIGKILL"
            problem = problem or remove_ipc() or restore(taken)
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


def main():
    control = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    serve(control)


if __name__ == "__main__":
    main()
