"""The course's spine: lessons, builder, release, solution and notebook stay consistent, in every edition."""
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
from autograder.notebook.editions import COURSE, EDITIONS
from solutions import sdpa
from tests.support import points
from tests.support.language import CJK

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "source" / "sdpa" / "sdpa.ipynb"
RELEASE = ROOT / "assignments" / "sdpa" / "sdpa.ipynb"
# what the visible checks say of an answer not written yet, in each edition's language
NOT_DONE = {"zh": "还没有", "en": "yet"}


def source_of(assignment):
    return ROOT / "source" / assignment / f"{assignment}.ipynb"


def release_of(assignment):
    return ROOT / "assignments" / assignment / f"{assignment}.ipynb"
FUNCTIONS = ["attention_scores", "scale_scores", "apply_mask", "softmax", "attention_output",
             "scaled_dot_product_attention", "causal_mask", "key_padding_to_attn_mask", "fixed_attention"]


def _cells(path=SOURCE):
    nb = nbformat.read(str(path), as_version=4)
    return {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells}


def test_builder_output_is_committed():
    proc = subprocess.run([sys.executable, "-m", "tools.build_notebooks", "--check"], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("name", FUNCTIONS)
def test_solution_cells_are_the_reference_module(name):
    assert _cells(SOURCE)[name].source == inspect.getsource(getattr(sdpa, name)).strip("\n")


def _solution_lines(source):
    lines = set()
    for cell in nbformat.read(str(source), as_version=4).cells:
        for region in re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", cell.source, re.S):
            lines |= {line.strip() for line in region.splitlines() if len(line.strip()) > 3}
        for region in re.findall(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", cell.source, re.S):
            lines |= {line.strip() for line in region.splitlines() if line.strip()}
    return lines


@pytest.mark.parametrize("assignment", EDITIONS)
def test_release_holds_no_solution_or_hidden_text(assignment):
    source, release = source_of(assignment), release_of(assignment).read_text()
    written = [c.source for c in nbformat.read(str(source), as_version=4).cells
               if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "markdown"]
    given = {line.strip() for c in nbformat.read(str(source), as_version=4).cells
             if not c.metadata.get("nbgrader", {}).get("solution") for line in c.source.splitlines()
             if "BEGIN HIDDEN" not in c.source}  # lines the provided code shows anyway (the debugging candidates)
    leaked = [line for line in (_solution_lines(source) - given) | set(written) if line in release]
    assert not leaked
    assert "BEGIN SOLUTION" not in release and "HIDDEN TESTS" not in release


OPTION = re.compile(r"^\s*-\s*([A-Z])[.．]\s*(.+?)\s*$", re.M)
CHOICE = re.compile(r"^\s*(\w+)\s*=\s*[\"']([A-Z])[\"']\s*$", re.M)
CODE_FRAGMENT = re.compile(r"`([^`]+)`|([A-Za-z_][\w.]*\s*=\s*-?[\w.]+|[A-Za-z_][\w.]*\([^()]*\))")


def _choice_answers(source):
    """[(variable, letter, option text, grade_ids of its section, all options)] for every choice answer.

    A choice answer is `name = "X"` inside a solution region; its options are the
    `- X. text` lines of the closest markdown cell above that lists options; its
    section runs from one `## ` heading to the next.
    """
    sections, options, answers = [[]], {}, []
    for cell in nbformat.read(str(source), as_version=4).cells:
        if cell.cell_type == "markdown" and re.match(r"\s*## ", cell.source):
            sections.append([])
        sections[-1].append(grade_id(cell))
        if cell.cell_type == "markdown" and OPTION.search(cell.source):
            options = dict(OPTION.findall(cell.source))
        for region in re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", cell.source, re.S):
            for name, letter in CHOICE.findall(region):
                assert letter in options, f"{name} = {letter!r} has no option {letter} above it"
                answers.append((name, letter, options[letter], sections[-1], options))
    return answers


def _prose_of_code(source):
    """Docstrings, comments and string literals of a code cell: the words a reader sees."""
    texts = [node.value for node in ast.walk(ast.parse(source))
             if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    texts += [tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
              if tok.type == tokenize.COMMENT]
    return texts


def _words(text):
    return re.findall(r"[A-Za-z_0-9$\\]+", text.lower())


def _hints(option, language, others=()):
    """What would give an option away: its code fragments, its words and its phrases.

    In Chinese prose, an English word is a name from the code and a phrase is a run of four or more
    characters between punctuation. In English prose, a single word is too common to count: the words
    are the names inside its code fragments, and the phrases are its runs of three words that no other
    option of the question (`others`) has (a quantity every option names gives nothing away).
    """
    fragments = {"".join(m).strip() for m in CODE_FRAGMENT.findall(option)}
    if language == "zh":
        words = {w.lower() for w in re.findall(r"[A-Za-z_]{4,}", option)}
        phrases = {p for p in re.split(r"[\s，。、；：（）()“”,.;:`]+", option) if len(p) >= 4 and not p.isascii()}
    else:
        words = {w.lower() for f in fragments for w in re.findall(r"[A-Za-z_]{4,}", f)}
        tokens = _words(re.sub(r"`[^`]*`", " ", option))
        phrases = {" ".join(tokens[i:i + 3]) for i in range(len(tokens) - 2)}
        phrases = {p for p in phrases if not any(p in " ".join(_words(other)) for other in others)}
    return fragments, words, phrases


@pytest.mark.parametrize("assignment", EDITIONS)
def test_release_gives_no_answer_away(assignment):
    """Every released code cell, docstrings and comments included, is scanned for the answers' hints.

    A choice question is solved by debugging only if nothing the student is given names
    the right option: no code fragment of it anywhere in the released code, and none of
    its words or phrases in a docstring, comment or string of a released code cell of its
    section (provided code, answer stubs and visible checks alike).
    """
    answers = _choice_answers(source_of(assignment))
    assert len(answers) == 6, "expected the six choice answers of the source notebook"
    released = [c for c in nbformat.read(str(release_of(assignment)), as_version=4).cells if c.cell_type == "code"]
    found = []
    for name, letter, option, section, options in answers:
        others = [text for other, text in options.items() if other != letter]
        fragments, words, phrases = _hints(option, EDITIONS[assignment], others)
        for cell in released:
            found += [(name, letter, grade_id(cell), "code", f) for f in fragments if f in cell.source]
            if grade_id(cell) not in section:
                continue
            for text in _prose_of_code(cell.source):
                found += [(name, letter, grade_id(cell), "word", w, text) for w in words
                          if re.search(rf"\b{re.escape(w)}", text.lower())]
                lowered = " ".join(_words(text)) if EDITIONS[assignment] == "en" else text
                found += [(name, letter, grade_id(cell), "phrase", p, text) for p in phrases if p in lowered]
    assert not found, found


@pytest.mark.parametrize("assignment", EDITIONS)
def test_release_matches_nbgrader_output(released, assignment):
    """The committed release is exactly what `nbgrader generate_assignment` makes from source/."""
    regenerated = (released / "assignments" / assignment / f"{assignment}.ipynb").read_text()
    assert regenerated == release_of(assignment).read_text(), "assignments/ is stale: run `make release` and commit it"


@pytest.mark.parametrize("assignment", EDITIONS)
def test_the_editions_give_each_cell_the_same_points(assignment):
    """Points are set per grade cell in the source notebook; every edition gives the same, and some are by hand."""
    assert points.grade_cells(assignment) == points.grade_cells(COURSE)
    assert any(by_hand for _, by_hand in points.grade_cells(assignment).values())


@pytest.mark.slow
@pytest.mark.parametrize("assignment", EDITIONS)
def test_release_runs_top_to_bottom_with_only_clear_failures(tmp_path, assignment):
    """Stubs raise NotImplementedError, visible checks say so clearly, nothing else errors."""
    from nbclient import NotebookClient

    nb = nbformat.read(str(release_of(assignment)), as_version=4)
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
            assert NOT_DONE[EDITIONS[assignment]] in errors[0].evalue, errors[0].evalue
            if EDITIONS[assignment] == "zh":  # what the student reads carries no English class name
                assert "NotDoneYet" not in "".join(errors[0].traceback), errors[0].traceback
        else:
            assert not errors, (meta.get("grade_id"), [e.evalue for e in errors])


@pytest.mark.slow
@pytest.mark.parametrize("assignment", EDITIONS)
def test_source_notebook_previews_every_hidden_check_passing(tmp_path, assignment):
    """Run as an instructor would: the source notebook shows each part's hidden checks, all passing.

    The hidden checks' feedback is Chinese in every edition (the preview's words below)."""
    from nbclient import NotebookClient

    nb = nbformat.read(str(source_of(assignment)), as_version=4)
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

    from course.checks import test_debugging

    namespace = _provided_namespace("candidates")
    rng = torch.Generator().manual_seed(0)
    shown = {f"verdict_{i}": _diagnose(namespace[f"candidate_{i}"], rng) for i in (1, 2, 3)}
    assert shown == {name: {letter} for name, letter in test_debugging.VERDICTS.items()}
    assert len(set(test_debugging.VERDICTS.values())) == 3, "each candidate should need its own diagnosis"
    assert _diagnose(namespace["fixed_attention"], rng) == {"A"}


def test_answer_keys_use_the_notebooks_own_inputs():
    """The hidden checks' copies of the lesson's demo inputs are the ones the notebook shows."""
    import torch

    from course.checks import test_causal_alignment, test_empty_rows

    namespace = _provided_namespace("empty-rows-demo")
    assert torch.equal(namespace["mask_demo"], test_empty_rows.MASK)
    L, S = test_causal_alignment.L, test_causal_alignment.S
    assert f"$L = {L}$、$S = {S}$" in _cells(source_of("sdpa"))["causal-align-task"].source
    assert f"$L = {L}$ and $S = {S}$" in _cells(source_of("sdpa_en"))["causal-align-task"].source


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


# --- the editions: one course in several languages ---------------------------------------------------------------


class _Language(ast.NodeTransformer):
    """Blanks what is human language in code: every string constant, and the text of every f-string.

    An f-string keeps its placeholders (sorted, so a translation may reorder them), so a placeholder
    added, removed or changed is still a difference in the code. Comments are not in the syntax tree.
    """

    def visit_JoinedStr(self, node):
        values = sorted((self.visit(v) for v in node.values if isinstance(v, ast.FormattedValue)), key=ast.dump)
        return ast.copy_location(ast.Tuple(elts=values, ctx=ast.Load()), node)

    def visit_Constant(self, node):
        return ast.copy_location(ast.Constant(""), node) if isinstance(node.value, str) else node


def code_without_language(source):
    """The syntax tree of a cell's code with its strings and comments left out, as text."""
    return ast.dump(_Language().visit(ast.parse(source)))


@pytest.mark.parametrize("edited, same", [
    ('print("权重:", w)  # 注释', True),                          # strings and comments are language
    ('print(f"{name} is not filled in yet, {x!r}")', False),      # one placeholder fewer
    ('print("weights:", w, end="")', False),                     # another argument
    ('print("weights:", v)', False),                             # another name
])
def test_code_without_language_sees_code_changes_only(edited, same):
    original = 'print("weights:", w)  # a comment'
    assert (code_without_language(edited) == code_without_language(original)) is same
    assert code_without_language('f"{a} 与 {b!r} 不一致"') == code_without_language('f"{b!r} does not match {a}"')


def _structure(cell):
    return (cell.id, cell.cell_type, cell.metadata)


@pytest.mark.parametrize("assignment", [a for a in EDITIONS if a != COURSE])
def test_editions_have_the_same_cells_and_code(assignment):
    """Same cells in the same order (ids, types, nbgrader metadata: grade ids, points, locks; tags), and
    the same code: only string literals and comments differ."""
    base = nbformat.read(str(source_of(COURSE)), as_version=4).cells
    other = nbformat.read(str(source_of(assignment)), as_version=4).cells
    assert [_structure(c) for c in other] == [_structure(c) for c in base]
    for mine, theirs in zip(other, base):
        if mine.cell_type == "code":
            assert code_without_language(mine.source) == code_without_language(theirs.source), mine.id
            assert re.findall(r"### (?:BEGIN|END) [A-Z ]+", mine.source) == re.findall(r"### (?:BEGIN|END) [A-Z ]+",
                                                                                   theirs.source), mine.id
            assert cell_parts(mine) == cell_parts(theirs), mine.id


def cell_parts(cell):
    from autograder.notebook.cells import part_of, without_hidden_tests

    return part_of(cell), cell.source.count("### BEGIN SOLUTION"), len(without_hidden_tests(cell.source)) > 0


def test_the_english_edition_is_in_english():
    """No Chinese left in the English lesson, prose or code."""
    left = [(c.id, line) for c in nbformat.read(str(source_of("sdpa_en")), as_version=4).cells
            for line in c.source.splitlines() if CJK.search(line)]
    assert not left, left


PLOT_TEXT_CALLS = {"set_xlabel", "set_ylabel", "set_title", "suptitle", "text", "annotate"}
PLOT_TEXT_KEYWORDS = {"label", "xlabel", "ylabel", "title"}


def _plot_texts(source):
    """The strings a cell's code hands matplotlib to draw (labels, titles, legends): literals, and names bound
    to literals in the same cell (legend labels are named once and used in a loop)."""
    tree = ast.parse(code_without_magics(source))
    constants = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Tuple):
            pairs = zip(node.targets[0].elts, node.value.elts)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            pairs = [(node.targets[0], node.value)]
        else:
            continue
        for target, value in pairs:
            if isinstance(target, ast.Name) and isinstance(value, ast.Constant) and isinstance(value.value, str):
                constants[target.id] = value.value

    def text(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, ast.Name) and node.id in constants:
            return [constants[node.id]]
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Attribute) and node.func.attr in PLOT_TEXT_CALLS:
            found += [t for arg in node.args[:1] for t in text(arg)]
        found += [t for kw in node.keywords if kw.arg in PLOT_TEXT_KEYWORDS for t in text(kw.value)]
    return found


def code_without_magics(source):
    return "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))


def test_the_chinese_editions_plots_draw_no_english_words():
    """Chinese text in a plot needs a CJK font the student's matplotlib may not have (boxes instead of
    characters): the Chinese edition's figures use mathematical notation, which matplotlib draws with its own
    fonts, and say the rest in the prose and comments around them."""
    texts = [text for cell in nbformat.read(str(SOURCE), as_version=4).cells if cell.cell_type == "code"
             for text in _plot_texts(cell.source)]
    assert len(texts) >= 8, texts  # the why-scale figure and the heatmap
    words = [(text, re.sub(r"\$[^$]*\$", "", text)) for text in texts]
    assert not [(text, rest) for text, rest in words if re.search(r"[A-Za-z]{2,}|[\u4e00-\u9fff]", rest)], words


@pytest.mark.parametrize("assignment", EDITIONS)
def test_every_edition_is_built_from_its_lesson(assignment):
    """Each edition's source notebook is its lesson file read by jupytext, cell ids = grade ids, and the
    automatic cells' points added from the checks' weights (the lesson has none for them)."""
    import jupytext

    from autograder.grading.check_api import part_points
    from autograder.notebook.cells import is_test_cell, part_of
    from autograder.notebook.editions import lesson_file

    lesson = jupytext.read(ROOT / lesson_file(assignment), fmt="md:myst")
    built = nbformat.read(str(source_of(assignment)), as_version=4)
    weights = part_points()
    for cell in lesson.cells:
        if is_test_cell(cell):
            assert "points" not in cell.metadata["nbgrader"], cell.metadata["nbgrader"]["grade_id"]
            cell.metadata["nbgrader"]["points"] = weights[part_of(cell)]
    assert [(c.cell_type, c.source, c.metadata) for c in lesson.cells] == \
        [(c.cell_type, c.source, c.metadata) for c in built.cells]
    assert all(c.id == c.metadata["nbgrader"]["grade_id"] for c in built.cells)


def test_a_parts_points_are_its_checks_weights_in_every_edition(monkeypatch):
    """Points are declared once, on the checks: the built grade cell takes its part's sum, and a lesson that
    sets points on an automatic cell does not build."""
    from tools import build_notebooks

    weights = build_notebooks.part_points()
    for assignment in EDITIONS:
        nb = build_notebooks.build_source(assignment, {**weights, "apply_mask": 12})
        cell = next(c for c in nb.cells if c.metadata["nbgrader"]["grade_id"] == "apply_mask-check")
        assert cell.metadata["nbgrader"]["points"] == 12
    original = build_notebooks.jupytext.read

    def with_points(*args, **kwargs):
        nb = original(*args, **kwargs)
        next(c for c in nb.cells if c.metadata["nbgrader"]["grade_id"] == "softmax-check").metadata["nbgrader"][
            "points"] = 12
        return nb

    monkeypatch.setattr(build_notebooks.jupytext, "read", with_points)
    with pytest.raises(build_notebooks.LessonError, match="softmax-check sets points"):
        build_notebooks.build_source(COURSE, weights)
