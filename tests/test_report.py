"""The class report from a hand-built gradebook and grading.json records, without the sandbox.

The slow tests report on a real autograde run; these build the sqlite
gradebook with nbgrader's API, so the report's arithmetic (totals, codes,
review counts, pass rates) is checked against inputs we chose, in seconds.
"""
import csv
import shutil
import subprocess
import warnings

import pytest

from autograder import i18n
from autograder import report as reportlib
from autograder.batch.coursedir import CourseError
from autograder.demo import course
from autograder.grading import record
from autograder.grading.misconceptions import CATALOGUE
from tests.support.language import CJK

COURSE_ID = "unit-course"
ASSIGNMENT, NOTEBOOK = "hw1", "attention"
SCRIPT = "<script>alert(1)</script>"
# (grade_id, cell_type, max_score) in notebook order
GRADE_CELLS = [("test-softmax", "code", 3.0), ("test-scale", "code", 2.0), ("essay", "markdown", 1.0)]
# student -> grade_id -> (auto_score, manual_score); a markdown cell without a manual score still needs grading
SCORES = {
    "alice": {"test-softmax": (3.0, None), "test-scale": (2.0, None), "essay": (None, 1.0)},
    "bob": {"test-softmax": (1.5, None), "test-scale": (0.0, None), "essay": (None, None)},
    "dave": {"test-softmax": (3.0, None), "test-scale": (1.0, None), "essay": (None, 0.5)},
}
NOT_SUBMITTED = "carol"


def _checks(*specs):
    return [{"name": f"c{i}", "passed": passed, "points": 1.0 if passed else 0.0, "max_points": 1.0,
             "codes": codes, "message": "" if passed else "wrong"} for i, (passed, codes) in enumerate(specs)]


# What TrustedScoring writes; dave has none (e.g. graded before grading.json existed).
RECORDS = {
    "alice": {"sandbox": {"isolated": True}, "events": [], "review": [], "seconds": 2.5, "cells": [
        {"grade_id": "test-softmax", "part": "softmax", "checks": _checks((True, []), (True, []))},
        {"grade_id": "test-scale", "part": "scale", "checks": _checks((True, []))}]},
    "bob": {"sandbox": {"isolated": True}, "seconds": 7.25,
            "events": [{"kind": "CellTimeoutError", "cell": 4, "detail": "ran past 8 s"}],
            "review": [{"cell": 4, "line": 2, "category": "gc", "detail": SCRIPT},
                       {"cell": 6, "line": 1, "category": "ctypes", "detail": "import ctypes"}],
            "cells": [
                {"grade_id": "test-softmax", "part": "softmax", "checks": _checks(
                    (False, ["softmax-unstable"]), (False, ["softmax-unstable", "dtype-changed"]), (True, []))},
                {"grade_id": "test-scale", "part": "scale", "checks": _checks((False, ["scale-missing"]))}]},
}


def _score(auto, manual):
    return manual if manual is not None else (auto or 0.0)


def _cell_codes(student, gid):
    cells = [c for c in RECORDS.get(student, {}).get("cells", []) if c["grade_id"] == gid]
    return list(dict.fromkeys(code for c in cells for check in c["checks"] for code in check["codes"]))


def _student_codes(student):
    return list(dict.fromkeys(code for gid, _, _ in GRADE_CELLS for code in _cell_codes(student, gid)))


def _write_config(root):
    (root / "nbgrader_config.py").write_text(
        f"c = get_config()  # noqa: F821\nc.CourseDirectory.root = {str(root)!r}\n"
        f"c.CourseDirectory.course_id = {COURSE_ID!r}\n", encoding="utf-8")


def _make_gradebook(root):
    from nbgrader.api import Gradebook

    with pytest.MonkeyPatch.context() as mp:
        # a new gradebook asks the `alembic` command for its schema version, as `nbgrader` does
        mp.setenv("PATH", course.nbgrader_env()["PATH"])
        gradebook = Gradebook(f"sqlite:///{root / 'gradebook.db'}", COURSE_ID)
    with warnings.catch_warnings():  # nbgrader's own add_submission trips SQLAlchemy's autoflush warnings
        warnings.simplefilter("ignore")
        _fill_gradebook(gradebook)


