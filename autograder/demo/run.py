"""``sdpa-course demo``: a demo course graded by stock nbgrader, with feedback and the class report.

Built from this repository in ``.artifacts/demo`` (or ``--dir``): the
release, a few sample submissions (correct, empty and typical bugs), stock
``nbgrader autograde`` and ``generate_feedback`` with our configuration,
then ``sdpa-course report``.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Optional, Union

from solutions import solution_notebook

from .. import report
from ..batch.coursedir import CourseError
from ..grading import record
from ..notebook.editions import EDITIONS
from ..sandbox import isolation
from . import course as coursekit
from . import submissions

DEMO_SAMPLES = ("correct-reference", "empty-release", "bug-mask-inverted", "bug-scale-missing",
                "bug-softmax-unstable", "bug-causal-off-by-one")
# The English edition's students (named with "-en"): each command of the quick start can be tried with sdpa_en.
ENGLISH = next(assignment for assignment, language in EDITIONS.items() if language == "en")
ENGLISH_SAMPLES = ("correct-reference", "bug-mask-inverted")


def run_demo(directory: Optional[Union[str, os.PathLike]] = None) -> int:
    """Build the demo course, grade the demo submissions of both editions, write feedback and the reports;
    returns 0."""
    root = Path(directory or Path(coursekit.ROOT) / ".artifacts" / "demo").resolve()
    started = time.perf_counter()

    def step(text: str) -> None:
        print(f"[{time.perf_counter() - started:5.1f}s] {text}", flush=True)

    def nbgrader(*cmd: str) -> subprocess.CompletedProcess:
        proc = coursekit.nbgrader(root, *cmd, check=False)
        refused = [line for line in proc.stderr.splitlines() if isolation.REFUSED in line]
        if refused:  # no sandbox here, and grading without one is not allowed: nothing was graded
            raise isolation.IsolationRefused(isolation.REFUSED + refused[0].split(isolation.REFUSED, 1)[1])
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
            step(f"   `nbgrader {' '.join(cmd)}` exited with {proc.returncode}: {tail[0]}")
        return proc

    step(f"building the demo course in {root}")
    if root.exists():
        shutil.rmtree(root)
    coursekit.make_course(root)
    catalogue = {s.name: s for s in submissions.CORRECT + submissions.BUGS + submissions.EMPTY}
    editions = {coursekit.ASSIGNMENT: [catalogue[name] for name in DEMO_SAMPLES],
                ENGLISH: [dataclasses.replace(catalogue[name], name=f"{name}-en") for name in ENGLISH_SAMPLES]}
    reports = {}
    for assignment, chosen in editions.items():
        step(f"nbgrader generate_assignment {assignment}")
        proc = nbgrader("generate_assignment", assignment, "--force")
        if proc.returncode != 0:
            raise CourseError(f"`nbgrader generate_assignment {assignment}` failed in {root} — see `make release` "
                              "for the details")
        release = coursekit.release_notebook(root, assignment)
        solution = solution_notebook(assignment)  # answers in the edition's language
        for sample in chosen:
            coursekit.submit(root, sample.name, submissions.build(sample, release, solution), assignment)
        step(f"submitted {len(chosen)} sample notebooks to {assignment}: {', '.join(s.name for s in chosen)}")
        step(f"nbgrader autograde {assignment}   (stock nbgrader, our sandbox + trusted scoring)")
        nbgrader("autograde", assignment)
        step(f"nbgrader generate_feedback {assignment}")
        nbgrader("generate_feedback", assignment)
        step(f"sdpa-course report {assignment}")
        reports[assignment] = report.build(str(root), assignment)
    step("done")
    print()
    students = [(assignment, sample) for assignment, chosen in editions.items() for sample in chosen]
    width = max(len(s.name) for _, s in students) + 2
    print(f"{'student':{width}}{'edition':9}{'score':>10}   {'expected':12}codes named in the feedback")
    for assignment, sample in students:
        cells = coursekit.grades(root, assignment).get(sample.name)
        if not cells:
            print(f"{sample.name:{width}}{assignment:9}{'FAILED':>10}   {sample.expect:12}(not graded: see the output "
                  "above)")
            continue
        earned = sum(s or 0 for s, _ in cells.values())
        possible = sum(m for _, m in cells.values())
        graded = coursekit.grading_report(root, sample.name, assignment)
        named = record.codes_named(graded)
        mark = "ok" if submissions.verdict(sample, cells, named, record.held_points(graded))[0] else "NOT MET"
        expected = f"{sample.expect} {mark}".strip()
        print(f"{sample.name:{width}}{assignment:9}{f'{earned:g}/{possible:g}':>10}   {expected:12}"
              f"{' '.join(named) or '-'}")
    print()
    print("feedback (open in a browser):")
    for assignment, sample in students:
        path = coursekit.feedback_html(root, sample.name, assignment)
        print(f"  {path if path.exists() else str(path) + '  (missing)'}")
    for assignment, built in reports.items():
        print(f"class report ({assignment}): {built['html']}")
    return 0
