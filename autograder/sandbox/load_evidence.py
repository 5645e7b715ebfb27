"""Whether a runner that overran its limit had a CPU to itself: the evidence for charging it at once.

A limit overrun is retried on a fresh runner when load may have caused it,
and charged at once when it cannot have: then a retry would only double a
busy loop's cost.  The evidence is read by this (trusted) side from the
kernel's per-thread accounting, ``/proc/<pid>/task/<tid>/schedstat``, which
the runner cannot forge.  Over the window, its threads together must have

* run on a CPU for at least `MIN_CPU_SHARE` of the wall time: it ran, it was
  not sleeping or waiting for us; and
* waited in the run queue for at most `MAX_WAIT_SHARE` of it.  Run time alone
  is not enough: four threads that each got a quarter of a busy machine add
  up to a whole CPU while every one of them was starved.

Both figures come from the same threads, so what cannot be seen is never
half-counted: a thread that ended in the window, a child process, a thread
id that was reused, all make the run time short or the evidence void.  No
evidence means a retry: the rule only ever saves time, it never charges a
student on a guess.

The first reading is taken lazily, when the wait for a reply first wakes
without one (`tick`), so a request that answers quickly costs no reads.  If
this side woke late (it was starved itself), the window would miss the
start of the request, so a late first reading is no evidence either.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

from .guest import procfs

MIN_CPU_SHARE = 0.9
MAX_WAIT_SHARE = 0.1
MIN_WINDOW_SECONDS = 0.5  # too short a window says little
LATE_FIRST_READING_SECONDS = 0.5  # the wait loop wakes every 0.2 s; later means this side was starved


@dataclass(frozen=True)
class _Reading:
    at: float
    threads: Optional[dict[int, tuple[float, float]]]  # tid -> (seconds run, seconds waited)

    @classmethod
    def of(cls, pid: int) -> _Reading:
        try:
            threads = procfs.thread_schedstats(pid)
        except Exception:  # noqa: BLE001 - whatever /proc holds, unreadable is no evidence
            threads = None
        return cls(time.monotonic(), threads)


class LoadWatch:
    """Readings of one runner around one request; `had_a_core()` decides after an overrun."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.created = time.monotonic()
        self.first: Optional[_Reading] = None

    def tick(self) -> None:
        if self.first is None:
            self.first = _Reading.of(self.pid)

    def had_a_core(self) -> bool:
        """True only when the kernel's figures show the runner ran unhindered from the first reading to now."""
        start = self.first
        if start is None or start.threads is None or start.at - self.created > LATE_FIRST_READING_SECONDS:
            return False
        end = _Reading.of(self.pid)
        window = end.at - start.at
        if end.threads is None or window < MIN_WINDOW_SECONDS or not set(start.threads) <= set(end.threads):
            return False  # gone, too short, or a thread ended: what it did is lost with it
        ran = waited = 0.0
        for tid, (run_now, wait_now) in end.threads.items():
            run_then, wait_then = start.threads.get(tid, (0.0, 0.0))
            if run_now < run_then or wait_now < wait_then:
                return False  # a reused thread id
            ran += run_now - run_then
            waited += wait_now - wait_then
        return ran >= MIN_CPU_SHARE * window and waited <= MAX_WAIT_SHARE * window
