"""The writable places, processes and IPC of a zygote's sandbox, laid back after every runner.

Part of the zygote (``zygote.py``): `snapshot` records scratch (the cwd and
HOME), /tmp and /dev/shm after warm-up, and a reset kills every other
process in the pid namespace (`kill_others`), removes System V IPC objects
(`remove_ipc`) and puts the files back (`restore`), checking each step.
"""
import ctypes
import os
import shutil
import signal
import stat
import sys
import time

# `python -I` leaves this directory off sys.path; the guest files import each other by name.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import procfs  # noqa: E402

IPC_RMID = 0
SNAPSHOT_MAX_BYTES = 16 * 2**20
KILL_SECONDS = 5.0

_libc = ctypes.CDLL(None, use_errno=True)


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
    filter of ``shim.py``, so there are none to remove.)
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

