"""The one home of what an nbgrader cell is to this course: ids, answers, test cells, parts.

Every other module asks here, so a change to the metadata schema or to how
a test cell names its part is made once.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from nbformat import NotebookNode

def number(index: int) -> int:
    """The cell at `index` (nbformat's, from 0) as a person counts it, from 1 at the top of the notebook: what
    every log line, failure line, report and feedback page shows, so they all name the same cell."""
    return index + 1


# The errors the lesson's visible checks raise to talk to the student (lesson/*.md): the message is what to
# read, the class name is the lesson's code.
VISIBLE_CHECK_ERRORS = frozenset({"NotDoneYet", "FixHelperFirst"})

HIDDEN_RE = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", re.S)
PART_RE = re.compile(r"run_hidden_checks\(\s*['\"]([a-z_]+)['\"]\s*\)")


class CellError(Exception):
    """A step failed on one cell; carries where, so the failure report names it.

    Raised (``from`` the original error) by the step that knows the cell's
    index in the notebook and its grade_id.
    """

    def __init__(self, index: Optional[int], grade_id: Optional[str], message: str, step: Optional[str] = None) -> None:
        super().__init__(message)
        self.index, self.grade_id, self.step = index, grade_id, step


def nbgrader_meta(cell: dict) -> dict:
    """The cell's nbgrader metadata ({} for a plain cell or malformed metadata)."""
    try:
        meta = cell.get("metadata", {}).get("nbgrader", {})
    except AttributeError:
        return {}
    return meta if isinstance(meta, dict) else {}


def grade_id(cell: dict) -> Optional[str]:
    """The cell's grade_id, or None."""
    return nbgrader_meta(cell).get("grade_id")


def is_answer_cell(cell: dict) -> bool:
    return bool(nbgrader_meta(cell).get("solution"))


def is_test_cell(cell: dict) -> bool:
    """An autograder test cell: graded, not an answer, code."""
    meta = nbgrader_meta(cell)
    return bool(meta.get("grade")) and not meta.get("solution") and cell.get("cell_type") == "code"


def student_code_cells(nb: NotebookNode) -> list[int]:
    """Indices of the code cells the student wrote: answer cells and cells they added."""
    return [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
            and (is_answer_cell(cell) or not grade_id(cell))]


def part_of(cell: dict) -> Optional[str]:
    """The graded part a test cell scores (the argument of its ``run_hidden_checks``), or None."""
    match = PART_RE.search(cell.get("source", ""))
    return match.group(1) if match else None


def without_hidden_tests(source: str) -> str:
    """A cell's source with the instructor's hidden-test region removed."""
    return HIDDEN_RE.sub("", source)


def code_cells(nb: NotebookNode) -> tuple[list[int], list[str]]:
    """(positions, sources): the notebook index of each code cell, and its code as the runner gets it (the
    hidden tests removed)."""
    positions = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    return positions, [without_hidden_tests(nb.cells[i].source) for i in positions]


def display_cells(nb: NotebookNode, positions: list[int]) -> list[int]:
    """Positions of provided code cells after the first answer: they only show output.

    The setup cells before the first answer (imports) keep the long timeout.
    """
    first_answer = next((i for i in positions if is_answer_cell(nb.cells[i])), len(nb.cells))
    return [pos for pos, index in enumerate(positions)
            if index > first_answer and nbgrader_meta(nb.cells[index]).get("locked")
            and not is_answer_cell(nb.cells[index])]
