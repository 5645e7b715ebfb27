"""The check service's grader: the final grading's engine on a notebook, the answer a student reads."""
import json

import nbformat
import pytest

import catalogue
from autograder.demo import course, submissions
from autograder.service.checker import Checker, CheckRefused
from tests.support.grading import FAST_LIMITS


@pytest.fixture(scope="module")
def checker(released):
    checker = Checker(released, ["sdpa", "sdpa_en"], FAST_LIMITS, say=lambda line: None)
    yield checker
    checker.close()


def _notebook(released, name, assignment="sdpa"):
    (sample,) = [s for s in catalogue.CATALOGUE if s.name == name]
    return nbformat.writes(submissions.build(sample, course.release_notebook(released, assignment))).encode()


@pytest.mark.slow
def test_an_inverted_mask_is_named_then_the_fix_passes(checker, released):
    buggy = checker.grade("alice", "sdpa_en", _notebook(released, "bug-mask-inverted", "sdpa_en"))
    assert not buggy["passes"] and buggy["codes"] == ["mask-inverted"] and buggy["language"] == "en"
    parts = {p["part"]: p for p in buggy["parts"]}
    assert not parts["apply_mask"]["passes"] and parts["softmax"]["passes"]
    fixed = checker.grade("alice", "sdpa_en", _notebook(released, "correct-reference", "sdpa_en"))
    assert fixed["passes"] and fixed["codes"] == []


@pytest.mark.slow
def test_a_check_never_uses_the_final_grading_seeds(checker, released, monkeypatch):
    from autograder.grading import hidden_checks

    seen = []
    original = hidden_checks.seed_for
    monkeypatch.setattr(hidden_checks, "seed_for", lambda *key: seen.append(key) or original(*key))
    checker.grade("bob", "sdpa", _notebook(released, "correct-reference"))
    # grading runs in this process's grader (the sandbox runs only the student's code); the first grading of a
    # course may also time the reference solution, under its own key
    students = {key[1] for key in seen}
    assert "bob+check" in students and "bob" not in students, students


@pytest.mark.parametrize("notebook, words", [(b"{not json", {"sdpa_en": "not valid JSON", "sdpa": "不是有效的 JSON"}),
                                             (b" " * (64 * 2**20 + 1), {"sdpa_en": "over the 64 MiB",
                                                                        "sdpa": "超过了提交允许的 64 MiB"})])
def test_a_notebook_it_cannot_grade_is_refused_with_what_to_do_in_its_language(checker, notebook, words):
    for assignment, said in words.items():
        with pytest.raises(CheckRefused, match=said):
            checker.grade("carol", assignment, notebook)
    with pytest.raises(CheckRefused, match="sdpa, sdpa_en"):
        checker.grade("carol", "other", json.dumps({}).encode())


def test_a_notebook_with_far_more_cells_than_the_release_is_refused(checker, released):
    """Found by a red-team pass: 300,000 extra markdown cells held the only grader for minutes."""
    nb = json.loads(_notebook(released, "correct-reference", "sdpa_en"))
    nb["cells"] += [{"cell_type": "markdown", "metadata": {}, "source": "x"}] * (2 * len(nb["cells"]) + 101)
    with pytest.raises(CheckRefused, match="delete the extra cells"):
        checker.grade("dave", "sdpa_en", json.dumps(nb).encode())
