"""The deployed exchange flow with the nbgrader CLI, each step as its own Unix user (issue 14).

The instructor (``sdpa-instructor``) generates and releases ``sdpa`` through a shared exchange;
two students fetch it into their own homes, put in a correct and a mask-inverted solution and
submit; the instructor collects, autogrades (our sandbox and trusted scoring, loaded from the
course's nbgrader_config.py), grades the written answers, generates and releases feedback;
each student fetches their own feedback.  Along the way: what student B can and cannot read.

No JupyterHub and no browser here (tests/test_hub_browser.py drives the same semester through
the hub): the same users, config and exchange layout as ``make hub`` (hub/control.py), so this
is the fast check of the deployment.  Needs root (it creates the ``sdpa-*`` users).  It resets
the ``sdpa-student-*`` users' fetched work, and skips while a ``make hub`` instance is running.
"""
import json
import os
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

import catalogue as samples
from hub import control
from hub.control import ASSIGNMENT, COURSE_ID, INSTRUCTOR
from tests.support import feedback_page, points

STUDENT_A, STUDENT_B = control.STUDENTS[:2]
SAMPLE_FOR = {STUDENT_A: "correct-reference", STUDENT_B: "bug-mask-inverted"}
AUTOMATIC_CELLS, AUTOMATIC_POINTS = len(points.part_points()), points.AUTOMATIC


pytestmark = [
    pytest.mark.hub,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the exchange flow runs as separate Unix users "
                       "(sdpa-instructor, sdpa-student-a/b), which only root can create and become"),
    pytest.mark.skipif(not shutil.which("bwrap"), reason="no bubblewrap (run `make system-deps`)"),
]

TIMINGS = {}


def _step(name):
    class _Timer:
        def __enter__(self):
            self.started = time.perf_counter()

        def __exit__(self, *exc):
            TIMINGS[name] = round(time.perf_counter() - self.started, 1)
    return _Timer()


@pytest.fixture(scope="module")
def hub():
    """Users, a private exchange and a fresh course copy in the instructor's home (no hub process)."""
    if control.Hub().pid():
        pytest.skip("a `make hub` instance is running with these users; `make hub-stop` first")
    base = Path(tempfile.mkdtemp(prefix="sdpa-exchange-flow-", dir="/tmp"))
    os.chmod(base, 0o755)
    hub = control.Hub(state=base / "state", exchange=base / "exchange", course_name="sdpa-course-cli-test",
                      check_service=False)
    try:
        with _step("setup (users, exchange, course copy)"):
            hub.setup(fresh_course=True)
            hub.reset_student_work()
        yield hub
    finally:
        for pid in control.user_processes():  # nothing of the course users may outlive the test
            os.kill(pid, 9)
        shutil.rmtree(hub.course, ignore_errors=True)
        hub.reset_student_work()
        shutil.rmtree(base, ignore_errors=True)
        print("exchange flow timings:", json.dumps(TIMINGS, ensure_ascii=False))


def _probe_as(hub, user, paths):
    """{path: "ok" | error name} for listing/reading each path as `user`."""
    code = ("import json, os, sys\nout = {}\nfor p in sys.argv[1:]:\n"
            "    try:\n        os.listdir(p) if os.path.isdir(p) else open(p, 'rb').read(1)\n        out[p] = 'ok'\n"
            "    except OSError as e:\n        out[p] = type(e).__name__\nprint(json.dumps(out))\n")
    proc = hub.run_as(user, control.bin_dir(user) / "python", "-c", code, *paths)
    return json.loads(proc.stdout)


def _plant_in_the_inbox(hub, inbound, course):
    """What a red-team pass did as student A, through the exchange's inbox that every student may write: links
    to the instructor's files and to /dev/zero in A's own submission, a folder in B's name dated after B's real
    submission, and one of A's own dated in the future."""
    script = ("import os, shutil, sys, datetime\n"
              "inbound, course, me, other, assignment, mine = sys.argv[1:]\n"
              "os.symlink(os.path.join(course, 'source', assignment, assignment + '.ipynb'),"
              " os.path.join(mine, 'leak_solution.html'))\n"
              "os.symlink('/dev/zero', os.path.join(mine, 'zero.bin'))\n"
              "soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=1)\n"
              "for name, when in ((other, soon.strftime('%Y-%m-%d %H:%M:%S.%f UTC')),"
              " (me, '2099-01-01 00:00:00.000000 UTC')):\n"
              "    forged = os.path.join(inbound, f'{name}+{assignment}+{when}+deadbeef')\n"
              "    shutil.copytree(mine, forged, symlinks=True)\n"
              "    open(os.path.join(forged, 'timestamp.txt'), 'w').write(when)\n")
    # the inbox cannot be listed by a student, but A knows its own submission's name (its nbgrader cache has it)
    (mine,) = inbound.glob(f"{STUDENT_A}+{ASSIGNMENT}+*")
    hub.run_as(STUDENT_A, control.bin_dir(STUDENT_A) / "python", "-c", script, inbound, course, STUDENT_A, STUDENT_B,
               ASSIGNMENT, mine)


