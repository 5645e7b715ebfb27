"""Run untrusted student code in a bubblewrap sandbox with resource limits.

Every process that executes student code goes through `sandboxed_popen`.
Inside the sandbox the process sees only: the system directories (/usr and
the /bin, /lib... links), a few files of /etc, the running Python
installation (venv, base interpreter, site-packages; never a venv's parent
directory), caller-chosen read-only paths, a private /proc, /dev and /tmp,
and the host `scratch` directory mounted read-write at `SCRATCH_MOUNT`
(the cwd and HOME).  It has its own pid, network (loopback only), ipc, uts and
cgroup namespaces, no capabilities, and dies with its parent.  Pass paths
inside scratch as *relative* paths: they work both in the sandbox (cwd
/sandbox) and in the unisolated fallback (cwd = scratch).  A process killed
by signal N shows up as returncode 128+N under bwrap (-N in the fallback).

Limits are applied by a tiny trusted shim (`_SHIM`, run with the host
interpreter as the sandbox's first process) right before it execs the
command, not in a `preexec_fn` (which is unsafe in threaded callers and,
for RLIMIT_NPROC, applied in the wrong place, see below).  The shim also
installs a seccomp filter (in the fallback too) that makes the kernel
keyring (add_key, request_key, keyctl) and POSIX message queues (mq_*) fail
with EPERM: a key outlives the sandbox in the host kernel, a queue outlives
a runner in a shared sandbox, and no course code needs either.  Calls of
another ABI (i386, x32) are refused too; on an architecture without a
table (not x86_64 or aarch64) it only warns.

Process-count limit -- what was measured (Linux 6.18, bwrap 0.8.0):

* RLIMIT_NPROC is not enforced for kernel uid 0, and `bwrap --unshare-user
  --uid 65534` run by root still maps the sandbox to kernel uid 0, so it
  does not help.
* Dropping root to an unprivileged uid *before* bwrap fails: bwrap resolves
  every bind source by path (even `--ro-bind-fd`, via realpath), and an
  interpreter under /root (mode 0700) gives "Can't find source path ...:
  Permission denied".
* Used as root (of the initial user namespace; root inside a rootless
  container is a normal user to the kernel): bwrap runs privileged without a user namespace, keeping only
  CAP_SETUID/CAP_SETGID; the shim switches to a random per-sandbox uid/gid in
  [`UID_BASE`, `UID_BASE` + `UID_SPAN`) (all capabilities vanish; bwrap
  sets no_new_privs) before setting RLIMIT_NPROC.  Since no other process has
  that uid, the limit counts exactly this sandbox's tasks.  Consequences:
  `scratch` is chown'ed (recursively) to that uid, and `readonly` paths must
  be world-readable.  Nested user namespaces cannot be disabled in this mode.
  A zygote (`zygote=True`, ``guest/zygote.py``) instead stays uid 0 with
  `ZYGOTE_CAPS` only, so that it can give each runner it forks a uid of its
  own: a runner then cannot touch the zygote's process (rlimits, priority,
  scheduling, affinity, signals), and RLIMIT_NPROC counts that runner alone.
* Used as a normal user: bwrap in an unprivileged user namespace
  (`--disable-userns` when supported); the shim sets RLIMIT_NPROC inside it.
  Since Linux 5.14 the count is kept per user namespace, so the user's other
  processes do not count (setting it before bwrap would count all of them).
  bwrap's own pid 1 counts as one task.
* In both modes a `while True: os.fork()` bomb stays at `max_processes`
  tasks (threads count as tasks), and `kill_tree` removes it
  (``tests/sandbox/test_launcher.py`` times it).

Other limits: RLIMIT_AS and RLIMIT_CPU are per process, not per tree (so the
tree's totals are bounded only via max_processes); callers must add a
wall-clock timeout and call `kill_tree`.  The 6 GiB default address space
is several times what ``import torch`` (CPU build) and a small SDPA/plotting
workload need, leaving room for student tensors (CUDA builds need far more
address space; this course is CPU-only).
The private /tmp (a tmpfs, capped by `tmpfs_bytes` when bwrap >= 0.8) is not
counted in RLIMIT_AS; total bytes written to scratch are not capped (only per
file, by RLIMIT_FSIZE).

Without a working bwrap, `sandboxed_popen` falls back to rlimits + a cleared
environment + cwd=scratch, with a loud warning (or `SandboxUnavailableError`
when isolation is required).  As root the fallback cannot enforce the
process-count limit; as a normal user it caps the user's tasks at their
current count + max_processes.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import secrets
import shutil
import signal
import site
import stat
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .guest import procfs

__all__ = [
    "SCRATCH_MOUNT",
    "Limits",
    "SandboxStatus",
    "SandboxUnavailableError",
    "SandboxUnavailableWarning",
    "kill_tree",
    "probe",
    "sandboxed_popen",
]

SCRATCH_MOUNT = "/sandbox"

log = logging.getLogger(__name__)

_NO_SANDBOX = "none (rlimits only)"
_FIX = (
    "to fix: apt-get install bubblewrap, and allow unprivileged user namespaces "
    "(sysctl kernel.unprivileged_userns_clone=1 user.max_user_namespaces=10000; "
    "on Ubuntu >= 23.10 also kernel.apparmor_restrict_unprivileged_userns=0)"
)
# Random per-sandbox uids when running as root (see module docstring); a
# zygote draws its runners' uids from the same range.
UID_BASE = 0x5A000000
UID_SPAN = 1 << 20
# What a zygote keeps as root (no setuid): switching each runner to a uid of
# its own, killing its processes, restoring the files it changed or locked.
ZYGOTE_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_CHOWN", "CAP_FOWNER", "CAP_DAC_OVERRIDE")
_SHM_BYTES = 64 * 2**20  # private /dev/shm (POSIX semaphores, torch tensor sharing)
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC_FILES = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "nsswitch.conf", "passwd",
    "group", "hosts", "localtime", "fonts", "alternatives",
)
# Popen arguments this module must own to keep its guarantees.
_RESERVED = frozenset({"args", "cwd", "preexec_fn", "user", "group", "extra_groups",
                       "start_new_session", "process_group", "executable", "shell"})

# Runs first inside the sandbox (trusted); argv: cwd uid as cpu nproc fsize cmd...
# It chdirs itself: as root, bwrap has dropped CAP_DAC_OVERRIDE and could not
# enter a scratch dir of mode 0700 owned by the sandbox uid.  uid -1: keep
# the uid (a zygote in root mode, or no root at all).
_SHIM = """\
import ctypes, os, resource as r, struct, sys
uid, mem, cpu, nproc, fsize = map(int, sys.argv[2:7])
libc = ctypes.CDLL(None, use_errno=True)
def seccomp():
    # Keys (add_key, request_key, keyctl) outlive the sandbox, POSIX message
    # queues (mq_*) outlive a runner: refuse them with EPERM, allow the rest.
    arch, nrs = {"x86_64": (0xC000003E, (248, 249, 250, 240, 241, 242, 243, 244, 245)),
                 "aarch64": (0xC00000B7, (217, 218, 219, 180, 181, 182, 183, 184, 185)),
                 }.get(os.uname().machine if sys.maxsize > 2**32 else "", (0, ()))
    if not arch:
        sys.stderr.write("sandbox: WARNING: no syscall filter for this architecture\\n")
        return
    deny, allow, n = 0x00050000 | 1, 0x7FFF0000, len(nrs)  # SECCOMP_RET_ERRNO | EPERM, SECCOMP_RET_ALLOW
    prog = [(0x20, 0, 0, 4),                 # A = seccomp_data.arch
            (0x15, 1, 0, arch),              # our ABI? then skip the next
            (0x06, 0, 0, deny),              # another ABI (i386 via int 0x80): refuse everything
            (0x20, 0, 0, 0),                 # A = seccomp_data.nr
            (0x35, n + 1, 0, 0x40000000)]    # x32 numbers (bit 30): refuse
    prog += [(0x15, n - i, 0, nr) for i, nr in enumerate(nrs)]  # a listed one: jump to the deny
    prog += [(0x06, 0, 0, allow), (0x06, 0, 0, deny)]
    code = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *ins) for ins in prog))
    fprog = struct.pack("HxxxxxxP", len(prog), ctypes.addressof(code))  # struct sock_fprog
    ul = ctypes.c_ulong
    if (libc.prctl(38, ul(1), ul(0), ul(0), ul(0))  # PR_SET_NO_NEW_PRIVS (bwrap sets it too)
            or libc.prctl(22, ul(2), ctypes.c_char_p(fprog), ul(0), ul(0))):  # PR_SET_SECCOMP, FILTER
        err = os.strerror(ctypes.get_errno())
        sys.stderr.write(f"sandbox: WARNING: cannot install the syscall filter: {err}\\n")
