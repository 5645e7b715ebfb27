"""``<notebook>.grading.json``: what `TrustedScoring` concluded, for reports and tools.

One file per autograded notebook, next to it.  It holds the checks and
their points, the misconception codes named, the sandbox's limit events,
the code flagged for review and the grading seconds.  This module is the
one place that writes its name and reads codes out of it.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Optional, Union

SUFFIX = ".grading.json"


def filename(notebook: str) -> str:
    """The record's file name for a notebook name (without .ipynb)."""
    return f"{notebook}{SUFFIX}"


def dumps(record: dict) -> bytes:
    return json.dumps(record, ensure_ascii=False, indent=1).encode()


def load(path: Union[str, os.PathLike]) -> dict:
    """The record at `path`; {} when it is missing or unreadable."""
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def cell_entry(grade_id: Optional[str], part: str, points: float, max_points: float, held: Optional[float],
               checks: Iterable) -> dict:
    """A grade cell's entry of the record: its points (0 while `held`, the points its checks gave, waits for a
    person) and each check's result (`hidden_checks.CheckResult`)."""
    return {"grade_id": grade_id, "part": part, "points": points, "max_points": max_points,
            "held": held is not None, "held_points": held,
            "checks": [{"name": c.name, "passed": c.passed, "points": c.points, "max_points": c.max_points,
                        "codes": c.codes, "charged_elsewhere": c.charged_elsewhere, "unexplained": c.unexplained,
                        "message": c.message, "example": c.example} for c in checks]}


def held_points(record: dict) -> dict[str, float]:
    """{grade_id: points its checks gave} of the cells held for review (nothing counted until a person reads
    the flagged code)."""
    return {cell["grade_id"]: float(cell.get("held_points") or 0.0) for cell in record.get("cells", [])
            if isinstance(cell, dict) and cell.get("held")}


def summary_line(record: dict) -> str:
    """One line for the instructor's terminal: the student, then `points_summary`."""
    return f"{record.get('student')}: {points_summary(record)}"


def points_summary(record: dict) -> str:
    """The automatic points counted, the codes named, the notes for review and the cells held for a person."""
    cells = [c for c in record.get("cells", []) if isinstance(c, dict)]
    counted = sum(float(c.get("points") or 0) for c in cells if not c.get("held"))
    top = sum(float(c.get("max_points") or 0) for c in cells)
    line = f"{counted:g} / {top:g} automatic points"
    codes = codes_named(record)
    line += f"; codes {' '.join(codes)}" if codes else "; no misconception named"
    review = record.get("review") or []
    line += f"; {len(review)} note{'s' * (len(review) != 1)} for review" if review else ""
    held = [c.get("grade_id") for c in cells if c.get("held")]
    line += f"; held for a person: {', '.join(map(str, held))}" if held else ""
    line += "; graded WITHOUT the sandbox" if not (record.get("sandbox") or {}).get("isolated", True) else ""
    return line


def codes_named(record: dict, cells: Optional[list[dict]] = None) -> list[str]:
    """Misconception codes the feedback named, each once, in order; only in `cells` if given."""
    chosen = record.get("cells", []) if cells is None else cells
    return list(dict.fromkeys(code for cell in chosen for check in cell.get("checks", [])
                              for code in check.get("codes", [])))


def unfinished(autograded: Union[str, os.PathLike], submitted: Union[str, os.PathLike]) -> bool:
    """Whether a student's autograded folder was left by a run that stopped before the end (killed, a full
    disk): for one of the submitted notebooks, the autograded notebook or its record is missing, or cut
    short.  Such a folder is graded again, by stock `nbgrader autograde` and `sdpa-course autograde` alike,
    instead of keeping a silent 0."""
    autograded, submitted = Path(autograded), Path(submitted)
    if not autograded.is_dir():
        return False
    for notebook in sorted(p.stem for p in submitted.glob("*.ipynb")):
        for path in (autograded / f"{notebook}.ipynb", autograded / filename(notebook)):
            try:
                json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return True
    return False
