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
import re
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from typing import Optional

# A check's request: JupyterLab's panel sends the notebook without its outputs (the check regrades them), so a
# released notebook is about 140 KB: 2 MiB leave room for any honest answer.  The service's HTTP server enforces
# it before any read (other requests get `MAX_OTHER_BYTES`); each user's server (``labextension/
# sdpa_check_my_work``, the same number) refuses a larger one before it leaves.
MAX_CHECK_BYTES = 2 * 2**20
MAX_OTHER_BYTES = 16 * 2**10
# One cell's source: the release's largest is about 12,000 characters; 1.3 MB of source held the grader's static
# scan for 26 s in a red-team pass.  (A notebook's JSON structure is bounded by the submission rule,
# ``notebook/submission.py: MAX_JSON_CONTAINERS``, applied before the body is parsed.)
MAX_CELL_SOURCE_CHARS = 100_000
# All the code cells' source together: the release has about 35,000 characters of code.  The trusted static scan
# reads about a MiB in 10 s, outside the sandbox's time limits (a red-team check of 2 MiB of code held the one
# grader for 286 s before the scan was made linear): 400,000 characters keep a check's scan to a few seconds.
MAX_CODE_CHARS = 400_000
# Lines IPython rewrites before Python reads them (`%magic`, `!shell`, `x = !cmd`, `name?`), in all code cells:
# IPython tokenizes the whole cell again after each rewrite, twice on the trusted side (a red-team cell of 100 such
# lines in 100,000 characters took 39 s).  The release has none.
MAX_IPYTHON_LINES = 20
IPYTHON_LINE = re.compile(r"^[ \t]*(?:[%!?]|[\w.]+[ \t]*=[ \t]*[%!])|\?[ \t]*$", re.M)
# Bodies arriving at once: one per student, and this many in all.
MAX_UPLOADS = 8


class RateLimit:
    """A sliding window of one hour per student: at most `per_hour` checks, and at most `seconds_per_hour` of the
    grader's time (None: no such bound).  Counting checks alone let a notebook that runs each call to just under
    its time limit hold the one grader for most of a minute per press: a few students could fill its hour."""

    def __init__(self, per_hour: int, seconds_per_hour: Optional[float] = None,
                 clock: Callable[[], float] = time.time) -> None:
        if per_hour < 1:
            raise ValueError("per_hour must be at least 1")
        if seconds_per_hour is not None and not seconds_per_hour > 0:
            raise ValueError("seconds_per_hour must be positive")
        self.per_hour, self.seconds_per_hour, self.clock = per_hour, seconds_per_hour, clock
        self._seen: dict[str, collections.deque] = {}  # student -> times of their checks
        self._spent: dict[str, collections.deque] = {}  # student -> (time, grader seconds) of their checks
        self._lock = threading.Lock()

    def _window(self, student: str, now: float) -> tuple[collections.deque, collections.deque]:
        seen = self._seen.setdefault(student, collections.deque())
        spent = self._spent.setdefault(student, collections.deque())
        while seen and seen[0] <= now - 3600:
            seen.popleft()
        while spent and spent[0][0] <= now - 3600:
            spent.popleft()
        return seen, spent

    def take(self, student: str, count: bool = True) -> Optional[float]:
        """Count one check for `student` and return None, or return the time (epoch seconds) of the next check
        allowed, counting nothing.  `count=False` only asks."""
        now = self.clock()
        with self._lock:
            seen, spent = self._window(student, now)
            later = seen[0] + 3600 if len(seen) >= self.per_hour else None
            if self.seconds_per_hour is not None:
                used = sum(seconds for _, seconds in spent)
                for when, seconds in spent:  # the time the oldest checks leave the window, enough to go on
                    if used < self.seconds_per_hour:
                        break
                    used -= seconds
                    later = max(later or 0.0, when + 3600)
            if later is not None:
                return later
            if count:
                seen.append(now)
            return None

    def count(self, student: str) -> None:
        """Count one check for `student` now, whatever the limits say (an upload that never arrived)."""
        now = self.clock()
        with self._lock:
            self._window(student, now)[0].append(now)

    def charge(self, student: str, seconds: float) -> None:
        """Add the grader time one of `student`'s checks took."""
        if self.seconds_per_hour is None or not seconds > 0:
            return
        now = self.clock()
        with self._lock:
            self._window(student, now)[1].append((now, float(seconds)))

    def seed(self, checks: Iterable[tuple[str, float, Optional[float]]]) -> None:
        """Count the checks (student, made at, grader seconds) made before this service started (from its
        record), so that a restart does not give every student a fresh hour.  Each student's window is sorted
        once (sorting it again per check took a red-team record of 48,000 rows 50 s, the service answering
        nothing meanwhile)."""
        now = self.clock()
        with self._lock:
            touched = set()
            for student, at, seconds in checks:
                if not at > now - 3600:
                    continue
                seen, spent = self._window(student, now)
                seen.append(at)
                if self.seconds_per_hour is not None and seconds and seconds > 0:
                    spent.append((at, float(seconds)))
                touched.add(student)
            for student in touched:
                self._seen[student] = collections.deque(sorted(self._seen[student]))
                self._spent[student] = collections.deque(sorted(self._spent[student]))

    def grader_seconds(self, student: str) -> float:
        """The grader time `student`'s checks took in the last hour."""
        with self._lock:
            return sum(seconds for _, seconds in self._window(student, self.clock())[1])


