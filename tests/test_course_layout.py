"""The course's spine: builder, release, solution and notebook stay consistent."""
import ast
import inspect
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import nbformat
import pytest

from autograder.notebook.cells import grade_id
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
             if "BEGIN HIDDEN" not in c.source}  # lines the provided code shows anyway (the debugging candidates)
    leaked = [line for line in (_solution_lines() - given) | set(written) if line in release]
    assert not leaked
    assert "BEGIN SOLUTION" not in release and "HIDDEN TESTS" not in release


OPTION = re.compile(r"^\s*-\s*([A-Z])[.．]\s*(.+?)\s*$", re.M)
CHOICE = re.compile(r"^\s*(\w+)\s*=\s*[\"']([A-Z])[\"']\s*$", re.M)
CODE_FRAGMENT = re.compile(r"`([^`]+)`|([A-Za-z_][\w.]*\s*=\s*-?[\w.]+|[A-Za-z_][\w.]*\([^()]*\))")


def _choice_answers():
    """[(variable, letter, option text, grade_ids of its section)] for every choice answer in the source.

    A choice answer is `name = "X"` inside a solution region; its options are the
    `- X. text` lines of the closest markdown cell above that lists options; its
    section runs from one `## ` heading to the next.
    """
    sections, options, answers = [[]], {}, []
    for cell in nbformat.read(str(SOURCE), as_version=4).cells:
        if cell.cell_type == "markdown" and re.match(r"\s*## ", cell.source):
            sections.append([])
        sections[-1].append(grade_id(cell))
        if cell.cell_type == "markdown" and OPTION.search(cell.source):
            options = dict(OPTION.findall(cell.source))
        for region in re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", cell.source, re.S):
            for name, letter in CHOICE.findall(region):
                assert letter in options, f"{name} = {letter!r} has no option {letter} above it"
                answers.append((name, letter, options[letter], sections[-1]))
    return answers