def _fill_gradebook(gradebook):
    with gradebook as gb:
        gb.add_assignment(ASSIGNMENT)
        gb.add_notebook(NOTEBOOK, ASSIGNMENT)
        for gid, cell_type, max_score in GRADE_CELLS:
            gb.add_grade_cell(gid, NOTEBOOK, ASSIGNMENT, max_score=max_score, cell_type=cell_type)
        for student in sorted([*SCORES, NOT_SUBMITTED]):
            gb.add_student(student)
        for student, scores in SCORES.items():
            gb.add_submission(ASSIGNMENT, student)
            for gid, (auto, manual) in scores.items():
                grade = gb.find_grade(gid, NOTEBOOK, ASSIGNMENT, student)
                grade.auto_score, grade.manual_score = auto, manual
                grade.needs_manual_grade = auto is None and manual is None
            gb.db.commit()


def _write_records(root):
    for student, rec in RECORDS.items():
        path = root / "autograded" / student / ASSIGNMENT / record.filename(NOTEBOOK)
        path.parent.mkdir(parents=True)
        path.write_bytes(record.dumps(dict(rec, student=student, assignment=ASSIGNMENT, notebook=NOTEBOOK)))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    _write_config(root)
    _make_gradebook(root)
    _write_records(root)
    return dict(reportlib.build(str(root), ASSIGNMENT), root=root)


def _rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_students_csv_totals_codes_and_review(built):
    rows = {r["student"]: r for r in _rows(built["students_csv"])}
    assert sorted(rows) == sorted(SCORES)  # carol has no submission
    max_score = sum(m for _, _, m in GRADE_CELLS)
    max_auto = sum(m for _, kind, m in GRADE_CELLS if kind == "code")
    kinds = {gid: kind for gid, kind, _ in GRADE_CELLS}
    for student, scores in SCORES.items():
        row, rec = rows[student], RECORDS.get(student, {})
        assert float(row["score"]) == pytest.approx(sum(_score(*s) for s in scores.values())), student
        assert float(row["max_score"]) == max_score
        assert float(row["auto_score"]) == pytest.approx(
            sum(_score(*s) for gid, s in scores.items() if kinds[gid] == "code")), student
        assert float(row["max_auto_score"]) == max_auto
        pending = any(auto is None and manual is None for auto, manual in scores.values())
        assert row["needs_manual_grade"] == str(pending), student
        assert row["needs_review"] == str(len(rec.get("review", []))), student
        assert row["sandbox_events"] == str(len(rec.get("events", []))), student
        assert row["seconds"] == ("" if "seconds" not in rec else str(rec["seconds"])), student
        assert row["codes"].split() == _student_codes(student), student


def test_cells_csv_one_row_per_student_and_grade_cell(built):
    rows = _rows(built["cells_csv"])
    assert sorted((r["student"], r["grade_id"]) for r in rows) == sorted(
        (s, gid) for s in SCORES for gid, _, _ in GRADE_CELLS)
    kinds = {gid: (kind, max_score) for gid, kind, max_score in GRADE_CELLS}
    for row in rows:
        student, gid = row["student"], row["grade_id"]
        auto, manual = SCORES[student][gid]
        info = next((c for c in RECORDS.get(student, {}).get("cells", []) if c["grade_id"] == gid), {})
        checks = info.get("checks", [])
        where = (student, gid)
        assert row["notebook"] == NOTEBOOK
        assert (row["cell_type"], float(row["max_score"])) == kinds[gid], where
        assert float(row["score"]) == _score(auto, manual), where
        assert row["auto_score"] == ("" if auto is None else str(auto)), where
        assert row["manual_score"] == ("" if manual is None else str(manual)), where
        assert row["needs_manual_grade"] == str(auto is None and manual is None), where
        assert row["part"] == info.get("part", ""), where
        assert row["checks_total"] == (str(len(checks)) if checks else ""), where
        assert row["checks_passed"] == (str(sum(c["passed"] for c in checks)) if checks else ""), where
        assert row["codes"].split() == _cell_codes(student, gid), where


