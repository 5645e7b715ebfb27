"""``sdpa-course autograde``: `nbgrader autograde`, in parallel and resumable.

Same grades as the stock command: every submission goes through nbgrader's
own `Autograde` converter with the course's configuration (``worker.py``);
only *where* it runs differs.

* Workers: ``--workers`` processes forked from this one (``local_workers.py``)
  or a dask cluster (``dask_cluster.py``), each grading in a private course
  directory made from a bundle (``bundle.py``), with runners forked from a
  warmed zygote (``autograder/sandbox/forkserver.py``).  Local workers'
  zygotes start first, and warm up while this process imports.
* Single writer: only this process writes the course's gradebook, one
  result at a time (``importer.py``); SQLite sees one writer.
* Resume: a student appears in ``autograded/`` only after their grades are
  committed, so an interrupted run loses at most the submissions in flight;
  re-running skips every student already graded, with nbgrader's rule
  (unless ``--force``, or a newer ``timestamp.txt``).  A lock file keeps two
  runs off one course.
* Failures: a submission whose grading raises, whose worker dies, or that
  runs past ``--timeout`` is reported on one line (``failures.py``) and the
  others go on; it gets no ``autograded/`` directory, so the next run
  retries it (as stock does).  Exit status 1.  Where nbgrader's converter
  failed (an unreadable notebook, ...), the gradebook gets what the stock
  command leaves for it (``Importer.save_failed``): an export shows the
  same scores whichever command graded.

How fast, and where a submission's time goes: ``make bench`` and
``python -m benchmarks profile``; the figures are in the docs (docs/benchmarks.md).
"""
from __future__ import annotations

import collections
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, TextIO, Union

from ..grading import record
from ..notebook.submission import SubmissionRefused, check_folder
from .bundle import make_bundle, read_tree
from .coursedir import (
    ASSIGNMENT,
    CourseError,
    autograded_top,
    check_course,
    find_submissions,
    load_app,
    needs_grading,
    step_dir,
)
from .dask_cluster import DEFAULT_TIMEOUT, grade_on_dask_worker, probe_scheduler
from .failures import Failure, exit_text, failure_result, reason_of
from .importer import Importer
from .local_workers import LocalWorker, remove_stale_worker_dirs, start_zygotes, stop_zygotes
from .worker import collector_paused, sandbox_or_refuse, warm_parent

LOCK = ".sdpa-course.lock"

__all__ = ["ASSIGNMENT", "DEFAULT_TIMEOUT", "Autograder", "CourseError", "Summary", "autograde"]


@dataclass
class Summary:
    """What one run did, for the command's closing lines."""

    total: int = 0  # submissions found (after --student)
    graded: list = field(default_factory=list)  # (student, score, max_score, seconds)
    skipped: list = field(default_factory=list)
    failed: list = field(default_factory=list)  # Failure
    wall: float = 0.0
    interrupted: bool = False
    disk_full: str = ""  # what could not be written when the disk filled up: the run stopped there
    workers: int = 0
    runners: collections.Counter = field(default_factory=collections.Counter)  # source -> submissions



class DiskFull(Exception):
    """A write failed for want of space: going on would fail every later student the same way."""


# How a full disk (or quota) shows: errno ENOSPC / EDQUOT, SQLite's own words, or a worker's reason that quotes them.
_FULL = ("No space left on device", "Disk quota exceeded", "database or disk is full")


def _disk_full(text: str) -> bool:
    return any(words in text for words in _FULL)


class _Lock:
    """An exclusive lock file holding the pid of the run that grades the course."""

    def __init__(self, path):
        self.path = path
        self.file = None

    def __enter__(self):
        import fcntl

        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self.file = open(self.path, "a+")
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.file.seek(0)
            holder = self.file.read().strip() or "?"
            self.file.close()
            raise CourseError(f"another `sdpa-course autograde` (pid {holder}) is grading this course "
                              f"({self.path}) — wait for it to finish") from None
        self.file.seek(0)
        self.file.truncate()
        self.file.write(str(os.getpid()))
        self.file.flush()
        return self

    def __exit__(self, *exc):
        self.file.close()



