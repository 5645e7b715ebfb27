"""Drive the stock nbgrader commands on a (temporary) copy of the course.

Shared by the demo, the end-to-end tests and the benchmark, so all three
exercise exactly what an instructor runs: `nbgrader generate_assignment`,
`autograde`, `generate_feedback` and `export`, with the gradebook in sqlite.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Union

import nbformat

from ..grading import record
from . import submissions

if TYPE_CHECKING:
    from .submissions import Sample

ROOT = Path(__file__).resolve().parents[2]  # the repository: the course's files
ASSIGNMENT = "sdpa"
COPIED = ("nbgrader_config.py", "autograder", "course", "solutions", "lesson", "source", "tools", "assignments")


def nbgrader_env() -> dict[str, str]:
    env = dict(os.environ)
    # nbgrader shells out to `alembic`; make sure the interpreter's bin dir is on PATH.
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def make_course(target: Union[str, os.PathLike]) -> Path:
    """Copy the course files (no runtime state) into `target`."""
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, target / name, ignore=ignore, dirs_exist_ok=True)
        elif src.exists():
            shutil.copy2(src, target / name)
    return target


def nbgrader(course: Union[str, os.PathLike], *args: str, check: bool = True,
             timeout: float = 3600) -> subprocess.CompletedProcess:
    """Run one nbgrader command in `course`; returns the CompletedProcess."""
    cmd = [sys.executable, "-m", "nbgrader", *args, "--log-level=WARN"]
    proc = subprocess.run(cmd, cwd=course, env=nbgrader_env(), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"`nbgrader {' '.join(args)}` failed in {course}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def release_notebook(course: Union[str, os.PathLike], assignment: str = ASSIGNMENT) -> nbformat.NotebookNode:
    return nbformat.read(str(Path(course) / "assignments" / assignment / f"{assignment}.ipynb"), as_version=4)


def submit(course: Union[str, os.PathLike], student: str, nb: nbformat.NotebookNode,
           assignment: str = ASSIGNMENT) -> Path:
    """Place a notebook where `nbgrader collect` would put it."""
    path = Path(course) / "submitted" / student / assignment / f"{assignment}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


def grades(course: Union[str, os.PathLike],
           assignment: str = ASSIGNMENT) -> dict[str, dict[str, tuple[Optional[float], float]]]:
    """{student: {grade_id: (auto_score, max_score)}} from the sqlite gradebook."""
    from nbgrader.api import Gradebook

    out = {}
    with Gradebook(f"sqlite:///{Path(course) / 'gradebook.db'}") as gb:
        for student in gb.students:
            try:
                sub = gb.find_submission_notebook(assignment, assignment, student.id)
            except Exception:  # noqa: BLE001 - student without this submission
                continue
            out[student.id] = {g.name: (g.auto_score, g.max_score) for g in sub.grades
                               if g.cell_type == "code"}
    return out


def feedback_html(course: Union[str, os.PathLike], student: str, assignment: str = ASSIGNMENT) -> Path:
    return Path(course) / "feedback" / student / assignment / f"{assignment}.html"


def grading_report(course: Union[str, os.PathLike], student: str, assignment: str = ASSIGNMENT) -> dict:
    """The trusted scorer's JSON report of one student's notebook."""
    return record.load(Path(course) / "autograded" / student / assignment / record.filename(assignment))


def grade_samples(course: Union[str, os.PathLike], catalogue: Iterable[Sample],
                  *autograde_args: str) -> tuple[dict[str, dict[str, tuple[Optional[float], float]]], float,
                                                 subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """Release, submit every sample, autograde, give feedback, export: like an instructor.

    Returns (grades, autograde seconds, the autograde and the generate_feedback CompletedProcess).
    """
    import time

    nbgrader(course, "generate_assignment", ASSIGNMENT, "--force")
    release = release_notebook(course)
    for sample in catalogue:
        submit(course, sample.name, submissions.build(sample, release))
    started = time.perf_counter()
    autograde = nbgrader(course, "autograde", ASSIGNMENT, *autograde_args, check=False)
    seconds = time.perf_counter() - started
    feedback = nbgrader(course, "generate_feedback", ASSIGNMENT, check=False)
    nbgrader(course, "export")
    return grades(course), seconds, autograde, feedback
