"""What the runners inherit from the zygote's process: recorded after warm-up, put back and compared before each fork.

Part of the zygote (``zygote.py``): a difference means "dirty", and the
grader throws the sandbox away rather than hand a runner a changed inheritance.
"""
import ctypes
import os
import resource
from typing import Callable

PR_GET_DUMPABLE = 3
_libc = ctypes.CDLL(None, use_errno=True)

_STATUS_KEYS = ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
                "NoNewPrivs", "Seccomp", "Seccomp_filters")
_SYSCALLS = {"x86_64": {"ioprio_set": 251, "ioprio_get": 252, "sched_getattr": 315},
             "aarch64": {"ioprio_set": 30, "ioprio_get": 31, "sched_getattr": 275}}.get(os.uname().machine, {})
IOPRIO_WHO_PROCESS = 1


def status() -> dict:
    """The ids, capabilities and seccomp lines of /proc/self/status."""
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
             "status": status(), "dumpable": _libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)}
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
