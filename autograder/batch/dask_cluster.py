"""``--dask ADDRESS``: the same grading work on a dask.distributed cluster.

Each task carries one student's submitted files; the course bundle is
scattered to the workers once; each dask worker grades through private
grading processes (``transport.py``), reused for later tasks of the same
bundle.  Results come back to ``sdpa-course``, which alone writes the
gradebook.
"""
from __future__ import annotations

import collections
import re
import socket
import threading

from .coursedir import CourseError
from .failures import failure_result
from .transport import ProcessGrader

DEFAULT_TIMEOUT = 900.0  # seconds one submission may take before its grading process is killed

_DASK_IDLE = collections.defaultdict(list)  # bundle token -> idle ProcessGrader
_DASK_LOCK = threading.Lock()


def grade_on_dask_worker(bundle: dict, task: dict, timeout: float = DEFAULT_TIMEOUT) -> dict:
    """The dask task: grade `task` with a grading process of this worker (started on first use)."""
    with _DASK_LOCK:
        idle = _DASK_IDLE[bundle["token"]]
        grader = idle.pop() if idle else None
    if grader is None or not grader.alive():
        grader = ProcessGrader(bundle)
    result = grader.grade(task, timeout)
    if result is None:
        grader.kill()
        return failure_result(task["student"], "grading process died before taking the task")
    if grader.alive():
        with _DASK_LOCK:
            _DASK_IDLE[bundle["token"]].append(grader)
    return result



def probe_scheduler(address: str) -> None:
    """Fail in a moment, not after dask's connect timeout, when nothing listens at a tcp:// address."""
    match = re.fullmatch(r"(?:tcp://)?\[?([^\]/]+?)\]?:(\d+)/?", address)
    if not match:
        return
    try:
        socket.create_connection((match.group(1), int(match.group(2))), timeout=5).close()
    except OSError as exc:
        raise CourseError(f"cannot reach the dask scheduler at {address} ({exc.strerror or exc}) — start one "
                          f"with `dask scheduler` and workers with `dask worker ADDRESS`, or check the "
                          f"address") from None

