"""Forbids this process, and every process it forks, to start a program: `execve` and `execveat` fail with EPERM.

A program started while the student's code runs is code the grader never sees, with no tripwires and no audit
hook; and not every route raises an audit event (red team: `_posixsubprocess.fork_exec`, under `subprocess`,
started a fresh interpreter that computed `torch.softmax` for every hidden check).  A seccomp filter is the
kernel's: once installed it cannot be removed or loosened by anything in the process, so it holds no switch.
It is installed just before the first request, after the runner's own set-up (which may start programs).
"""
import ctypes
import os
import platform
import struct

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
EPERM = 1
# classic BPF opcodes
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
# struct seccomp_data: int nr; u32 arch; ...
_NR, _ARCH = 0, 4
# per machine: the audit architecture, the syscalls that start a program, and where another ABI's numbers begin
# (x32's share the architecture with x86-64 and are refused whole)
_MACHINES = {"x86_64": (0xC000003E, (59, 322), 0x40000000), "aarch64": (0xC00000B7, (221, 281), None)}


class UnsupportedMachine(RuntimeError):
    """No filter is known for this machine: the runner must not serve (secure by default)."""


def _filter(arch: int, calls: tuple, foreign_abi) -> list[tuple[int, int, int, int]]:
    deny = (_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM)
    program = [(_LD_W_ABS, 0, 0, _ARCH),
               (_JEQ_K, 1, 0, arch),  # another architecture's calls (a 32-bit entry): refused
               deny,
               (_LD_W_ABS, 0, 0, _NR)]
    if foreign_abi is not None:
        program += [(_JGE_K, 0, 1, foreign_abi), deny]
    for call in calls:
        program += [(_JEQ_K, 0, 1, call), deny]
    return program + [(_RET_K, 0, 0, SECCOMP_RET_ALLOW)]


def install() -> None:
    """Install the filter for good; raises where the kernel refuses or the machine is unknown."""
    machine = _MACHINES.get(platform.machine())
    if machine is None:
        raise UnsupportedMachine(f"no exec filter for {platform.machine()}")
    program = _filter(*machine)
    code = b"".join(struct.pack("HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(code, len(code))
    fprog = struct.pack("HxxxxxxP", len(program), ctypes.addressof(buffer))  # struct sock_fprog
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if prctl(PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    holder = ctypes.create_string_buffer(fprog, len(fprog))
    if prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(holder), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()) + ": prctl(PR_SET_SECCOMP)")