def _prose_of_code(source):
    """Docstrings, comments and string literals of a code cell: the words a reader sees."""
    texts = [node.value for node in ast.walk(ast.parse(source))
             if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    texts += [tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
              if tok.type == tokenize.COMMENT]
    return texts


def _hints(option):
    """What would give an option away: its code fragments, its English words, its Chinese phrases."""
    fragments = {"".join(m).strip() for m in CODE_FRAGMENT.findall(option)}
    words = {w.lower() for w in re.findall(r"[A-Za-z_]{4,}", option)}
    phrases = {p for p in re.split(r"[\s，。、；：（）()“”,.;:`]+", option) if len(p) >= 4 and not p.isascii()}
    return fragments, words, phrases


def test_release_gives_no_answer_away():
    """Every released code cell, docstrings and comments included, is scanned for the answers' hints.

    A choice question is solved by debugging only if nothing the student is given names
    the right option: no code fragment of it anywhere in the released code, and none of
    its words or phrases in a docstring, comment or string of a released code cell of its
    section (provided code, answer stubs and visible checks alike).
    """
    answers = _choice_answers()
    assert answers, "no choice answers found in the source notebook"
    released = [c for c in nbformat.read(str(RELEASE), as_version=4).cells if c.cell_type == "code"]
    found = []
    for name, letter, option, section in answers:
        fragments, words, phrases = _hints(option)
        for cell in released:
            found += [(name, letter, grade_id(cell), "code", f) for f in fragments if f in cell.source]
            if grade_id(cell) not in section:
                continue
            for text in _prose_of_code(cell.source):
                found += [(name, letter, grade_id(cell), "word", w, text) for w in words
                          if re.search(rf"\b{re.escape(w)}", text.lower())]
                found += [(name, letter, grade_id(cell), "phrase", p, text) for p in phrases if p in text]
    assert not found, found


def test_release_matches_nbgrader_output(released):
    """The committed release is exactly what `nbgrader generate_assignment` makes from source/."""
    regenerated = (released / "assignments" / "sdpa" / "sdpa.ipynb").read_text()
    assert regenerated == RELEASE.read_text(), "assignments/ is stale: run `make release` and commit it"


def test_points_add_up():
    cells = _cells(SOURCE).values()
    points = [float(c.metadata["nbgrader"].get("points", 0)) for c in cells if c.metadata["nbgrader"].get("grade")]
    manual = [float(c.metadata["nbgrader"]["points"]) for c in cells
              if c.metadata["nbgrader"].get("grade") and c.metadata["nbgrader"].get("solution")]
    assert sum(points) == 110 and sum(manual) == 5


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
    assert len(graded) == 18
    for cell in graded:
        text = "".join(o.get("text", "") for o in cell.outputs)
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.metadata["nbgrader"]["grade_id"]
        assert "[教师预览，不计分]" in text and "全部通过" in text, (cell.metadata["nbgrader"]["grade_id"], text[-400:])


def _provided_namespace(*grade_ids):
    """The reference answers' globals after also running the given provided cells of the source notebook."""
    from autograder.grading.local_student import reference_namespace

    cells = _cells(SOURCE)
    namespace = reference_namespace()
    for name in grade_ids:
        exec(compile(cells[name].source, name, "exec"), namespace)  # noqa: S102 - our own notebook
    return namespace


def _diagnose(candidate, rng):
    """The debugging options a candidate shows on random inputs: A, or the symptoms among B, C, D."""
    import torch

    from autograder.grading import cases

    q, k = cases.randn(rng, 2, 5, 8), cases.randn(rng, 2, 7, 8)
    eye = torch.eye(7, dtype=torch.float64).expand(2, 7, 7)  # values = identity: the output is the weights
    mask = cases.random_bool_mask(rng, (5, 7), p_keep=0.5)
    symptoms = set()
    for m in (None, mask):
        weights = candidate(q, k, eye, m)
        _, expected = cases.sdpa(q, k, eye, m)
        if torch.allclose(weights, expected, atol=1e-9):
            continue
        if not torch.allclose(weights.sum(-1), torch.ones(2, 5, dtype=torch.float64), atol=1e-9):
            symptoms.add("B")
        if m is not None and bool((weights[..., ~m] != 0).any()):
            symptoms.add("C")
        symptoms = symptoms or {"D"}
    return symptoms or {"A"}


def test_debugging_answer_key_matches_what_the_candidates_do():
    """Each candidate shows exactly the one symptom the answer key gives it, when run."""
    import torch

    from autograder.grading.checks import test_debugging

    namespace = _provided_namespace("candidates")
    rng = torch.Generator().manual_seed(0)
    shown = {f"verdict_{i}": _diagnose(namespace[f"candidate_{i}"], rng) for i in (1, 2, 3)}
    assert shown == {name: {letter} for name, letter in test_debugging.VERDICTS.items()}
    assert len(set(test_debugging.VERDICTS.values())) == 3, "each candidate should need its own diagnosis"
    assert _diagnose(namespace["fixed_attention"], rng) == {"A"}


def test_answer_keys_use_the_notebooks_own_inputs():
    """The hidden checks' copies of the lesson's demo inputs are the ones the notebook shows."""
    import torch

    from autograder.grading.checks import test_causal_alignment, test_empty_rows

    namespace = _provided_namespace("empty-rows-demo")
    assert torch.equal(namespace["mask_demo"], test_empty_rows.MASK)
    task = _cells(SOURCE)["causal-align-task"].source
    assert f"$L = {test_causal_alignment.L}$、$S = {test_causal_alignment.S}$" in task


def test_bottom_right_mask_is_what_pytorch_calls_causal_lower_right():
    """The lesson's bottom-right mask (tril(S - L)) is torch.nn.attention.bias.causal_lower_right."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention.bias import causal_lower_right, causal_upper_left

    namespace = _provided_namespace("causal-align-demo")
    L, S = namespace["L_demo"], namespace["S_demo"]
    q, k = torch.randn(1, L, 8, dtype=torch.float64), torch.randn(1, S, 8, dtype=torch.float64)
    eye = torch.eye(S, dtype=torch.float64)[None]  # values = identity: the output is the weights
    alignments = ((causal_lower_right(L, S), namespace["bottom_right"]),
                  (causal_upper_left(L, S), namespace["top_left"]))
    for bias, ours in alignments:
        weights = F.scaled_dot_product_attention(q, k, eye, attn_mask=bias)
        assert torch.equal(weights[0] > 0, ours)