class Autograder:
    """One ``sdpa-course autograde`` run; see the module docstring."""

    def __init__(self, course: Union[str, os.PathLike], assignment: str = ASSIGNMENT, *, workers: Optional[int] = None,
                 students: Optional[Iterable[str]] = None, force: bool = False, dask: Optional[str] = None,
                 timeout: float = DEFAULT_TIMEOUT, prewarm: bool = True, nbgrader_args: Sequence[str] = (),
                 out: Optional[TextIO] = None, verbose: bool = False) -> None:
        self.course = os.path.abspath(course)
        self.assignment = assignment
        self.workers = workers or os.cpu_count() or 1
        self.students = list(students or [])
        self.force, self.dask, self.timeout, self.prewarm = force, dask, timeout, prewarm
        self.nbgrader_args = list(nbgrader_args)
        self.out = out or sys.stderr
        self.verbose = verbose
        if self.workers < 1:
            raise CourseError(f"--workers must be at least 1 (got {self.workers})")
        if not os.path.isdir(self.course):
            raise CourseError(f"course directory {self.course} does not exist — pass --course DIR")

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def plan(self) -> tuple[list[str], list[str]]:
        """(tasks to grade, students skipped), after checking the course."""
        self.app = load_app(self.course, self.nbgrader_args)
        coursedir = self.app.coursedir
        check_course(self.app, self.assignment)
        sandbox_or_refuse(self.app, self.say)  # before any student: refuse, or say so
        found = find_submissions(coursedir, self.assignment)
        sub_pattern = os.path.relpath(step_dir(coursedir, coursedir.submitted_directory, "*", self.assignment),
                                      self.course)
        if not found:
            raise CourseError(f"no submissions under {sub_pattern} in {self.course} — run "
                              f"`nbgrader collect {self.assignment}` first")
        if self.students:
            missing = [s for s in self.students if s not in found]
            if missing:
                listing = os.path.relpath(step_dir(coursedir, coursedir.submitted_directory, ".", "."), self.course)
                raise CourseError(f"no submission for {', '.join(map(repr, missing))} under {sub_pattern} "
                                  f"— check the student IDs (`ls {listing}`)")
            found = {s: found[s] for s in self.students}
        todo, skipped = [], []
        for student in found:
            (todo if needs_grading(coursedir, self.assignment, student, self.force) else skipped).append(student)
        return todo, skipped

    def _task(self, student):
        path = step_dir(self.app.coursedir, self.app.coursedir.submitted_directory, student, self.assignment)
        check_folder(path, self.app.coursedir.ignore, os.path.relpath(path, self.course))
        return {"student": student, "files": read_tree(path, self.app.coursedir.ignore)}

    def run(self) -> Summary:
        started = time.perf_counter()
        summary = Summary()
        if self.dask:
            probe_scheduler(self.dask)
        # Zygotes for the local workers start first, with the default runner settings: they warm up (seconds of
        # CPU each) while this process imports nbgrader, reads the course and builds the bundle.  A course
        # configured otherwise gets new ones at its first runner (`forkserver.ForkServer.take`).  One core is
        # left to those imports: the other workers start their own zygotes once forked.
        wanted = min(self.workers, len(self.students)) if self.students else self.workers
        early = self._start_zygotes(min(wanted, max(1, (os.cpu_count() or 1) - 1)))
        try:
            with collector_paused():  # plan() imports nbgrader and torch
                todo, skipped = self.plan()
            summary.total, summary.skipped = len(todo) + len(skipped), skipped
            for _ in range(len(early) - min(len(early), len(todo))):  # fewer submissions than workers
                stop_zygotes([early.pop()])
            lock = os.path.join(autograded_top(self.app.coursedir), LOCK)
            with _Lock(lock):
                self._run(todo, skipped, summary, early)
        finally:
            stop_zygotes(early)  # those no worker took
        summary.wall = time.perf_counter() - started
        return summary

    def _start_zygotes(self, count):
        """Zygotes for the workers `_run_local` will fork (only with the fork start method)."""
        if self.dask or not self.prewarm or threading.active_count() != 1 or count < 1:
            return []
        return start_zygotes(count)

    def _run(self, todo, skipped, summary, early):
        importer = Importer(self.app, self.assignment)
        importer.clean_staging()
        if skipped:
            self.say(f"skipping {len(skipped)} already graded (in autograded/; --force to regrade)")
        if todo:
            bundle = make_bundle(self.app, self.assignment, self.nbgrader_args)
            self._done = 0
            self._todo = len(todo)
            previous = signal.getsignal(signal.SIGTERM)
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, _raise_interrupt)
            try:
                if self.dask:
                    self._run_dask(todo, bundle, importer, summary)
                else:
                    self._run_local(todo, bundle, importer, summary, early)
            except KeyboardInterrupt:
                summary.interrupted = True
            except DiskFull as exc:
                summary.disk_full = str(exc)
            finally:
                if threading.current_thread() is threading.main_thread():
                    signal.signal(signal.SIGTERM, previous)
        importer.clean_staging()

    # -- results ---------------------------------------------------------------
    def _handle(self, result, importer, summary):
        student = result["student"]
        self._done += 1
        prefix = f"[{self._done}/{self._todo}] {student}"
        if result.get("ok"):
            try:
                score, max_score = importer.save(result)
            except Exception as exc:  # noqa: BLE001 - e.g. a locked or corrupt gradebook
                if _disk_full(reason_of(exc)):
                    raise DiskFull(f"saving {student}'s grades: {reason_of(exc)}") from exc
                result = dict(result, ok=False, failure={"notebook": (result["notebooks"] or ["-"])[0] + ".ipynb",
                                                         "cell": None, "reason": reason_of(exc),
                                                         "stage": "saving to the gradebook"})
            else:
                seconds = result.get("seconds") or 0.0
                summary.graded.append((student, score, max_score, seconds))
                summary.runners[result.get("runners") or "fresh"] += 1
                self.say(f"{prefix} {seconds:.1f}s {_points_line(result, score, max_score)}")
                if self.verbose and result.get("log"):
                    self.say(_indent(result["log"]))
                return
        info = result.get("failure") or {}
        reason = info.get("reason") or "unknown error"
        if _disk_full(reason):  # the worker could not write its own copy of the course
            raise DiskFull(f"grading {student}: {reason}")
        try:
            importer.save_failed(result)  # what stock nbgrader leaves for a submission it failed on
        except Exception as exc:  # noqa: BLE001 - as above
            reason += f" (and its gradebook entries could not be saved: {reason_of(exc)})"
        failure = Failure(student, info.get("notebook") or "-", info.get("cell"), reason, info.get("stage"))
        summary.failed.append(failure)
        self.say(f"{prefix} FAILED {failure.short()}")
        if self.verbose and result.get("log"):
            self.say(_indent(result["log"]))

    def _task_or_failure(self, student, importer, summary):
        try:
            return self._task(student)
        except SubmissionRefused as exc:
            reason = str(exc)
            try:
                importer.save_refused(student)  # what stock leaves when its first step refuses the submission
            except Exception as error:  # noqa: BLE001 - reported with the refusal
                reason += f" (and its gradebook entries could not be saved: {reason_of(error)})"
            self._handle(failure_result(student, reason), importer, summary)
            return None
        except (OSError, ValueError) as exc:
            self._handle(failure_result(student, f"cannot read the submission: {exc}"), importer, summary)
            return None

    # -- local processes -----------------------------------------------------
    def _run_local(self, todo, bundle, importer, summary, early):
        """`early`: (directory, fork server) per worker from `_start_zygotes`; each one a worker takes is
        removed from the list (the rest are the caller's to stop)."""
        from multiprocessing.connection import wait

        if threading.active_count() == 1:
            warm_parent()
            ctx = multiprocessing.get_context("fork")
        else:  # forking a threaded process is unsafe (and a fork server cannot go to a spawned worker)
            ctx = multiprocessing.get_context("spawn")
            stop_zygotes(early)
        remove_stale_worker_dirs()
        count = min(self.workers, len(todo))
        summary.workers = count
        self.say(f"grading {len(todo)} submission{'s' * (len(todo) != 1)} with {count} worker"
                 f"{'s' * (count != 1)}")
        pending = collections.deque(todo)
        workers = []
        try:
            for _ in range(count):
                mine = early[0] if early else None
                workers.append(LocalWorker(ctx, bundle, self.prewarm, mine, [server for _, server in early[1:]]))
                if mine is not None:
                    early.pop(0)  # the worker's now
            while True:
                for worker in workers:
                    self._feed(worker, pending, importer, summary)
                busy = [w for w in workers if w.task is not None]
                if not busy:
                    break
                ready = wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=1.0)
                for index, worker in enumerate(workers):
                    if worker.task is None:
                        continue
                    message = None
                    if worker.conn in ready or worker.proc.sentinel in ready:
                        try:
                            message = worker.conn.recv() if worker.conn.poll() else None
                        except (EOFError, OSError):
                            message = None
                    if message is not None:
                        kind, payload = message
                        if kind == "init-error":
                            raise CourseError(f"a grading worker could not start: {payload}")
                        worker.task = None
                        # Its next submission first: the worker grades while this process imports.
                        self._feed(worker, pending, importer, summary)
                        self._handle(payload, importer, summary)
                        continue
                    if not worker.proc.is_alive():
                        reason = f"grading process died ({exit_text(worker.proc.exitcode)})"
                    elif time.monotonic() - worker.since > self.timeout:
                        reason = f"grading took longer than {self.timeout:g} s (worker killed)"
                    else:
                        continue
                    student = worker.task["student"]
                    worker.kill()
                    worker.task = None
                    if pending:
                        workers[index] = LocalWorker(ctx, bundle, self.prewarm)
                    self._handle(failure_result(student, reason), importer, summary)
        finally:
            for worker in workers:
                if worker.task is not None:
                    worker.kill()
                else:
                    worker.stop()

    def _feed(self, worker, pending, importer, summary):
        """Give an idle worker the next submission; retire it when there is none."""
        while worker.task is None and pending:
            task = self._task_or_failure(pending.popleft(), importer, summary)
            if task is not None:
                task["more"] = bool(pending)  # whether to warm a runner for a next one
                worker.assign(task)
        if worker.task is None and not pending:
            worker.retire()

    # -- dask --------------------------------------------------------------------
    def _run_dask(self, todo, bundle, importer, summary):
        try:
            from distributed import Client, as_completed
        except ImportError:
            raise CourseError("--dask needs dask.distributed — pip install 'sdpa-course[cluster]'") from None
        probe_scheduler(self.dask)
        try:
            client = Client(self.dask, timeout=15, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise CourseError(f"cannot reach the dask scheduler at {self.dask} ({type(exc).__name__}: {exc}) — "
                              f"start one with `dask scheduler` and workers with `dask worker ADDRESS`, "
                              f"or check the address") from None
        futures = {}
        try:
            count = len(client.scheduler_info().get("workers", {}))
            summary.workers = count
            self.say(f"grading {len(todo)} submission{'s' * (len(todo) != 1)} on the dask cluster at "
                     f"{self.dask} ({count} worker{'s' * (count != 1)})")
            [shared] = client.scatter([bundle], broadcast=True)
            for student in todo:
                task = self._task_or_failure(student, importer, summary)
                if task is None:
                    continue
                future = client.submit(grade_on_dask_worker, shared, task, self.timeout, pure=False,
                                       key=f"sdpa-autograde-{bundle['token']}-{uuid.uuid4().hex[:8]}")
                futures[future] = student
            for future in as_completed(list(futures), loop=client.loop):
                try:
                    result = future.result()
                except Exception as exc:  # noqa: BLE001 - a lost worker, a broken task...
                    result = failure_result(futures[future], f"dask task failed: {reason_of(exc)}")
                self._handle(result, importer, summary)
        finally:
            for future in futures:
                if not future.done():
                    future.cancel()
            client.close()



def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _points_line(result: dict, score: float, max_score: float) -> str:
    """What stock `nbgrader autograde` prints for the student ("100 / 105 automatic points; codes …"), read from
    the grading record the worker wrote; the gradebook's score over its total (written answers included, which
    no machine grades) only when there is no record."""
    lines = []
    for rel, (data, _mode) in sorted((result.get("files") or {}).items()):
        if rel.endswith(record.SUFFIX):
            try:
                lines.append(record.points_summary(json.loads(data)))
            except (ValueError, AttributeError):
                continue
    return "; ".join(lines) or f"{score:g}/{max_score:g}"


def _indent(text):
    return "\n".join("    " + line for line in text.splitlines())


def autograde(course: Union[str, os.PathLike], assignment: str = ASSIGNMENT, **kwargs: Any) -> Summary:
    """Grade a course's submissions (see `Autograder`); returns a `Summary`."""
    return Autograder(course, assignment, **kwargs).run()


