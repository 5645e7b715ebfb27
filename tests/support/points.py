"""The course's points, read from the source notebooks (where an author sets them), never written in a test."""
import functools

import nbformat

from autograder.notebook.cells import is_test_cell, nbgrader_meta, part_of
from autograder.notebook.editions import COURSE, EDITIONS


@functools.cache
def _source(assignment: str) -> nbformat.NotebookNode:
    from catalogue import ROOT

    return nbformat.read(str(ROOT / "source" / assignment / f"{assignment}.ipynb"), as_version=4)


@functools.cache
def grade_cells(assignment: str = COURSE) -> dict[str, tuple[float, bool]]:
    """{grade_id: (points, graded by hand?)} of the edition's source notebook."""
    nb = _source(assignment)
    return {meta["grade_id"]: (float(meta.get("points", 0)), bool(meta.get("solution")))
            for meta in (nbgrader_meta(cell) for cell in nb.cells) if meta.get("grade")}


@functools.cache
def part_points(assignment: str = COURSE) -> dict[str, float]:
    """{part: points} of the automatically graded cells."""
    nb = _source(assignment)
    return {part_of(cell): float(nbgrader_meta(cell).get("points", 0)) for cell in nb.cells if is_test_cell(cell)}


AUTOMATIC = sum(part_points().values())  # full automatic marks
TOTAL = sum(points for points, _ in grade_cells().values())  # automatic and by hand
assert all(part_points(e) == part_points() for e in EDITIONS), "the editions give different points"
