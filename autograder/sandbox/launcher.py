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

Limits are applied by a tiny trusted shim (``shim.py``), the sandbox's
first process, right before it execs the command; it also installs the
syscall filter.

Process-count limit: RLIMIT_NPROC counts the tasks of one uid, and is not
enforced for kernel uid 0.

* Used as root (of the initial user namespace; root inside a rootless
  container is a normal user to the kernel): bwrap runs privileged without
  a user namespace, keeping only CAP_SETUID/CAP_SETGID; the shim switches to
  a random per-sandbox uid/gid in [`UID_BASE`, `UID_BASE` + `UID_SPAN`) (all
  capabilities vanish; bwrap sets no_new_privs) before setting
  RLIMIT_NPROC, so the limit counts exactly this sandbox's tasks.  (Root
  mapped to another uid by ``--unshare-user`` is still kernel uid 0, and
  dropping root before bwrap fails: bwrap resolves every bind source by
  path, which the new uid may not reach.)  Consequences: `scratch` is
  chown'ed (recursively) to that uid, and `readonly` paths must be
  world-readable.  Nested user namespaces cannot be disabled in this mode.
  A zygote (`zygote=True`, ``guest/zygote.py``) instead stays uid 0 with
  `ZYGOTE_CAPS` only, so that it can give each runner it forks a uid of its
  own: a runner then cannot touch the zygote's process (rlimits, priority,
  scheduling, affinity, signals), and RLIMIT_NPROC counts that runner alone.
* Used as a normal user: bwrap in an unprivileged user namespace
  (`--disable-userns` when supported); the shim sets RLIMIT_NPROC inside it,
  where the kernel keeps the count per user namespace, so the user's other
  processes do not count.  bwrap's own pid 1 counts as one task.
* In both modes a `while True: os.fork()` bomb stays at `max_processes`
  tasks (threads count as tasks), and `procs.kill_tree` removes it.

Other limits: RLIMIT_AS and RLIMIT_CPU are per process, not per tree (so the
tree's totals are bounded only via max_processes); callers must add a
wall-clock timeout and call `procs.kill_tree`.  The default address space
leaves room for student tensors beside ``import torch`` (CPU build; CUDA
builds need far more address space, and this course is CPU-only).
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
import site
import stat
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from . import shim
from .procs import task_count

__all__ = [
    "SCRATCH_MOUNT",
    "Limits",
    "SandboxStatus",
    "SandboxUnavailableError",
    "SandboxUnavailableWarning",
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
        with tempfile.TemporaryDirectory(prefix=f"{PROBE_TMP_PREFIX}{os.getpid()}-") as scratch:
            cmd, _, home, tmp = _isolated_command([sys.executable, "-S", "-c", ""], scratch, (), Limits(), info)
            done = subprocess.run(cmd, env=_environment(home, tmp, None), cwd="/", stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return SandboxStatus(False, _NO_SANDBOX, f"{version} failed to start: {exc}")
    if done.returncode != 0:
        detail = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return SandboxStatus(False, _NO_SANDBOX, f"{version} cannot create the sandbox: {detail}")
    return SandboxStatus(True, version, "")


PROBE_TMP_PREFIX = "sandbox-probe-"  # + the pid of the probing process + "-": a killed probe's dir is removable


def sandboxed_popen(argv: list[str], *, scratch: os.PathLike, readonly: Sequence[os.PathLike] = (),
                    env: Mapping[str, str] | None = None, limits: Limits = Limits(),
                    require_isolation: bool = False, zygote: bool = False,
                    **popen_kwargs) -> subprocess.Popen:
    """Start `argv` in the sandbox; popen_kwargs go to subprocess.Popen (stdin defaults to DEVNULL).

    `scratch` (an existing host directory) is the read-write cwd and HOME,
    mounted at SCRATCH_MOUNT; `readonly` paths appear read-only at their host
    paths.  Stop it with `procs.kill_tree`.  `zygote`: the process forks runners
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
    nproc = -1 if _is_real_root() else task_count(os.getuid()) + limits.max_processes
    return _shim(scratch, -1, limits, nproc, argv), scratch, scratch, tmp


def _shim(cwd, uid, limits, nproc, argv):
    return shim.command(cwd, uid, limits.memory_bytes, limits.cpu_seconds, nproc, limits.max_file_bytes, argv)


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
