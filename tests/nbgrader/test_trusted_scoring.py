"""Unit tests of `TrustedScoring` (`autograder/nbgrader/trusted_scoring.py`) on a small notebook: the hidden checks
run in this process against the reference functions (a stand-in for the sandboxed session), no nbgrader run."""
import json
from types import SimpleNamespace

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from autograder.grading import record
from autograder.grading.local_student import LocalStudent, reference_namespace
from autograder.nbgrader import trusted_scoring
from autograder.nbgrader.state import EXECUTION, ExecutionState, Shared
from autograder.nbgrader.trusted_scoring import TrustedScoring
from autograder.sandbox.compiled_texts import CompiledTexts

BUILTIN_SOFTMAX = "def softmax(x, dim=-1):\n    return torch.softmax(x, dim)"
HAND_SOFTMAX = ("def softmax(x, dim=-1):\n    e = (x - x.amax(dim, keepdim=True)).exp()\n"
                "    return e / e.sum(dim, keepdim=True)")
INFO = {"assignment": "sdpa", "student": "alice", "notebook": "sdpa"}


class FakeSession(LocalStudent):
    """What `TrustedScoring` reads of the session `SandboxedExecute` leaves open; calls run in this process."""

    def __init__(self, namespace):
        super().__init__(namespace)
        self.status = SimpleNamespace(isolated=True, mechanism="test")
        self.events = [{"kind": "CellTimeout", "cell": 0}]
        self.budget = SimpleNamespace(cell_limits={}, call_limits={})
        self.retries, self.charged_without_retry, self.closed = 0, 0, False
        self.cells, self.compiled = [], CompiledTexts()  # what the runner was given, and compiled at run time

    def elapsed(self):
        return 1.5

    def close(self):
        self.closed = True


def _answer(grade_id, source):
    return new_code_cell(source, metadata={"nbgrader": {"solution": True, "grade": False, "grade_id": grade_id}})


def _check_cell(part, points, outputs=()):
    return new_code_cell(f'run_hidden_checks("{part}")', outputs=list(outputs), execution_count=3,
                         metadata={"nbgrader": {"grade": True, "solution": False, "grade_id": f"{part}-check",
                                                "points": points}})


def _notebook(softmax_source):
    visible_failure = new_output("error", ename="AssertionError", evalue="softmax 的行和不是 1", traceback=[])
    return new_notebook(cells=[
        new_markdown_cell("## softmax"),
        _answer("softmax", softmax_source),
        _check_cell("softmax", 10, [visible_failure, new_output("stream", name="stdout", text="checked\n")]),
        _answer("scale_scores", "def scale_scores(scores, d_k):\n    return scores / math.sqrt(d_k)"),
        _check_cell("scale_scores", 5),
    ])


def _score(nb, namespace):
    session = FakeSession(namespace)
    resources = {"nbgrader": dict(INFO), EXECUTION: Shared(ExecutionState(session, positions=[1, 2, 3, 4]))}
    nb, resources = TrustedScoring().preprocess(nb, resources)
    report = json.loads(resources["outputs"][record.filename("sdpa")])
    return nb, report, session


def _grade_of(cell):
    """What nbgrader reads as the cell's partial credit: the text/plain of its execute_result."""
    results = [o for o in cell.outputs if o.output_type == "execute_result"]
    assert len(results) == 1
    return float(results[0].data["text/plain"])


def test_scoring_needs_the_execution_step_first():
    with pytest.raises(RuntimeError, match="SandboxedExecute"):
        TrustedScoring().preprocess(_notebook(BUILTIN_SOFTMAX), {"nbgrader": dict(INFO)})


def test_reference_answers_get_full_marks_and_the_runner_is_closed():
    namespace = reference_namespace()
    nb, report, session = _score(_notebook(HAND_SOFTMAX), namespace)
    assert session.closed
    assert [_grade_of(nb.cells[i]) for i in (2, 4)] == [10.0, 5.0]
    assert [(c["grade_id"], c["part"], c["points"], c["max_points"]) for c in report["cells"]] == [
        ("softmax-check", "softmax", 10.0, 10.0), ("scale_scores-check", "scale_scores", 5.0, 5.0)]
    assert report["review"] == [] and report["seconds"] == 1.5
    assert report["sandbox"] == {"isolated": True, "mechanism": "test"}
    # the session's cell position 0 is notebook cell 1, the softmax answer
    assert report["events"] == [{"kind": "CellTimeout", "cell": 1, "grade_id": "softmax"}]


def test_a_builtin_softmax_in_the_code_loses_its_points_whatever_the_runner_said():
    namespace = reference_namespace()  # the runner's answers are correct ...
    nb, report, _ = _score(_notebook(BUILTIN_SOFTMAX), namespace)  # ... but the code calls torch.softmax
    assert [_grade_of(nb.cells[i]) for i in (2, 4)] == [0.0, 5.0]
    softmax = report["cells"][0]
    assert softmax["points"] == 0.0 and softmax["checks"]
    assert all(not c["passed"] and "softmax-builtin" in c["codes"] for c in softmax["checks"])
    assert all(c["passed"] for c in report["cells"][1]["checks"])


