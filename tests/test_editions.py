"""The editions grade alike: the same code scores the same in `sdpa` and `sdpa_en`, with stock
`nbgrader autograde` and with `sdpa-course autograde`, with the same hidden-check results.

The grading seeds come from the course, not the edition (`editions.seed_assignment`), so the hidden
checks draw the same random tensors for a student in both editions: a failed check's message and its
example (the student's values against the expected ones) say the same, each in its edition's language.
With a seed that depended on the assignment's name, the scores of these samples would still agree (their
bugs fail on any input), but those messages and examples would not.
"""
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import catalogue
from autograder.demo import course, submissions
from autograder.grading import record
from autograder.nbgrader.trusted_scoring import SUMMARY_KEY
from autograder.notebook.editions import COURSE, edition_of, seed_assignment
from solutions import solution_notebook
from tests.support.feedback_page import story_problems
from tests.support.grading import FAST_LIMITS

ENGLISH = "sdpa_en"
# a correct answer, bugs of several parts (random inputs decide some of their points), a submission whose
# tests were deleted (restored from the edition's release) and an empty one
SAMPLES = ["correct-reference", "bug-mask-inverted", "bug-scale-by-dk", "bug-softmax-wrong-dim",
           "bug-causal-off-by-one", "bug-hand-unscaled", "attack-delete-tests", "empty-release"]


def test_every_edition_seeds_from_the_course():
    assert seed_assignment(COURSE) == seed_assignment(ENGLISH) == COURSE
    assert seed_assignment("another-assignment") == "another-assignment"


def test_a_notebook_named_after_an_edition_is_graded_as_that_edition():
    """`sdpa-course check` without --assignment grades submitted/ID/sdpa_en/sdpa_en.ipynb as sdpa_en."""
    assert edition_of("submitted/ana/sdpa_en/sdpa_en.ipynb") == ENGLISH
    assert edition_of("sdpa.ipynb") == COURSE
    assert edition_of("solutions/sdpa_en_solution.ipynb") is None


def _results(root, assignment, student):
    """What grading decided for one student, in no language: each part's checks (points, codes, where a
    mistake was charged, how many facts the example shows), the root causes and the code review's
    findings; not the run's timing, the names of the assignment, or the words of the messages."""
    path = Path(root) / "autograded" / student / assignment / record.filename(assignment)
    report = record.load(path)
    cells = [{**{k: v for k, v in cell.items() if k != "checks"},
              "checks": [{k: v for k, v in check.items() if k not in ("message", "example")}
                         | {"example": len(check["example"])} for check in cell["checks"]]}
             for cell in report["cells"]]
    return {"cells": cells, "root_causes": report["root_causes"], "review": len(report["review"])}


@pytest.mark.slow
def test_the_same_code_scores_the_same_in_both_editions(graded_course, tmp_path):
    """The Chinese edition's results are the catalogue's, graded by stock nbgrader (``graded_course``); the
    English edition is graded here by stock nbgrader and by `sdpa-course autograde`."""
    samples = [s for s in catalogue.CATALOGUE if s.name in SAMPLES]
    assert len(samples) == len(SAMPLES)
    stock = course.make_course(tmp_path / "stock")
    parallel = course.make_course(tmp_path / "parallel")
    for root in (stock, parallel):
        course.nbgrader(root, "generate_assignment", ENGLISH, "--force")
        release = course.release_notebook(root, ENGLISH)
        for sample in samples:
            course.submit(root, sample.name, submissions.build(sample, release, solution_notebook(ENGLISH)), ENGLISH)
    course.nbgrader(stock, "autograde", ENGLISH, *FAST_LIMITS, check=False)
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "--course", str(parallel), "autograde", ENGLISH,
                           "--workers", "2", *FAST_LIMITS], capture_output=True, text=True, timeout=1200,
                          env=course.nbgrader_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr

    chinese = {student: graded_course["grades"][student] for student in SAMPLES}
    english = course.grades(stock, ENGLISH)
    assert set(english) == set(SAMPLES)
    assert english == chinese
    assert course.grades(parallel, ENGLISH) == chinese
    # the scores are not all equal for a trivial reason: the samples score differently from each other
    assert len({sum(score or 0 for score, _ in cells.values()) for cells in chinese.values()}) >= 4
    for student in SAMPLES:
        in_chinese = _results(graded_course["root_of"](student), COURSE, student)
        assert _results(stock, ENGLISH, student) == in_chinese, student
        assert _results(parallel, ENGLISH, student) == in_chinese, student
    course.nbgrader(stock, "generate_feedback", ENGLISH, check=False)
    pages = {student: course.feedback_html(stock, student, ENGLISH).read_text() for student in SAMPLES}
    assert {student: story_problems(page) for student, page in pages.items() if story_problems(page)} == {}
    assert "(awaiting your instructor's grade, out of 2.5)" in pages["correct-reference"]
    bug = _results(stock, ENGLISH, "bug-mask-inverted")
    assert "mask-inverted" in record.codes_named(bug)
    assert any(check["example"] for cell in bug["cells"] for check in cell["checks"]), "no example was compared"
    _assert_feedback_language({COURSE: graded_course["root_of"]("bug-mask-inverted"), ENGLISH: stock},
                              "bug-mask-inverted")


def _assert_feedback_language(root_of, student):
    """The feedback's own words (the score lines, the root-cause summary) are in the edition's language
    (`root_of`: the course that graded each edition)."""
    languages = ((COURSE, "项隐藏检查", "先修这里"), (ENGLISH, "hidden checks", "Fix these first"))
    for assignment, words, summary in languages:
        path = Path(root_of[assignment]) / "autograded" / student / assignment / f"{assignment}.ipynb"
        nb = nbformat.read(path, as_version=4)
        texts = [o.get("data", {}).get("text/plain", "") for c in nb.cells for o in c.get("outputs", [])]
        assert any(words in t for t in texts), (assignment, texts[:3])
        assert nb.metadata[SUMMARY_KEY]["text"].startswith(summary), nb.metadata[SUMMARY_KEY]["text"]
