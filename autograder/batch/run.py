"""Parallel, resumable `nbgrader autograde`: the engine of ``sdpa-course autograde``.

Same grades as the stock command
--------------------------------
Nothing here re-implements grading.  Every submission goes through
nbgrader's own `Autograde` converter, configured as ``nbgrader autograde``
configures it: an `AutogradeApp` loads the same config files (the course's
``nbgrader_config.py``, so `RestoreNotebookStructure`, `SandboxedExecute`,
`TrustedScoring`, ..., `SaveAutoGrades`, `AssignLatePenalties` run in the
same order) plus any ``--Class.trait=value`` options given on our command
line.  The only difference is *where* it runs:

* A worker is a long-lived process with a private course directory (a temp
  dir holding ``nbgrader_config.py``, ``source/<a>/``, the release
  ``<release>/<a>/`` and a snapshot of ``gradebook.db``).  For each
  submission it copies the student's files to ``submitted/<student>/<a>/``
  there, runs the converter, and sends back the files it wrote (the
  autograded notebook, ``sdpa.grading.json``, ``timestamp.txt``...) and the
  auto scores its private gradebook received.

* Single writer: only the parent process (``sdpa-course``) writes the
  course's gradebook, one result at a time.  It repeats, in the real
  gradebook, the writes the converter made in the private one:
  `update_or_create_student`, `update_or_create_submission` (with the
  timestamp.txt time), then nbgrader's own `SaveAutoGrades` and
  `AssignLatePenalties` preprocessors on the autograded notebook -- they
  read everything they write from that notebook and the gradebook -- and
  checks that every auto score equals the worker's.  Workers never open the
  real gradebook; SQLite sees one writer.

* Resume: results are saved as they arrive.  The files go to
  ``autograded/.sdpa-staging/`` first; the gradebook transaction commits;
  only then is the directory renamed to ``autograded/<student>/<a>/``.  So a
  student is in ``autograded/`` only once their grades are in the gradebook,
  and an interrupted run (Ctrl-C, kill, crash) loses at most the
  submissions in flight.  Re-running skips every student already in
  ``autograded/``, with nbgrader's rule: unless ``--force``, or the
  submission's ``timestamp.txt`` is newer than the autograded one.  A lock
  file (``autograded/.sdpa-course.lock``) keeps two runs off one course.
  Each worker's temporary files (course copy, runner sandboxes) live in one
  ``sdpa-worker-<pid>-*`` dir that is removed when the worker ends; those of
  a run that was killed outright are removed by the next run.

* Failures: a submission whose grading raises, whose worker process dies,
  or that runs past ``--timeout`` is reported on one line (student,
  notebook, cell, reason) and the others go on.  Like with nbgrader it gets
  no ``autograded/`` directory, so the next run retries it.  Exit status 1.

Speed (what one submission costs, and what the parallel path removes)
---------------------------------------------------------------------
``python tools/bench.py --profile --n 8`` on the 2-core development VM:
stock ``nbgrader autograde`` takes about 2 s once per run to start
nbgrader, then 3.5 s per submission:

    runner start (bwrap, interpreter, IPython)           0.11 s
    first cell: import torch, matplotlib                 1.62 s
    the other cells (visible checks, plots)              0.58 s
    hidden checks (pytest)                               0.98 s
      the student's functions, in the runner             0.69 s
        (the first meta-device op imports torch._dynamo and sympy)
    sanitizing, nbconvert, gradebook writes, files       0.29 s

About 2.5 s of that is a fresh runner getting ready: it is a new process
per student, as nbgrader's kernel is.  The parallel path:

* runs ``--workers`` (default: the CPU count) worker processes, forked from
  a parent that has already imported nbgrader, torch and pytest;
* forks every runner from a warmed zygote (`autograder.forkserver`): one
  zygote sandbox per worker imports torch, matplotlib, torch._dynamo and
  the fonts once (about 2.5 s), then each student gets a new process forked
  from it, never one that ran anyone's code, and the sandbox is reset and
  checked between two students (see ``sandbox_zygote.py``).  Without
  bubblewrap it falls back to one pre-started fresh runner (`autograder.pool`);
* freezes the worker's long-lived objects after its first submission
  (``gc.freeze()``), so the collections pytest forces in every check run
  stop scanning torch's and nbgrader's heap;
* writes the gradebook from the parent while the workers go on grading.

``python tools/bench.py --profile --n 8 --zygote`` (the same pipeline with
forked runners): 1.3 s per submission including the zygote's one-time
warm-up; a fork costs 0.02 s, the sandbox reset 0.01 s, the first cell
0.01 s, the student's functions in the checks 0.05 s.  What is left is the
notebook's own cells (0.33 s) and the grading process (pytest 0.27 s,
nbgrader 0.28 s).  ``make bench`` (60 submissions, 2 workers), two runs:
stock 3.84 / 3.65 s, ``--workers 2`` 0.93 / 0.90 s per submission, 4.13x /
4.04x, identical scores and autograded notebooks both times.

Dask
----
``--dask ADDRESS`` sends the same work to a dask.distributed cluster: each
task carries one student's submitted files; the course bundle (config,
source, release, gradebook snapshot) is scattered to the workers once; each
dask worker grades through a private grading process (``python -m
autograder.parallel --serve``, with its own zygote) in a private
course directory, exactly as above.  Results come back to this process,
which alone writes the gradebook and ``autograded/`` (resume and failure
handling are the same; a lost dask worker is a failed submission, retried
by the next run).  Workers need no access to the course directory.  To run
on a real cluster::

    # on every machine: this course package at the same version (make install),
    # bubblewrap (make system-deps); about 1 GiB of memory per dask worker process
    dask scheduler                                              # head node, port 8786
    dask worker tcp://HEAD:8786 --nworkers CORES --nthreads 1   # each grading node
    sdpa-course autograde sdpa --dask tcp://HEAD:8786           # in the course directory

One single-threaded dask worker process per core: each grading task keeps
one core busy.  The grading code the workers run is the ``autograder``
package installed there (as for local workers, which use the package the
``sdpa-course`` process imported); the course's ``nbgrader_config.py``
travels with the bundle.
"""
import argparse
import collections
import ctypes
import fnmatch
import gc
import glob
import hashlib
import json
import logging
import multiprocessing
import os
import pickle
import queue
import re
import shutil
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ASSIGNMENT = "sdpa"
STAGING = ".sdpa-staging"
LOCK = ".sdpa-course.lock"
DEFAULT_TIMEOUT = 900.0
MAX_SUBMISSION_BYTES = 64 * 2**20

