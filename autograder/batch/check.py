"""``sdpa-course check NOTEBOOK``: grade one notebook outside the gradebook and print its feedback.

The notebook is graded exactly as ``autograde`` would (a `Grader` in a
private copy of the course), but nothing is written to the course.
"""
from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Optional, Union

from ..grading import record
from ..nbgrader.warm import before_first_grading
from ..notebook.cells import grade_id, nbgrader_meta
from .bundle import make_bundle
from .coursedir import CourseError, check_course, load_app
from .failures import Failure, failure_result
from .worker import Grader, collector_paused, sandbox_or_refuse


def check_notebook(course: Union[str, os.PathLike], notebook: Union[str, os.PathLike], assignment: str,
                   student: Optional[str] = None, extra: Sequence[str] = (), pool: object = None) -> int:
    """Grade one notebook in a throwaway copy of the course and print its feedback; returns the exit code.

    `pool`: a fork server already warming up (``sdpa-course check`` starts one before its imports); else
    the grader starts its own."""
    from nbgrader.api import Gradebook

    path = os.path.abspath(notebook)
    if not os.path.isfile(path):
        raise CourseError(f"notebook {notebook} not found — pass the path of an .ipynb file")
    with collector_paused():  # these import nbgrader and torch
        app = load_app(course, extra)
        check_course(app, assignment)
    sandbox_or_refuse(app, lambda line: print(line, file=sys.stderr))  # before any student code: refuse, or say so
    with Gradebook(app.coursedir.db_url, app.coursedir.course_id) as gb:
        spec = gb.find_assignment(assignment)
        names = [nb.name for nb in spec.notebooks]
        cells = {nb.name: [(c.name, c.cell_type, float(c.max_score)) for c in nb.grade_cells]
                 for nb in spec.notebooks}
    stem = Path(path).stem
    name = stem if stem in names else names[0] if len(names) == 1 else None
    if name is None:
        raise CourseError(f"{notebook} is not one of the notebooks of {assignment} "
                          f"({', '.join(n + '.ipynb' for n in names)}) — rename it")
    student = student or _student_from_path(app, path, assignment) or "check"
    print(f"grading {path} as {name}.ipynb of {assignment}, student {student!r} (not saved to the gradebook)",
          file=sys.stderr)
    started = time.perf_counter()
    with collector_paused():
        grader = Grader(make_bundle(app, assignment, extra), pool=pool)  # runners from a warm zygote
        before_first_grading()  # while the zygote may still warm up
    try:
        result = grader.grade({"student": student, "files": {f"{name}.ipynb": (Path(path).read_bytes(), 0o644)}})
    finally:
        grader.close()
    if not result["ok"]:
        info = result["failure"] or failure_result(student, "unknown error")["failure"]
        print(Failure(student, info["notebook"], info["cell"], info["reason"], info["stage"]).line())
        if result.get("log"):
            print(result["log"], file=sys.stderr)
        return 1
    nb = json.loads(result["files"][f"{name}.ipynb"][0].decode("utf-8"))
    report = json.loads(result["files"].get(record.filename(name), (b"{}",))[0].decode("utf-8"))
    print(_feedback_text(nb, report, cells[name], result["grades"].get(name, {}), time.perf_counter() - started))
    return 0


def _student_from_path(app, path, assignment):
    parts = Path(path).parts
    submitted = os.path.basename(os.path.normpath(app.coursedir.submitted_directory))
    if len(parts) >= 4 and parts[-2] == assignment and parts[-4] == submitted:
        return parts[-3]
    return None


def _feedback_text(nb, report, grade_cells, auto_scores, seconds):
    lines = []
    shown = {}
    for cell in nb.get("cells", []):
        if nbgrader_meta(cell).get("grade") and cell.get("cell_type") == "code":
            outputs = cell.get("outputs", [])
            text = ""
            if outputs and outputs[0].get("output_type") == "display_data":
                text = _plain(outputs[0].get("data", {}).get("text/plain", ""))
            shown[grade_id(cell)] = text
    auto_total = auto_max = 0.0
    scored = False  # as in the gradebook: a held cell has no automatic score
    for name, cell_type, max_score in grade_cells:
        if cell_type == "code":
            score = auto_scores.get(name)
            scored |= score is not None
            auto_total += score or 0.0
            auto_max += max_score
            # The feedback's first line is "<grade_id>：<score> / <max> 分（...）".
            shown_score = "held" if score is None else f"{score:g}"
            lines.append(shown.get(name) or f"{name}: {shown_score} / {max_score:g} (no feedback)")
        else:
            lines.append(f"{name}: graded by hand ({max_score:g} points)")
        lines.append("")
    for event in report.get("events", []):
        lines.append(f"!! sandbox: {event}")
    sandbox = report.get("sandbox", {})
    if sandbox and not sandbox.get("isolated"):
        lines.append(f"!! the code ran WITHOUT sandbox isolation ({sandbox.get('mechanism')})")
    held = record.held_points(report)
    if held:
        lines.append(f"!! held for review: {', '.join(held)} ({sum(held.values()):g} points from their checks count "
                     "only once an instructor has read the flagged code)")
    if scored:
        lines.append(f"automatic score: {auto_total:g} / {auto_max:g}   ({seconds:.1f} s)")
    else:  # what the gradebook holds too: no automatic score until a person decides
        lines.append(f"automatic score: none yet, held for review (of {auto_max:g})   ({seconds:.1f} s)")
    return "\n".join(lines)


def _plain(text):
    return "".join(text) if isinstance(text, list) else str(text)


