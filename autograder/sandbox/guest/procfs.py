"""Reading a process's state and parent from ``/proc/<pid>/stat``: shared by both sides.

The grader (``launcher.py``) and the zygote (inside the sandbox) both need
it.  The command name in field 2 may hold spaces and parentheses, so the
fields are split after its last ")".
"""
import os
from typing import Optional, Union


def stat_fields(pid: Union[int, str]) -> Optional[list[str]]:
    """The fields after the command name (state first), or None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def state(pid: Union[int, str]) -> str:
    """One-letter state ('R', 'S', 'T' stopped, 'Z' zombie...), '' if the process is gone."""
    fields = stat_fields(pid)
    return fields[0] if fields else ""


def cpu_seconds(pid: Union[int, str]) -> Optional[float]:
    """CPU seconds a process has used: its threads and the children it waited for; None if it is gone."""
    fields = stat_fields(pid)
    try:
        return sum(int(fields[i]) for i in (11, 12, 13, 14)) / os.sysconf("SC_CLK_TCK") if fields else None
    except (IndexError, ValueError):
        return None


def run_queue_waits(pid: Union[int, str]) -> Optional[dict[int, float]]:
    """Seconds each live thread of a process has spent runnable but waiting for a CPU (field 2 of
    ``/proc/<pid>/task/<tid>/schedstat``), by thread id; None if the process is gone or the kernel
    keeps no such figures."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    waits = {}
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                waits[int(tid)] = int(f.read().split()[1]) / 1e9
        except FileNotFoundError:
            continue  # the thread ended between the listing and the read
        except (OSError, IndexError, ValueError):
            return None
    return waits or None


def parent(pid: Union[int, str]) -> Optional[int]:
    """The parent pid, or None if the process is gone."""
    fields = stat_fields(pid)
    try:
        return int(fields[1]) if fields else None
    except (IndexError, ValueError):
        return None


def pids() -> list[int]:
    """Pids visible in this /proc."""
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def descendants(pid: int) -> list[int]:
    """Pids of every live process below `pid`, children before grandchildren."""
    children = {}
    for child in pids():
        children.setdefault(parent(child), []).append(child)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def group_or_mentioning(pgid: int, text: bytes) -> list[int]:
    """Live (non-zombie) pids in process group `pgid` or whose command line contains `text`:
    what survives killing a group whose sandboxes run in sessions of their own."""
    found = []
    for pid in pids():
        fields = stat_fields(pid)
        if not fields or fields[0] == "Z":
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read()
        except OSError:
            continue
        if fields[2] == str(pgid) or text in args:
            found.append(pid)
    return found