log = logging.getLogger(__name__)


class CourseError(Exception):
    """A problem with the course or the command line: shown as one line, no traceback."""


# ---------------------------------------------------------------------------
# nbgrader configuration and the course directory
# ---------------------------------------------------------------------------

def load_app(root, args=(), require_config=True):
    """An `AutogradeApp` configured as ``nbgrader autograde ARGS`` run in `root` would be."""
    from nbgrader.apps.autogradeapp import AutogradeApp

    if not os.path.isdir(root):
        raise CourseError(f"course directory {root} does not exist — pass --course DIR")
    if require_config and not os.path.exists(os.path.join(root, "nbgrader_config.py")):
        raise CourseError(f"{root} is not an nbgrader course directory (no nbgrader_config.py) "
                          f"— run in the course root or pass --course DIR")

    old = os.getcwd()
    os.chdir(root)
    try:
        app = AutogradeApp()
        app.initialize(list(args))
    except SystemExit:
        raise CourseError(f"nbgrader rejected the options {' '.join(args) or '(none)'} or the config in {root} "
                          f"— check them with `nbgrader autograde --help-all`") from None
    finally:
        os.chdir(old)
    return app


def _dir(coursedir, step, student, assignment):
    return os.path.normpath(coursedir.format_path(step, student, assignment))


def sqlite_path(db_url):
    if not db_url.startswith("sqlite:///"):
        raise CourseError(f"the gradebook is {db_url!r}, but sdpa-course needs an sqlite gradebook "
                          f"— use `nbgrader autograde` for other databases")
    return db_url[len("sqlite:///"):]


def check_course(app, assignment):
    """One-line errors for a course that cannot be graded yet; returns the gradebook path."""
    coursedir = app.coursedir
    root = coursedir.root
    if not os.path.exists(os.path.join(root, "nbgrader_config.py")):
        raise CourseError(f"{root} is not an nbgrader course directory (no nbgrader_config.py) "
                          f"— run in the course root or pass --course DIR")
    db = sqlite_path(coursedir.db_url)
    release = _dir(coursedir, coursedir.release_directory, ".", assignment)
    source = _dir(coursedir, coursedir.source_directory, ".", assignment)
    hint = f"run `nbgrader generate_assignment {assignment}` (or `make release`) first"
    if not os.path.isdir(source):
        raise CourseError(f"no assignment {assignment!r} in {source} — check the name, or {hint}")
    if not os.path.exists(db):
        raise CourseError(f"no gradebook at {db} — {hint}")
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            raise CourseError(f"assignment {assignment!r} is not in {db} — {hint}") from None
    if not glob.glob(os.path.join(release, "*.ipynb")):
        raise CourseError(f"no released notebook in {release} — {hint}")
    return db


def find_submissions(coursedir, assignment):
    """{student: submission directory} for submitted/<student>/<assignment>/ holding a notebook."""
    pattern = _dir(coursedir, coursedir.submitted_directory, "*", glob.escape(assignment))
    regexp = coursedir.format_path(coursedir.submitted_directory, "(?P<student_id>[^/]+)", re.escape(assignment),
                                   escape=True)
    exclude = set(filter(None, (coursedir.student_id_exclude or "").split(",")))
    found = {}
    for path in sorted(glob.glob(pattern)):
        match = re.fullmatch(regexp, os.path.normpath(path))
        if match and match.group("student_id") not in exclude and glob.glob(os.path.join(glob.escape(path),
                                                                                           "*.ipynb")):
            found[match.group("student_id")] = path
    return found