def _no_one_moves_anothers_submission(hub, inbound):
    """Found by a red-team pass: nbgrader makes the inbox 733, so a student who learned A's submission name
    could rename or delete A's folder.  The hub's inbox has the sticky bit: B, told the name, cannot."""
    (mine,) = inbound.glob(f"{STUDENT_A}+{ASSIGNMENT}+*")
    moved = hub.run_as(STUDENT_B, control.bin_dir(STUDENT_B) / "python", "-c",
                       "import os, sys\ntry:\n    os.rename(sys.argv[1], sys.argv[1] + '-gone')\n    print('moved')\n"
                       "except OSError as exc:\n    print(type(exc).__name__)", mine, cwd="/")
    assert moved.stdout.strip() == "PermissionError" and mine.is_dir(), moved.stdout
    assert inbound.stat().st_mode & stat.S_ISVTX


def _students_hold_nothing_of_the_grader(hub):
    """A student reaches neither the answers nor the hidden checks: the checkout (solutions, course, catalogue,
    the grader's venv) is closed to them, and their own Python environment imports none of the grader."""
    secrets = [control.ROOT / "solutions" / "sdpa.py", control.ROOT / "course" / "checks",
               control.ROOT / "catalogue", control.ROOT / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb",
               control.VENV_BIN / "python"]
    for student in control.STUDENTS:
        probe = _probe_as(hub, student, [str(path) for path in secrets])
        assert set(probe.values()) == {"PermissionError"}, (student, probe)
    imports = hub.run_as(STUDENT_A, control.bin_dir(STUDENT_A) / "python", "-c",
                         "import importlib.util as u, sys; print([m for m in sys.argv[1:] if u.find_spec(m)])",
                         "autograder", "course", "solutions", "catalogue", "torch", "sdpa_check_my_work", cwd="/")
    assert imports.stdout.strip() == "['torch', 'sdpa_check_my_work']", imports.stdout


def _toc_scores(html):
    """[(entry label, kind, score, max)] from the feedback page's summary."""
    entry = feedback_page.ENTRY.replace(" ", "</span> ", 1)
    found = re.findall(r'<li><a href="#[^"]+">([^<]*)</a> <span class="sdpa-kind">' + entry + "</li>", html)
    return [(label, feedback_page.kind(kind), float(score), float(top)) for label, kind, score, top in found]


