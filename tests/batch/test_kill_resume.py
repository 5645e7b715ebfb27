"""`sdpa-course autograde` killed whole (SIGKILL to its process group) at several points, then resumed.

Complements ``test_cli.py::test_parallel_equals_stock_and_resumes_after_kill``
(one SIGKILL of the parent alone, after the first save, compared with
stock): here the CLI, its workers and their runners all die at once, in the
middle of a gradebook write and at random moments, three times in a row,
and the resumed course must equal an uninterrupted run's.  Between kills,
every student in ``autograded/`` must already have the clean run's grades.
"""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import catalogue
from autograder import cli
from autograder.batch import importer
from autograder.demo import course
from autograder.sandbox.guest import procfs

LIMITS = ["--SandboxedExecute.cell_timeout=8", "--SandboxedExecute.call_timeout=5",
          "--SandboxedExecute.cell_time_floor=2"]
STUDENTS = ("correct-reference", "bug-mask-inverted", "correct-noisy", "bug-scale-by-dk", "correct-alternatives",
            "bug-softmax-unstable")

# Loaded by the `sdpa-course` process at start-up (sitecustomize): the parent -- the gradebook's only
# writer, not its forked workers, which write private gradebooks -- stops for good in the middle of
# importing a student, their grades written to the database but not committed, and says so in a marker file.
PAUSE_IN_WRITE = """
import os, time
_parent, _mark = os.getpid(), os.environ["SDPA_TEST_PAUSE_MARK"]
from autograder.batch import importer
_apply = importer.Importer._apply
def _apply_then_pause(self, gb, student, values):
    _apply(self, gb, student, values)
    gb.db.flush()
    if os.getpid() == _parent and not os.path.exists(_mark):
        open(_mark, "w").close()
        time.sleep(3600)
importer.Importer._apply = _apply_then_pause
"""


def _course(released, target, built):
    shutil.copytree(released, target)
    for name in STUDENTS:
        course.submit(target, name, built[name])
    return target


def _cmd(root):
    return [sys.executable, "-m", "autograder.cli", "--course", str(root), "autograde", "--workers", "2", *LIMITS]


def _start(root, env):
    """A run in its own process group, to be killed whole."""
    return subprocess.Popen(_cmd(root), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _survivors(pgid, scratch):
    """Live processes of the group, or using the runs' temporary dirs (sandboxes run in sessions of their own)."""
    return procfs.group_or_mentioning(pgid, os.fsencode(scratch))


def _kill_group(proc, scratch):
    """SIGKILL the whole group; returns the processes (workers, sandboxes) still alive after 10 s."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:  # it had finished
        pass
    proc.wait()
    deadline = time.monotonic() + 10
    while (left := _survivors(proc.pid, scratch)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def _graded(root):
    top = Path(root) / "autograded"
    return sorted(p.name for p in top.iterdir() if not p.name.startswith(".")) if top.exists() else []


def _notebooks(root):
    return {s: json.loads((Path(root) / "autograded" / s / "sdpa" / "sdpa.ipynb").read_text(encoding="utf-8"))
            for s in _graded(root)}


def _saved_equal_clean(root, clean, why):
    """What a kill may leave: students in autograded/ hold the clean run's grades; returns the gradebook."""
    now = course.grades(root)
    for student in _graded(root):
        assert now[student] == clean[student], (why, student)
    return now


@pytest.mark.slow
def test_sigkill_of_the_whole_run_at_several_points_then_resume(released, tmp_path):
    package_root = str(Path(cli.__file__).resolve().parents[1])
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = dict(course.nbgrader_env(), TMPDIR=str(scratch), PYTHONPATH=package_root)
    release = course.release_notebook(released)  # built once: an appended cell gets a random id each time
    built = {name: catalogue.build(next(s for s in catalogue.CATALOGUE if s.name == name), release)
             for name in STUDENTS}
    # The reference: one uninterrupted run.
    clean_root = _course(released, tmp_path / "clean", built)
    started = time.monotonic()
    done = subprocess.run(_cmd(clean_root), env=env, capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    clean = course.grades(clean_root)
    assert sorted(clean) == sorted(STUDENTS)

    root = _course(released, tmp_path / "course", built)
    # 1. In the middle of a gradebook write: three grades of a student committed, not published.
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(PAUSE_IN_WRITE)
    mark = tmp_path / "paused"
    proc = _start(root, dict(env, PYTHONPATH=os.pathsep.join([str(inject), package_root]),
                             SDPA_TEST_PAUSE_MARK=str(mark)))
    deadline = time.monotonic() + 300
    while not mark.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mark.exists(), "the run never reached a gradebook write"
    assert _kill_group(proc, scratch) == []
    now = _saved_equal_clean(root, clean, "killed during a write")
    paused = [s for s in now if s not in _graded(root) and now[s] != clean[s]]
    assert paused, now  # the kill did land inside one student's import...
    # ...which is one transaction: none of their grades is committed (the submission's rows are, as
    # nbgrader's own `update_or_create_submission` commits them, and as stock leaves them on a failure).
    assert all(auto is None for s in paused for auto, _ in now[s].values()), now

    # 2. At random moments of a run (seeded; the seed is in the failure message).
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    for point in (rng.uniform(0, wall), rng.uniform(0, wall)):
        proc = _start(root, env)
        try:
            proc.wait(point)
        except subprocess.TimeoutExpired:
            pass
        assert _kill_group(proc, scratch) == [], (seed, point)
        _saved_equal_clean(root, clean, f"seed {seed}, killed after {point:.1f} s")

    # 3. Resumed to the end: exactly the clean run, and nothing left behind.
    final = subprocess.run(_cmd(root), env=env, capture_output=True, text=True, timeout=600)
    assert final.returncode == 0, (seed, final.stdout + final.stderr)
    assert course.grades(root) == clean, seed
    assert _notebooks(root) == _notebooks(clean_root), seed
    assert not (root / "autograded" / importer.STAGING).exists()
    assert os.listdir(scratch) == []  # the killed runs' worker dirs, removed by the next run


def test_the_next_run_removes_what_killed_runs_left_in_tmp(tmp_path, monkeypatch):
    """A worker's dir and a sandbox probe's dir of a dead process are removed; a live process's are kept."""
    import tempfile

    from autograder.batch import local_workers
    from autograder.sandbox import launcher

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    names = [f"{local_workers.WORKER_TMP_PREFIX}{dead}-a", f"{launcher.PROBE_TMP_PREFIX}{dead}-b",
             f"{launcher.PROBE_TMP_PREFIX}{os.getpid()}-c", "unrelated"]
    for name in names:
        (tmp_path / name).mkdir()
    local_workers.remove_stale_worker_dirs()
    assert sorted(os.listdir(tmp_path)) == sorted(names[2:])
