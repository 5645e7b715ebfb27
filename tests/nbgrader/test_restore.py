"""`RestoreNotebookStructure` on small hand-built notebooks: answers kept, everything else restored.

Each test edits a copy of the released notebook the way a student might and
checks that only the answers and the cells they added survive, so a student
cannot drop, blank or re-point a test cell, nor change its points.
"""
import copy

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from traitlets.config import Config

from autograder.nbgrader.restore import RestoreNotebookStructure
from autograder.notebook.cells import CellError, grade_id, is_answer_cell, nbgrader_meta

ASSIGNMENT, NOTEBOOK, STUDENT = "hw1", "attention", "alice"
RELEASE_DIR = "assignments"  # not nbgrader's default ("release"): the step must read the configured one
STUB = "# YOUR CODE HERE\nraise NotImplementedError()"


def _meta(gid, *, solution=False, grade=False, points=None):
    meta = {"grade_id": gid, "solution": solution, "grade": grade, "locked": not solution, "schema_version": 3}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def _source_notebook():
    """Intro, setup, two answer/test pairs (the second answer also manually graded), a written answer, a note."""
    return new_notebook(cells=[
        new_markdown_cell("# Attention", metadata=_meta("intro")),
        new_code_cell("import math", metadata=_meta("setup")),
        new_code_cell("def softmax(x):\n    ### BEGIN SOLUTION\n    return x.softmax(-1)\n    ### END SOLUTION",
                      metadata=_meta("ans-softmax", solution=True)),
        new_code_cell("run_hidden_checks('softmax')\n### BEGIN HIDDEN TESTS\nassert True\n### END HIDDEN TESTS",
                      metadata=_meta("test-softmax", grade=True, points=3)),
        new_code_cell("def scale(s, d):\n    ### BEGIN SOLUTION\n    return s / math.sqrt(d)\n    ### END SOLUTION",
                      metadata=_meta("ans-scale", solution=True, grade=True, points=1)),
        new_code_cell("run_hidden_checks('scale')", metadata=_meta("test-scale", grade=True, points=2)),
        new_markdown_cell("Why divide by sqrt(d_k)?", metadata=_meta("essay", solution=True, grade=True, points=2)),
        new_markdown_cell("Done.", metadata=_meta("outro")),
    ])


def _release_notebook(source):
    """What generate_assignment would release: stubs for answers, hidden tests gone, a checksum added."""
    release = copy.deepcopy(source)
    for cell in release.cells:
        if is_answer_cell(cell):
            cell.source = STUB
        else:
            cell.source = cell.source.split("### BEGIN HIDDEN TESTS")[0]
        cell.metadata["nbgrader"]["checksum"] = f"release-{grade_id(cell)}"
    return release


@pytest.fixture
def course(tmp_path):
    source = _source_notebook()
    release = _release_notebook(source)
    for step, nb in (("source", source), (RELEASE_DIR, release)):
        path = tmp_path / step / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(nb, str(path))
    return {"root": tmp_path, "source": source, "release": release}


def _answered(course):
    """The released notebook with both answers filled in, as a student hands it in."""
    nb = copy.deepcopy(course["release"])
    for cell in nb.cells:
        if is_answer_cell(cell):
            cell.source = f"# answer of {grade_id(cell)}\ndef f():\n    return 1"
    return nb


def _restore(course, nb):
    config = Config()
    config.CourseDirectory.root = str(course["root"])
    config.CourseDirectory.source_directory = "source"
    config.CourseDirectory.release_directory = RELEASE_DIR
    resources = {"nbgrader": {"assignment": ASSIGNMENT, "notebook": NOTEBOOK, "student": STUDENT}}
    out, _ = RestoreNotebookStructure(config=config).preprocess(nb, resources)
    return out


def _ids(nb):
    return [grade_id(c) for c in nb.cells]


def _cell(nb, gid):
    matches = [c for c in nb.cells if grade_id(c) == gid]
    assert len(matches) == 1, f"{gid}: {len(matches)} cells"
    return matches[0]


def _expected(course, answers):
    """Source skeleton: answer cells from the release with `answers[gid]` as source, all else from source."""
    stubs = {grade_id(c): c for c in course["release"].cells}
    cells = []
    for cell in course["source"].cells:
        gid = grade_id(cell)
        if is_answer_cell(cell):
            cell = copy.deepcopy(stubs[gid])
            cell.source = answers.get(gid, cell.source)
        cells.append(cell)
    return cells


def _answers(nb):
    return {grade_id(c): c.source for c in nb.cells if is_answer_cell(c)}


