"""The visible checks point to the cause: a composite's check names the helper to fix first.

Each student notebook is run top to bottom in an IPython shell, as JupyterLab runs it (the built solution
notebook with one catalogue mistake swapped in), up to the check that matters; both editions.
"""
import matplotlib
import nbformat
import pytest

from autograder.demo.submissions import build
from catalogue import BUGS, CORRECT
from tools.build_notebooks import solution_path

matplotlib.use("Agg")
SAMPLES = {s.name: s for s in BUGS + CORRECT}
FIRST_COMPOSITE = "scaled_dot_product_attention-check"
# sample -> (the function the message must name, the misconception code it must carry)
NAMED = {
    "bug-mask-inverted": ("apply_mask", "[mask-inverted]"),
    "bug-mask-zero-fill": ("apply_mask", "[mask-zero-fill]"),
    "bug-scale-missing": ("scale_scores", "[scale-missing]"),
    "bug-scale-by-dk": ("scale_scores", "[scale-by-dk]"),
    "bug-scores-transposed": ("attention_scores", "[scores-transposed]"),
    "bug-softmax-unstable": ("softmax", "[softmax-unstable]"),
    "bug-fully-masked-nan": ("softmax", "[fully-masked-nan]"),
    "bug-softmax-dim-ignored": ("softmax", "[softmax-dim-ignored]"),
    "bug-scale-low-precision": ("scale_scores", "[scale-low-precision]"),
    # mistakes in scaled_dot_product_attention itself: its own check names them
    "bug-softmax-wrong-dim": (None, "[softmax-wrong-dim]"),
    "bug-mask-after-softmax": (None, "[mask-after-softmax]"),
}


@pytest.fixture(scope="module")
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    return InteractiveShell.instance(colors="nocolor")


def _run_until(shell, nb, stop_at):
    """{grade_id: the error message its cell ended with, or None} for every code cell up to `stop_at`."""
    shell.reset(new_session=True)
    messages = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        result = shell.run_cell(cell.source, store_history=False, silent=True)
        messages[grade_id] = str(result.error_in_exec) if result.error_in_exec is not None else None
        if grade_id == stop_at:
            return messages
    raise AssertionError(f"no cell {stop_at}")


@pytest.mark.parametrize("assignment", ["sdpa", "sdpa_en"])
@pytest.mark.parametrize("name", sorted(NAMED))
def test_the_first_composite_check_names_the_cause(shell, assignment, name):
    solution = nbformat.read(solution_path(assignment), as_version=4)
    nb = build(SAMPLES[name], solution, solution_path(assignment))
    message = _run_until(shell, nb, FIRST_COMPOSITE)[FIRST_COMPOSITE]
    helper, code = NAMED[name]
    assert message is not None and code in message, message
    if helper is not None:
        assert message.startswith(helper), message


@pytest.mark.parametrize("assignment", ["sdpa", "sdpa_en"])
def test_correct_code_passes_every_visible_check_and_an_inverted_mask_is_named_at_each_composite(shell, assignment):
    solution = nbformat.read(solution_path(assignment), as_version=4)
    last = [c for c in solution.cells if c.cell_type == "code"][-1].metadata["nbgrader"]["grade_id"]
    failed = {gid: m for gid, m in _run_until(shell, solution, last).items() if m is not None}
    assert failed == {}
    inverted = build(SAMPLES["bug-mask-inverted"], solution, solution_path(assignment))
    messages = _run_until(shell, inverted, last)
    for composite in (FIRST_COMPOSITE, "fixed_attention-check", "device_dtype-check"):
        assert messages[composite] and messages[composite].startswith("apply_mask"), (composite, messages[composite])
    assert messages["apply_mask-check"] is not None
    untouched = {gid for gid, m in messages.items() if m is None}
    assert {"softmax-check", "attention_scores-check", "scale_scores-check"} <= untouched


OWN_CHECK = {  # sample -> (its helper's own check, the code that check's message names)
    "bug-mask-inverted": ("apply_mask-check", "[mask-inverted]"),
    "bug-scale-by-dk": ("scale_scores-check", "[scale-by-dk]"),
    "bug-scores-transposed": ("attention_scores-check", "[scores-transposed]"),
    "bug-softmax-unstable": ("softmax-check", "[softmax-unstable]"),
}


@pytest.mark.parametrize("assignment", ["sdpa", "sdpa_en"])
@pytest.mark.parametrize("name", sorted(OWN_CHECK))
def test_a_helpers_own_check_names_the_typical_mistake_it_tells_apart(shell, assignment, name):
    solution = nbformat.read(solution_path(assignment), as_version=4)
    check, code = OWN_CHECK[name]
    message = _run_until(shell, build(SAMPLES[name], solution, solution_path(assignment)), check)[check]
    assert message is not None and code in message, message


@pytest.mark.parametrize("assignment", ["sdpa", "sdpa_en"])
def test_a_blank_notebook_says_not_done_yet_in_one_line_at_every_check(shell, assignment):
    """The released notebook run as it is: each check cell stops with the one-line "not filled in yet" /
    "not implemented yet" (NotDoneYet, shown without a traceback), never with the checking code's assert."""
    from pathlib import Path

    release = nbformat.read(Path(__file__).resolve().parents[1] / "assignments" / assignment / f"{assignment}.ipynb",
                            as_version=4)
    shell.reset(new_session=True)
    kinds = {}
    for cell in release.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.cell_type != "code":
            continue
        result = shell.run_cell(cell.source, store_history=False, silent=True)
        if grade_id and grade_id.endswith("-check"):
            error = result.error_in_exec
            kinds[grade_id] = [cls.__name__ for cls in type(error).__mro__] if error is not None else None
    assert len(kinds) >= 15
    assert {g: k for g, k in kinds.items() if k is None or "NotDoneYet" not in k} == {}
