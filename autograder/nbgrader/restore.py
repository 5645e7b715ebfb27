"""`RestoreNotebookStructure`: the submission rebuilt on the source notebook, answers only.

The first sanitize step.  It takes the student's answer cells (by grade_id)
and the cells they added; everything else comes from the instructor's
source, so deleted, renamed, blanked or re-typed test cells come back and
edited points or metadata are discarded.  The notebook's own metadata is the
release's, and an added cell keeps only its source, its attachments and the
metadata Jupyter writes (`_added_cell`): the feedback page and formgrader print
metadata into the page (``language_info`` as the code's CSS class, tags as the
cell's), where a student's would restyle or overlay it.
"""
from __future__ import annotations

import copy
import re
from pathlib import Path

import nbformat
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor

from ..notebook.cells import CellError, grade_id, is_answer_cell

# cell metadata Jupyter itself writes, and nothing a page prints as markup (tags are filtered, below)
ADDED_CELL_METADATA = ("collapsed", "scrolled", "jupyter", "editable", "deletable", "execution", "tags")
_TAG = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _added_cell(cell: dict) -> nbformat.NotebookNode:
    """A cell the student added, as plain student content: a raw cell keeps no format of its own."""
    kind = cell.get("cell_type")
    kind = kind if kind in ("code", "markdown", "raw") else "raw"
    source = cell.get("source", "")
    source = "".join(source) if isinstance(source, list) else str(source)
    meta = cell.get("metadata", {})
    if not isinstance(meta, dict):
        raise ValueError(f"its metadata is a {type(meta).__name__}, not an object")
    kept = {key: copy.deepcopy(meta[key]) for key in ADDED_CELL_METADATA if key in meta and kind != "raw"}
    if "tags" in kept:
        kept["tags"] = [t for t in kept["tags"] if isinstance(t, str) and _TAG.fullmatch(t)] \
            if isinstance(kept["tags"], list) else []
    added = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell,
             "raw": nbformat.v4.new_raw_cell}[kind](source, metadata=kept)
    if "id" in cell:  # the student's id (nbformat checks it), or none, as the cell had: no random new one
        added["id"] = cell["id"]
    else:
        added.pop("id", None)
    if kind == "code":
        added["outputs"], added["execution_count"] = copy.deepcopy(cell.get("outputs", [])), cell.get("execution_count")
    if kind == "markdown" and isinstance(cell.get("attachments"), dict):
        added["attachments"] = copy.deepcopy(cell["attachments"])
    return added


class RestoreNotebookStructure(NbGraderPreprocessor):
    """Rebuild the submission on the source notebook's skeleton, keeping only the answers."""

    def preprocess(self, nb: nbformat.NotebookNode, resources: dict) -> tuple[nbformat.NotebookNode, dict]:
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
                    student_cells[name] = cell
                    previous = name
                elif name is None and (cell.get("cell_type"), cell.get("source")) in plain:
                    continue
                else:  # an added cell, or a copy of a known one: keep it as plain student code
                    extras_after.setdefault(previous, []).append(_added_cell(cell))
            except Exception as exc:
                raise CellError(index, None, f"cannot read this cell: {exc}", type(self).__name__) from exc
        cells = list(extras_after[None])
        for cell in source.cells:
            name = grade_id(cell)
            if is_answer_cell(cell):  # the student's answer, or the released stub if they deleted it
                rebuilt = copy.deepcopy(stubs[name])
                if name in student_cells:
                    answer = student_cells[name]
                    rebuilt.source = answer.get("source", "")
                    if answer.get("attachments"):  # images pasted into a written answer
                        rebuilt["attachments"] = copy.deepcopy(answer["attachments"])
            else:  # everything else exactly as the instructor wrote it
                rebuilt = copy.deepcopy(cell)
            cells.append(rebuilt)
            if name is not None:
                cells.extend(extras_after.get(name, []))
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