def test_untouched_submission_keeps_answers_on_source_skeleton(course):
    """An honest submission: the answers survive and the test cells regain their hidden tests."""
    submitted = _answered(course)
    answers = _answers(submitted)
    out = _restore(course, copy.deepcopy(submitted))
    assert out.cells == _expected(course, answers)
    assert _cell(out, "test-softmax").source == _cell(course["source"], "test-softmax").source
    assert "BEGIN HIDDEN TESTS" in _cell(out, "test-softmax").source


def test_deleted_test_cell_comes_back(course):
    nb = _answered(course)
    answers = _answers(nb)
    nb.cells = [c for c in nb.cells if grade_id(c) != "test-softmax"]
    out = _restore(course, nb)
    assert _ids(out) == _ids(course["source"])
    assert _cell(out, "test-softmax") == _cell(course["source"], "test-softmax")
    assert out.cells == _expected(course, answers)


@pytest.mark.parametrize("edit", ["blank", "points", "not-graded", "answer"])
def test_edited_test_cell_is_restored_as_written(course, edit):
    """Blanking a test cell, raising its points, ungrading it or turning it into an answer is all undone."""
    nb = _answered(course)
    answers = _answers(nb)
    cell = _cell(nb, "test-scale")
    if edit == "blank":
        cell.source = ""
    elif edit == "points":
        cell.metadata["nbgrader"]["points"] = 100
    elif edit == "not-graded":
        cell.metadata["nbgrader"]["grade"] = False
    else:
        cell.metadata["nbgrader"]["solution"] = True
    out = _restore(course, nb)
    assert out.cells == _expected(course, answers)
    assert nbgrader_meta(_cell(out, "test-scale"))["points"] == 2


def test_test_cell_with_edited_grade_id_comes_back(course):
    """A test cell re-pointed to a new grade_id: the original is restored, the copy loses its metadata."""
    nb = _answered(course)
    answers = _answers(nb)
    cell = _cell(nb, "test-softmax")
    cell.metadata["nbgrader"]["grade_id"] = "test-softmax-mine"
    cell.metadata["nbgrader"]["points"] = 50
    out = _restore(course, nb)
    assert "test-softmax-mine" not in _ids(out)
    graded = [c for c in out.cells if nbgrader_meta(c).get("grade")]
    assert sum(nbgrader_meta(c)["points"] for c in graded) == sum(
        nbgrader_meta(c)["points"] for c in course["source"].cells if nbgrader_meta(c).get("grade"))
    plain = copy.deepcopy(cell)
    del plain.metadata["nbgrader"]
    plain["id"] = "added-0"  # it had the restored cell's id, which stays the instructor's
    expected = _expected(course, answers)
    expected.insert(_ids(course["source"]).index("ans-softmax") + 1, plain)  # the last known cell before it
    assert out.cells == expected


def test_renamed_answer_cell_is_kept_as_plain_cell(course):
    """An answer under an unknown grade_id is the student's code, but not their answer: the stub comes back."""
    nb = _answered(course)
    renamed = _cell(nb, "ans-scale")
    renamed.metadata["nbgrader"]["grade_id"] = "my-scale"
    out = _restore(course, nb)
    ids = _ids(out)
    assert "my-scale" not in ids
    plain = out.cells[ids.index("test-softmax") + 1]  # after the last known cell before it
    assert plain.source == renamed.source
    assert "nbgrader" not in plain.metadata
    assert out.cells[ids.index("test-softmax") + 2] == _cell(course["release"], "ans-scale")


def test_added_cells_stay_where_the_student_put_them(course):
    nb = _answered(course)
    answers = _answers(nb)
    top = new_code_cell("import numpy as np")
    helpers = [new_code_cell("def helper():\n    return 2"), new_markdown_cell("my notes")]
    at = _ids(nb).index("ans-softmax") + 1
    nb.cells[at:at] = helpers
    nb.cells.insert(0, top)
    out = _restore(course, nb)
    expected = _expected(course, answers)
    at = _ids(course["source"]).index("ans-softmax") + 1
    expected[at:at] = helpers
    assert out.cells == [top] + expected


def test_added_cells_follow_their_answer_even_if_the_test_cell_was_deleted(course):
    nb = _answered(course)
    answers = _answers(nb)
    extra = new_code_cell("print(softmax)")
    nb.cells = [c for c in nb.cells if grade_id(c) != "test-softmax"]
    nb.cells.insert(_ids(nb).index("ans-softmax") + 1, extra)
    out = _restore(course, nb)
    expected = _expected(course, answers)
    expected.insert(_ids(course["source"]).index("ans-softmax") + 1, extra)
    assert out.cells == expected


