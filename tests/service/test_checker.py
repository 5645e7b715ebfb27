"""The check service's grader: the final grading's engine on a notebook, the answer a student reads."""
import json

import nbformat
import pytest

import catalogue
from autograder import i18n
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
    """The hidden checks seed each input from (edition, student, check) (`hidden_checks.seed_for`, with the
    student as grading names them: `TrustedScoring`); a check's record names the student `<name>+check`."""
    from autograder.service import checker as checker_module

    graded = []
    monkeypatch.setattr(checker_module, "answer", lambda record, show: graded.append(record) or {"passes": True})
    checker.grade("bob", "sdpa", _notebook(released, "correct-reference"))
    assert [record["student"] for record in graded] == ["bob+check"]


@pytest.mark.parametrize("notebook, words", [(b"{not json", {"sdpa_en": "not valid JSON", "sdpa": "不是有效的 JSON"}),
                                             # nbformat 3 keeps cells under "worksheets": every cap below
                                             # read a top-level "cells" list, and passed it on (red team)
                                             (json.dumps({"nbformat": 3, "worksheets": [{"cells": []}]}).encode(),
                                              {"sdpa_en": "nbformat 4", "sdpa": "nbformat 4"}),
                                             (json.dumps({"nbformat": 5, "cells": []}).encode(),
                                              {"sdpa_en": "nbformat 4", "sdpa": "nbformat 4"}),
                                             # tags nbformat's validation compares pairwise (red team: 10 min)
                                             (json.dumps({"nbformat": 4, "cells": [{"cell_type": "code", "metadata": {
                                                 "tags": ["a", 0] * 20_000}, "source": ""}]}).encode(),
                                              {"sdpa_en": "Cell 1's tags", "sdpa": "第 1 个单元格的标签"}),
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


def test_only_what_grading_reads_reaches_the_grader(released):
    """Found by a red-team pass: five million empty objects in a notebook's metadata held the service at 11 GiB
    (every nbconvert step copies the notebook).  Outputs, attachments and unknown metadata are dropped before
    grading; what grading reads stays: sources, ids, nbgrader metadata and tags, the kernel and the edition."""
    nb = json.loads(_notebook(released, "correct-reference", "sdpa_en"))
    nb["metadata"]["junk"] = [{}] * 50
    for cell in nb["cells"]:
        cell["metadata"]["junk"] = {"a": [1, 2, 3]}
        if cell["cell_type"] == "markdown":
            cell["attachments"] = {"x.png": {"image/png": "AAAA"}}
        else:
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "x" * 1000}]
    slim = json.loads(Checker._readable(json.dumps(nb).encode(), len(nb["cells"])))
    assert set(slim["metadata"]) == {"kernelspec", "language_info", "sdpa_course"}
    assert slim["metadata"]["sdpa_course"] == nb["metadata"]["sdpa_course"]
    for before, after in zip(nb["cells"], slim["cells"]):
        assert after["source"] == before["source"] and after["id"] == before["id"]
        assert after["metadata"] == {k: before["metadata"][k] for k in ("nbgrader", "tags") if k in before["metadata"]}
        assert "attachments" not in after and after.get("outputs", []) == []


@pytest.mark.parametrize("source", ["x = 1\n" * 20_000, ["y = 2\n"] * 20_000])
def test_a_cell_longer_than_any_answer_is_refused(released, source):
    """Found by a red-team pass: 1.3 MB of source in one cell held the grader's static scan for 26 s."""
    nb = json.loads(_notebook(released, "correct-reference", "sdpa_en"))
    nb["cells"][3]["source"] = source
    with pytest.raises(CheckRefused, match="Cell 4 has 120000 characters, over the 100000"):
        with i18n.using("en"):
            Checker._readable(json.dumps(nb).encode(), len(nb["cells"]))


def test_more_code_in_all_than_any_answer_needs_is_refused(released):
    """Found by a red-team pass: 19 added cells of 99,000 characters each (every one under the cap on one cell)
    held the service's one grader for 286 s of trusted static scan."""
    from autograder.service.policy import MAX_CODE_CHARS

    nb = json.loads(_notebook(released, "correct-reference", "sdpa_en"))
    Checker._readable(json.dumps(nb).encode(), len(nb["cells"]))  # the honest notebook: well within
    line = "print(dir(torch)); v = dir(torch)\n"
    for n in range(MAX_CODE_CHARS // 99_000 + 1):
        nb["cells"].append({"cell_type": "code", "id": f"extra{n}", "metadata": {}, "outputs": [],
                            "execution_count": None, "source": line * (99_000 // len(line))})
    with pytest.raises(CheckRefused, match=f"more than {MAX_CODE_CHARS} characters"):
        with i18n.using("en"):
            Checker._readable(json.dumps(nb).encode(), len(nb["cells"]))


def test_more_lines_ipython_rewrites_than_any_answer_needs_are_refused(released):
    """Found by a red-team pass: IPython tokenizes a whole cell again after each line it rewrites (`x = !ls`,
    `%magic`), twice on the trusted side: 100 such lines in a 100,000-character cell took 39 s."""
    from autograder.service.policy import MAX_IPYTHON_LINES

    nb = json.loads(_notebook(released, "correct-reference", "sdpa_en"))
    honest = ["%timeit softmax(x)\n", "!pip list\n", "value = %time 1 + 1\n", "softmax?\n"]
    nb["cells"].append({"cell_type": "code", "id": "magics", "metadata": {}, "outputs": [],
                        "execution_count": None, "source": honest})
    Checker._readable(json.dumps(nb).encode(), len(nb["cells"]))  # a few, as a student uses them
    nb["cells"][-1]["source"] = "if False:\n" + "".join(f"    a{n} = !ls\n" for n in range(MAX_IPYTHON_LINES + 1))
    with pytest.raises(CheckRefused, match=f"more than {MAX_IPYTHON_LINES} lines"):
        with i18n.using("en"):
            Checker._readable(json.dumps(nb).encode(), len(nb["cells"]))


def test_an_answer_shows_only_once_the_student_may_check_again():
    """The answer a student reads is published after its cost is counted and the queue let them go: a press
    made the moment it shows is never told the last check is still being graded (CI saw a 409 there)."""
    import threading

    from autograder.service.policy import FairQueue

    checker = object.__new__(Checker)  # only the worker's bookkeeping: no graders
    checker.queue, checker._done = FairQueue(4), threading.Condition()
    seen = []

    class Results(dict):
        def __setitem__(self, key, reply):
            if reply.get("state") != "grading":
                seen.append((reply["state"], checker.queue.in_progress(key[0])))
            super().__setitem__(key, reply)

    checker.results = Results()
    counted = []
    checker.grade = lambda student, assignment, notebook, show: {"passes": True}
    for grade in (checker.grade, lambda *args: (_ for _ in ()).throw(CheckRefused("no"))):
        checker.grade = grade
        checker.queue.put("alice", ("sdpa", b"{}", False, lambda s, a, reply: counted.append(reply["state"])))
        checker._check(*checker.queue.get(timeout=1))
    assert seen == [("answered", False), ("refused", False)] and counted == ["answered", "refused"]
