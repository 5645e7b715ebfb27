"""Why a submission could not be graded: one line naming the notebook, the cell and the reason.

The cell comes from evidence that says so explicitly: a `CellError` raised
by the step that knew the cell, the JSON path of an nbformat validation
error, or, for text that cannot be written back, the first cell that is not
valid UTF-8 JSON.  Nothing is read out of traceback frames.
"""
from __future__ import annotations

import json
import os
import signal
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from ..notebook import editions
from ..notebook.cells import CellError, grade_id, number


@dataclass
class Failure:
    """One submission that could not be graded, as the instructor sees it."""

    student: str
    notebook: str
    cell: Optional[tuple]  # (index, grade_id) or None
    reason: str
    stage: Optional[str] = None

    def line(self) -> str:
        return f"FAILED {self.student}  {self.short()}"

    def short(self) -> str:
        if self.cell is None:
            cell = "cell -"
        else:
            index, name = self.cell
            cell = f"cell {number(index) if isinstance(index, int) else index}" + (f" ({name})" if name else "")
        stage = f" [{self.stage}]" if self.stage else ""
        return f"{self.notebook}  {cell}  {self.reason}{stage}"


def explain_failure(converter: Any, exc: BaseException, files: Mapping[str, tuple[bytes, int]],
                    log_lines: Sequence[str]) -> dict:
    """{notebook, cell, reason, stage} for a failed submission, as precisely as the evidence tells."""
    notebook, stage, error = "-", None, exc
    observed = getattr(converter, "failure", None)
    if observed is not None:
        path, error, sanitizing = observed
        if path:
            notebook = os.path.basename(path)
        stage = "sanitize" if sanitizing else "autograde"
    elif converter is not None and getattr(converter, "notebooks", None):
        notebook = os.path.basename(sorted(converter.notebooks)[0])
    reason = reason_of(error)
    if observed is None and "NbGraderException" in type(exc).__name__:
        reason = _reason_from_log(log_lines) or reason
    reason = _misplaced_edition(error, files) or reason
    where, cell = locate(error)
    if cell is None and isinstance(error, (UnicodeError, TypeError)) and notebook != "-":
        cell = _cell_from_notebook(files.get(notebook, (b"",))[0])
    return {"notebook": notebook, "cell": cell, "reason": reason,
            "stage": " ".join(x for x in (stage, where and f"in {where}") if x) or None}


def reason_of(exc: Optional[BaseException]) -> str:
    """The exception and its cause, one line each at most."""
    parts, seen = [], set()
    while exc is not None and id(exc) not in seen and len(parts) < 2:
        seen.add(id(exc))
        text = str(exc).strip().splitlines()
        parts.append(f"{type(exc).__name__}: {text[0] if text else ''}".strip().rstrip(":")[:240])
        exc = exc.__cause__ or exc.__context__
    return parts[0] + (f" (from {parts[1]})" if len(parts) > 1 else "") if parts else "unknown error"


def _misplaced_edition(exc, files):
    """What to do, where nbgrader found none of the assignment's notebooks ("did you forget to run
    generate_assignment?") in a submission that holds another edition's notebook."""
    if "No notebooks found" not in str(exc):
        return None
    others = sorted(filter(None, (editions.edition_of(name) for name in files)))
    if not others:
        return None
    edition = others[0]
    return (f"the submission holds {edition}.ipynb, the notebook of the {edition} edition, and none of this "
            f"assignment: {editions.move_to(edition, '')}")


def _reason_from_log(lines):
    skip = ("There was an error processing", "Please see", "Traceback")
    for line in reversed(lines):
        first = line.splitlines()[0] if line else ""
        if first.startswith("[ERROR]") and not any(s in first for s in skip):
            return first[len("[ERROR] "):][:300]
    return None


def locate(exc: Optional[BaseException]) -> tuple[Optional[str], Optional[tuple[Optional[int], Optional[str]]]]:
    """(step name, (cell index, grade_id)) from the exception chain of `exc`, when it says."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, CellError):
            return exc.step, (exc.index, exc.grade_id)
        path = getattr(exc, "absolute_path", None) or getattr(exc, "path", None)
        path = list(path) if isinstance(path, (list, tuple)) or type(path).__name__ == "deque" else []
        if len(path) >= 2 and path[0] == "cells" and isinstance(path[1], int):
            return None, (path[1], None)
        exc = exc.__cause__ or exc.__context__
    return None, None


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
            return index, grade_id(cell)
    return None


def failure_result(student: str, reason: str, notebook: str = "-", cell: Optional[tuple] = None) -> dict:
    """A worker result for a submission that produced nothing (read error, dead or late worker)."""
    return {"student": student, "ok": False, "files": {}, "notebooks": [], "grades": {}, "seconds": None,
            "failure": {"notebook": notebook, "cell": cell, "reason": reason, "stage": None}, "log": "",
            "pid": None, "host": socket.gethostname(), "runners": None}


def exit_text(code: Optional[int]) -> str:
    """How a process ended, in words."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"