def needs_grading(coursedir, assignment, student, force):
    """nbgrader's rule: not autograded yet, --force, or a newer timestamp.txt."""
    dest = _dir(coursedir, coursedir.autograded_directory, student, assignment)
    if force or not os.path.exists(dest):
        return True
    new = coursedir.get_existing_timestamp(_dir(coursedir, coursedir.submitted_directory, student, assignment))
    old = coursedir.get_existing_timestamp(dest)
    return new is not None and old is not None and new > old


def _read_tree(top, ignore=()):
    """{relative path: (bytes, mode)} of the files under `top`."""
    files = {}
    for dirname, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if not _ignored(d, ignore))
        for name in sorted(filenames):
            if _ignored(name, ignore):
                continue
            path = os.path.join(dirname, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                files[os.path.relpath(path, top)] = (f.read(), os.stat(path).st_mode & 0o777)
    return files


def _ignored(name, patterns):
    return any(fnmatch.fnmatch(name, p) for p in patterns)


def _write_tree(top, files):
    for rel, (data, mode) in files.items():
        parts = Path(rel).parts
        if os.path.isabs(rel) or ".." in parts or not parts:
            raise ValueError(f"refusing to write outside {top}: {rel!r}")
        path = os.path.join(top, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode or 0o644)


def snapshot_gradebook(db_path):
    """A consistent copy of the sqlite gradebook, as bytes (sqlite's backup API)."""
    with tempfile.TemporaryDirectory(prefix="sdpa-gb-") as tmp:
        copy = os.path.join(tmp, "gradebook.db")
        src = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        dst = sqlite3.connect(copy)
        try:
            src.backup(dst)
        finally:
            dst.close()
            src.close()
        return Path(copy).read_bytes()


def make_bundle(app, assignment, nbgrader_args=()):
    """What a worker needs to grade this course anywhere: config, source, release, gradebook."""
    coursedir = app.coursedir
    root = coursedir.root
    files = {}
    config = os.path.join(root, "nbgrader_config.py")
    if os.path.exists(config):
        files["nbgrader_config.py"] = (Path(config).read_bytes(), 0o644)
    for step in (coursedir.source_directory, coursedir.release_directory):
        top = _dir(coursedir, step, ".", assignment)
        for rel, item in _read_tree(top, coursedir.ignore).items():
            files[os.path.relpath(os.path.join(top, rel), root)] = item
    gradebook = snapshot_gradebook(sqlite_path(coursedir.db_url))
    digest = hashlib.sha256(gradebook)
    for rel in sorted(files):
        digest.update(rel.encode() + files[rel][0])
    digest.update(json.dumps(list(nbgrader_args)).encode())
    return {"assignment": assignment, "files": files, "gradebook": gradebook, "nbgrader_args": list(nbgrader_args),
            "token": digest.hexdigest()[:16]}


# ---------------------------------------------------------------------------
# The worker side: grade one submission in a private course directory
# ---------------------------------------------------------------------------

def _autograde_class():
    from nbgrader.converters import Autograde

    class ObservedAutograde(Autograde):
        """nbgrader's Autograde, unchanged, except that it remembers the first exception it saw."""

        failure = None

        def _remember(self, notebook):
            if self.failure is None:
                self.failure = (notebook, sys.exc_info()[1], self._sanitizing)

        def init_assignment(self, assignment_id, student_id):
            try:
                return super().init_assignment(assignment_id, student_id)
            except Exception:
                self._remember(None)
                raise

        def convert_single_notebook(self, notebook_filename):
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

    def __init__(self, bundle, prewarm=True):
        self.assignment = bundle["assignment"]
        self.root = tempfile.mkdtemp(prefix="sdpa-grader-")
        _write_tree(self.root, bundle["files"])
        Path(self.root, "gradebook.db").write_bytes(bundle["gradebook"])
        self.db_url = "sqlite:///" + os.path.join(self.root, "gradebook.db")
        self.app = load_app(self.root, list(bundle["nbgrader_args"]) + [
            f"--CourseDirectory.root={self.root}", f"--CourseDirectory.db_url={self.db_url}"])
        self.capture = _LogCapture()
        for handler in list(self.app.log.handlers):
            self.app.log.removeHandler(handler)
        self.app.log.addHandler(self.capture)
        self.app.log.propagate = False
        logging.getLogger().addHandler(self.capture)
        logging.captureWarnings(True)
        self.converter_class = _autograde_class()
        self.pool = None
        if prewarm and self._uses_sandboxed_execute():
            self._start_pool()
        self.graded = 0

    def _uses_sandboxed_execute(self):
        from nbgrader.converters import Autograde

        from .preprocessors import SandboxedExecute

        return SandboxedExecute in Autograde(coursedir=self.app.coursedir, parent=self.app).autograde_preprocessors

    def _start_pool(self):
        """Runners forked from a warmed zygote (under bubblewrap), else pre-started ones."""
        from . import forkserver, pool, sandbox
        from .preprocessors import SandboxedExecute
        from .session import Budget

        settings = SandboxedExecute(parent=self.app)
        limits = sandbox.Limits(memory_bytes=settings.memory_mb * 2**20)
        if forkserver.ForkServer.usable():
            self.pool, self._pool_module = forkserver.ForkServer(
                limits, settings.require_isolation, start_timeout=Budget().start_timeout), forkserver
        else:
            self.pool, self._pool_module = pool.RunnerPool(
                limits, settings.require_isolation, start_timeout=Budget().start_timeout), pool
        self._pool_module.install(self.pool)

    def close(self):
        if self.pool is not None:
            self._pool_module.uninstall(self.pool)
            self.pool = None
        logging.getLogger().removeHandler(self.capture)
        logging.captureWarnings(False)
        shutil.rmtree(self.root, ignore_errors=True)

    def grade(self, task):
        """Grade one submission; never raises.  `task`: {"student", "files"}."""
        started = time.perf_counter()
        student = task["student"]
        coursedir = self.app.coursedir
        for step in (coursedir.submitted_directory, coursedir.autograded_directory):
            shutil.rmtree(_dir(coursedir, step, ".", "."), ignore_errors=True)
        submitted = _dir(coursedir, coursedir.submitted_directory, student, self.assignment)
        autograded = _dir(coursedir, coursedir.autograded_directory, student, self.assignment)
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
            _write_tree(submitted, task["files"])
            converter = self.converter_class(coursedir=coursedir, parent=self.app)
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
            result["files"] = _read_tree(autograded)
            result["notebooks"] = [os.path.splitext(os.path.basename(n))[0] for n in graded]
            result["grades"] = self._private_grades(student, result["notebooks"])
            result["ok"] = True
        except Exception as exc:  # noqa: BLE001 - one submission's failure is data, not a crash
            result["failure"] = diagnose(converter, exc, task["files"], self.capture.lines)
        result["log"] = "\n".join(self.capture.lines)
        result["runners"] = self._runner_source(*counts)
        result["seconds"] = round(time.perf_counter() - started, 3)
        self.graded += 1
        if self.graded == 1:
            # Everything alive now (torch, nbgrader, the checks) lives as long as
            # the worker: keep it out of every later collection (pytest forces some).
            gc.collect()
            gc.freeze()
        return result

    def _runner_source(self, handed, missed):
        """Where this submission's runners came from: "zygote", "pre-started", "fresh" or "mixed"."""
        if self.pool is None or self.pool.handed == handed:
            return "fresh"
        if self.pool.missed > missed:
            return "mixed"
        return "zygote" if self._pool_module.__name__.endswith("forkserver") else "pre-started"

    def _private_grades(self, student, notebooks):
        from nbgrader.api import Gradebook

        out = {}
        with Gradebook(self.db_url) as gb:
            for name in notebooks:
                sub = gb.find_submission_notebook(name, self.assignment, student)
                out[name] = {g.name: g.auto_score for g in sub.grades}
        return out


def diagnose(converter, exc, files, log_lines):
    """{notebook, cell, reason, stage} for a failed submission, as precisely as we can tell."""
    notebook, stage, error = "-", None, exc
    observed = getattr(converter, "failure", None)
    if observed is not None:
        path, error, sanitizing = observed
        if path:
            notebook = os.path.basename(path)
        stage = "sanitize" if sanitizing else "autograde"
    elif converter is not None and getattr(converter, "notebooks", None):
        notebook = os.path.basename(sorted(converter.notebooks)[0])
    reason = _reason(error)
    if observed is None and "NbGraderException" in type(exc).__name__:
        reason = _reason_from_log(log_lines) or reason
    where, cell = _locate(error)
    if cell is None and isinstance(error, (UnicodeError, TypeError)) and notebook != "-":
        data = files.get(notebook, (b"",))[0]
        cell = _cell_from_notebook(data)
    return {"notebook": notebook, "cell": cell, "reason": reason,
            "stage": " ".join(x for x in (stage, where and f"in {where}") if x) or None}


def _reason(exc):
    parts, seen = [], set()
    while exc is not None and id(exc) not in seen and len(parts) < 2:
        seen.add(id(exc))
        text = str(exc).strip().splitlines()
        parts.append(f"{type(exc).__name__}: {text[0] if text else ''}".strip().rstrip(":")[:240])
        exc = exc.__cause__ or exc.__context__
    return parts[0] + (f" (from {parts[1]})" if len(parts) > 1 else "") if parts else "unknown error"


def _reason_from_log(lines):
    skip = ("There was an error processing", "Please see", "Traceback")
    for line in reversed(lines):
        first = line.splitlines()[0] if line else ""
        if first.startswith("[ERROR]") and not any(s in first for s in skip):
            return first[len("[ERROR] "):][:300]
    return None


def _locate(exc):
    """(step class name, (cell index, grade_id)) from the traceback of `exc`, when it tells."""
    if exc is None:
        return None, None
    from nbconvert.preprocessors import Preprocessor

    from .session import StudentSession

    frames, tb = [], exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    where, positions = None, None
    for frame in frames:
        owner = frame.f_locals.get("self")
        if isinstance(owner, Preprocessor) or type(owner).__name__ == "FilesWriter":
            where = type(owner).__name__
        if isinstance(frame.f_locals.get("positions"), list):
            positions = frame.f_locals["positions"]
    path = list(getattr(exc, "absolute_path", None) or getattr(exc, "path", None) or [])
    if len(path) >= 2 and path[0] == "cells" and isinstance(path[1], int):
        return where, (path[1], None)
    for frame in reversed(frames):
        loc = frame.f_locals
        index = loc.get("cell_index", loc.get("index") if "cell" in loc else None)
        if isinstance(index, int):
            return where, (index, _grade_id(loc.get("cell")))
        if isinstance(loc.get("self"), StudentSession) and isinstance(loc.get("pos"), int) and positions:
            if 0 <= loc["pos"] < len(positions):
                return where, (positions[loc["pos"]], None)
    return where, None


def _grade_id(cell):
    try:
        return cell["metadata"]["nbgrader"]["grade_id"]
    except (KeyError, TypeError):
        return None


def _cell_from_notebook(data):
    """Index and grade_id of the first cell that cannot be written back as UTF-8 JSON."""
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    for index, cell in enumerate(raw.get("cells", []) if isinstance(raw, dict) else []):
        try:
            json.dumps(cell, ensure_ascii=False).encode("utf-8")
            source = cell.get("source", "")
            if not isinstance(source, str) and not (isinstance(source, list)
                                                    and all(isinstance(s, str) for s in source)):
                raise TypeError
        except (UnicodeError, TypeError, AttributeError):
            return index, _grade_id(cell)
    return None


# --- worker processes -------------------------------------------------------

def _die_with_parent():
    """Linux: SIGKILL this process when its parent dies (its runners follow: bwrap --die-with-parent)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _fork_main(conn, bundle, prewarm, parent_pid, tmp):
    """Body of a local worker process (multiprocessing)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what Ctrl-C means
    _die_with_parent()
    if os.getppid() != parent_pid:
        os._exit(1)
    # Everything this worker creates (its course copy, runner and zygote dirs) goes
    # under `tmp`, which the parent removes even when it had to kill the worker.
    tempfile.tempdir = tmp
    grader = None
    try:
        try:
            grader = Grader(bundle, prewarm=prewarm)
        except Exception as exc:  # noqa: BLE001
            conn.send(("init-error", exc.args[0] if isinstance(exc, CourseError) else _reason(exc)))
            return
        while True:
            try:
                task = conn.recv()
            except EOFError:
                return
            if task is None:
                return
            conn.send(("result", grader.grade(task)))
    finally:
        if grader is not None:
            grader.close()


def _send_frame(stream, obj):
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("!Q", len(data)) + data)
    stream.flush()


