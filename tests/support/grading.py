"""Grading the catalogue in tests: the short limits CI grades with, reading a student's grading report,
and grading answer cells in-process (the hidden checks on the reference solution with cells swapped in)."""
from autograder.demo import course
from autograder.grading.hidden_checks import run_checks
from autograder.grading.local_student import LocalStudent, reference_namespace
from catalogue.charge_once import parts

# Shorter limits than the defaults keep the hang/loop samples cheap in CI.
FAST_LIMITS = ("--SandboxedExecute.cell_timeout=8", "--SandboxedExecute.call_timeout=5",
               "--SandboxedExecute.display_cell_timeout=3", "--SandboxedExecute.cell_time_floor=2")


def grading_report(root, student):
    """The ``<notebook>.grading.json`` that grading wrote for `student` in the course at `root`."""
    return course.grading_report(root, student)


def grade_in_process(replace: dict, key: str, charge_once: bool = True) -> dict:
    """{part: PartResult} of the reference solution with `replace`'s answer cells swapped in, seeded by `key`."""
    namespace = reference_namespace()
    for source in replace.values():
        exec(source, namespace)  # noqa: S102 - our own samples, trusted test code
    return run_checks(LocalStudent(namespace), parts(), seed_key=("sdpa", key), context={"charge_once": charge_once})
