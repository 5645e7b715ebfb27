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
def test_the_same_code_scores_the_same_in_both_editions(tmp_path):
    samples = [s for s in catalogue.CATALOGUE if s.name in SAMPLES]
    assert len(samples) == len(SAMPLES)
    stock = course.make_course(tmp_path / "stock")
    parallel = course.make_course(tmp_path / "parallel")
    for root in (stock, parallel):
        for assignment in (COURSE, ENGLISH):
            course.nbgrader(root, "generate_assignment", assignment, "--force")
            release = course.release_notebook(root, assignment)
            for sample in samples:
                course.submit(root, sample.name, submissions.build(sample, release), assignment)
    for assignment in (COURSE, ENGLISH):
        course.nbgrader(stock, "autograde", assignment, *FAST_LIMITS, check=False)
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "--course", str(parallel), "autograde", ENGLISH,
                           "--workers", "2", *FAST_LIMITS], capture_output=True, text=True, timeout=1200,
                          env=course.nbgrader_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr

    chinese, english = course.grades(stock, COURSE), course.grades(stock, ENGLISH)
    assert set(chinese) == set(SAMPLES)
    assert english == chinese
    assert course.grades(parallel, ENGLISH) == chinese
    # the scores are not all equal for a trivial reason: the samples score differently from each other
    assert len({sum(score or 0 for score, _ in cells.values()) for cells in chinese.values()}) >= 4
    for student in SAMPLES:
        assert _results(stock, ENGLISH, student) == _results(stock, COURSE, student), student
        assert _results(parallel, ENGLISH, student) == _results(stock, COURSE, student), student
    bug = _results(stock, COURSE, "bug-mask-inverted")
    assert "mask-inverted" in record.codes_named(bug)
    assert any(check["example"] for cell in bug["cells"] for check in cell["checks"]), "no example was compared"
    _assert_feedback_language(stock, "bug-mask-inverted")


def _assert_feedback_language(root, student):
    """The feedback's own words (the score lines, the root-cause summary) are in the edition's language."""
    languages = ((COURSE, "项隐藏检查", "先修这里"), (ENGLISH, "hidden checks", "Fix these first"))
    for assignment, words, summary in languages:
        nb = nbformat.read(Path(root) / "autograded" / student / assignment / f"{assignment}.ipynb", as_version=4)
        texts = [o.get("data", {}).get("text/plain", "") for c in nb.cells for o in c.get("outputs", [])]
        assert any(words in t for t in texts), (assignment, texts[:3])
        assert nb.metadata[SUMMARY_KEY]["text"].startswith(summary), nb.metadata[SUMMARY_KEY]["text"]