def _recv_frame(stream):
    head = _read_exact(stream, 8)
    return pickle.loads(_read_exact(stream, struct.unpack("!Q", head)[0]))


def _read_exact(stream, size):
    chunks, left = [], size
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise EOFError("grading process closed its pipe")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def serve_stdio():
    """``python -m autograder.parallel --serve``: a grading process fed through stdin/stdout."""
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # stray prints go to stderr, never into the protocol
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    grader = None
    try:
        try:
            bundle = _recv_frame(proto_in)
            grader = Grader(bundle, prewarm=True)
        except EOFError:
            return
        except Exception as exc:  # noqa: BLE001
            _send_frame(proto_out, ("init-error", exc.args[0] if isinstance(exc, CourseError) else _reason(exc)))
            return
        _send_frame(proto_out, ("ready", os.getpid()))
        while True:
            try:
                task = _recv_frame(proto_in)
            except EOFError:
                return
            _send_frame(proto_out, ("result", grader.grade(task)))
    finally:
        if grader is not None:
            grader.close()


class _ProcessGrader:
    """A ``--serve`` grading process, used from dask workers (daemonic: no multiprocessing there)."""

    def __init__(self, bundle):
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")  # nbgrader runs alembic
        self.proc = subprocess.Popen([sys.executable, "-m", "autograder.parallel", "--serve"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                     cwd=tempfile.gettempdir(), start_new_session=True)
        self.replies = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        _send_frame(self.proc.stdin, bundle)
        kind, detail = self._get(600)
        if kind != "ready":
            self.kill()
            raise RuntimeError(f"grading process did not start: {detail}")

    def _read(self):
        try:
            while True:
                self.replies.put(_recv_frame(self.proc.stdout))
        except Exception as exc:  # noqa: BLE001
            self.replies.put(("gone", exc))

    def _get(self, timeout):
        try:
            return self.replies.get(timeout=timeout)
        except queue.Empty:
            return ("timeout", None)

    def grade(self, task, timeout):
        try:
            _send_frame(self.proc.stdin, task)
        except OSError:
            return None
        kind, payload = self._get(timeout)
        if kind == "result":
            return payload
        if kind == "timeout":
            self.kill()
            return failure_result(task["student"], f"grading took longer than {timeout:g} s (grading process "
                                                   f"killed)")
        self.kill()
        return failure_result(task["student"], f"grading process died ({_exit_text(self.proc.wait())})")

    def alive(self):
        return self.proc.poll() is None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


_DASK_IDLE = collections.defaultdict(list)  # bundle token -> idle _ProcessGrader
_DASK_LOCK = threading.Lock()


def grade_on_dask_worker(bundle, task, timeout=DEFAULT_TIMEOUT):
    """The dask task: grade `task` with a grading process of this worker (started on first use)."""
    with _DASK_LOCK:
        idle = _DASK_IDLE[bundle["token"]]
        grader = idle.pop() if idle else None
    if grader is None or not grader.alive():
        grader = _ProcessGrader(bundle)
    result = grader.grade(task, timeout)
    if result is None:
        grader.kill()
        return failure_result(task["student"], "grading process died before taking the task")
    if grader.alive():
        with _DASK_LOCK:
            _DASK_IDLE[bundle["token"]].append(grader)
    return result


def failure_result(student, reason, notebook="-", cell=None):
    return {"student": student, "ok": False, "files": {}, "notebooks": [], "grades": {}, "seconds": None,
            "failure": {"notebook": notebook, "cell": cell, "reason": reason, "stage": None}, "log": "",
            "pid": None, "host": socket.gethostname(), "runners": None}


def _exit_text(code):
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


# ---------------------------------------------------------------------------
# The parent side: plan, dispatch, import (the gradebook's only writer)
# ---------------------------------------------------------------------------

@dataclass
class Failure:
    student: str
    notebook: str
    cell: object  # (index, grade_id) or None
    reason: str
    stage: str = None

    def line(self):
        return f"FAILED {self.student}  {self.short()}"

    def short(self):
        if self.cell is None:
            cell = "cell -"
        else:
            index, grade_id = self.cell
            cell = f"cell {index}" + (f" ({grade_id})" if grade_id else "")
        stage = f" [{self.stage}]" if self.stage else ""
        return f"{self.notebook}  {cell}  {self.reason}{stage}"


@dataclass
class Summary:
    total: int = 0  # submissions found (after --student)
    graded: list = field(default_factory=list)  # (student, score, max_score, seconds)
    skipped: list = field(default_factory=list)
    failed: list = field(default_factory=list)  # Failure
    wall: float = 0.0
    interrupted: bool = False
    workers: int = 0
    runners: collections.Counter = field(default_factory=collections.Counter)  # source -> submissions


class ImportMismatch(Exception):
    pass


class Importer:
    """Writes results into the course: the gradebook (single writer) and autograded/."""

    def __init__(self, app, assignment):
        from nbgrader.converters import Autograde
        from nbgrader.preprocessors import AssignLatePenalties, SaveAutoGrades

        self.app, self.assignment = app, assignment
        self.create_student = Autograde(coursedir=app.coursedir, parent=app).create_student
        self.coursedir = app.coursedir
        self.staging = os.path.join(_dir(self.coursedir, self.coursedir.autograded_directory, ".", "."), STAGING)
        self.save_grades = SaveAutoGrades(parent=app)
        self.late_penalties = AssignLatePenalties(parent=app)

    def clean_staging(self):
        shutil.rmtree(self.staging, ignore_errors=True)

    def save(self, result):
        """Import one successful result; returns (score, max_score)."""
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # nbgrader's SQLAlchemy warnings, printed by every stock run too
            return self._save(result)

    def _save(self, result):
        from nbgrader.api import Gradebook, MissingEntry

        student, coursedir, assignment = result["student"], self.coursedir, self.assignment
        os.makedirs(self.staging, exist_ok=True)
        stage = os.path.join(self.staging, f"{uuid.uuid4().hex[:12]}")
        _write_tree(stage, result["files"])
        db_url = coursedir.db_url
        timestamp = coursedir.get_existing_timestamp(
            _dir(coursedir, coursedir.submitted_directory, student, assignment))
        # What Autograde.init_assignment writes...
        with Gradebook(db_url, coursedir.course_id) as gb:
            if self.create_student:
                gb.update_or_create_student(student)
            else:
                gb.find_student(student)
            if timestamp:
                gb.update_or_create_submission(assignment, student, timestamp=timestamp)
            else:
                gb.update_or_create_submission(assignment, student)
        # ...then what its SaveAutoGrades and AssignLatePenalties steps write, by those very steps.
        import nbformat

        for name in result["notebooks"]:
            nb = nbformat.read(os.path.join(stage, f"{name}.ipynb"), as_version=4)
            resources = {"nbgrader": {"student": student, "assignment": assignment, "notebook": name,
                                      "db_url": db_url}}
            self.save_grades.preprocess(nb, resources)
            self.late_penalties.preprocess(nb, resources)
        with Gradebook(db_url, coursedir.course_id) as gb:
            # Autograde zeroes notebooks of the assignment that were not submitted.
            for notebook in gb.find_assignment(assignment).notebooks:
                if notebook.name not in result["notebooks"]:
                    try:
                        sub = gb.find_submission_notebook(notebook.name, assignment, student)
                    except MissingEntry:
                        continue
                    for grade in sub.grades:
                        grade.auto_score = 0
                        grade.needs_manual_grade = False
                    gb.db.commit()
            for name, expected in result["grades"].items():
                sub = gb.find_submission_notebook(name, assignment, student)
                got = {g.name: g.auto_score for g in sub.grades}
                if got != expected:
                    raise ImportMismatch(f"gradebook import differs from the worker's grades for {name}: "
                                         f"{got} != {expected}")
            submission = gb.find_submission(assignment, student)
            score, max_score = submission.score, submission.max_score
        # Publish: only now does the student appear in autograded/.
        dest = _dir(coursedir, coursedir.autograded_directory, student, assignment)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        old = None
        if os.path.exists(dest):
            old = os.path.join(self.staging, f"old-{uuid.uuid4().hex[:12]}")
            os.replace(dest, old)
        os.replace(stage, dest)
        if old:
            shutil.rmtree(old, ignore_errors=True)
        return score, max_score


class _Lock:
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


def warm_parent():
    """Import what every worker needs before forking them, so each does not pay for it."""
    import nbformat
    import pytest  # noqa: F401
    import torch  # noqa: F401
    from nbgrader.converters import Autograde  # noqa: F401

    from . import checking, pool, preprocessors, scoring  # noqa: F401

    try:  # builds nbformat's JSON-schema validator (and its format checkers) once
        nbformat.validate(nbformat.v4.new_notebook())
    except Exception:  # noqa: BLE001
        pass
    gc.collect()
    gc.freeze()


WORKER_TMP_PREFIX = "sdpa-worker-"  # + the pid of the sdpa-course process that owns it + "-"


def remove_stale_worker_dirs():
    """Remove the worker dirs of `sdpa-course` runs that were killed (their process is gone).

    Only our own dirs (same owner), and only when the owning pid is dead; a
    reused pid keeps its dirs until a later run, which is harmless.
    """
    top = tempfile.gettempdir()
    try:
        names = os.listdir(top)
    except OSError:
        return
    for name in names:
        if not name.startswith(WORKER_TMP_PREFIX):
            continue
        pid = name[len(WORKER_TMP_PREFIX):].split("-", 1)[0]
        path = os.path.join(top, name)
        try:
            if not pid.isdigit() or os.stat(path).st_uid != os.geteuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


class _LocalWorker:
    def __init__(self, ctx, bundle, prewarm):
        self.conn, child = ctx.Pipe()
        self.tmp = tempfile.mkdtemp(prefix=f"{WORKER_TMP_PREFIX}{os.getpid()}-")
        self.proc = ctx.Process(target=_fork_main, args=(child, bundle, prewarm, os.getpid(), self.tmp),
                                name="sdpa-grader", daemon=True)
        self.proc.start()
        child.close()
        self.task, self.since, self.retired = None, None, False

    def assign(self, task):
        self.task, self.since = task, time.monotonic()
        self.conn.send(task)

    def retire(self):
        """No more work: let it exit now (and kill its spare runner), without waiting."""
        if not self.retired:
            self.retired = True
            try:
                self.conn.send(None)
            except (OSError, ValueError):
                pass

    def stop(self, wait=5.0):
        self.retire()
        self.proc.join(wait)
        self.kill()

    def kill(self):
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()
        # Its sandboxes die with it (bwrap --die-with-parent); what they wrote goes now.
        shutil.rmtree(self.tmp, ignore_errors=True)


class Autograder:
    """One ``sdpa-course autograde`` run; see the module docstring."""

    def __init__(self, course, assignment=ASSIGNMENT, *, workers=None, students=None, force=False, dask=None,
                 timeout=DEFAULT_TIMEOUT, prewarm=True, nbgrader_args=(), out=None, verbose=False):
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

    def say(self, text):
        print(text, file=self.out, flush=True)

    def plan(self):
        """(tasks to grade, students skipped), after checking the course."""
        self.app = load_app(self.course, self.nbgrader_args)
        coursedir = self.app.coursedir
        check_course(self.app, self.assignment)
        found = find_submissions(coursedir, self.assignment)
        sub_pattern = os.path.relpath(_dir(coursedir, coursedir.submitted_directory, "*", self.assignment),
                                      self.course)
        if not found:
            raise CourseError(f"no submissions under {sub_pattern} in {self.course} — run "
                              f"`nbgrader collect {self.assignment}` first")
        if self.students:
            missing = [s for s in self.students if s not in found]
            if missing:
                listing = os.path.relpath(_dir(coursedir, coursedir.submitted_directory, ".", "."), self.course)
                raise CourseError(f"no submission for {', '.join(map(repr, missing))} under {sub_pattern} "
                                  f"— check the student IDs (`ls {listing}`)")
            found = {s: found[s] for s in self.students}
        todo, skipped = [], []
        for student in found:
            (todo if needs_grading(coursedir, self.assignment, student, self.force) else skipped).append(student)
        return todo, skipped

    def _task(self, student):
        path = _dir(self.app.coursedir, self.app.coursedir.submitted_directory, student, self.assignment)
        files = _read_tree(path, self.app.coursedir.ignore)
        size = sum(len(data) for data, _ in files.values())
        if size > MAX_SUBMISSION_BYTES:
            raise ValueError(f"submission is {size / 2**20:.0f} MiB (limit {MAX_SUBMISSION_BYTES // 2**20} MiB)")
        return {"student": student, "files": files}

    def run(self):
        started = time.perf_counter()
        summary = Summary()
        if self.dask:
            _probe_scheduler(self.dask)
        todo, skipped = self.plan()
        summary.total, summary.skipped = len(todo) + len(skipped), skipped
        importer = Importer(self.app, self.assignment)
        lock = os.path.join(os.path.dirname(importer.staging), LOCK)
        with _Lock(lock):
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
                        self._run_local(todo, bundle, importer, summary)
                except KeyboardInterrupt:
                    summary.interrupted = True
                finally:
                    if threading.current_thread() is threading.main_thread():
                        signal.signal(signal.SIGTERM, previous)
            importer.clean_staging()
        summary.wall = time.perf_counter() - started
        return summary

    # -- results ---------------------------------------------------------------
    def _handle(self, result, importer, summary):
        student = result["student"]
        self._done += 1
        prefix = f"[{self._done}/{self._todo}] {student}"
        if result.get("ok"):
            try:
                score, max_score = importer.save(result)
            except Exception as exc:  # noqa: BLE001 - e.g. a locked or corrupt gradebook
                result = dict(result, ok=False, failure={"notebook": (result["notebooks"] or ["-"])[0] + ".ipynb",
                                                         "cell": None, "reason": _reason(exc),
                                                         "stage": "saving to the gradebook"})
            else:
                seconds = result.get("seconds") or 0.0
                summary.graded.append((student, score, max_score, seconds))
                summary.runners[result.get("runners") or "fresh"] += 1
                self.say(f"{prefix} {seconds:.1f}s {score:g}/{max_score:g}")
                if self.verbose and result.get("log"):
                    self.say(_indent(result["log"]))
                return
        info = result.get("failure") or {}
        failure = Failure(student, info.get("notebook") or "-", info.get("cell"),
                          info.get("reason") or "unknown error", info.get("stage"))
        summary.failed.append(failure)
        self.say(f"{prefix} FAILED {failure.short()}")
        if self.verbose and result.get("log"):
            self.say(_indent(result["log"]))

    def _task_or_failure(self, student, importer, summary):
        try:
            return self._task(student)
        except (OSError, ValueError) as exc:
            self._handle(failure_result(student, f"cannot read the submission: {exc}"), importer, summary)
            return None

    # -- local processes -----------------------------------------------------
    def _run_local(self, todo, bundle, importer, summary):
        from multiprocessing.connection import wait

        if threading.active_count() == 1:
            warm_parent()
            ctx = multiprocessing.get_context("fork")
        else:  # forking a threaded process is unsafe
            ctx = multiprocessing.get_context("spawn")
        remove_stale_worker_dirs()
        count = min(self.workers, len(todo))
        summary.workers = count
        self.say(f"grading {len(todo)} submission{'s' * (len(todo) != 1)} with {count} worker"
                 f"{'s' * (count != 1)}")
        pending = collections.deque(todo)
        workers = [_LocalWorker(ctx, bundle, self.prewarm) for _ in range(count)]
        try:
            while True:
                for worker in workers:
                    while worker.task is None and pending:
                        task = self._task_or_failure(pending.popleft(), importer, summary)
                        if task is not None:
                            task["more"] = bool(pending)  # whether to warm a runner for a next one
                            worker.assign(task)
                    if worker.task is None and not pending:
                        worker.retire()
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
                        self._handle(payload, importer, summary)
                        continue
                    if not worker.proc.is_alive():
                        reason = f"grading process died ({_exit_text(worker.proc.exitcode)})"
                    elif time.monotonic() - worker.since > self.timeout:
                        reason = f"grading took longer than {self.timeout:g} s (worker killed)"
                    else:
                        continue
                    student = worker.task["student"]
                    worker.kill()
                    worker.task = None
                    if pending:
                        workers[index] = _LocalWorker(ctx, bundle, self.prewarm)
                    self._handle(failure_result(student, reason), importer, summary)
        finally:
            for worker in workers:
                if worker.task is not None:
                    worker.kill()
                else:
                    worker.stop()

    # -- dask --------------------------------------------------------------------
    def _run_dask(self, todo, bundle, importer, summary):
        try:
            from distributed import Client, as_completed
        except ImportError:
            raise CourseError("--dask needs dask.distributed — pip install 'sdpa-course[cluster]'") from None
        _probe_scheduler(self.dask)
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
                    result = failure_result(futures[future], f"dask task failed: {_reason(exc)}")
                self._handle(result, importer, summary)
        finally:
            for future in futures:
                if not future.done():
                    future.cancel()
            client.close()


def _probe_scheduler(address):
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


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _indent(text):
    return "\n".join("    " + line for line in text.splitlines())


def autograde(course, assignment=ASSIGNMENT, **kwargs):
    """Grade a course's submissions (see `Autograder`); returns a `Summary`."""
    return Autograder(course, assignment, **kwargs).run()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="grading process of sdpa-course (used by --dask workers)")
    parser.add_argument("--serve", action="store_true", required=True)
    parser.parse_args()
    serve_stdio()
