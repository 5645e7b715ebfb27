"""Secure by default: where bubblewrap cannot start, no path runs student code unless the instructor allows it.

A stand-in `bwrap` first on PATH fails the way a container without user namespaces does.  Every path
(stock `nbgrader autograde`, formgrader's step, `sdpa-course autograde`, `check`, `demo`) must then exit
non-zero with one line that names bwrap's message and grade nothing; with `allow_unisolated` each grades
and says so: the command's output, the feedback page and the class report.
"""
import json
import os
import subprocess
import sys

import nbformat
import pytest

import catalogue
from autograder import report
from autograder.demo import course, submissions
from autograder.sandbox import isolation, launcher
from tests.support.points import AUTOMATIC

pytestmark = pytest.mark.slow
BWRAP_SAYS = "bwrap: Creating new namespace failed: Operation not permitted"
ALLOW = "--SandboxedExecute.allow_unisolated=True"
STAND_IN = f"""#!/bin/sh
case "$1" in
  --version) echo "bubblewrap 0.8.0"; exit 0;;
  --help) echo "usage: bwrap [OPTIONS...] --perms --tmpfs --unshare-all --die-with-parent --size"; exit 0;;
esac
echo "{BWRAP_SAYS}" >&2
exit 1
"""


@pytest.fixture(scope="module")
def failing_bwrap(tmp_path_factory):
    """PATH with the stand-in first."""
    bin_dir = tmp_path_factory.mktemp("bin")
    (bin_dir / "bwrap").write_text(STAND_IN)
    (bin_dir / "bwrap").chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A released course with one correct submission (copied per test: grading writes into it)."""
    root = course.make_course(tmp_path_factory.mktemp("course") / "course")
    course.nbgrader(root, "generate_assignment", course.ASSIGNMENT, "--force")
    sample = next(s for s in catalogue.CATALOGUE if s.name == "correct-reference")
    course.submit(root, "s1", submissions.build(sample, course.release_notebook(root)))
    return root


@pytest.fixture
def root(released, tmp_path):
    copy = tmp_path / "course"
    subprocess.run(["cp", "-a", str(released), str(copy)], check=True)
    return copy


def _run(cmd, root, path, timeout=600):
    env = dict(course.nbgrader_env(), PATH=path)
    env.pop("SDPA_SANDBOX", None)
    return subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)


def _refused_once(done):
    lines = [line for line in (done.stdout + done.stderr).splitlines() if isolation.REFUSED in line]
    return len(lines) == 1 and BWRAP_SAYS in lines[0] and "allow_unisolated" in lines[0]


NBGRADER = [sys.executable, "-m", "nbgrader", "autograde", course.ASSIGNMENT]
SDPA_COURSE = [sys.executable, "-m", "autograder.cli"]


def test_stock_autograde_refuses_with_one_line_and_grades_nothing(root, failing_bwrap):
    done = _run(NBGRADER, root, failing_bwrap)
    assert done.returncode == 2 and _refused_once(done), done.stderr[-3000:]
    assert not (root / "autograded").exists() and course.grades(root) == {}


def test_sdpa_course_autograde_and_check_refuse_with_one_line(root, failing_bwrap):
    done = _run([*SDPA_COURSE, "autograde", course.ASSIGNMENT, "--workers", "1"], root, failing_bwrap)
    assert done.returncode == 2 and _refused_once(done), done.stderr[-3000:]
    assert not (root / "autograded").exists()
    notebook = root / "submitted" / "s1" / course.ASSIGNMENT / f"{course.ASSIGNMENT}.ipynb"
    done = _run([*SDPA_COURSE, "check", str(notebook)], root, failing_bwrap)
    assert done.returncode == 2 and _refused_once(done), done.stderr[-3000:]
    assert "automatic score" not in done.stdout


def test_the_demo_refuses_with_one_line(tmp_path, failing_bwrap):
    done = _run([*SDPA_COURSE, "demo", "--dir", str(tmp_path / "demo")], tmp_path, failing_bwrap, timeout=900)
    assert done.returncode == 2 and _refused_once(done), done.stderr[-3000:]
    assert "class report" not in done.stdout


def test_formgraders_autograde_step_refuses(root, failing_bwrap, monkeypatch):
    """Formgrader runs nbgrader's Autograde in its server: the step raises (nbgrader logs it, grades nothing)."""
    from autograder.nbgrader import SandboxedExecute

    monkeypatch.setenv("PATH", failing_bwrap)
    monkeypatch.delenv("SDPA_SANDBOX", raising=False)
    launcher.probe.cache_clear()
    launcher._bwrap_info.cache_clear()
    try:
        nb = nbformat.read(root / "submitted" / "s1" / course.ASSIGNMENT / f"{course.ASSIGNMENT}.ipynb", 4)
        with pytest.raises(isolation.IsolationRefused) as refused:
            SandboxedExecute().preprocess(nb, {"nbgrader": {"assignment": course.ASSIGNMENT, "notebook": "sdpa",
                                                            "student": "s1"}})
        assert BWRAP_SAYS in str(refused.value) and "\n" not in str(refused.value)
    finally:
        launcher.probe.cache_clear()
        launcher._bwrap_info.cache_clear()


def test_allowed_grading_without_isolation_says_so_everywhere(root, failing_bwrap):
    done = _run([*NBGRADER, ALLOW], root, failing_bwrap)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "GRADED WITHOUT ISOLATION" in done.stderr
    total = sum(score for score, _ in course.grades(root)["s1"].values())
    assert total == AUTOMATIC
    assert _run([sys.executable, "-m", "nbgrader", "generate_feedback", course.ASSIGNMENT], root,
                failing_bwrap).returncode == 0
    page = course.feedback_html(root, "s1").read_text()
    assert 'class="sdpa-unisolated"' in page
    built = report.build(str(root), course.ASSIGNMENT, out=str(root / "reports"))
    assert 'class="unisolated"' in open(built["html"]).read()
    notebook = root / "submitted" / "s1" / course.ASSIGNMENT / f"{course.ASSIGNMENT}.ipynb"
    done = _run([*SDPA_COURSE, "check", str(notebook), ALLOW], root, failing_bwrap)
    assert done.returncode == 0 and "GRADED WITHOUT ISOLATION" in done.stderr, done.stderr[-3000:]
    assert "WITHOUT sandbox isolation" in done.stdout
    done = _run([*SDPA_COURSE, "autograde", course.ASSIGNMENT, "--force", "--workers", "1", ALLOW], root,
                failing_bwrap)
    assert done.returncode == 0 and "GRADED WITHOUT ISOLATION" in done.stdout + done.stderr, done.stderr[-3000:]
    record = json.loads((root / "autograded" / "s1" / course.ASSIGNMENT / "sdpa.grading.json").read_text())
    assert record["sandbox"]["isolated"] is False
