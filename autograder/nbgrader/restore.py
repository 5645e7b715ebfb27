"""`RestoreNotebookStructure`: the submission rebuilt on the source notebook, answers only.

The first sanitize step.  It takes the student's answer cells (by grade_id)
and the cells they added; everything else comes from the instructor's
source, so deleted, renamed, blanked or re-typed test cells come back and
edited points or metadata are discarded.  The notebook's own metadata is the
release's, and an added cell keeps only its source, its attachments and the
metadata Jupyter writes (`_added_cell`): the feedback page and formgrader print
metadata into the page (``language_info`` as the code's CSS class, tags as the
cell's), where a student's would restyle or overlay it.  Before that, a
submission over the size both commands accept is refused (``notebook/submission.py``),
and a notebook whose own metadata names the other edition (renamed into this
one's folder) is refused (`MisplacedEdition`), with where to move it.
"""
from __future__ import annotations

import copy
import os
import re
from pathlib import Path

import nbformat
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor

from ..notebook.cells import CellError, grade_id, is_answer_cell
from ..notebook.editions import misplaced
from ..notebook.submission import SubmissionRefused, check_folder

# cell metadata Jupyter itself writes, each with the values nbformat's schema allows; nothing a page
# prints as markup (tags are filtered, below).  Any other key, or a value of another type, is dropped.
ADDED_CELL_METADATA = {
    "collapsed": lambda v: isinstance(v, bool),
    "scrolled": lambda v: isinstance(v, bool) or v == "auto",
    "editable": lambda v: isinstance(v, bool),
    "deletable": lambda v: isinstance(v, bool),
    "jupyter": lambda v: isinstance(v, dict),
    "tags": lambda v: isinstance(v, list),
}
JUPYTER_FLAGS = ("source_hidden", "outputs_hidden")
_TAG = re.compile(r"[A-Za-z0-9_-]{1,64}")
_CELL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # nbformat 4.5's cell id


def _text(value: object, what: str) -> str:
    """A cell's source as nbformat stores it: a string, or a list of strings to join."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(line, str) for line in value):
        return "".join(value)
    raise ValueError(f"its {what} is a {type(value).__name__}, not text")


def _attachments(cell: dict) -> dict | None:
    """A markdown cell's pasted images ({name: {mime: base64}}), or None where it has none of that shape."""
    found = cell.get("attachments")
    if not isinstance(found, dict):
        return None
    kept = {name: dict(data) for name, data in found.items()
            if isinstance(name, str) and isinstance(data, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in data.items())}
    return copy.deepcopy(kept) or None


def _added_metadata(meta: dict) -> dict:
    kept = {key: copy.deepcopy(meta[key]) for key, valid in ADDED_CELL_METADATA.items()
            if key in meta and valid(meta[key])}
    if "jupyter" in kept:
        kept["jupyter"] = {flag: kept["jupyter"][flag] for flag in JUPYTER_FLAGS
                           if isinstance(kept["jupyter"].get(flag), bool)}
    if "tags" in kept:  # unique, as the schema requires, and plain enough to be a CSS class
        kept["tags"] = list(dict.fromkeys(t for t in kept["tags"] if isinstance(t, str) and _TAG.fullmatch(t)))
    return kept


def _added_cell(cell: dict) -> nbformat.NotebookNode:
    """A cell the student added, as plain student content: a raw cell keeps no format of its own."""
    kind = cell.get("cell_type")
    kind = kind if kind in ("code", "markdown", "raw") else "raw"
    source = cell.get("source", "")
    source = "".join(map(str, source)) if isinstance(source, list) else str(source)
    meta = cell.get("metadata", {})
    if not isinstance(meta, dict):
        raise ValueError(f"its metadata is a {type(meta).__name__}, not an object")
    kept = _added_metadata(meta) if kind != "raw" else {}
    added = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell,
             "raw": nbformat.v4.new_raw_cell}[kind](source, metadata=kept)
    if "id" in cell:  # the student's id (checked against the others by `_unique_ids`), or none: no random one
        added["id"] = cell["id"]
    else:
        added.pop("id", None)
    if kind == "code":
        added["outputs"], added["execution_count"] = copy.deepcopy(cell.get("outputs", [])), cell.get("execution_count")
    if kind == "markdown" and _attachments(cell):
        added["attachments"] = _attachments(cell)
    return added


