"""Shared fixtures: one real nbgrader run over the whole sample catalogue.

Grading every sample costs a few seconds each, so the course is built,
released, graded and given feedback once per test session; the tests then
read the gradebook, the feedback HTML and our grading reports.
"""
import pytest

from autograder.demo import course
from tests import catalogue

# Shorter limits than the defaults keep the hang/loop samples cheap in CI.
FAST_LIMITS = ("--SandboxedExecute.cell_timeout=8", "--SandboxedExecute.call_timeout=5",
               "--SandboxedExecute.display_cell_timeout=3", "--SandboxedExecute.cell_time_floor=2")


@pytest.fixture(scope="session")
def released(tmp_path_factory):
    """A copy of the course after `nbgrader generate_assignment` (a few seconds; nothing graded)."""
    root = course.make_course(tmp_path_factory.mktemp("released"))
    course.nbgrader(root, "generate_assignment", course.ASSIGNMENT, "--force")
    return root


@pytest.fixture(scope="session")
def graded_course(tmp_path_factory):
    root = course.make_course(tmp_path_factory.mktemp("course"))
    grades, seconds, autograde = course.grade_samples(root, catalogue.CATALOGUE, *FAST_LIMITS)
    return {"root": root, "grades": grades, "seconds": seconds, "autograde": autograde}


def grading_report(root, student):
    return course.grading_report(root, student)
