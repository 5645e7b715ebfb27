"""A grading worker: the stock `Autograde` converter, one submission at a time, in a private course.

The worker's course directory is a temporary copy made from a bundle
(``bundle.py``); each submission's files are written into it, nbgrader's
own converter grades them with the course's configuration, and the files it
wrote plus the auto scores of its private gradebook go back as a result.
The worker hands each notebook a runner source (a zygote fork server, or a
pre-started runner where bubblewrap has no pid namespace) through nbgrader's
per-notebook resources.
"""
from __future__ import annotations

import contextlib
import gc
import glob
import logging
import os
import shutil
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

from ..nbgrader.state import RUNNER_SOURCE, Shared
from .bundle import read_tree, write_tree
from .coursedir import load_app, step_dir
from .failures import explain_failure
from .importer import autograde_entries, written_before_failure


def autograde_class() -> type:
    from nbgrader.converters import Autograde

    class ObservedAutograde(Autograde):
        """nbgrader's Autograde, unchanged, except that it remembers the first exception it saw and the
        student's gradebook entries before it wrote any (for ``importer.written_before_failure``), and
        hands each notebook the worker's runner source (nbconvert resources, see ``nbgrader/state.py``)."""

        failure = None
        runner_source = None
        entries_before = None

        def init_single_notebook_resources(self, notebook_filename: str) -> dict:
            resources = super().init_single_notebook_resources(notebook_filename)
            resources[RUNNER_SOURCE] = Shared(self.runner_source)
            return resources

        def _remember(self, notebook):
            if self.failure is None:
                self.failure = (notebook, sys.exc_info()[1], self._sanitizing)

        def init_assignment(self, assignment_id: str, student_id: str) -> None:
            try:
                self.entries_before = autograde_entries(self.coursedir.db_url, self.coursedir.course_id,
                                                        assignment_id, student_id)
                return super().init_assignment(assignment_id, student_id)
            except Exception:
                self._remember(None)
                raise

        def convert_single_notebook(self, notebook_filename: str) -> None:
            try:
                return super().convert_single_notebook(notebook_filename)
            except Exception:
                self._remember(notebook_filename)
                raise

    return ObservedAutograde


