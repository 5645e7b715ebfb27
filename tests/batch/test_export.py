"""Exports an instructor uploads: one row per student, in the edition they submitted.

A mixed class is graded by stock ``nbgrader autograde`` in both editions: ana takes the Chinese edition,
ben the English one with an inverted mask, cai submits the Chinese one and then the English one, and dee puts
the English notebook in the Chinese folder (renamed ``sdpa.ipynb``), which autograde refuses.  nbgrader's own
export would list them all under both editions, with false zeros; ``nbgrader export`` (the course's plugin) and
``sdpa-course export`` list each graded student once, name dee with what to do instead of exporting a 0, and
the Canvas and Moodle files parse back to the same scores as the gradebook.
"""
import csv
import subprocess
import sys

import pytest

from autograder.demo import course, submissions
from autograder.grading import honest
from catalogue import CORRECT
from tests.support import points

pytestmark = pytest.mark.slow

CLASS = {  # student -> [(edition, sample's answer cells, submission time)]
    "ana": [("sdpa", {}, "2026-12-01 09:00:00.000000 UTC")],
    "ben": [("sdpa_en", honest.replacement("mask-inverted"), "2026-12-01 10:00:00.000000 UTC")],
    "cai": [("sdpa", {}, "2026-12-01 09:30:00.000000 UTC"),
            ("sdpa_en", honest.replacement("mask-inverted"), "2026-12-02 08:00:00.000000 UTC")],
}
MISPLACED = "dee"  # submits the sdpa_en notebook as submitted/dee/sdpa/sdpa.ipynb
DEE_SAID = ("dee's sdpa submission is not graded, so it is not in this file: sdpa.ipynb is the sdpa_en edition's "
            "notebook (its metadata says so), submitted as sdpa: move it to submitted/dee/sdpa_en/sdpa_en.ipynb")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = course.make_course(tmp_path_factory.mktemp("export") / "course")
    reference = next(s for s in CORRECT if s.name == "correct-reference")
    for edition in ("sdpa", "sdpa_en"):
        course.nbgrader(root, "generate_assignment", edition, "--force")
    for student, taken in CLASS.items():
        for edition, replace, when in taken:
            sample = submissions.Sample(student, "bug", "partial", replace or reference.replace)
            path = course.submit(root, student, submissions.build(sample, course.release_notebook(root, edition)),
                                 edition)
            (path.parent / "timestamp.txt").write_text(when)
    course.submit(root, MISPLACED, submissions.build(submissions.Sample(MISPLACED, "bug", "partial", reference.replace),
                                                     course.release_notebook(root, "sdpa_en")), "sdpa")
    refused = course.nbgrader(root, "autograde", "sdpa", check=False)
    # one line says what to do, without nbgrader's traceback
    assert refused.returncode == 1 and "Refused: sdpa.ipynb is the sdpa_en edition's notebook" in refused.stderr
    assert "Traceback" not in refused.stderr, refused.stderr[-3000:]
    course.nbgrader(root, "autograde", "sdpa_en")
    return root


def _gradebook_scores(root):
    """{(student, edition): score} as the gradebook holds them."""
    from nbgrader.api import Gradebook, MissingEntry

    found = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for edition in ("sdpa", "sdpa_en"):
            for student in gb.students:
                try:
                    found[student.id, edition] = float(gb.find_submission(edition, student.id).score)
                except MissingEntry:
                    pass
    return found


def _read(path):
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.reader(f))


