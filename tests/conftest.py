"""Shared fixtures: one real nbgrader run over the whole sample catalogue.

Grading every sample costs a few seconds each, so the course is built,
released, graded and given feedback once per test session; the tests then
read the gradebook, the feedback HTML and our grading reports.
"""
import json
import time
from pathlib import Path

import pytest

from autograder import course, samples


@pytest.fixture(scope="session")
def graded_course(tmp_path_factory):
    root = course.make_course(tmp_path_factory.mktemp("course"))
    course.nbgrader(root, "generate_assignment", course.ASSIGNMENT, "--force")
    release = course.release_notebook(root)
    for sample in samples.CATALOGUE:
        course.submit(root, sample.name, samples.build(sample, release))
    started = time.perf_counter()
    # Shorter limits than the defaults keep the hang/loop samples cheap in CI.
    limits = ["--SandboxedExecute.cell_timeout=8", "--SandboxedExecute.call_timeout=5",
              "--SandboxedExecute.check_cell_timeout=3"]
    autograde = course.nbgrader(root, "autograde", course.ASSIGNMENT, *limits, check=False)
    seconds = time.perf_counter() - started
    course.nbgrader(root, "generate_feedback", course.ASSIGNMENT, check=False)
    course.nbgrader(root, "export")
    return {"root": root, "grades": course.grades(root), "seconds": seconds, "autograde": autograde}


def grading_report(root, student):
    path = Path(root) / "autograded" / student / course.ASSIGNMENT / f"{course.ASSIGNMENT}.grading.json"
    return json.loads(path.read_text())