def _unique_ids(cells: list, added: set[int]) -> None:
    """Give an added cell whose id is malformed, or is another cell's, the id ``added-N`` instead.

    nbformat would otherwise rename one of the two at random, perhaps the instructor's cell, which
    formgrader and the feedback page link to by id; a name derived from the order stays the same
    in every grading of the notebook.
    """
    taken = {cell["id"] for position, cell in enumerate(cells) if position not in added and "id" in cell}
    renamed = []
    for position in sorted(added):  # first every well-formed id that is still free, so it stays the student's
        cell = cells[position]
        if "id" not in cell:
            continue
        if isinstance(cell["id"], str) and _CELL_ID.fullmatch(cell["id"]) and cell["id"] not in taken:
            taken.add(cell["id"])
        else:
            renamed.append(cell)
    serial = 0
    for cell in renamed:
        while f"added-{serial}" in taken:
            serial += 1
        cell["id"] = f"added-{serial}"
        taken.add(cell["id"])


class MisplacedEdition(SubmissionRefused):
    """A notebook whose own metadata names another edition than the assignment it was submitted as."""


class RestoreNotebookStructure(NbGraderPreprocessor):
    """Rebuild the submission on the source notebook's skeleton, keeping only the answers."""

    def preprocess(self, nb: nbformat.NotebookNode, resources: dict) -> tuple[nbformat.NotebookNode, dict]:
        info = resources.get("nbgrader", {})
        folder = resources.get("metadata", {}).get("path")
        if folder:  # the submission as stock reads it: refused over the size sdpa-course refuses too
            coursedir = CourseDirectory(parent=self)
            check_folder(folder, coursedir.ignore, os.path.relpath(folder, coursedir.root))
        wrong_place = misplaced(nb.metadata, info.get("assignment"), f"{info.get('notebook', 'the notebook')}.ipynb")
        if wrong_place:  # the other edition's notebook, renamed: its answers would be graded in the wrong words
            raise MisplacedEdition(wrong_place)
        source = course_notebook(self, resources, "source_directory")
        release = course_notebook(self, resources, "release_directory")
        stubs = {grade_id(c): c for c in release.cells}
        known = {grade_id(c) for c in source.cells} - {None}
        # Cells the instructor left without nbgrader metadata come from the source too;
        # the student's unchanged copies of them are not cells they added.
        plain = {(c.cell_type, c.source) for c in source.cells if grade_id(c) is None}
        student_cells = {}
        extras_after = {None: []}  # grade_id of the previous known cell -> added cells
        previous = None
        for index, cell in enumerate(nb.cells):
            try:
                name = grade_id(cell)
                if name in known and name not in student_cells:
                    student_cells[name] = (index, cell)
                    previous = name
                elif name is None and (cell.get("cell_type"), cell.get("source")) in plain:
                    continue
                else:  # an added cell, or a copy of a known one: keep it as plain student code
                    extras_after.setdefault(previous, []).append(_added_cell(cell))
            except Exception as exc:
                raise CellError(index, None, f"cannot read this cell: {exc}", type(self).__name__) from exc
        cells = list(extras_after[None])
        added = set(range(len(cells)))
        for cell in source.cells:
            name = grade_id(cell)
            if is_answer_cell(cell):  # the student's answer, or the released stub if they deleted it
                rebuilt = copy.deepcopy(stubs[name])
                if name in student_cells:
                    index, answer = student_cells[name]
                    try:
                        rebuilt.source = _text(answer.get("source", ""), "source")
                    except ValueError as exc:
                        raise CellError(index, name, f"cannot read this answer: {exc}",
                                        type(self).__name__) from exc
                    if rebuilt.cell_type == "markdown" and _attachments(answer):  # images pasted into it
                        rebuilt["attachments"] = _attachments(answer)
            else:  # everything else exactly as the instructor wrote it
                rebuilt = copy.deepcopy(cell)
            cells.append(rebuilt)
            if name is not None:
                added.update(range(len(cells), len(cells) + len(extras_after.get(name, []))))
                cells.extend(extras_after.get(name, []))
        _unique_ids(cells, added)
        nb.cells = cells
        nb.metadata = copy.deepcopy(release.metadata)
        return nb, resources


def course_notebook(parent: object, resources: dict, step: str) -> nbformat.NotebookNode:
    """The instructor's copy of this notebook in `step` ("source_directory", "release_directory")."""
    coursedir = CourseDirectory(parent=parent)
    info = resources["nbgrader"]
    path = Path(coursedir.format_path(getattr(coursedir, step), ".", info["assignment"])) / (
        info["notebook"] + ".ipynb")
    if not path.exists():
        raise FileNotFoundError(f"notebook {path} is missing: run `nbgrader generate_assignment "
                                f"{info['assignment']}` (or `make release`) first")
    return nbformat.read(str(path), as_version=4)
