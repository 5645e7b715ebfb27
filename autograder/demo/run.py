"""``sdpa-course demo``: a demo course graded by stock nbgrader, with feedback and the class report.

Built from this repository in ``.artifacts/demo`` (or ``--dir``): the
release, a few sample submissions (correct, empty and typical bugs), stock
``nbgrader autograde`` and ``generate_feedback`` with our configuration,
then ``sdpa-course report``.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Optional, Union

from .. import report
from ..batch.coursedir import CourseError
from ..grading import record
from ..sandbox import isolation
from . import course as coursekit
from . import submissions

DEMO_SAMPLES = ("correct-reference", "empty-release", "bug-mask-inverted", "bug-scale-missing",
                "bug-softmax-unstable", "bug-causal-off-by-one")


def run_demo(directory: Optional[Union[str, os.PathLike]] = None) -> int:
    """Build the demo course, grade the demo submissions, write feedback and the report; returns 0."""
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
    step("nbgrader generate_assignment sdpa")
    proc = nbgrader("generate_assignment", coursekit.ASSIGNMENT, "--force")
    if proc.returncode != 0:
        raise CourseError(f"`nbgrader generate_assignment` failed in {root} — see `make release` for the details")
    release = coursekit.release_notebook(root)
    catalogue = {s.name: s for s in submissions.CORRECT + submissions.BUGS + submissions.EMPTY}
    chosen = [catalogue[name] for name in DEMO_SAMPLES if name in catalogue]
    for sample in chosen:
        coursekit.submit(root, sample.name, submissions.build(sample, release))
    step(f"submitted {len(chosen)} sample notebooks: {', '.join(s.name for s in chosen)}")
    step("nbgrader autograde sdpa   (stock nbgrader, our sandbox + trusted scoring)")
    nbgrader("autograde", coursekit.ASSIGNMENT)
    step("nbgrader generate_feedback sdpa")
    nbgrader("generate_feedback", coursekit.ASSIGNMENT)
    step("sdpa-course report sdpa")
    built = report.build(str(root), coursekit.ASSIGNMENT)
    grades = coursekit.grades(root)
    step("done")
    print()
    width = max(len(s.name) for s in chosen) + 2
    print(f"{'student':{width}}{'score':>10}   {'expected':12}codes named in the feedback")
    for sample in chosen:
        cells = grades.get(sample.name)
        if not cells:
            print(f"{sample.name:{width}}{'FAILED':>10}   {sample.expect:12}(not graded: see the output above)")
            continue
        earned = sum(s or 0 for s, _ in cells.values())
        possible = sum(m for _, m in cells.values())
        graded = coursekit.grading_report(root, sample.name)
        named = record.codes_named(graded)
        mark = "ok" if submissions.verdict(sample, cells, named, record.held_points(graded))[0] else "NOT MET"
        expected = f"{sample.expect} {mark}".strip()
        print(f"{sample.name:{width}}{f'{earned:g}/{possible:g}':>10}   {expected:12}{' '.join(named) or '-'}")
    print()
    print("feedback (open in a browser):")
    for sample in chosen:
        path = coursekit.feedback_html(root, sample.name)
        print(f"  {path if path.exists() else str(path) + '  (missing)'}")
    print(f"class report: {built['html']}")
    return 0