def test_nbgrader_export_lists_each_student_once_in_the_edition_taken(graded):
    said = course.nbgrader(graded, "export", "--to", "grades.csv").stderr
    rows = {r["student_id"]: r for r in csv.DictReader(open(graded / "grades.csv", encoding="utf-8"))}
    assert sorted(rows) == ["ana", "ben", "cai"]  # dee's refused submission is named, not exported as a 0
    assert DEE_SAID in said, said
    assert {s: r["edition"] for s, r in rows.items()} == {"ana": "sdpa", "ben": "sdpa_en", "cai": "sdpa_en"}
    scores = _gradebook_scores(graded)
    for student, row in rows.items():
        assert float(row["score"]) == scores[student, row["edition"]]
    assert float(rows["ana"]["score"]) == points.AUTOMATIC
    # a column per part: the inverted mask costs points in apply_mask, and nowhere else
    part_points = points.part_points()
    assert float(rows["ben"]["apply_mask"]) < part_points["apply_mask"]
    assert all(float(rows["ben"][part]) == most for part, most in part_points.items() if part != "apply_mask")


def test_canvas_and_moodle_files_parse_back_to_the_gradebook_scores(graded):
    scores = _gradebook_scores(graded)
    taken = {"ana": "sdpa", "ben": "sdpa_en", "cai": "sdpa_en"}
    for fmt in ("canvas", "moodle"):
        out = graded / f"{fmt}.csv"
        proc = subprocess.run([sys.executable, "-m", "autograder.cli", "--course", str(graded), "export",
                               "--format", fmt, "--out", str(out)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert "cai submitted sdpa and sdpa_en" in proc.stdout and "3 students" in proc.stdout, proc.stdout
        assert DEE_SAID in proc.stdout, proc.stdout
        header, *body = _read(out)
        if fmt == "canvas":
            assert header[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
            assert body[0][0] == "Points Possible" and float(body[0][5]) == points.TOTAL
            got = {row[3]: float(row[5]) for row in body[1:]}
        else:
            assert header[0] == "Username" and "Email address" in header
            got = {row[0]: float(row[-1]) for row in body}
        assert got == {student: scores[student, edition] for student, edition in taken.items()}, fmt


def test_an_export_of_one_edition_lists_its_students_only(graded):
    """`sdpa-course export sdpa_en`, as the README's "use sdpa_en in place of sdpa in every command" invites."""
    out = graded / "english.csv"
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "--course", str(graded), "export", "sdpa_en",
                           "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert {row["student_id"]: row["edition"] for row in csv.DictReader(open(out, encoding="utf-8"))} == {
        "ben": "sdpa_en", "cai": "sdpa_en"}
    assert "dee" not in proc.stdout  # dee's refused submission is of sdpa
    wrong = subprocess.run([sys.executable, "-m", "autograder.cli", "--course", str(graded), "export", "sdpa_fr"],
                           capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and "not an edition of this course: sdpa_fr" in wrong.stderr, wrong.stderr


def test_an_unknown_format_is_refused_with_the_choices(graded):
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "--course", str(graded), "export", "--format",
                           "blackboard"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "canvas" in proc.stderr


def test_an_export_says_which_answers_wait_for_a_person_until_they_are_graded(graded):
    """Before the written answers are graded in formgrader, both exports count them as 0: they say so, naming
    the students and the answers; once a person has graded them, nothing is said. (Runs last: it grades.)"""
    from nbgrader.api import Gradebook

    def export():
        proc = subprocess.run([sys.executable, "-m", "autograder.cli", "--course", str(graded), "export"],
                              capture_output=True, text=True, timeout=120)
        stock = course.nbgrader(graded, "export", "--to", "stock.csv")
        assert proc.returncode == 0, proc.stderr
        return proc.stdout, stock.stderr

    cli, stock = export()
    for said in (cli, stock):
        assert "3 students with answers not yet graded by hand, counted as 0 in this file" in said, said
        assert "ben (" in said and "written-a1" in said and "formgrader" in said
    with Gradebook(f"sqlite:///{graded / 'gradebook.db'}") as gb:
        for student, taken in CLASS.items():
            for edition in {e for e, _, _ in taken}:
                for grade in gb.find_submission_notebook(edition, edition, student).grades:
                    if grade.needs_manual_grade:  # what formgrader's Manual Grading does with a score
                        grade.manual_score, grade.needs_manual_grade = grade.max_score, False
        gb.db.commit()
    cli, stock = export()
    assert "not yet graded by hand" not in cli + stock
