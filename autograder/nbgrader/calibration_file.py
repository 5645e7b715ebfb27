"""The reference solution's timings, measured once and kept in the course directory.

Measuring the reference (``calibration.py``) runs the whole source notebook
and its hidden checks: seconds of work that every grading process used to
repeat.  A `Store` keeps one measurement per assignment and notebook in
``<course>/.sdpa-calibration/<assignment>/<notebook>.json`` (the directory
is `SandboxedExecute.calibration_directory`), with what it was measured on.
It is reused while its `key` holds:

* the machine: host name, CPU model and count, architecture;
* the course version: the source notebook's code cells, the grading
  engine's hidden checks and everything it runs in the sandbox;
* the versions of torch and Python.

Any change, a file that does not parse or does not validate, or
`SandboxedExecute.recalibrate` means a new measurement, which replaces the
file.  Concurrent processes (``sdpa-course autograde``'s workers, a stock
run beside them) share one: the first takes an exclusive lock on the
notebook's ``.lock`` file and measures, the others wait for the lock --
bounded by `LOCK_WAIT_SECONDS` of wall clock -- and then read what it wrote.
A process that cannot lock or write (a read-only course) measures for itself
and says so in its log.  The file is written whole and renamed into place,
so a reader never sees half of one.

The course directory is the instructor's, never the student's: no runner
sees it (``docs/design/sandbox.md``).  The file is still read as untrusted
text -- its size capped, every number checked -- so a damaged one costs a
new measurement and nothing else.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import math
import os
import platform
import re
import socket
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from nbformat import NotebookNode


@dataclass(frozen=True)
class ReferenceTimes:
    """Wall seconds the reference solution took, measured on this machine (what this file keeps)."""

    cells: dict[str, float]  # `cell_key` -> seconds of that cell's run
    calls: dict[str, float]  # function -> seconds of its longest call in the hidden checks
    seconds: float = 0.0  # how long measuring took (runner start included)
    # (source, outputs) of each code cell before the first answer, in order: no student code runs
    # before them, so a submission that starts with the same sources computes the same outputs
    prefix: tuple[tuple[str, list], ...] = ()


FORMAT = 1
DIRECTORY = ".sdpa-calibration"
LOCK_WAIT_SECONDS = 300.0  # the longest a process waits for another one's measurement
MAX_FILE_BYTES = 32 * 2**20
MAX_SECONDS = 86400.0
_ROOT = Path(__file__).resolve().parents[2]  # the checkout: autograder/ and course/
# What the measured run executes besides the source notebook: the course's checks and specs, the grading
# engine and the guest.
_ENGINE = ("course", "autograder/grading", "autograder/sandbox/guest")


def default_directory(parent: object) -> str:
    """`DIRECTORY` in the course root of nbgrader config `parent`."""
    from nbgrader.coursedir import CourseDirectory

    return os.path.join(CourseDirectory(parent=parent).root, DIRECTORY)


def machine() -> dict[str, Any]:
    """What the timings depend on about this machine."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    return {"host": socket.gethostname(), "cpu": model or platform.processor(), "cores": os.cpu_count() or 0,
            "arch": platform.machine()}


def course_version(source: NotebookNode) -> str:
    """A digest of the source notebook's code and of the grading engine's checks and guest."""
    digest = hashlib.sha256()
    digest.update("\x00".join(c.source for c in source.cells if c.cell_type == "code").encode())
    for top in _ENGINE:
        for path in sorted((_ROOT / top).rglob("*.py")):
            digest.update(b"\x00" + str(path.relative_to(_ROOT)).encode() + b"\x00" + path.read_bytes())
    return digest.hexdigest()


def key(source: NotebookNode) -> dict[str, Any]:
    """What a kept measurement must match to be reused."""
    import torch

    return {"format": FORMAT, "machine": machine(), "course": course_version(source), "torch": torch.__version__,
            "python": platform.python_version()}


def _name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text).lstrip(".") or "_"


