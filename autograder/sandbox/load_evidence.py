"""Whether a runner that overran its limit had a CPU to itself: the evidence for charging it at once.

A limit overrun is retried on a fresh runner when load may have caused it,
and charged at once when it cannot have: then a retry would only double a
busy loop's cost.  The evidence is read by this (trusted) side from the
kernel's own accounting in ``/proc``, which the runner cannot forge:

* its CPU time (``/proc/<pid>/stat``) was at least `MIN_CPU_SHARE` of the
  wall time: it ran, it was not waiting for us or sleeping;
* the time its threads spent runnable but waiting for a CPU (the run-queue
  wait in ``/proc/<pid>/task/*/schedstat``) was at most `MAX_WAIT_SHARE` of
  the wall time.  CPU time alone is not enough: four threads that each got a
  quarter of a busy machine add up to a whole CPU while every one of them
  was starved.

Anything missing (no pid, a thread that ended in the window so its waits are
lost, a kernel without schedstat, a window too short to judge) is no
evidence, and no evidence means a retry: the rule only ever saves time, it
never charges a student on a guess.

The first reading is taken lazily, the first time the wait for a reply
wakes without one (`tick`), so a request that answers quickly costs nothing.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

from .guest import procfs

MIN_CPU_SHARE = 0.9
MAX_WAIT_SHARE = 0.1
MIN_WINDOW_SECONDS = 0.5  # shorter windows are too coarse for clock-tick CPU figures


@dataclass(frozen=True)
class _Reading:
    at: float
    cpu: Optional[float]
    waits: Optional[dict[int, float]]

    @classmethod
    def of(cls, pid: int) -> _Reading:
        return cls(time.monotonic(), procfs.cpu_seconds(pid), procfs.run_queue_waits(pid))


class LoadWatch:
    """Readings of one runner around one request; `had_a_core()` decides after an overrun."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.first: Optional[_Reading] = None

    def tick(self) -> None:
        if self.first is None:
            self.first = _Reading.of(self.pid)

    def had_a_core(self) -> bool:
        """True only when both figures show the runner ran unhindered from the first reading to now."""
        start = self.first
        if start is None or start.cpu is None or start.waits is None:
            return False
        end = _Reading.of(self.pid)
        window = end.at - start.at
        if end.cpu is None or end.waits is None or window < MIN_WINDOW_SECONDS:
            return False
        if not set(start.waits) <= set(end.waits):
            return False  # a thread ended: what it waited is gone with it
        waited = sum(end.waits[tid] - start.waits.get(tid, 0.0) for tid in end.waits)
        return end.cpu - start.cpu >= MIN_CPU_SHARE * window and waited <= MAX_WAIT_SHARE * window
