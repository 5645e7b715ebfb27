"""Stock `nbgrader autograde` (and formgrader, and `sdpa-course check`) grade with runners forked from one warm
zygote kept for the whole process (`autograder.sandbox.shared_zygote`): every student starts clean, the
reference is timed once, and a fresh runner is only the fallback, which the log names."""
import json
import logging
import os
import subprocess
import sys
import textwrap

import pytest
from nbformat.v4 import new_code_cell

import catalogue
from autograder.demo import course, submissions
from autograder.sandbox import forkserver, launcher, runners, shared_zygote
from autograder.sandbox.session import StudentSession
from tests.support.grading import FAST_LIMITS

pytestmark = pytest.mark.slow
needs_bwrap = pytest.mark.skipif(not launcher.probe().isolated, reason="the zygote needs bubblewrap")

# What a student sees of its sandbox, printed as one JSON line (the pid aside, which tells the kinds apart).
OBSERVE = textwrap.dedent("""
    import json, os
    def listing(path):
        return sorted(os.listdir(path))
    print("SEEN " + json.dumps({
        "pid": os.getpid(), "ppid": os.getppid(), "scratch": listing("."), "home": listing(os.path.expanduser("~")),
        "tmp": listing("/tmp"), "shm": listing("/dev/shm"), "sysv": open("/proc/sysvipc/shm").read().splitlines()[1:],
        "others": [p for p in listing("/proc") if p.isdigit() and int(p) not in (1, 2, os.getpid())],
        "env_left": os.environ.get("LEFT"),
        "mpl": {name: len(open("/tmp/mpl/" + name, "rb").read()) for name in listing("/tmp/mpl")},
    }, sort_keys=True))
""")
TRACES = next(s for s in catalogue.ATTACKS if s.name == "attack-leave-traces").append[0]
CORRECT = next(s for s in catalogue.CATALOGUE if s.name == "correct-reference")


def _course(tmp_path, students):
    """A released course with `students`: {id: extra cells appended to the correct reference answer}."""
    root = course.make_course(tmp_path / "course")
    course.nbgrader(root, "generate_assignment", course.ASSIGNMENT, "--force")
    release = course.release_notebook(root)
    for student, extra in students.items():
        nb = submissions.build(CORRECT, release)
        nb.cells.extend(new_code_cell(source) for source in extra)
        course.submit(root, student, nb)
    return root


def _autograde(root, *args, env=None):
    cmd = [sys.executable, "-m", "nbgrader", "autograde", course.ASSIGNMENT, "--log-level=INFO", *FAST_LIMITS, *args]
    return subprocess.run(cmd, cwd=root, env=dict(course.nbgrader_env(), **(env or {})), capture_output=True,
                          text=True, timeout=900)


def _seen(root, student):
    nb = json.loads((root / "autograded" / student / course.ASSIGNMENT / f"{course.ASSIGNMENT}.ipynb").read_text())
    lines = [line for cell in nb["cells"] if cell["cell_type"] == "code" for out in cell.get("outputs", [])
             if out.get("output_type") == "stream" for line in "".join(out["text"]).splitlines()
             if line.startswith("SEEN ")]
    assert len(lines) == 1, lines
    return json.loads(lines[0][5:])


@needs_bwrap
def test_students_of_one_stock_autograde_share_a_warm_zygote_and_each_starts_clean(tmp_path):
    students = {"s1-first": [OBSERVE], "s2-leaves-traces": [TRACES, "import os\nos.environ['LEFT'] = '1'"],
                "s3-after-traces": [OBSERVE]}
    root = _course(tmp_path, students)
    done = _autograde(root)
    assert done.returncode == 0, done.stderr[-3000:]
    log = done.stderr
    assert log.count("runners are forked from one warm zygote, kept for this whole process") == 1, log[-3000:]
    assert "fresh sandboxed runner" not in log and "no warm zygote" not in log
    grades = course.grades(root)
    # What each notebook's checks gave: the observing cells read /proc, so every part is held for review
    # (nothing counted until a person reads them), with its points kept in the grading record.
    totals = {s: sum(c["held_points"] if c["held"] else c["points"] for c in course.grading_report(root, s)["cells"])
              for s in grades}
    assert len(set(totals.values())) == 1 and set(totals) == set(students), totals  # all full marks alike
    first, after = _seen(root, "s1-first"), _seen(root, "s3-after-traces")
    # A fresh sandbox's runner is pid 7; these come later from one zygote, which forked the reference's
    # runner and the students' before them.
    assert 7 < first.pop("pid") < after.pop("pid")
    assert first == after, {k: (first[k], after[k]) for k in first if first[k] != after[k]}
    assert after["others"] == [] and after["env_left"] is None and after["sysv"] == []
    assert "planted.txt" not in after["scratch"] + after["home"] + after["tmp"] + after["shm"]
    # The reference was timed once, and kept for the next grading process.
    assert (root / ".sdpa-calibration" / course.ASSIGNMENT / f"{course.ASSIGNMENT}.json").exists()
    assert "reference timings kept in" in log and "reference timings reused" not in log
    again = _autograde(root, "--force")
    assert again.returncode == 0 and "reference timings reused from" in again.stderr
    assert "reference solution timed" not in again.stderr
    assert course.grades(root) == grades