class Store:
    """The kept measurement of one assignment's notebook; see the module docstring."""

    def __init__(self, directory: str, assignment: str, notebook: str, log: Any) -> None:
        self.path = Path(directory) / _name(assignment) / f"{_name(notebook)}.json"
        self.lock_path = self.path.with_suffix(".lock")
        self.log = log

    def load(self, wanted: dict[str, Any], newer_than: Optional[float] = None) -> Optional[ReferenceTimes]:
        """The kept measurement if it matches `wanted` (and was made after `newer_than`), else None."""
        try:
            with open(self.path, "rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        except OSError:
            return None
        try:
            if len(data) > MAX_FILE_BYTES:
                raise ValueError("too large")
            record = json.loads(data)
            if record.get("key") != wanted:
                return None
            measured = _number(record["measured_on"]["time"], math.inf)
            if newer_than is not None and measured < newer_than:
                return None
            reference = _reference(record["reference"])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            self.log.warning("kept reference timings %s are unusable (%s): measuring again", self.path, exc)
            return None
        self.log.info("reference timings reused from %s (measured %s on %s)", self.path,
                      record["measured_on"].get("date", "?"), record["measured_on"].get("host", "?"))
        return reference

    def save(self, wanted: dict[str, Any], reference: ReferenceTimes) -> None:
        """Keep `reference` (written whole, then renamed into place); a failure is logged, not raised."""
        now = time.time()
        record = {"key": wanted,
                  "measured_on": {**wanted["machine"], "torch": wanted["torch"], "python": wanted["python"],
                                  "time": now, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
                                  "load": [round(x, 2) for x in os.getloadavg()], "pid": os.getpid()},
                  "reference": {"cells": reference.cells, "calls": reference.calls, "seconds": reference.seconds,
                                "prefix": [[src, outputs] for src, outputs in reference.prefix]}}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tmp-", suffix=".json")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(record, f, ensure_ascii=False, indent=1)
                os.chmod(tmp, 0o644)
                os.replace(tmp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            self.log.warning("reference timings not kept (%s): the next grading process measures again", exc)
            return
        self.log.info("reference timings kept in %s", self.path)

    @contextlib.contextmanager
    def locked(self, wait: float = LOCK_WAIT_SECONDS) -> Iterator[bool]:
        """Hold the notebook's lock: True once held, False if it could not be had within `wait` seconds."""
        try:
            self.lock_path.parent.mkdir(parents=True, exist_ok=True)
            handle = open(self.lock_path, "a+")
        except OSError as exc:
            self.log.warning("cannot lock %s (%s): measuring the reference in this process only", self.lock_path, exc)
            yield False
            return
        try:
            deadline = time.monotonic() + wait
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                        self.log.warning("cannot lock %s (%s): measuring the reference in this process only",
                                         self.lock_path, exc)
                        yield False
                        return
                if time.monotonic() >= deadline:
                    self.log.warning("another process has measured the reference for over %g s (%s): measuring "
                                     "in this process only", wait, self.lock_path)
                    yield False
                    return
                time.sleep(0.05)
            try:
                yield True
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
        finally:
            handle.close()


def _number(value: Any, top: float = MAX_SECONDS) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= top:
        raise ValueError(f"not a number of seconds: {value!r}")
    return float(value)


def _times(mapping: Any) -> dict[str, float]:
    if not isinstance(mapping, dict) or not all(isinstance(k, str) for k in mapping):
        raise ValueError("not a mapping of names to seconds")
    return {k: _number(v) for k, v in mapping.items()}


def _reference(data: dict) -> ReferenceTimes:
    prefix = data["prefix"]
    if not isinstance(prefix, list) or not all(
            isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], list)
            and all(isinstance(o, dict) for o in item[1]) for item in prefix):
        raise ValueError("the provided cells' outputs are malformed")
    return ReferenceTimes(_times(data["cells"]), _times(data["calls"]), _number(data["seconds"]),
                          tuple((src, outputs) for src, outputs in prefix))


__all__ = ["DIRECTORY", "Store", "default_directory", "key", "machine"]
