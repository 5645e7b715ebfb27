"""Build the nbgrader source notebook and the solution notebook of every edition.

The lesson is authored as text, one MyST Markdown file per language
(``lesson/sdpa.zh.md``, ``lesson/sdpa.en.md``), read by jupytext.  This script
does only what jupytext does not:

- a text notebook keeps no cell ids, so each cell's id is its nbgrader ``grade_id``
  (the grader restores a tampered notebook cell by cell, by these ids);
- jupytext's own notebook metadata is left out of the built notebook;
- the solution notebook is the source minus its hidden-test regions: what a
  perfect student submits;
- an automatically graded cell's points are not written in the lesson: they are
  the sum of its part's check weights (``check_api.part_points``), the one
  place a part's points are declared.  Hand-graded cells keep theirs in the lesson;
- the points table of ``docs/instructor/grading.md`` (each graded cell's points,
  the total) is written from the built notebook, so it cannot drift either.

``tests/test_course_layout.py`` checks that the editions have the same cells, and
that the Chinese edition's solution cells are ``solutions/sdpa.py``, verbatim.
Run ``make notebooks`` after editing a lesson.

Usage: python -m tools.build_notebooks [--check]
"""
import argparse
import json
import re
import sys
from pathlib import Path

import jupytext
import nbformat

from autograder.grading.check_api import part_points
from autograder.notebook.cells import is_test_cell, part_of
from autograder.notebook.editions import COURSE, EDITIONS, METADATA_KEY, lesson_file

ROOT = Path(__file__).resolve().parents[1]


def source_path(assignment):
    return ROOT / "source" / assignment / f"{assignment}.ipynb"


def solution_path(assignment):
    return ROOT / "solutions" / f"{assignment}_solution.ipynb"


class LessonError(Exception):
    pass


def build_source(assignment, points=None):
    """The nbgrader source notebook of one edition, from its lesson file and the checks' weights (`points`)."""
    points = part_points() if points is None else points
    nb = jupytext.read(ROOT / lesson_file(assignment), fmt="md:myst")
    nb.metadata.pop("jupytext", None)
    nb.metadata[METADATA_KEY] = {"edition": assignment}  # read back by grading (``editions.misplaced``)
    nb.nbformat, nb.nbformat_minor = 4, 5
    for cell in nb.cells:
        meta = cell.metadata["nbgrader"]
        cell.id = meta["grade_id"]
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        if is_test_cell(cell):
            if "points" in meta:
                raise LessonError(f"{lesson_file(assignment)}: cell {meta['grade_id']} sets points; an automatically "
                                  "graded cell's points are its checks' @points — remove the line")
            if part_of(cell) not in points:
                raise LessonError(f"{lesson_file(assignment)}: cell {meta['grade_id']} runs the hidden checks of "
                                  f"{part_of(cell)!r}, which has no checks in course/checks/")
            weight = points[part_of(cell)]
            meta["points"] = int(weight) if weight == int(weight) else weight  # 10, as an author writes it
    return nb


def solution_notebook(nb):
    """The source notebook minus hidden-test regions: what a perfect student submits."""
    out = nbformat.from_dict(json.loads(json.dumps(nb)))
    for cell in out.cells:
        cell.source = re.sub(r"\n*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", "", cell.source, flags=re.S)
    return out


def render(nb):
    return nbformat.writes(nb) + "\n"


POINTS_PAGE = ROOT / "docs" / "instructor" / "grading.md"


def points_page(nb, page):
    """`page` with its points table's points, its rows (one per graded cell of `nb`, in order; a new cell's
    part named by its grade_id until someone describes it) and its totals taken from `nb`."""
    graded = [c.metadata["nbgrader"] for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    lines = page.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| grade_id |"))
    end = next((i for i in range(start + 2, len(lines)) if not lines[i].startswith("|")), len(lines))
    described = {}
    for line in lines[start + 2:end]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        described[cells[0].strip("`")] = cells[1]
    rows = [f"| `{m['grade_id']}` | {described.get(m['grade_id'], m['grade_id'])} | {m['points']:g} |"
            for m in graded]
    total = sum(m["points"] for m in graded)
    automatic = sum(m["points"] for m in graded if not m.get("solution"))
    text = "\n".join([*lines[:start + 2], *rows, *lines[end:]]) + "\n"
    text = re.sub(r"The notebook is worth [\d.]+ points", f"The notebook is worth {total:g} points", text)
    return re.sub(r"Total: [\d.]+ points, [\d.]+ of them automatic",
                  f"Total: {total:g} points, {automatic:g} of them automatic", text)


def targets():
    """{path: content} of every notebook the lessons build, and of the docs' points table."""
    out, points = {}, part_points()
    for assignment in EDITIONS:
        source = build_source(assignment, points)
        out[source_path(assignment)] = render(source)
        out[solution_path(assignment)] = render(solution_notebook(source))
    out[POINTS_PAGE] = points_page(build_source(COURSE, points),
                                   POINTS_PAGE.read_text(encoding="utf-8"))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed notebooks are stale")
    args = parser.parse_args()
    built = targets()
    stale = [path for path, content in built.items() if not path.exists() or path.read_text() != content]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is stale: run `make notebooks`", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(built[path])
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