seccomp()
if uid >= 0:
    os.setgroups([]); os.setgid(uid); os.setuid(uid)
    caps = (ctypes.c_uint32 * 8)(0x20080522, 0)  # capget header (v3) + 2 x (eff, prm, inh)
    libc.capget(caps, ctypes.byref(caps, 8))
    caps[4] = caps[7] = 0  # the inheritable set too: no capability left anywhere
    libc.capset(caps, ctypes.byref(caps, 8))
os.chdir(sys.argv[1])
os.environ["PWD"] = os.getcwd()  # bwrap set it to its own --chdir
def lim(res, soft, hard):
    cur = r.getrlimit(res)[1]
    cap = (lambda v: v) if cur == r.RLIM_INFINITY else (lambda v: min(v, cur))
    r.setrlimit(res, (cap(soft), cap(hard)))
lim(r.RLIMIT_CORE, 0, 0)
lim(r.RLIMIT_AS, mem, mem)
lim(r.RLIMIT_CPU, cpu, cpu + 1)
lim(r.RLIMIT_FSIZE, fsize, fsize)
if nproc >= 0:
    lim(r.RLIMIT_NPROC, nproc, nproc)
try:
    os.execvp(sys.argv[7], sys.argv[7:])
except OSError as e:
    sys.stderr.write(f"sandbox: cannot exec {sys.argv[7]!r}: {e}\\n")
    os._exit(127)
