"""`sdpa-course`: parallel autograde == stock nbgrader, resume, failures, report, dask, errors.

The slow tests share one released course and one stock `nbgrader autograde`
run over a few samples, and grade copies of it in other ways.
"""
import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import catalogue
from autograder import cli
from autograder import report as reportlib
from autograder.batch import importer, local_workers, run
from autograder.demo import course
from autograder.notebook.submission import MAX_SUBMISSION_BYTES
from benchmarks import graders as bench_graders
from tests.support.points import AUTOMATIC, TOTAL

# Short limits, as in tests/support/grading.py: the attack sample hangs/crashes cost less.
LIMITS = ["--SandboxedExecute.cell_timeout=8", "--SandboxedExecute.call_timeout=5",
          "--SandboxedExecute.cell_time_floor=2"]
STUDENTS = ("bug-mask-inverted", "correct-noisy", "attack-exit-kernel")


def _sample(name):
    return next(s for s in catalogue.CATALOGUE if s.name == name)


def _cli(root, *args, timeout=600, env=None):
    return subprocess.run([sys.executable, "-m", "autograder.cli", "--course", str(root), *args],
                          env=env or course.nbgrader_env(), capture_output=True, text=True, timeout=timeout)


def _graded(root):
    top = Path(root) / "autograded"
    return sorted(p.name for p in top.iterdir() if not p.name.startswith(".")) if top.exists() else []


def _notebook(root, student):
    path = Path(root) / "autograded" / student / course.ASSIGNMENT / f"{course.ASSIGNMENT}.ipynb"
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def built(released):
    release = course.release_notebook(released)
    return {name: catalogue.build(_sample(name), release) for name in STUDENTS + ("correct-reference",)}


def _course_copy(released, target, built, students):
    shutil.copytree(released, target)
    for student in students:
        course.submit(target, student, built[student])
    return target


@pytest.fixture(scope="module")
def stock(released, built, tmp_path_factory):
    """The reference: stock `nbgrader autograde` over STUDENTS."""
    root = _course_copy(released, tmp_path_factory.mktemp("stock") / "course", built, STUDENTS)
    course.nbgrader(root, "autograde", course.ASSIGNMENT, *LIMITS, check=False)
    grades = course.grades(root)
    assert sorted(grades) == sorted(STUDENTS)
    return root


