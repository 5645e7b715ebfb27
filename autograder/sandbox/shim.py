"""The trusted shim: the first process inside every sandbox, run with the host interpreter.

It applies the limits right before it execs the command, instead of a
`preexec_fn` (unsafe in threaded callers, and for RLIMIT_NPROC applied in
the wrong place: before bwrap's user namespace).  It also installs a seccomp
filter (in the unisolated fallback too) that makes the kernel keyring
(add_key, request_key, keyctl) and POSIX message queues (mq_*) fail with
EPERM: a key outlives the sandbox in the host kernel, a queue outlives a
runner in a shared sandbox, and no course code needs either.  Calls of
another ABI (i386, x32) are refused too; on an architecture without a table
(not x86_64 or aarch64) it only warns.

argv of `SOURCE`: cwd uid as cpu nproc fsize cmd...  It chdirs itself: as
root, bwrap has dropped CAP_DAC_OVERRIDE and could not enter a scratch dir
of mode 0700 owned by the sandbox uid.  uid -1: keep the uid (a zygote in
root mode, or no root at all).
"""
from __future__ import annotations

import sys
from collections.abc import Sequence

SOURCE = """\
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


def command(cwd: str, uid: int, memory: int, cpu: int, nproc: int, fsize: int, argv: Sequence[str]) -> list[str]:
    """The shim's command line: run `argv` in `cwd` as `uid` with these limits (-1: no uid switch, no NPROC)."""
    numbers = (uid, memory, cpu, nproc, fsize)
    return [sys.executable, "-I", "-S", "-c", SOURCE, cwd, *map(str, numbers), *argv]