def test_without_a_zygote_each_submission_gets_a_fresh_runner_and_the_log_says_so(tmp_path):
    root = _course(tmp_path, {"s1": [], "s2": []})
    done = _autograde(root, "--SandboxedExecute.allow_unisolated=True", env={"SDPA_SANDBOX": "off"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count("no warm zygote") == 1, done.stderr[-3000:]
    assert "runners are forked from one warm zygote" not in done.stderr
    totals = {s: sum(score for score, _ in cells.values()) for s, cells in course.grades(root).items()}
    assert set(totals) == {"s1", "s2"} and len(set(totals.values())) == 1


@needs_bwrap
def test_a_zygote_that_cannot_start_leaves_fresh_runners_and_a_log_line(monkeypatch, caplog):
    command = runners.runner_command  # the fresh runners keep their own reference to it
    monkeypatch.setattr(runners, "runner_command", lambda limits: (
        [arg.replace("zygote.py", "no-such-zygote.py") for arg in command(limits)[0]], command(limits)[1]))
    shared_zygote.close()
    log = logging.getLogger("test-stock-zygote")
    try:
        with caplog.at_level(logging.WARNING, logger=log.name):
            source = shared_zygote.process_runners(launcher.Limits(), True, log)
            assert source is not None
            source.server.start_timeout = 20
            with StudentSession(["z = 3"], runner_source=source) as s:
                s.run_notebook()
                assert s.get("z") == 3 and not isinstance(s.proc, forkserver.ForkedRunner)
    finally:
        shared_zygote.close()
    assert "fresh sandboxed runner for this session (no zygote runner: zygote discarded" in caplog.text


@needs_bwrap
def test_one_zygote_per_process_shared_by_its_sessions_and_not_by_a_forked_child():
    probe = textwrap.dedent("""
        import json, os, sys
        from autograder.sandbox import forkserver, launcher, shared_zygote
        from autograder.sandbox.session import StudentSession
        def grade():
            source = shared_zygote.process_runners(launcher.Limits(), True)
            with StudentSession(["import os\\npid = os.getpid()"], runner_source=source) as s:
                s.run_notebook()
                return s.get("pid"), isinstance(s.proc, forkserver.ForkedRunner), id(source.server)
        first, second = grade(), grade()
        read, write = os.pipe()
        child = os.fork()
        if child == 0:
            os.write(write, json.dumps(grade()).encode())
            os._exit(0)
        os.waitpid(child, 0)
        in_child = json.loads(os.read(read, 4096))
        third = grade()  # the parent's zygote, untouched by the child
        print(json.dumps([first, second, in_child, third]))
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert done.returncode == 0, done.stderr[-3000:]
    first, second, in_child, third = json.loads(done.stdout.strip().splitlines()[-1])
    assert first[1] and second[1] and in_child[1] and third[1]  # every runner forked from a zygote
    assert first[2] == second[2] == third[2] and second[0] > first[0] and third[0] > second[0]  # one zygote
    assert in_child[0] == 7  # the child's own new zygote: its first runner


LIMIT = "import resource\nprint('SEEN', resource.getrlimit(resource.RLIMIT_AS)[0] // 2**20)"


@needs_bwrap
@pytest.mark.parametrize("command", ["nbgrader autograde", "sdpa-course autograde"])
def test_a_zygote_started_early_never_serves_a_course_configured_otherwise(tmp_path, command):
    """Both commands start a zygote before they read the course, with the default limits; a course that asks
    for others gets runners with its own (the early zygote is replaced at the first runner)."""
    root = _course(tmp_path, {"s1": [LIMIT]})
    option = "--SandboxedExecute.memory_mb=5000"
    if command == "nbgrader autograde":
        done = _autograde(root, option)
    else:
        done = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", course.ASSIGNMENT, "--workers",
                               "1", *FAST_LIMITS, option], cwd=root, env=course.nbgrader_env(), capture_output=True,
                              text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    nb = json.loads((root / "autograded" / "s1" / course.ASSIGNMENT / f"{course.ASSIGNMENT}.ipynb").read_text())
    seen = [line for cell in nb["cells"] if cell["cell_type"] == "code" for out in cell.get("outputs", [])
            if out.get("output_type") == "stream" for line in "".join(out["text"]).splitlines()
            if line.startswith("SEEN ")]
    assert seen == ["SEEN 5000"]


@needs_bwrap
def test_an_idle_zygote_is_stopped_and_the_next_session_gets_a_new_one():
    """A Jupyter server (formgrader) keeps the process's zygote only `zygote_idle_seconds` after a runner."""
    import time

    shared_zygote.close()
    try:
        source = shared_zygote.process_runners(launcher.Limits(), True, logging.getLogger("idle"), idle_seconds=1.0)
        with StudentSession(["a = 1"], runner_source=source) as s:
            s.run_notebook()
            assert isinstance(s.proc, forkserver.ForkedRunner) and s.get("a") == 1
            time.sleep(1.5)  # past the idle time while the runner is still out: kept
            assert source.server._zygote is not None
        deadline = time.monotonic() + 10
        while source.server._zygote is not None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert source.server._zygote is None and source.server.zygotes == 1
        with StudentSession(["b = 2"], runner_source=source) as s:
            s.run_notebook()
            assert isinstance(s.proc, forkserver.ForkedRunner) and s.get("b") == 2
        assert source.server.zygotes == 2
    finally:
        shared_zygote.close()