@pytest.mark.slow
def test_parallel_equals_stock_and_resumes_after_kill(released, built, stock, tmp_path):
    root = _course_copy(released, tmp_path / "course", built, STUDENTS)
    scratch = tmp_path / "tmp"  # the runs' temporary dirs
    scratch.mkdir()
    env = dict(course.nbgrader_env(), TMPDIR=str(scratch))
    # An interrupted run: killed (SIGKILL, no clean-up) once the first student is saved.
    proc = subprocess.Popen([sys.executable, "-m", "autograder.cli", "--course", str(root), "autograde",
                             "--workers", "1", *LIMITS], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not _graded(root) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.kill()
    out, err = proc.communicate()
    first = _graded(root)
    assert first and len(first) < len(STUDENTS), (first, out, err)
    saved = course.grades(root)
    for student in first:  # in autograded/ => its grades are in the gradebook, equal to stock
        assert saved[student] == course.grades(stock)[student]
    before = {s: os.stat(root / "autograded" / s / "sdpa" / "sdpa.ipynb").st_mtime_ns for s in first}

    left = [name for name in os.listdir(scratch) if name.startswith(local_workers.WORKER_TMP_PREFIX)]
    assert left  # what the killed run could not remove...
    done = _cli(root, "autograde", "sdpa", "--workers", "2", *LIMITS, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert os.listdir(scratch) == []  # ...the next run does, along with its own
    assert f"skipped {len(first)}" in done.stdout
    # `make bench` reads the start-up and each result from these lines (benchmarks/graders.py)
    lines = done.stderr.splitlines()
    assert sum(bool(bench_graders.FORKED.match(line)) for line in lines) == 1, done.stderr
    assert sum(bool(bench_graders.PROGRESS.match(line)) for line in lines) == len(STUDENTS) - len(first), done.stderr
    assert _graded(root) == sorted(STUDENTS)
    assert not (root / "autograded" / importer.STAGING).exists()
    for student in first:  # not regraded
        assert os.stat(root / "autograded" / student / "sdpa" / "sdpa.ipynb").st_mtime_ns == before[student]
    # Exactly the scores and feedback of stock nbgrader: gradebook and autograded notebooks.
    assert course.grades(root) == course.grades(stock)
    for student in STUDENTS:
        assert _notebook(root, student) == _notebook(stock, student), student
    # Nothing left to do; --force regrades only the students asked for.
    again = _cli(root, "autograde", "sdpa", "--student", STUDENTS[0], "--force", *LIMITS)
    assert again.returncode == 0 and "graded 1, skipped 0" in again.stdout, again.stdout + again.stderr
    assert course.grades(root) == course.grades(stock)


# Loaded by the `sdpa-course` process below (sitecustomize runs at interpreter start):
# its grading workers, forked from it, die when they get the student "worker-dies".
DIE_ON_ONE_STUDENT = """
import os
from autograder.batch import worker
_grade = worker.Grader.grade
def _grade_or_die(self, task):
    if task["student"] == "worker-dies":
        os._exit(3)
    return _grade(self, task)
worker.Grader.grade = _grade_or_die
"""


@pytest.mark.slow
def test_crashing_submissions_are_reported_and_the_rest_graded(released, built, tmp_path):
    root = _course_copy(released, tmp_path / "course", built, ["correct-reference"])
    broken = root / "submitted" / "not-json" / "sdpa" / "sdpa.ipynb"
    broken.parent.mkdir(parents=True)
    broken.write_text("{not json")
    raw = json.loads(Path(root / "submitted" / "correct-reference" / "sdpa" / "sdpa.ipynb").read_text())
    for cell in raw["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == "softmax":
            cell["source"] = "bad = '\ud800'\n" + "".join(cell["source"])  # a lone surrogate: no UTF-8
    surrogate = root / "submitted" / "surrogate" / "sdpa" / "sdpa.ipynb"
    surrogate.parent.mkdir(parents=True)
    surrogate.write_text(json.dumps(raw, ensure_ascii=True))
    course.submit(root, "worker-dies", built["correct-reference"])
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(DIE_ON_ONE_STUDENT)
    package_root = str(Path(cli.__file__).resolve().parents[1])
    scratch = tmp_path / "tmp"  # every temporary dir of the run: removed, even a dead worker's
    scratch.mkdir()
    env = dict(course.nbgrader_env(), PYTHONPATH=os.pathsep.join([str(inject), package_root]), TMPDIR=str(scratch))
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "--course", str(root), "autograde", "--workers",
                           "2", *LIMITS], env=env, capture_output=True, text=True, timeout=600)
    assert sorted(os.listdir(scratch)) == []
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    failed = {line.split()[1]: line for line in out.splitlines() if line.startswith("FAILED")}
    assert sorted(failed) == ["not-json", "surrogate", "worker-dies"], out
    assert "sdpa.ipynb  cell -  NotJSONError" in failed["not-json"]
    softmax_at = next(i for i, cell in enumerate(raw["cells"])
                      if cell["metadata"].get("nbgrader", {}).get("grade_id") == "softmax")
    assert f"cell {softmax_at + 1} (softmax)" in failed["surrogate"]  # counted from 1, as the report and feedback
    assert "UnicodeEncodeError" in failed["surrogate"]
    assert "grading process died (exit status 3)" in failed["worker-dies"]
    assert "graded 1, skipped 0 (already graded), failed 3" in out
    assert _graded(root) == ["correct-reference"]
    assert sum(s for s, _ in course.grades(root)["correct-reference"].values()) == AUTOMATIC
    # the progress lines name the failures as they happen, and a graded student's points as stock prints them
    assert "] worker-dies FAILED -  cell -  grading process died" in proc.stderr, proc.stderr
    graded = [line for line in proc.stderr.splitlines() if "] correct-reference " in line]
    assert len(graded) == 1 and graded[0].endswith(
        f"s {AUTOMATIC:g} / {AUTOMATIC:g} automatic points; no misconception named"), proc.stderr


@pytest.mark.slow
def test_report_files_charts_and_numbers(stock, tmp_path):
    assert cli.main(["--course", str(stock), "report", "sdpa", "--out", str(tmp_path / "reports")]) == 0
    out = tmp_path / "reports" / "sdpa"  # one folder per assignment under --out
    for name in ("report.html", "cells.csv", "students.csv") + reportlib.CHARTS:
        assert (out / name).stat().st_size > 0, name
    for chart in reportlib.CHARTS:
        assert (out / chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    grades = course.grades(stock)
    rows = list(csv.DictReader(open(out / "cells.csv", encoding="utf-8")))
    code_rows = [r for r in rows if r["cell_type"] == "code"]
    assert {(r["student"], r["grade_id"]): (float(r["auto_score"]), float(r["max_score"])) for r in code_rows} == {
        (s, g): v for s, cells in grades.items() for g, v in cells.items()}
    totals = {r["student"]: r for r in csv.DictReader(open(out / "students.csv", encoding="utf-8"))}
    for student, cells in grades.items():
        assert float(totals[student]["auto_score"]) == sum(s for s, _ in cells.values())
    assert "mask-inverted" in totals["bug-mask-inverted"]["codes"].split()
    assert {r["needs_review"] for r in totals.values()} == {"0"}  # none of these samples tampers
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<h2>需要人工审阅</h2>" in page and '<html lang="zh-CN">' in page  # the sdpa edition is Chinese
    for chart in ("score_histogram.png", "pass_rate.png", "misconceptions.png", "slowest.png"):
        assert f'src="{chart}"' in page
    # pass rate of a grade cell = students with full points / students
    cell = "apply_mask-check"
    full = sum(1 for cells in grades.values() if cells[cell][0] == cells[cell][1])
    assert f"<td>{cell}</td><td class=n>{100 * full / len(grades):.0f}%</td>" in page
    # the code table counts students whose feedback names the code
    report = json.loads((stock / "autograded" / "bug-mask-inverted" / "sdpa" / "sdpa.grading.json").read_text())
    named = {code for c in report["cells"] for check in c["checks"] for code in check["codes"]}
    assert "<td><code>mask-inverted</code></td><td class=n>1</td>" in page and "mask-inverted" in named


@pytest.mark.slow
def test_check_prints_the_feedback_of_one_notebook(stock, capsys):
    student = "bug-mask-inverted"
    path = stock / "submitted" / student / "sdpa" / "sdpa.ipynb"
    assert cli.main(["--course", str(stock), "check", str(path), *LIMITS]) == 0
    out = capsys.readouterr().out
    earned = sum(s for s, _ in course.grades(stock)[student].values())
    assert f"automatic score: {earned:g} / {AUTOMATIC:g}" in out
    assert "[mask-inverted]" in out and "apply_mask-check" in out


def _check_one_line(code, stderr, contains):
    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith("sdpa-course: error:") and contains in lines[0], lines[0]


def _one_line_error(args, *, contains):
    """As a user runs it: a fresh `sdpa-course` process."""
    proc = _cli(*args)
    _check_one_line(proc.returncode, proc.stderr, contains)


def test_bad_input_gives_one_line_errors(tmp_path, capsys):
    unreleased = course.make_course(tmp_path / "unreleased")
    broken = course.make_course(tmp_path / "broken-config")
    config = broken / "nbgrader_config.py"
    config.write_text(config.read_text() + "\nraise PermissionError('cannot create the exchange')\n")
    cases = [
        ((broken, "autograde", "sdpa"), "failed to run (PermissionError: cannot create the exchange)"),
        ((tmp_path / "nowhere", "autograde"), "does not exist"),
        ((tmp_path, "autograde"), "no nbgrader_config.py"),
        ((unreleased, "autograde", "sdpa"), "nbgrader generate_assignment sdpa"),
        ((unreleased, "autograde", "nosuch"), "no assignment 'nosuch'"),
        ((unreleased, "autograde", "--workers", "0"), "--workers must be at least 1"),
        ((unreleased, "autograde", "--frobnicate"), "unrecognized arguments: --frobnicate"),
        ((unreleased, "check", str(tmp_path / "missing.ipynb")), "not found"),
        ((unreleased, "report", "sdpa"), "no gradebook"),
    ]
    for (root, *args), contains in cases:
        capsys.readouterr()
        try:
            code = cli.main(["--course", str(root), *args])
        except SystemExit as exc:  # argparse
            code = exc.code
        _check_one_line(code, capsys.readouterr().err, contains)
    # and once as a separate process, as users run it
    _one_line_error((unreleased, "autograde", "sdpa"), contains="nbgrader generate_assignment sdpa")


def _main_error(args, capsys, contains):
    capsys.readouterr()
    try:
        code = cli.main([str(a) for a in args])
    except SystemExit as exc:  # argparse
        code = exc.code
    _check_one_line(code, capsys.readouterr().err, contains)


@pytest.mark.slow
def test_errors_on_a_released_course(released, built, tmp_path, capsys):
    _main_error(["--course", released, "autograde", "sdpa"], capsys, "no submissions under submitted/*/sdpa")
    _main_error(["--course", released, "report", "sdpa"], capsys, "no graded submissions")
    root = _course_copy(released, tmp_path / "course", built, ["correct-reference"])
    _main_error(["--course", root, "autograde", "--student", "nobody"], capsys, "no submission for 'nobody'")
    with run._Lock(str(root / "autograded" / run.LOCK)):
        _main_error(["--course", root, "autograde"], capsys, "another `sdpa-course autograde`")
    _main_error(["--course", root, "autograde", "--dask", "tcp://127.0.0.1:9"], capsys,
                "cannot reach the dask scheduler")


@pytest.mark.slow
def test_dask_local_cluster_gives_the_stock_grades(released, built, stock, tmp_path):
    distributed = pytest.importorskip("distributed")
    root = _course_copy(released, tmp_path / "course", built, STUDENTS[:2])
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as lc:
        proc = _cli(root, "autograde", "sdpa", "--dask", lc.scheduler_address, *LIMITS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "on the dask cluster" in proc.stderr and "graded 2" in proc.stdout
    grades = course.grades(root)
    assert grades == {s: course.grades(stock)[s] for s in STUDENTS[:2]}
    for student in STUDENTS[:2]:
        assert _notebook(root, student) == _notebook(stock, student)



@pytest.mark.slow
def test_pool_hands_each_session_its_own_fresh_sandboxed_runner():
    from autograder.sandbox import launcher, pool
    from autograder.sandbox.session import StudentSession

    # Every runner has pyplot imported before student code (``zygote.warm_up``), pooled or not.
    cells = ["import sys\npreloaded = 'matplotlib.pyplot' in sys.modules",
             "names = sorted(k for k in globals() if not k.startswith('_'))",
             "import os\nmine = os.getpid()"]
    runners = pool.RunnerPool()
    runners.warm()
    try:
        sessions = [StudentSession(cells, runner_source=runners) for _ in range(2)]
        for s in sessions:
            s.run_notebook()
    finally:
        runners.close()
    plain = StudentSession(cells)
    plain.run_notebook()
    try:
        assert runners.handed == 2
        hosts = {s.proc.pid for s in sessions + [plain]}
        assert len(hosts) == 3  # one process per session, never shared
        if launcher.probe().isolated:
            assert all(os.path.basename(s.proc.args[0]) == "bwrap" for s in sessions)
        assert [s.get("preloaded") for s in sessions + [plain]] == [True, True, True]
        # the preload bound no name: the student's namespace is what it is without a pool
        assert sessions[0].get("names") == sessions[1].get("names") == plain.get("names")
    finally:
        for s in sessions + [plain]:
            s.close()


def _entries(root):
    """{student: what `nbgrader export` and formgrader read of their submission (None: no submission)}."""
    from nbgrader.api import Gradebook, MissingEntry

    out = {}
    with Gradebook(f"sqlite:///{Path(root) / 'gradebook.db'}") as gb:
        for student in gb.students:
            try:
                sub = gb.find_submission(course.ASSIGNMENT, student.id)
            except MissingEntry:
                out[student.id] = None
                continue
            out[student.id] = {
                "timestamp": sub.timestamp, "score": sub.score, "max_score": sub.max_score,
                "notebooks": {nb.name: {
                    "late_submission_penalty": nb.late_submission_penalty,
                    "grades": {g.name: (g.auto_score, g.score, g.max_score, g.needs_manual_grade) for g in nb.grades},
                    "comments": {c.name: c.auto_comment for c in nb.comments}} for nb in sub.notebooks}}
    return out


def _stock_failed(proc):
    """Students the stock command names in its closing error lines."""
    import re

    return set(re.findall(r"There was an error processing assignment '[^']*' for student '([^']*)'", proc.stderr))


def _submit_files(root, student, files, timestamp):
    """`files`: {name: bytes}, or {name: {name: bytes}} for a folder."""
    folder = Path(root) / "submitted" / student / course.ASSIGNMENT
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name, data in files.items():
        if isinstance(data, dict):
            (folder / name).mkdir()
            for inner, inner_data in data.items():
                (folder / name / inner).write_bytes(inner_data)
        else:
            (folder / name).write_bytes(data)
    (folder / "timestamp.txt").write_text(timestamp)


def _with_output(notebook: bytes, size: int) -> bytes:
    """`notebook` with one cell's output printed out to `size` bytes in all."""
    import nbformat

    nb = nbformat.reads(notebook.decode("utf-8"), as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * max(0, size - len(notebook)))]
    return nbformat.writes(nb).encode("utf-8")


def _has_autograded(root, student):
    return (Path(root) / "autograded" / student / course.ASSIGNMENT).exists()


@pytest.mark.slow
def test_unreadable_notebooks_get_the_stock_gradebook_entries(released, built, tmp_path):
    """Both commands, same course: identical gradebook entries, also for notebooks nbgrader cannot read."""
    import nbformat

    good = nbformat.writes(built["correct-reference"]).encode("utf-8")
    english = catalogue.build(_sample("correct-reference"), nbformat.read(
        str(catalogue.ROOT / "assignments" / "sdpa_en" / "sdpa_en.ipynb"), as_version=4),
        catalogue.ROOT / "solutions" / "sdpa_en_solution.ipynb")
    # A lone surrogate printed by the student made nbgrader fail while writing the autograded notebook;
    # wire.receive now replaces it, so both commands grade this one like any correct notebook.
    printing = nbformat.reads(good.decode("utf-8"), as_version=4)
    printing.cells.append(nbformat.v4.new_code_cell("print('\\ud800')"))
    tagged = json.loads(good)  # tags of mixed types, which nbformat's validation compares pairwise (red team)
    tagged["cells"][2].setdefault("metadata", {})["tags"] = [t for n in range(150) for t in (f"t{n}", n)]
    unreadable = {
        "empty": {"sdpa.ipynb": b""},
        "truncated": {"sdpa.ipynb": good[: len(good) // 2]},
        "not-utf8": {"sdpa.ipynb": b'{"cells": ["\xff\xfe\x80"]}'},
        "json-list": {"sdpa.ipynb": b"[]"},
        "json-object": {"sdpa.ipynb": b"{}"},
        "other-name": {"answers.ipynb": good},  # nbgrader creates the submission, then finds no known notebook
        # over the size both commands accept (a notebook's outputs: MAX_SUBMISSION_BYTES)
        "too-large": {"sdpa.ipynb": _with_output(good, MAX_SUBMISSION_BYTES + 2**20)},
        "notebook-folder": {"sdpa.ipynb": {"sdpa.ipynb": good}},  # a folder where the notebook belongs
        # more JSON objects than a notebook may hold, in its metadata (a red-team pass: 16 MiB of them held a
        # grading at 9 GiB)
        "json-objects": {"sdpa.ipynb": good.replace(b'"metadata": {', b'"metadata": {"junk": [' +
                                                     b",".join([b"{}"] * 150_000) + b"], ", 1)},
        "mixed-tags": {"sdpa.ipynb": json.dumps(tagged).encode("utf-8")},
    }
    submissions = dict(unreadable, **{
        "correct-reference": {"sdpa.ipynb": good},
        "prints-surrogate": {"sdpa.ipynb": nbformat.writes(printing).encode("utf-8")},
        "no-notebook": {"notes.txt": b"no notebook here"},  # neither command sees a submission
        "other-edition": {"sdpa_en.ipynb": good},  # the English edition's notebook in the Chinese folder
        # ... and renamed: its metadata says which edition it is
        "renamed-edition": {"sdpa.ipynb": nbformat.writes(english).encode("utf-8")},
    })
    roots = {}
    for name in ("stock", "cli"):
        roots[name] = tmp_path / name
        shutil.copytree(released, roots[name])
        for student, files in submissions.items():
            _submit_files(roots[name], student, files, "2024-03-01 10:00:00.000000 UTC")
    stock, cli_root = roots["stock"], roots["cli"]

    def both(*args):
        """Both commands at once (two course copies): stock grades on one core, so they overlap."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(2) as pool:
            stock_run = pool.submit(course.nbgrader, stock, "autograde", course.ASSIGNMENT, *args, *LIMITS,
                                    check=False)
            ours = _cli(cli_root, "autograde", course.ASSIGNMENT, "--workers", "2", *args, *LIMITS)
            ref = stock_run.result()
        failed = {line.split()[1]: line for line in ours.stdout.splitlines() if line.startswith("FAILED")}
        assert ref.returncode == ours.returncode == 1, ref.stderr[-3000:] + ours.stdout + ours.stderr
        assert set(failed) == _stock_failed(ref), (ours.stdout, ref.stderr[-3000:])
        assert _entries(cli_root) == _entries(stock)
        for student in failed:  # nbgrader removes a failed submission's autograded/ folder: so does the CLI
            assert not _has_autograded(stock, student) and not _has_autograded(cli_root, student), student
        return failed, ours, ref

    failed, ours, stock_run = both()
    assert set(unreadable) <= set(failed) and "correct-reference" not in failed
    assert "FAILED empty  sdpa.ipynb  cell -  NotJSONError" in failed["empty"]
    assert "] empty FAILED sdpa.ipynb  cell -  NotJSONError" in ours.stderr
    assert "prints-surrogate" not in failed
    assert "holds sdpa_en.ipynb, the notebook of the sdpa_en edition" in failed["other-edition"]
    assert "move it to submitted/<student>/sdpa_en/" in failed["other-edition"]
    assert "sdpa.ipynb is the sdpa_en edition's notebook (its metadata says so)" in failed["renamed-edition"]
    assert "move it to submitted/<student>/sdpa_en/sdpa_en.ipynb" in failed["renamed-edition"]
    assert "sdpa.ipynb is the sdpa_en edition's notebook (its metadata says so)" in stock_run.stderr
    for student, rule in (("too-large", "MiB a submission may hold"), ("notebook-folder", "is a folder, not a"),
                          ("json-objects", "JSON objects and arrays, over the 100,000"),
                          ("mixed-tags", "cell 3 of submitted/mixed-tags/sdpa/sdpa.ipynb has tags that are not")):
        where = f"submitted/{student}/sdpa"
        assert where in failed[student] and rule in failed[student], failed[student]
        assert "/tmp/" not in failed[student].replace(str(cli_root), ""), failed[student]  # no worker's path
    assert "Clear its outputs" in failed["too-large"] and "Clear its outputs" in stock_run.stderr
    # stock refuses before nbconvert reads the notebook, in one line
    assert "Refused: submitted/json-objects/sdpa/sdpa.ipynb holds 150," in stock_run.stderr
    assert "Refused: submitted/notebook-folder/sdpa/sdpa.ipynb is a folder" in stock_run.stderr
    assert "Refused: cell 3 of submitted/mixed-tags/sdpa/sdpa.ipynb has tags" in stock_run.stderr
    assert f"graded 2, skipped 0 (already graded), failed {len(failed)} " in ours.stdout, ours.stdout
    entries = _entries(cli_root)
    assert "no-notebook" not in entries
    assert (entries["correct-reference"]["score"], entries["correct-reference"]["max_score"]) == (AUTOMATIC, TOTAL)
    assert entries["prints-surrogate"]["score"] == AUTOMATIC
    for student in unreadable:  # what an export shows: a submission worth 0 of TOTAL (no automatic score)
        assert (entries[student]["score"], entries[student]["max_score"]) == (0, TOTAL), student
        assert {g[0] for g in entries[student]["notebooks"]["sdpa"]["grades"].values()} == {None}, student

    # A second run retries the failed ones (they have no autograded/ folder), as stock does; nothing changes.
    again, ours, _ = both()
    assert again.keys() == failed.keys() and "skipped 2 (already graded)" in ours.stdout, ours.stdout

    # A graded student resubmits an empty notebook: both keep the old scores, record the new timestamp and
    # drop the autograded/ folder.
    for root in (stock, cli_root):
        _submit_files(root, "correct-reference", {"sdpa.ipynb": b""}, "2024-03-02 10:00:00.000000 UTC")
    resubmitted, _, _ = both("--student", "correct-reference")
    assert list(resubmitted) == ["correct-reference"]
    entry = _entries(cli_root)["correct-reference"]
    assert entry["score"] == AUTOMATIC and str(entry["timestamp"]).startswith("2024-03-02 10:00")


def test_check_of_a_held_notebook_prints_no_automatic_score():
    """As in the gradebook, a notebook whose every part is held has no automatic score: `check` says so instead
    of printing 0 (the class benchmark compares its line with stock's gradebook)."""
    from autograder.batch.check import _feedback_text

    report = {"cells": [{"grade_id": "softmax-check", "held": True, "held_points": 12.0},
                        {"grade_id": "scale_scores-check", "held": True, "held_points": 5.0}]}
    cells = [("softmax-check", "code", 12.0), ("scale_scores-check", "code", 5.0)]
    held = _feedback_text({"cells": []}, report, cells, {"softmax-check": None, "scale_scores-check": None}, 1.0)
    assert "automatic score: none yet, held for review (of 17)" in held and "automatic score: 0" not in held
    assert "!! held for review: softmax-check, scale_scores-check (17 points" in held
    partly = _feedback_text({"cells": []}, {"cells": [report["cells"][0]]}, cells,
                            {"softmax-check": None, "scale_scores-check": 0.0}, 1.0)
    assert "automatic score: 0 / 17" in partly  # a part that earned nothing is not held: it counts 0


@pytest.mark.slow
def test_a_full_disk_stops_the_run_at_the_first_failed_write(released, built, tmp_path, capsys, monkeypatch):
    """One line, exit 2, what was saved kept; the same command afterwards grades the rest."""
    import errno

    students = ["correct-reference", *STUDENTS[:2]]
    root = tmp_path / "course"
    shutil.copytree(released, root)
    for student in students:
        course.submit(root, student, built.get(student) or built["correct-reference"])
    real_save, saves = importer.Importer.save, []

    def save_then_full(self, result):
        saves.append(result["student"])
        if len(saves) > 1:  # the second write finds the disk full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "autograded")
        return real_save(self, result)

    monkeypatch.setattr(importer.Importer, "save", save_then_full)
    capsys.readouterr()
    code = cli.main(["--course", str(root), "autograde", "--workers", "1", *LIMITS])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("sdpa-course: error:")]
    assert code == 2 and len(lines) == 1, err
    assert "the disk is full" in lines[0] and "1 graded and saved, 2 not graded" in lines[0], lines[0]
    assert "free space" in lines[0] and "Traceback" not in err
    assert _graded(root) == [saves[0]]  # the first one's grades and folder are kept
    monkeypatch.setattr(importer.Importer, "save", real_save)
    assert cli.main(["--course", str(root), "autograde", "--workers", "1", *LIMITS]) == 0
    assert _graded(root) == sorted(students)
