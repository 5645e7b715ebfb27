"""A gradebook SQLite cannot use is an input error, not an internal one: the file, what happened, what to do."""
import sqlite3
import subprocess
import sys

import pytest

from autograder.demo import course


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    root = course.make_course(tmp_path_factory.mktemp("gradebook") / "course")
    course.nbgrader(root, "generate_assignment", course.ASSIGNMENT, "--force")
    return root


def _report(root):
    return subprocess.run([sys.executable, "-m", "autograder.cli", "--course", str(root), "report"],
                          capture_output=True, text=True, timeout=300, env=course.nbgrader_env())


def test_a_damaged_gradebook_names_the_file_and_the_way_back(released, tmp_path):
    damaged = tmp_path / "course"
    subprocess.run(["cp", "-a", str(released), str(damaged)], check=True)
    db = damaged / "gradebook.db"
    db.write_bytes(db.read_bytes()[:3000])  # cut short, as a full disk or a killed copy leaves it
    done = _report(damaged)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(lines) == 1 and str(db) in lines[0] and "restore it from a backup" in lines[0], lines


def test_a_locked_gradebook_says_who_may_hold_it(released):
    holder = sqlite3.connect(released / "gradebook.db", isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        done = _report(released)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(lines) == 1 and "is locked by another process" in lines[0] and "gradebook.db" in lines[0], lines