def test_deleted_answer_cell_comes_back_as_stub(course):
    nb = _answered(course)
    answers = _answers(nb)
    del answers["ans-softmax"]
    nb.cells = [c for c in nb.cells if grade_id(c) != "ans-softmax"]
    out = _restore(course, nb)
    assert _cell(out, "ans-softmax") == _cell(course["release"], "ans-softmax")
    assert out.cells == _expected(course, answers)


def test_answer_metadata_comes_from_the_release(course):
    """Points of a manually graded answer cell are the instructor's, whatever the student wrote."""
    nb = _answered(course)
    _cell(nb, "ans-scale").metadata["nbgrader"]["points"] = 99
    out = _restore(course, nb)
    assert _cell(out, "ans-scale").metadata == _cell(course["release"], "ans-scale").metadata
    assert _cell(out, "ans-scale").source == _cell(nb, "ans-scale").source


def test_duplicated_known_cell_is_kept_as_plain_code(course):
    """The first copy is the answer; a second copy is the student's code without nbgrader metadata."""
    nb = _answered(course)
    answers = _answers(nb)
    copy_ = copy.deepcopy(_cell(nb, "ans-softmax"))
    copy_.source = "def softmax(x):\n    return 0"
    nb.cells.insert(_ids(nb).index("test-softmax") + 1, copy_)  # after the test cell
    out = _restore(course, nb)
    assert _cell(out, "ans-softmax").source == answers["ans-softmax"]
    plain = [c for c in out.cells if grade_id(c) is None]
    assert [c.source for c in plain] == [copy_.source]
    assert "nbgrader" not in plain[0].metadata
    assert plain[0].cell_type == "code"
    assert len(out.cells) == len(course["source"].cells) + 1


def test_duplicated_test_cell_cannot_add_points(course):
    nb = _answered(course)
    dup = copy.deepcopy(_cell(nb, "test-scale"))
    nb.cells.append(dup)
    out = _restore(course, nb)
    graded = [grade_id(c) for c in out.cells if nbgrader_meta(c).get("grade")]
    assert graded == [grade_id(c) for c in course["source"].cells if nbgrader_meta(c).get("grade")]


def test_unreadable_cell_names_its_index(course):
    nb = _answered(course)
    bad = new_code_cell("x = 1")
    bad["metadata"] = ["not", "a", "dict"]
    nb.cells.insert(2, bad)
    with pytest.raises(CellError) as info:
        _restore(course, nb)
    assert info.value.index == 2
    assert info.value.step == "RestoreNotebookStructure"


@pytest.mark.parametrize("step", ["source", RELEASE_DIR])
def test_missing_notebook_says_to_generate_the_assignment(course, step):
    (course["root"] / step / ASSIGNMENT / f"{NOTEBOOK}.ipynb").unlink()
    with pytest.raises(FileNotFoundError) as info:
        _restore(course, _answered(course))
    message = str(info.value)
    assert f"nbgrader generate_assignment {ASSIGNMENT}" in message
    assert str(course["root"] / step) in message


def test_added_cell_survives_a_plain_source_cell(course):
    """nbgrader allows cells without nbgrader metadata in the source; they must not swallow added cells."""
    for step in ("source", RELEASE_DIR):
        nb = course["source"] if step == "source" else course["release"]
        nb.cells.append(new_markdown_cell("A plain footer."))
        nbformat.write(nb, str(course["root"] / step / ASSIGNMENT / f"{NOTEBOOK}.ipynb"))
    nb = _answered(course)
    answers = _answers(nb)
    helper = new_code_cell("def helper():\n    return 2")
    nb.cells.insert(_ids(nb).index("ans-softmax") + 1, helper)
    out = _restore(course, nb)
    expected = _expected(course, answers)
    expected.insert(_ids(course["source"]).index("ans-softmax") + 1, helper)
    assert out.cells == expected


def test_written_answer_keeps_its_attachments(course):
    nb = _answered(course)
    essay = _cell(nb, "essay")
    essay.source = "Scores grow with d_k, see ![plot](attachment:plot.png)"
    essay["attachments"] = {"plot.png": {"image/png": "iVBORw0KGgo="}}
    nbformat.validate(nb)
    out = _restore(course, nb)
    assert _cell(out, "essay").source == essay.source
    assert _cell(out, "essay").get("attachments") == essay["attachments"]