class Uploads:
    """Check bodies arriving at once: at most one per student and `most` in all, so that neither one student's
    many connections nor a crowd's holds the service's memory (each body is up to MAX_CHECK_BYTES)."""

    def __init__(self, most: int = MAX_UPLOADS) -> None:
        self.most = most
        self._arriving: set[str] = set()
        self._lock = threading.Lock()

    def start(self, student: str) -> Optional[str]:
        """None when `student` may send a body now (call `end` once it is in), else "student" (theirs is
        already arriving) or "full"."""
        with self._lock:
            if student in self._arriving:
                return "student"
            if len(self._arriving) >= self.most:
                return "full"
            self._arriving.add(student)
            return None

    def end(self, student: str) -> None:
        with self._lock:
            self._arriving.discard(student)


class FairQueue:
    """Waiting checks, first come first served, one per student, at most `capacity` at once."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._waiting: collections.OrderedDict = collections.OrderedDict()  # student -> job
        self._taken: set[str] = set()  # students whose job the worker took and has not `finished`
        self._ready = threading.Condition()

    REFUSED = 0  # put's answer when `admit` refused a new entry
    IN_PROGRESS = -1  # put's answer while the student's last job is taken and not finished

    def put(self, student: str, job: object, admit: Optional[Callable[[], bool]] = None) -> Optional[int]:
        """Queue `job` for `student`; returns their place (1 = next), None when the queue is full, or REFUSED.
        A student already waiting keeps their place, with the newer notebook, and `admit` is not asked; a new
        entry is made only if `admit()` (the hourly limit, counting it) says yes, decided under the queue's lock:
        the worker cannot take a waiting job between the question "is this student waiting?" and the put."""
        with self._ready:
            if student not in self._waiting:
                if student in self._taken:  # decided with the take, under one lock: no press slips between
                    return self.IN_PROGRESS
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
        """The next (student, job), waiting at most `timeout` seconds; None if none came.  The student's next
        job is refused (`IN_PROGRESS`) until `finished(student)`."""
        with self._ready:
            if not self._ready.wait_for(lambda: self._waiting, timeout):
                return None
            student, job = self._waiting.popitem(last=False)
            self._taken.add(student)
            return student, job

    def finished(self, student: str) -> None:
        """The job `get` gave for `student` is done (and its cost counted)."""
        with self._ready:
            self._taken.discard(student)

    def in_progress(self, student: str) -> bool:
        with self._ready:
            return student in self._taken

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
