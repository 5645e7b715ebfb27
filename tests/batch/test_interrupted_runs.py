"""A run killed while grading a student leaves no silent 0: the next run of either command grades them again.

nbgrader skips a student whose autograded folder exists.  A stock run killed with SIGKILL mid-student, or
the states such a kill leaves (a folder with the grading record but no notebook, a notebook cut short, an
empty folder), must be graded again by stock `nbgrader autograde` and by `sdpa-course autograde` alike,
with the clean run's grades.
"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import catalogue
from autograder.demo import course, submissions
from autograder.grading import record
from tests.support import points
from tests.support.grading import FAST_LIMITS

pytestmark = pytest.mark.slow
STUDENT = "correct-reference"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    top = course.make_course(tmp_path_factory.mktemp("interrupted") / "course")
    course.nbgrader(top, "generate_assignment", course.ASSIGNMENT, "--force")
    sample = next(s for s in catalogue.CATALOGUE if s.name == STUDENT)
    course.submit(top, STUDENT, submissions.build(sample, course.release_notebook(top)))
    _stock(top)
    return top


@pytest.fixture(scope="module")
def clean(root):
    """The clean run's grades (each test leaves the course graded cleanly again)."""
    grades = course.grades(root)[STUDENT]
    assert sum(score for score, _ in grades.values()) == points.AUTOMATIC
    return grades


def _dest(root):
    return Path(root) / "autograded" / STUDENT / course.ASSIGNMENT


def _stock(root):
    return course.nbgrader(root, "autograde", course.ASSIGNMENT, *FAST_LIMITS, check=False)


def _cli(root):
    return subprocess.run([sys.executable, "-m", "autograder.cli", "--course", str(root), "autograde",
                           course.ASSIGNMENT, *FAST_LIMITS], env=course.nbgrader_env(), capture_output=True,
                          text=True, timeout=600)


def _kill_stock_when(ready):
    """Start stock autograde on a student not graded yet and SIGKILL it as soon as `ready(dest)` holds: the
    autograded folder exists (its files being copied), the notebook is (being) written, or the grading record
    is (the last file a student's grading writes)."""
    import shutil

    def kill(root):
        shutil.rmtree(_dest(root))
        proc = subprocess.Popen([sys.executable, "-m", "nbgrader", "autograde", course.ASSIGNMENT, *FAST_LIMITS],
                                cwd=root, env=course.nbgrader_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 300
        while not ready(_dest(root)) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return kill


_KILL_IN_FOLDER = _kill_stock_when(lambda dest: dest.exists())
_KILL_AFTER_RECORD = _kill_stock_when(lambda dest: (dest / f"{course.ASSIGNMENT}{record.SUFFIX}").exists())
_KILL_IN_NOTEBOOK = _kill_stock_when(lambda dest: (dest / f"{course.ASSIGNMENT}.ipynb").exists())
KILLS = (_KILL_IN_FOLDER, _KILL_IN_NOTEBOOK, _KILL_AFTER_RECORD)


def _record_only(root):
    (_dest(root) / f"{course.ASSIGNMENT}.ipynb").unlink()


def _notebook_cut_short(root):
    notebook = _dest(root) / f"{course.ASSIGNMENT}.ipynb"
    notebook.chmod(0o644)
    notebook.write_bytes(notebook.read_bytes()[:5000])


def _empty_folder(root):
    for path in _dest(root).iterdir():
        path.unlink() if path.is_file() else None


@pytest.mark.parametrize("leave, again", [(_KILL_IN_FOLDER, _cli), (_KILL_AFTER_RECORD, _stock),
                                          (_KILL_IN_NOTEBOOK, _cli), (_KILL_IN_FOLDER, _stock), (_record_only, _stock),
                                          (_notebook_cut_short, _cli), (_empty_folder, _stock)],
                         ids=["sigkill-in-folder-then-cli", "sigkill-after-record-then-stock",
                              "sigkill-in-notebook-then-cli", "sigkill-in-folder-then-stock", "record-only-then-stock",
                              "cut-short-then-cli", "empty-then-stock"])
def test_the_next_run_grades_the_student_again(root, clean, leave, again):
    if leave not in KILLS:
        assert not record.unfinished(_dest(root), Path(root) / "submitted" / STUDENT / course.ASSIGNMENT)
    leave(root)
    if leave not in KILLS[1:]:  # killed once the notebook or the record was written, it may be whole already
        assert record.unfinished(_dest(root), Path(root) / "submitted" / STUDENT / course.ASSIGNMENT) or \
            not _dest(root).exists()
    done = again(root)
    assert done.returncode == 0, (done.stdout + done.stderr)[-2000:]
    assert course.grades(root)[STUDENT] == clean
    assert not record.unfinished(_dest(root), Path(root) / "submitted" / STUDENT / course.ASSIGNMENT)
