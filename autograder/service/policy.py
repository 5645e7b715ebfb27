"""Who may check, and when: the instructor's limits on the check service, decided on the service's side.

- `RateLimit`: at most `per_hour` checks per student in any hour; a refused student is told when the next
  check is allowed.
- `FairQueue`: at most `capacity` notebooks wait at once, at most one per student (a second press while the
  first waits is the same request); everyone else is told the queue is full, so memory stays bounded under a
  rush and each student is either answered or told their place.
- `closed`: no checks after the assignment's due date unless the instructor allows them.
"""
from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Optional

# A check's request: a notebook of up to 16 MiB (a submission may hold 64; outputs are what makes a notebook
# large, and the panel says to clear them).  The service's HTTP server enforces it before any read; each user's
# server (``forward.py``) refuses a larger one before it leaves, saying so in words.
MAX_CHECK_BYTES = 16 * 2**20


class RateLimit:
    """A sliding window of one hour per student."""

    def __init__(self, per_hour: int, clock: Callable[[], float] = time.time) -> None:
        if per_hour < 1:
            raise ValueError("per_hour must be at least 1")
        self.per_hour, self.clock = per_hour, clock
        self._seen: dict[str, collections.deque] = {}
        self._lock = threading.Lock()

    def take(self, student: str, count: bool = True) -> Optional[float]:
        """Count one check for `student` and return None, or return the time (epoch seconds) of the next check
        allowed, counting nothing.  `count=False` only asks."""
        now = self.clock()
        with self._lock:
            seen = self._seen.setdefault(student, collections.deque())
            while seen and seen[0] <= now - 3600:
                seen.popleft()
            if len(seen) >= self.per_hour:
                return seen[0] + 3600
            if count:
                seen.append(now)
            return None


class FairQueue:
    """Waiting checks, first come first served, one per student, at most `capacity` at once."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._waiting: collections.OrderedDict = collections.OrderedDict()  # student -> job
        self._ready = threading.Condition()

    REFUSED = 0  # put's answer when `admit` refused a new entry

    def put(self, student: str, job: object, admit: Optional[Callable[[], bool]] = None) -> Optional[int]:
        """Queue `job` for `student`; returns their place (1 = next), None when the queue is full, or REFUSED.
        A student already waiting keeps their place, with the newer notebook, and `admit` is not asked; a new
        entry is made only if `admit()` (the hourly limit, counting it) says yes, decided under the queue's lock:
        the worker cannot take a waiting job between the question "is this student waiting?" and the put."""
        with self._ready:
            if student not in self._waiting:
                if len(self._waiting) >= self.capacity:
                    return None
                if admit is not None and not admit():
                    return self.REFUSED
            self._waiting[student] = job
            self._ready.notify()
            return list(self._waiting).index(student) + 1

    def place(self, student: str) -> Optional[int]:
        """`student`'s place in the queue (1 = next), or None when nothing of theirs waits."""
        with self._ready:
            return list(self._waiting).index(student) + 1 if student in self._waiting else None

    def get(self, timeout: Optional[float] = None) -> Optional[tuple[str, object]]:
        """The next (student, job), waiting at most `timeout` seconds; None if none came."""
        with self._ready:
            if not self._ready.wait_for(lambda: self._waiting, timeout):
                return None
            return self._waiting.popitem(last=False)

    def __len__(self) -> int:
        with self._ready:
            return len(self._waiting)


def closed(due: Optional[datetime], allow_after_due: bool, now: Optional[datetime] = None) -> bool:
    """Whether checks are closed: past the due date (nbgrader's gradebook stores it in UTC, without a time
    zone) and not allowed after it."""
    if due is None or allow_after_due:
        return False
    now = now or datetime.now(timezone.utc)
    if due.tzinfo is None:
        due = due.replace(tzinfo=timezone.utc)
    return now > due
