"""Grading the catalogue in tests: the short limits CI grades with, and reading a student's grading report."""
from autograder.demo import course

# Shorter limits than the defaults keep the hang/loop samples cheap in CI.
FAST_LIMITS = ("--SandboxedExecute.cell_timeout=8", "--SandboxedExecute.call_timeout=5",
               "--SandboxedExecute.display_cell_timeout=3", "--SandboxedExecute.cell_time_floor=2")


def grading_report(root, student):
    """The ``<notebook>.grading.json`` that grading wrote for `student` in the course at `root`."""
    return course.grading_report(root, student)