class _LogCapture(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001
            text = str(record.msg)
        if record.exc_info:
            text += "\n" + "".join(traceback.format_exception(*record.exc_info))
        if len(self.lines) < 200:
            self.lines.append(f"[{record.levelname}] {text}")


class Grader:
    """Grades submissions one at a time with the stock converter, in a private course directory."""

    def __init__(self, bundle: dict, prewarm: bool = True, pool: object = None) -> None:
        import torch

        # The hidden checks' tensors are tiny, and the workers and their runners already fill every
        # core: a second intra-op thread would only spin (twice the CPU per torch call, four times the
        # wall time when the cores are busy; python -m benchmarks torch-threads measures it).
        torch.set_num_threads(1)
        self.assignment = bundle["assignment"]
        self.root = tempfile.mkdtemp(prefix="sdpa-grader-")
        write_tree(self.root, bundle["files"])
        Path(self.root, "gradebook.db").write_bytes(bundle["gradebook"])
        self.db_url = "sqlite:///" + os.path.join(self.root, "gradebook.db")
        args = list(bundle["nbgrader_args"]) + [
            f"--CourseDirectory.root={self.root}", f"--CourseDirectory.db_url={self.db_url}"]
        kept = bundle.get("calibration")
        if kept and kept.get("host") == socket.gethostname():  # the course's own reference timings, shared
            args.append(f"--SandboxedExecute.calibration_directory={kept['directory']}")
        self.app = load_app(self.root, args)
        self.capture = _LogCapture()
        for handler in list(self.app.log.handlers):
            self.app.log.removeHandler(handler)
        self.app.log.addHandler(self.capture)
        self.app.log.propagate = False
        logging.getLogger().addHandler(self.capture)
        logging.captureWarnings(True)
        self.converter_class = autograde_class()
        self.pool = pool  # a fork server whose zygote the parent started for this worker, or None
        if pool is None and prewarm and uses_sandboxed_execute(self.app):
            self._start_pool()
        self.graded = 0
        if prewarm:
            from ..grading import reading_process

            reading_process.start()  # imports the scan in its own process, beside the zygote's warm-up

    def _start_pool(self):
        """Runners forked from a warmed zygote (under bubblewrap), else pre-started ones."""
        from ..sandbox.forkserver import ForkServer
        from ..sandbox.pool import RunnerPool

        source = ForkServer if ForkServer.usable() else RunnerPool
        self.pool = source(**runner_settings(self.app))
        self.pool.warm()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        logging.getLogger().removeHandler(self.capture)
        logging.captureWarnings(False)
        shutil.rmtree(self.root, ignore_errors=True)

    def grade(self, task: dict) -> dict:
        """Grade one submission; never raises.  `task`: {"student", "files"}."""
        started = time.perf_counter()
        student = task["student"]
        coursedir = self.app.coursedir
        for step in (coursedir.submitted_directory, coursedir.autograded_directory):
            shutil.rmtree(step_dir(coursedir, step, ".", "."), ignore_errors=True)
        submitted = step_dir(coursedir, coursedir.submitted_directory, student, self.assignment)
        autograded = step_dir(coursedir, coursedir.autograded_directory, student, self.assignment)
        counts = (self.pool.handed, self.pool.missed) if self.pool else (0, 0)
        if self.pool is not None:
            # A runner warmed for a submission that never comes would only slow the last ones down.
            self.pool.keep_warm = task.get("more", True)
            if self.pool.keep_warm:
                self.pool.warm()
        self.capture.lines = []
        converter = None
        result = {"student": student, "ok": False, "files": {}, "notebooks": [], "grades": {}, "failure": None,
                  "pid": os.getpid(), "host": socket.gethostname()}
        try:
            write_tree(submitted, task["files"])
            converter = self.converter_class(coursedir=coursedir, parent=self.app)
            converter.runner_source = self.pool
            converter.force = True
            coursedir.assignment_id = self.assignment
            coursedir.student_id = glob.escape(student)
            try:
                converter.start()
            finally:
                coursedir.student_id = "*"
            graded = [n for n in sorted(converter.notebooks) if os.path.exists(
                os.path.join(autograded, os.path.basename(n)))]
            if not graded:
                raise RuntimeError("nbgrader graded no notebook of this submission (see the log)")
            result["files"] = read_tree(autograded)
            result["notebooks"] = [os.path.splitext(os.path.basename(n))[0] for n in graded]
            result["grades"] = self._private_grades(student, result["notebooks"])
            # What nbgrader's steps left in this gradebook: the importer copies it into the course's.
            result["written"] = autograde_entries(self.db_url, coursedir.course_id, self.assignment, student)
            result["ok"] = True
        except Exception as exc:  # noqa: BLE001 - one submission's failure is data, not a crash
            result["failure"] = explain_failure(converter, exc, task["files"], self.capture.lines)
            result["written"] = written_before_failure(converter, self.assignment, student)
        result["log"] = "\n".join(self.capture.lines)
        result["runners"] = self._runner_source(*counts)
        result["seconds"] = round(time.perf_counter() - started, 3)
        self.graded += 1
        if self.graded == 1:
            # Everything alive now (torch, nbgrader, the checks) lives as long as
            # the worker: keep it out of every later collection.
            gc.collect()
            gc.freeze()
        return result

    def _runner_source(self, handed, missed):
        """Where this submission's runners came from: "zygote", "pre-started", "fresh" or "mixed"."""
        if self.pool is None or self.pool.handed == handed:
            return "fresh"
        if self.pool.missed > missed:
            return "mixed"
        return "zygote" if type(self.pool).__name__ == "ForkServer" else "pre-started"

    def _private_grades(self, student, notebooks):
        from nbgrader.api import Gradebook

        out = {}
        with Gradebook(self.db_url) as gb:
            for name in notebooks:
                sub = gb.find_submission_notebook(name, self.assignment, student)
                out[name] = {g.name: g.auto_score for g in sub.grades}
        return out



def uses_sandboxed_execute(app) -> bool:
    """Whether this course's `nbgrader autograde` runs SandboxedExecute (so runners are worth warming)."""
    from nbgrader.converters import Autograde

    from ..nbgrader import SandboxedExecute

    return SandboxedExecute in Autograde(coursedir=app.coursedir, parent=app).autograde_preprocessors


def sandbox_or_refuse(app, say) -> None:
    """Before any student code runs: `isolation.IsolationRefused` where the sandbox cannot start and the
    course has not set `allow_unisolated`; where it has, the banner goes to `say`."""
    from ..nbgrader import SandboxedExecute
    from ..sandbox import isolation

    isolation.require(SandboxedExecute(parent=app).allow_unisolated, say)


def runner_settings(app) -> dict:
    """The limits and isolation the course's sessions ask their runner source for (``nbgrader_config.py``)."""
    from ..nbgrader import SandboxedExecute
    from ..sandbox.session import Budget

    settings = SandboxedExecute(parent=app)
    return {"limits": settings.limits(), "require_isolation": settings.require_isolation,
            "start_timeout": Budget().start_timeout}


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic collector off while a command imports torch, nbgrader and the checks.

    Imports allocate millions of objects that live as long as the process, and every collection among
    them walks them all again: a large share of the imports' CPU, on the way to the first result.  The
    collector is on again when the block ends, however it ends.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def warm_parent() -> None:
    """Import what every worker needs before forking them, so each does not pay for it.

    Then everything alive goes out of the collector's sight (``gc.freeze``), with no collection first, as
    the gc module's documentation advises before a fork: a full collection here walks every object torch
    and nbgrader made (a third of a second, on the way to the first result) to free a few thousand.
    """
    with collector_paused():
        _import_for_workers()
    gc.freeze()


def _import_for_workers() -> None:
    from ..grading import local_student
    from ..nbgrader.warm import before_first_grading
    from ..sandbox import forkserver, pool  # noqa: F401

    before_first_grading()
    # A failing check re-runs the reference in this process (`hidden_checks.honest_failures`): the
    # solution notebook read and compiled once, and its setup cell's imports (matplotlib).
    local_student.reference_namespace()
