"""`OverwriteGradedCells`: nbgrader's OverwriteCells, silent about the lesson's ungraded, named cells.

The lesson names a few cells that are neither graded, answers nor locked (the "diagnosis" scratch
cell): the name lets `RestoreNotebookStructure` put the source's version back, so a student's
experiments there do not run at grading.  nbgrader keeps only graded, answer and locked cells in its
gradebook, so its OverwriteCells warned "Cell 'diagnosis' does not exist in the database" for every
student.  Such a cell has nothing in the gradebook to overwrite it with, so this step leaves it alone.
"""
from __future__ import annotations

from nbgrader.preprocessors import OverwriteCells


class OverwriteGradedCells(OverwriteCells):
    """OverwriteCells for the cells the gradebook knows: graded, answer, locked or task cells."""

    def preprocess_cell(self, cell, resources, cell_index):
        meta = cell.metadata.get("nbgrader", {})
        if not any(meta.get(flag) for flag in ("grade", "solution", "locked", "task")):
            return cell, resources
        return super().preprocess_cell(cell, resources, cell_index)