def test_visible_outputs_are_kept_but_never_read_as_a_grade():
    nb, _, _ = _score(_notebook(BUILTIN_SOFTMAX), reference_namespace())
    outputs = nb.cells[2].outputs
    assert outputs[0].output_type == "display_data"  # the feedback first
    assert "softmax-check" in outputs[0].data["text/plain"]
    assert outputs[1].output_type == "execute_result" and "0 / 10" in outputs[1].data["text/html"]
    assert outputs[2:] == [nbformat.from_dict({"output_type": "stream", "name": "stdout",
                                               "text": "可见检查未通过 — AssertionError: softmax 的行和不是 1\n"}),
                           nbformat.from_dict({"output_type": "stream", "name": "stdout", "text": "checked\n"})]


def test_a_grade_cell_without_hidden_checks_scores_zero():
    nb = _notebook(HAND_SOFTMAX)
    nb.cells[4].source = 'run_hidden_checks("no_such_part")'
    nb, report, _ = _score(nb, reference_namespace())
    assert _grade_of(nb.cells[4]) == 0.0
    assert "no_such_part" in nb.cells[4].outputs[0].data["text/plain"]
    assert report["cells"][1] == {"grade_id": "scale_scores-check", "part": "no_such_part", "points": 0.0,
                                  "max_points": 5.0, "held": False, "held_points": None, "checks": []}


# A correct softmax that also reaches code the grader cannot read (a name built at run time).
UNREADABLE = HAND_SOFTMAX + '\n    getattr(torch, "tolf"[::-1])'


@pytest.mark.parametrize("extra, held", [
    ("", False),
    ("import gc", False),  # a constant import is free: what counts is where its names are used
    ("print(dir(torch))", False),  # a top-level line that only shows what dir finds
    ("import gc\n_n = len(gc.get_objects())", True),  # runs while the notebook loads, outside any function
    ("import sys\n_r = sys.stdout.runner", True),  # behind the runner's stream
])
def test_code_the_grader_cannot_read_holds_every_part(extra, held):
    """Held: each part shows what its checks gave, counts 0 (nbgrader reads 0, so even a stock SaveAutoGrades
    gives nothing), and the record says which cells wait; unheld forms grade as usual."""
    nb = _notebook(HAND_SOFTMAX)
    nb.cells.insert(2, nbformat.v4.new_code_cell(extra))
    nb, report, _ = _score(nb, reference_namespace())
    grades = [_grade_of(nb.cells[i]) for i in (3, 5)]
    assert grades == ([0.0, 0.0] if held else [10.0, 5.0])
    assert report["held"] == (["softmax-check", "scale_scores-check"] if held else [])
    assert [c["held_points"] for c in report["cells"]] == ([10.0, 5.0] if held else [None, None])
    assert (trusted_scoring.HELD_BANNER_KEY in nb.metadata) == held  # the feedback page's banner
    if held:
        assert "待助教复核" in nb.cells[3].outputs[1].data["text/html"]
        assert "隐藏检查给出 10 分" in nb.cells[3].outputs[0].data["text/plain"]
        assert any(note["holds"] for note in report["review"])


def test_a_finding_inside_a_graded_function_holds_too():
    nb, report, _ = _score(_notebook(UNREADABLE), reference_namespace())
    assert [_grade_of(nb.cells[i]) for i in (2, 4)] == [0.0, 0.0]
    assert report["held"] == ["softmax-check", "scale_scores-check"]


def test_a_rich_visible_output_becomes_a_display():
    shown = trusted_scoring._as_plain(new_output("execute_result", data={"text/plain": "100.0"}, execution_count=1))
    assert shown.output_type == "display_data" and shown.data == {"text/plain": "100.0"}


def test_the_lessons_own_check_errors_show_their_message_without_a_class_name():
    """A newcomer's walk found "Visible check failed: FixHelperFirst: …" in both editions' feedback, in the
    failing function's own cell: the lesson's check errors speak to the student in their message."""
    import re
    from pathlib import Path

    from autograder.nbgrader.trusted_scoring import _as_plain
    from autograder.notebook.cells import VISIBLE_CHECK_ERRORS

    lesson = (Path(__file__).resolve().parents[2] / "lesson" / "sdpa.zh.md").read_text(encoding="utf-8")
    assert set(re.findall(r"^class (\w+)\((?:AssertionError|NotDoneYet)\)", lesson, re.M)) == VISIBLE_CHECK_ERRORS
    for ename in VISIBLE_CHECK_ERRORS:
        shown = _as_plain({"output_type": "error", "ename": ename, "evalue": "mask 为 False 的位置应变成 -inf"}, False)
        assert shown.text == "可见检查未通过 — mask 为 False 的位置应变成 -inf\n"
    other = _as_plain({"output_type": "error", "ename": "AssertionError", "evalue": "x"}, False)
    assert other.text == "可见检查未通过 — AssertionError: x\n"


@pytest.mark.parametrize("budget, held", [(0.0, True), (30.0, False)])
def test_a_reading_past_its_budget_holds_every_part_and_says_so(budget, held):
    """Reading the code (``reading_process``) that does not finish within the course's budget holds the
    notebook for a person, with a note that says why; the same notebook read within it is graded."""
    nb = _notebook(HAND_SOFTMAX)
    session = FakeSession(reference_namespace())
    resources = {"nbgrader": dict(INFO), EXECUTION: Shared(ExecutionState(session, positions=[1, 2, 3, 4]))}
    nb, resources = TrustedScoring(reading_seconds=budget).preprocess(nb, resources)
    report = json.loads(resources["outputs"][record.filename("sdpa")])
    assert report["held"] == (["softmax-check", "scale_scores-check"] if held else [])
    unfinished = [note for note in report["review"] if "没能读完你的代码" in note["detail"]]
    assert [note["holds"] for note in unfinished] == ([True] if held else [])
