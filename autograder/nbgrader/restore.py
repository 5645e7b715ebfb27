"""`RestoreNotebookStructure`: the submission rebuilt on the source notebook, answers only.

The first sanitize step.  It takes the student's answer cells (by grade_id)
and the cells they added; everything else comes from the instructor's
source, so deleted, renamed, blanked or re-typed test cells come back and
edited points or metadata are discarded.
"""
from __future__ import annotations

import copy
from pathlib import Path

import nbformat
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor

from ..notebook.cells import CellError, grade_id, is_answer_cell


class RestoreNotebookStructure(NbGraderPreprocessor):
    """Rebuild the submission on the source notebook's skeleton, keeping only the answers."""

    def preprocess(self, nb: nbformat.NotebookNode, resources: dict) -> tuple[nbformat.NotebookNode, dict]:
        source = course_notebook(self, resources, "source_directory")
        stubs = {grade_id(c): c for c in course_notebook(self, resources, "release_directory").cells}
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
                    added = copy.deepcopy(cell)
                    added.get("metadata", {}).pop("nbgrader", None)
                    extras_after.setdefault(previous, []).append(added)
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