"""


class SandboxUnavailableError(RuntimeError):
    """Isolation was required but bubblewrap cannot provide it here."""


class SandboxUnavailableWarning(RuntimeWarning):
    """Untrusted code is about to run without filesystem/network isolation."""


@dataclass(frozen=True)
class Limits:
    memory_bytes: int = 6 * 2**30  # RLIMIT_AS per process; see the module docstring
    cpu_seconds: int = 300  # RLIMIT_CPU per process (SIGXCPU, SIGKILL 1 s later)
    max_processes: int = 256  # RLIMIT_NPROC: tasks (processes + threads) in the sandbox
    max_file_bytes: int = 256 * 2**20  # RLIMIT_FSIZE
    tmpfs_bytes: int = 512 * 2**20  # size of the private /tmp (bwrap >= 0.8)


@dataclass(frozen=True)
class SandboxStatus:
    isolated: bool  # True when namespaces/bwrap isolation is active
    mechanism: str  # e.g. "bubblewrap 0.8.0" or "none (rlimits only)"
    reason: str  # why not isolated, empty when isolated


@functools.cache
def _bwrap_info() -> tuple[str, str, frozenset[str]] | None:
    """(path, version, supported options) of bwrap, or None; options vary by version."""
    path = shutil.which("bwrap") or ("/usr/bin/bwrap" if os.access("/usr/bin/bwrap", os.X_OK) else None)
    if path is None:
        return None
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
        usage = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return path, version or "bubblewrap", frozenset(re.findall(r"--[a-z0-9-]+", usage))


@functools.cache
def probe() -> SandboxStatus:
    """Try the real sandbox once (running the interpreter as the sandbox uid); cached.

    SDPA_SANDBOX=off turns isolation off on purpose (to measure its cost, or
    to debug); grading then takes the loud, unisolated fallback path.
    """
    if os.environ.get("SDPA_SANDBOX", "").lower() == "off":
        return SandboxStatus(False, _NO_SANDBOX, "turned off by SDPA_SANDBOX=off")
    info = _bwrap_info()
    if info is None:
        return SandboxStatus(False, _NO_SANDBOX, "bubblewrap (bwrap) is not installed")
    version = info[1]
    if "--perms" not in info[2]:
        return SandboxStatus(False, _NO_SANDBOX, f"{version} is too old (need >= 0.5)")
    try:
        with tempfile.TemporaryDirectory(prefix="sandbox-probe-") as scratch:
            cmd, _, home, tmp = _isolated_command([sys.executable, "-S", "-c", ""], scratch, (), Limits(), info)
            done = subprocess.run(cmd, env=_environment(home, tmp, None), cwd="/", stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return SandboxStatus(False, _NO_SANDBOX, f"{version} failed to start: {exc}")
    if done.returncode != 0:
        detail = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return SandboxStatus(False, _NO_SANDBOX, f"{version} cannot create the sandbox: {detail}")
    return SandboxStatus(True, version, "")


def sandboxed_popen(argv: list[str], *, scratch: os.PathLike, readonly: Sequence[os.PathLike] = (),
                    env: Mapping[str, str] | None = None, limits: Limits = Limits(),
                    require_isolation: bool = False, zygote: bool = False,
                    **popen_kwargs) -> subprocess.Popen:
    """Start `argv` in the sandbox; popen_kwargs go to subprocess.Popen (stdin defaults to DEVNULL).

    `scratch` (an existing host directory) is the read-write cwd and HOME,
    mounted at SCRATCH_MOUNT; `readonly` paths appear read-only at their host
    paths.  Stop it with `kill_tree`.  `zygote`: the process forks runners
    (``guest/zygote.py``, which every runner's sandbox runs, a fresh runner's
    too); as root it then keeps uid 0 with `ZYGOTE_CAPS` (and scratch is not
    chown'ed), so that each runner gets a uid of its own.
    """
    reserved = _RESERVED.intersection(popen_kwargs)
    if reserved:
        raise TypeError(f"sandboxed_popen() controls these Popen arguments itself: {sorted(reserved)}")
    scratch = os.path.abspath(os.fspath(scratch))
    if not os.path.isdir(scratch):
        raise NotADirectoryError(f"scratch directory does not exist: {scratch}")
    status = probe()
    if status.isolated:
        cmd, cwd, home, tmp = _isolated_command(list(argv), scratch, readonly, limits, _bwrap_info(), zygote)
    else:
        message = f"SANDBOX UNAVAILABLE ({status.reason}); {_FIX}"
        if require_isolation:
            raise SandboxUnavailableError(message)
        message = (f"{message}. Running untrusted code WITHOUT filesystem or network isolation"
                   + (", and without a process-count limit (root)" if _is_real_root() else ""))
        log.warning(message)
        warnings.warn(message, SandboxUnavailableWarning, stacklevel=2)
        cmd, cwd, home, tmp = _fallback_command(list(argv), scratch, limits)
    popen_kwargs.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.Popen(cmd, env=_environment(home, tmp, env), cwd=cwd, start_new_session=True,
                            **popen_kwargs)


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


def _isolated_command(argv, scratch, readonly, limits, info, zygote=False):
    """bwrap command line for `argv` and the (cwd, HOME, TMPDIR) it runs with."""
    bwrap, _, options = info
    as_root = _is_real_root()
    uid = UID_BASE + secrets.randbelow(UID_SPAN) if as_root and not zygote else -1
    cmd = [bwrap, "--die-with-parent", "--new-session", "--unshare-ipc", "--unshare-pid", "--unshare-net",
           "--unshare-uts", "--unshare-cgroup-try", "--cap-drop", "ALL"]
    if as_root:
        if uid >= 0:
            _chown_tree(scratch, uid)
        for path in readonly:
            _require_world_readable(os.fspath(path))
        for cap in ZYGOTE_CAPS if zygote else ("CAP_SETUID", "CAP_SETGID"):
            cmd += ["--cap-add", cap]
    else:
        cmd += ["--unshare-user"] + (["--disable-userns"] if "--disable-userns" in options else [])

    symlinks, binds = [], []  # binds: (option, host path, sandbox path)
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            symlinks.append((os.readlink(path), path))
        elif os.path.isdir(path):
            binds.append(("--ro-bind", path, path))
    binds += [("--ro-bind-try", f"/etc/{name}", f"/etc/{name}") for name in _ETC_FILES]
    mounted = [dest for _, _, dest in binds] + [dest for _, dest in symlinks]
    for path in sorted(_python_paths() | {os.path.abspath(os.fspath(p)) for p in readonly}):
        if not _under(path, mounted):
            binds.append(("--ro-bind", path, path))
            mounted.append(path)

    # The private filesystems come first, so that readonly paths under /tmp
    # (or a venv there) are mounted on top of the tmpfs instead of hidden.
    cmd += ["--proc", "/proc", "--dev", "/dev"]
    for size, path in ((limits.tmpfs_bytes, "/tmp"), (_SHM_BYTES, "/dev/shm")):
        cmd += ["--perms", "1777"] + (["--size", str(size)] if "--size" in options else []) + ["--tmpfs", path]
    # Directories bwrap would create implicitly get mode 0700 when it runs as
    # root, which the unprivileged sandbox uid could not traverse.
    parents = {os.path.dirname(dest) for dest in mounted + [SCRATCH_MOUNT]}
    ancestors = set()
    for path in parents:
        while path not in ("/", "/tmp") and not _under(path, mounted):
            ancestors.add(path)
            path = os.path.dirname(path)
    for path in sorted(ancestors):
        cmd += ["--perms", "0755", "--dir", path]
    for option, src, dest in binds:
        cmd += [option, src, dest]
    for target, dest in symlinks:
        cmd += ["--symlink", target, dest]
    # The root and /dev tmpfs would otherwise be writable (unbounded memory).
    cmd += ["--bind", scratch, SCRATCH_MOUNT, "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/", "--"]
    cmd += _shim(SCRATCH_MOUNT, uid, limits, limits.max_processes, argv)
    return cmd, "/", SCRATCH_MOUNT, "/tmp"


def _fallback_command(argv, scratch, limits):
    """Unisolated command (rlimits only) and its (cwd, HOME, TMPDIR)."""
    tmp = os.path.join(scratch, ".tmp")
    os.makedirs(tmp, exist_ok=True)
    nproc = -1 if _is_real_root() else _task_count(os.getuid()) + limits.max_processes
    return _shim(scratch, -1, limits, nproc, argv), scratch, scratch, tmp


def _shim(cwd, uid, limits, nproc, argv):
    numbers = (uid, limits.memory_bytes, limits.cpu_seconds, nproc, limits.max_file_bytes)
    return [sys.executable, "-I", "-S", "-c", _SHIM, cwd, *map(str, numbers), *argv]


def _environment(home, tmp, extra):
    env = {
        "PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8", "HOME": home, "TMPDIR": tmp, "MPLCONFIGDIR": f"{tmp}/mpl",
        "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", "USER": "sandbox", "LOGNAME": "sandbox",
    }
    env.update(extra or {})
    return env


def _is_real_root():
    """Root of the initial user namespace, the only uid RLIMIT_NPROC exempts.

    Root inside a rootless container is an ordinary user to the kernel and
    takes the unprivileged (user namespace) path.
    """
    if os.geteuid() != 0:
        return False
    try:
        with open("/proc/self/uid_map") as f:
            return f.read().split() == ["0", "0", "4294967295"]
    except OSError:
        return True


def _python_paths() -> set[str]:
    """The running interpreter's installation: enough to import the course's libraries."""
    exe = sys.executable
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(exe), os.path.dirname(os.path.realpath(exe))}
    paths.update(getattr(site, "getsitepackages", list)())
    found = set()
    for path in paths:
        for variant in (os.path.abspath(path), os.path.realpath(path)):
            if os.path.exists(variant):
                found.add(variant)
    return found


def _under(path, roots):
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _chown_tree(top, uid):
    """Hand scratch to the sandbox uid so the student code can write there."""
    os.lchown(top, uid, uid)
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), uid, uid)


def _require_world_readable(path):
    mode = os.stat(path).st_mode
    needed = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(mode) else 0)
    if mode & needed != needed:
        raise PermissionError(f"readonly path must be world-readable (sandbox runs as another uid): {path}")


def _task_count(uid):
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
        if len(kids) == 2 and _namespace_pid(pid) == 1:
            kids = [kid for kid in kids if _namespace_pid(kid) != 2]
        if len(kids) != 1:
            break
        pid = kids[0]
    return pid if process_state(pid) else None


def _namespace_pid(pid: int) -> int | None:
    """`pid`'s pid in its own (innermost) pid namespace, from the kernel's NSpid line; None if unknown."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError):
        pass
    return None
