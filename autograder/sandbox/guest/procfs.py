"""Reading a process's state and parent from ``/proc/<pid>/stat``: shared by both sides.

The grader (``procs.py``) and the zygote (inside the sandbox) both need
it.  The command name in field 2 may hold spaces and parentheses, so the
fields are split after its last ")".
"""
import os
from typing import Optional, Union


def stat_fields(pid: Union[int, str]) -> Optional[list[str]]:
    """The fields after the command name (state first), or None if the process is gone.

    Read as bytes: a process names itself (``/proc/self/comm``) with any bytes, and one that is not UTF-8
    must not crash whoever scans /proc (every session looks for its runner's children)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].decode("ascii", "replace").split()
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


def thread_schedstats(pid: Union[int, str]) -> Optional[dict[int, tuple[float, float]]]:
    """(seconds on a CPU, seconds runnable but waiting for one) of each live thread of a process, by
    thread id (fields 1 and 2 of ``/proc/<pid>/task/<tid>/schedstat``); None if the process is gone or
    the kernel keeps no such figures.  Threads that ended and child processes are in neither."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    stats = {}
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                ran, waited = f.read().split()[:2]
            stats[int(tid)] = (int(ran) / 1e9, int(waited) / 1e9)
        except FileNotFoundError:
            continue  # the thread ended between the listing and the read
        except (OSError, ValueError):
            return None
    return stats or None


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