def test_semester_through_the_exchange_as_separate_users(hub):
    course, exchange = hub.course, hub.exchange
    assert os.stat(course).st_uid == control.uid(INSTRUCTOR) and os.stat(course).st_mode & 0o777 == 0o700

    with _step("instructor: generate_assignment + release_assignment"):
        hub.nbgrader(INSTRUCTOR, "generate_assignment", ASSIGNMENT, "--force")
        hub.nbgrader(INSTRUCTOR, "release_assignment", ASSIGNMENT, "--force")
    outbound = exchange / COURSE_ID / "outbound" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    assert outbound.exists(), "release_assignment put nothing in the exchange"
    release = nbformat.read(str(outbound), as_version=4)

    with _step("2 students: list, fetch, solve, submit"):
        for student, sample_name in SAMPLE_FOR.items():
            listed = hub.nbgrader(student, "list")
            listing = listed.stdout + listed.stderr
            assert f"{COURSE_ID} {ASSIGNMENT}" in listing, f"{student} does not see the release: {listing}"
            hub.nbgrader(student, "fetch_assignment", ASSIGNMENT)
            fetched = control.home(student) / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
            assert os.stat(fetched).st_uid == control.uid(student)
            sample = next(s for s in samples.CATALOGUE if s.name == sample_name)
            nbformat.write(samples.build(sample, release), str(fetched))
            os.chown(fetched, control.uid(student), -1)
            hub.nbgrader(student, "submit", ASSIGNMENT)

    # Student B, through their own account: nobody else's work, not the course, not the inbox.
    probe = _probe_as(hub, STUDENT_B, [
        str(control.home(STUDENT_A) / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"), str(control.home(STUDENT_A)),
        str(course), str(course / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"),
        str(exchange / COURSE_ID / "inbound"), str(control.home(STUDENT_B) / ASSIGNMENT)])
    *denied, own = probe.values()
    assert all(v == "PermissionError" for v in denied), probe
    assert own == "ok", probe
    _students_hold_nothing_of_the_grader(hub)
    _no_one_moves_anothers_submission(hub, exchange / COURSE_ID / "inbound")

    submitted_by_b = nbformat.read(str(control.home(STUDENT_B) / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"), as_version=4)
    _plant_in_the_inbox(hub, exchange / COURSE_ID / "inbound", course)

    with _step("instructor: collect + autograde 2 submissions"):
        collected = hub.nbgrader(INSTRUCTOR, "collect", ASSIGNMENT)
        for student in SAMPLE_FOR:
            assert (course / "submitted" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").exists()
        # what A planted is refused, each with its line; B's own submission is the one collected
        said = collected.stdout + collected.stderr
        assert said.count("Not collected") == 4, said
        assert f"names {STUDENT_B} but belongs to {STUDENT_A}" in said and "is dated in the future" in said, said
        planted = course / "submitted" / STUDENT_A / ASSIGNMENT
        kept = {p.name for p in planted.iterdir()}
        assert f"{ASSIGNMENT}.ipynb" in kept and not kept & {"leak_solution.html", "zero.bin"}, kept
        assert not any(p.is_symlink() for p in planted.rglob("*"))
        b_collected = nbformat.read(str(course / "submitted" / STUDENT_B / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"),
                                    as_version=4)
        assert [c.source for c in b_collected.cells] == [c.source for c in submitted_by_b.cells]
        graded = hub.nbgrader(INSTRUCTOR, "autograde", ASSIGNMENT)
    assert "SANDBOX UNAVAILABLE" not in graded.stdout + graded.stderr, "autograde ran without the sandbox"
    for student in SAMPLE_FOR:  # our TrustedScoring ran (it writes this report), not stock nbgrader
        assert (course / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.grading.json").exists()

    with _step("instructor: manual grades, generate + release feedback"):
        manual = {STUDENT_A: 2.5, STUDENT_B: 1.0}
        script = ("import sys\nfrom nbgrader.api import Gradebook\n"
                  "with Gradebook('sqlite:///gradebook.db') as gb:\n"
                  "    for student, score in ((sys.argv[1], float(sys.argv[2])), (sys.argv[3], float(sys.argv[4]))):\n"
                  "        for name in ('written-a1', 'written-a2'):\n"
                  f"            g = gb.find_grade(name, '{ASSIGNMENT}', '{ASSIGNMENT}', student)\n"
                  "            g.manual_score = score\n"
                  "    gb.db.commit()\n")
        hub.run_as(INSTRUCTOR, control.VENV_BIN / "python", "-c", script,
                   STUDENT_A, manual[STUDENT_A], STUDENT_B, manual[STUDENT_B], cwd=course)
        hub.nbgrader(INSTRUCTOR, "generate_feedback", ASSIGNMENT)
        hub.nbgrader(INSTRUCTOR, "release_feedback", ASSIGNMENT)

    with _step("2 students: fetch_feedback"):
        pages = {}
        for student in SAMPLE_FOR:
            hub.nbgrader(student, "fetch_feedback", ASSIGNMENT)
            found = sorted((control.home(student) / ASSIGNMENT / "feedback").glob(f"*/{ASSIGNMENT}.html"))
            assert len(found) == 1, f"{student} fetched {found}"
            pages[student] = found[0].read_text(encoding="utf-8")

    entries = {s: _toc_scores(html) for s, html in pages.items()}
    for student, toc in entries.items():
        assert len(toc) == AUTOMATIC_CELLS + 2, f"{student}: summary entries {toc}"  # + the two written answers
        assert not any("Test cell" in label for label, *_ in toc)
        assert "apply_mask — " in " ".join(label for label, *_ in toc)
    auto_a = [(label, score, top) for label, kind, score, top in entries[STUDENT_A] if kind == "automatic checks"]
    assert sum(top for *_, top in auto_a) == AUTOMATIC_POINTS
    assert all(score == top for _, score, top in auto_a), f"student A lost automatic points: {auto_a}"
    written_a = [score for _, kind, score, _ in entries[STUDENT_A] if kind == "written response"]
    assert written_a == [manual[STUDENT_A]] * 2
    auto_b = {label.split(" — ")[0]: (score, top) for label, kind, score, top in entries[STUDENT_B]
              if kind == "automatic checks"}
    assert auto_b["apply_mask"][0] < auto_b["apply_mask"][1]
    named = '<span class="code">[mask-inverted]</span>'  # the grader's words, not the notebook's code
    assert named in pages[STUDENT_B] and named not in pages[STUDENT_A]

    # Offline page: math as MathML, no MathJax (or any other) script from the network.
    for html in pages.values():
        assert html.count("<math") > 50
        assert not re.search(r"<script[^>]+src=[\"']https?:", html), "feedback loads a script from the network"
        assert "$$\\mathrm{Attention}" not in html