def test_cells_follow_notebook_order(built):
    for student in SCORES:
        order = [r["grade_id"] for r in _rows(built["cells_csv"]) if r["student"] == student]
        assert order == [gid for gid, _, _ in GRADE_CELLS], student


def test_data_pass_rates_and_code_counts(built):
    data = built["data"]
    code_cells = [(gid, m) for gid, kind, m in GRADE_CELLS if kind == "code"]
    assert data.pass_rates == pytest.approx({
        gid: sum(_score(*SCORES[s][gid]) == m for s in SCORES) / len(SCORES) for gid, m in code_cells})
    expected = {}
    for student in SCORES:
        for code in _student_codes(student):
            expected[code] = expected.get(code, 0) + 1
    assert data.code_counts == expected
    assert [r.student for r in data.slowest] == sorted(RECORDS, key=lambda s: -RECORDS[s]["seconds"])
    assert data.parts == {c["grade_id"]: c["part"] for rec in RECORDS.values() for c in rec["cells"]}
    bob = next(r for r in data.students if r.student == "bob")
    assert [note["detail"] for note in bob.review] == [n["detail"] for n in RECORDS["bob"]["review"]]
    assert all(note["notebook"] == NOTEBOOK for note in bob.review)


def test_html_and_charts_are_written(built):
    page = open(built["html"], encoding="utf-8").read()
    for student in SCORES:
        assert student in page
    assert NOT_SUBMITTED not in page
    assert "<script" not in page.lower()  # review notes quote student code
    assert "&lt;script&gt;" in page
    for code in _student_codes("bob"):
        assert code in page
    assert [p.rsplit("/", 1)[-1] for p in built["charts"]] == list(reportlib.CHARTS)
    for chart in built["charts"]:
        with open(chart, "rb") as f:
            head = f.read(8)
        assert head == b"\x89PNG\r\n\x1a\n", chart
        assert f"src=\"{chart.rsplit('/', 1)[-1]}\"" in page


def test_missing_gradebook_is_a_clear_error(tmp_path):
    _write_config(tmp_path)
    with pytest.raises(CourseError, match="generate_assignment"):
        reportlib.collect(str(tmp_path), ASSIGNMENT)


def test_unknown_assignment_is_a_clear_error(built):
    with pytest.raises(CourseError, match="'hw2' is not in"):
        reportlib.collect(str(built["root"]), "hw2")


@pytest.fixture(scope="module")
def english(built, tmp_path_factory):
    return reportlib.build(str(built["root"]), ASSIGNMENT, out=tmp_path_factory.mktemp("en"), language="en")


def test_the_page_is_in_the_editions_language_unless_asked_for_another(built, english):
    chinese = open(built["html"], encoding="utf-8").read()
    assert '<html lang="zh-CN">' in chinese and "hw1：全班报告" in chinese  # hw1 is no edition: the course's
    assert CATALOGUE["scale-missing"].explanation in chinese
    page = open(english["html"], encoding="utf-8").read()
    assert '<html lang="en">' in page and "hw1: class report" in page
    assert i18n.catalog("en")[CATALOGUE["scale-missing"].explanation] in page
    assert not CJK.search(page), CJK.findall(page)[:20]
    # written answers wait for a person: "full points" counts the students with every automatic point
    full = sum(1 for r in english["data"].students if r.auto_score >= r.max_auto_score > 0)
    assert full > 0 and f"<li>full points in every automatic check: <b>{full}</b></li>" in page
    assert open(english["students_csv"], encoding="utf-8").read() == open(built["students_csv"],
                                                                          encoding="utf-8").read()


@pytest.mark.skipif(not subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True).stdout.strip()
                    if shutil.which("fc-list") else True, reason="no CJK font installed (fonts-noto-cjk)")
def test_a_chinese_chart_finds_a_face_for_every_glyph():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with warnings.catch_warnings(record=True) as caught, reportlib.chart_fonts():
        warnings.simplefilter("always")
        fig = Figure()
        FigureCanvasAgg(fig)
        fig.add_subplot(111).set_title("各评分单元格的满分率 (%)")
        fig.canvas.draw()
    assert not [w for w in caught if "missing from" in str(w.message)], [str(w.message) for w in caught]