def test_an_added_cell_keeps_no_metadata_a_page_would_print_as_markup(course):
    """The feedback page and formgrader print tags as CSS classes and a raw cell by its format."""
    nb = _answered(course)
    code = new_code_cell("y = 2", metadata={"tags": ["ok_tag", "x modal-backdrop in"], "scrolled": True,
                                            "widgets": {"state": 1}, "nbgrader": {"grade": True}})
    raw = nbformat.v4.new_raw_cell("<div class='modal'>x</div>", metadata={"raw_mimetype": "text/html"})
    nb.cells[2:2] = [code, raw]
    out = _restore(course, nb)
    kept_code = next(c for c in out.cells if c.source == "y = 2")
    assert kept_code.metadata == {"tags": ["ok_tag"], "scrolled": True}
    kept_raw = next(c for c in out.cells if c.cell_type == "raw")
    assert kept_raw.metadata == {} and kept_raw.source == raw.source


def test_the_notebook_metadata_is_the_releases(course):
    """``language_info`` becomes the class of every code block on the page."""
    nb = _answered(course)
    nb.metadata["language_info"] = {"name": "x modal-backdrop in"}
    nb.metadata["title"] = "<script>"
    out = _restore(course, nb)
    release = nbformat.read(str(course["root"] / RELEASE_DIR / ASSIGNMENT / f"{NOTEBOOK}.ipynb"), as_version=4)
    assert out.metadata == release.metadata


def test_an_added_cell_keeps_jupyter_metadata_only_of_the_schemas_types(course):
    """A wrong-typed display key would make the whole notebook fail nbformat's validation, ungraded."""
    nb = _answered(course)
    odd = new_code_cell("y = 3")
    odd.metadata = {"collapsed": "x", "scrolled": "auto", "editable": 1,
                    "jupyter": {"source_hidden": True, "outputs_hidden": "no", "x": 1},
                    "tags": ["a", "a", "b", 7], "execution": {"iopub.status.busy": 1}}
    bad_jupyter = new_markdown_cell("note")
    bad_jupyter.metadata = {"jupyter": "str", "tags": "not-a-list"}
    nb.cells[2:2] = [odd, bad_jupyter]
    out = _restore(course, nb)
    nbformat.validate(out)
    assert next(c for c in out.cells if c.source == "y = 3").metadata == {
        "scrolled": "auto", "jupyter": {"source_hidden": True}, "tags": ["a", "b"]}
    assert next(c for c in out.cells if c.source == "note").metadata == {}


def test_an_added_cell_never_takes_an_instructor_cells_id(course):
    """nbformat would rename one of two equal ids at random, perhaps the instructor's, which pages link to."""
    nb = _answered(course)
    instructor_ids = [c["id"] for c in course["source"].cells]
    copies = [new_code_cell(f"z = {n}") for n in range(4)]
    copies[0]["id"], copies[1]["id"], copies[2]["id"] = instructor_ids[3], "added-0", "bad id!"
    copies[3]["id"] = "mine"
    nb.cells[2:2] = copies
    out = _restore(course, nb)
    nbformat.validate(out)
    ids = [c["id"] for c in out.cells]
    assert len(ids) == len(set(ids))
    assert [c["id"] for c in out.cells if grade_id(c) is not None] == instructor_ids
    by_source = {c.source: c["id"] for c in out.cells}
    assert by_source["z = 1"] == "added-0" and by_source["z = 3"] == "mine"
    assert {by_source["z = 0"], by_source["z = 2"]} == {"added-1", "added-2"}
    assert _restore(course, copy.deepcopy(nb)).cells == out.cells  # the same in every grading


def test_an_answer_keeps_only_what_its_cell_type_may_hold(course):
    """Attachments belong to markdown; a code answer that carries some would fail validation."""
    nb = _answered(course)
    image = {"a.png": {"image/png": "iVBORw0KGgo="}}
    for cell in nb.cells:
        if is_answer_cell(cell):
            cell["attachments"] = dict(image, broken="x")
    nb.cells[2].source = ["def softmax(x):\n", "    return x\n"]
    out = _restore(course, nb)
    nbformat.validate(out)
    assert _cell(out, "ans-softmax").source == "def softmax(x):\n    return x\n"
    assert "attachments" not in _cell(out, "ans-softmax") and _cell(out, "essay")["attachments"] == image
    nb.cells[2].source = 5
    with pytest.raises(CellError, match="source is a int") as raised:
        _restore(course, nb)
    assert (raised.value.index, raised.value.grade_id) == (2, "ans-softmax")
