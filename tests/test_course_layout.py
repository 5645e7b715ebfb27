"""The course's spine: builder, release, solution and notebook stay consistent."""
import inspect
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from solutions import sdpa

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "source" / "sdpa" / "sdpa.ipynb"
RELEASE = ROOT / "assignments" / "sdpa" / "sdpa.ipynb"
FUNCTIONS = ["attention_scores", "scale_scores", "apply_mask", "softmax", "attention_output",
             "scaled_dot_product_attention", "causal_mask", "key_padding_to_attn_mask", "fixed_attention"]


def _cells(path):
    nb = nbformat.read(str(path), as_version=4)
    return {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells}


def test_builder_output_is_committed():
    proc = subprocess.run([sys.executable, "tools/build_notebooks.py", "--check"], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("name", FUNCTIONS)
def test_solution_cells_are_the_reference_module(name):
    assert _cells(SOURCE)[name].source == inspect.getsource(getattr(sdpa, name)).strip("\n")


def _solution_lines():
    lines = set()
    for cell in nbformat.read(str(SOURCE), as_version=4).cells:
        for region in re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", cell.source, re.S):
            lines |= {line.strip() for line in region.splitlines() if len(line.strip()) > 3}
        for region in re.findall(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", cell.source, re.S):
            lines |= {line.strip() for line in region.splitlines() if line.strip()}
    return lines


def test_release_holds_no_solution_or_hidden_text():
    release = RELEASE.read_text()
    written = [c.source for c in nbformat.read(str(SOURCE), as_version=4).cells
               if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "markdown"]
    given = {line.strip() for c in nbformat.read(str(SOURCE), as_version=4).cells
             if not c.metadata.get("nbgrader", {}).get("solution") for line in c.source.splitlines()
             if "BEGIN HIDDEN" not in c.source}  # lines the provided code shows anyway (buggy_attention)
    leaked = [line for line in (_solution_lines() - given) | set(written) if line in release]
    assert not leaked
    assert "BEGIN SOLUTION" not in release and "HIDDEN TESTS" not in release


def test_release_matches_nbgrader_output(released):
    """The committed release is exactly what `nbgrader generate_assignment` makes from source/."""
    regenerated = (released / "assignments" / "sdpa" / "sdpa.ipynb").read_text()
    assert regenerated == RELEASE.read_text(), "assignments/ is stale: run `make release` and commit it"


def test_points_add_up():
    cells = _cells(SOURCE).values()
    points = [float(c.metadata["nbgrader"].get("points", 0)) for c in cells if c.metadata["nbgrader"].get("grade")]
    manual = [float(c.metadata["nbgrader"]["points"]) for c in cells
              if c.metadata["nbgrader"].get("grade") and c.metadata["nbgrader"].get("solution")]
    assert sum(points) == 100 and sum(manual) == 5


@pytest.mark.slow
def test_release_runs_top_to_bottom_with_only_clear_failures(tmp_path):
    """Stubs raise NotImplementedError, visible checks say so clearly, nothing else errors."""
    from nbclient import NotebookClient

    nb = nbformat.read(str(RELEASE), as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
        if meta.get("solution") and cell.cell_type == "code":  # stubs raise when run or called
            assert [e.ename for e in errors] in ([], ["NotImplementedError"]), meta["grade_id"]
        elif meta.get("grade") and cell.cell_type == "code":
            assert len(errors) == 1, meta["grade_id"]
            assert errors[0].ename in ("AssertionError", "NotDoneYet"), (meta["grade_id"], errors[0].evalue)
            assert len(errors[0].traceback) <= 12, "the not-done message should not hide in a long traceback"
            assert "还没有" in errors[0].evalue, errors[0].evalue
        else:
            assert not errors, (meta.get("grade_id"), [e.evalue for e in errors])


@pytest.mark.slow
def test_source_notebook_previews_every_hidden_check_passing(tmp_path):
    """Run as an instructor would: the source notebook shows each part's hidden checks, all passing."""
    from nbclient import NotebookClient

    nb = nbformat.read(str(SOURCE), as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"]
    assert len(graded) == 13
    for cell in graded:
        text = "".join(o.get("text", "") for o in cell.outputs)
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.metadata["nbgrader"]["grade_id"]
        assert "[教师预览，不计分]" in text and "全部通过" in text, (cell.metadata["nbgrader"]["grade_id"], text[-400:])
