"""Grades to upload: ``sdpa-course export [--format csv|canvas|moodle]``, and ``nbgrader export`` through
`CourseExportPlugin` (``c.ExportApp.plugin_class`` in nbgrader_config.py).

The course has one nbgrader assignment per edition (``sdpa`` in Chinese, ``sdpa_en`` in English), and a
student takes one of them.  nbgrader's own CSV export lists every student under every assignment, with a
0 where they submitted nothing, so each student would appear twice and once with a false zero.  Here a
student appears once, in the edition they submitted, with that edition named; a student who submitted
both is listed with the submission made last (it is what they handed in), and the command says so.

Formats (each documented by its system; the fields matched are listed in docs/instructor/export.md):

- ``csv``: one row per student: id, names, e-mail, edition, submission time, late penalty, score, maximum,
  then one column per graded part (``softmax``, ``apply_mask``, …) and per written answer.
- ``canvas``: Canvas's gradebook import: ``Student, ID, SIS User ID, SIS Login ID, Section`` and one
  assignment column holding the score; a ``Points Possible`` row under the header.  The nbgrader student id
  goes in ``SIS Login ID``, the column Canvas matches a row on when the others are empty.
- ``moodle``: Moodle's grade import from a CSV file: a ``Username`` column to map to the user's username,
  names and e-mail (to check the mapping by eye), and one column holding the score.
"""
from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Optional, Union

import nbformat
from nbgrader.plugins import ExportPlugin

from .batch.coursedir import CourseError, load_app, sqlite_path
from .notebook import editions
from .notebook.cells import grade_id, part_of

FORMATS = ("csv", "canvas", "moodle")
COURSE_TITLE = "Scaled dot-product attention"  # the assignment column's name in Canvas and Moodle


@dataclass
class Row:
    """One student's graded submission of one edition."""

    student: str
    last_name: str
    first_name: str
    email: str
    edition: str
    timestamp: str
    late_penalty: float
    score: float
    max_score: float
    parts: dict = field(default_factory=dict)  # column (part or written answer) -> points
    awaiting: list = field(default_factory=list)  # answers a person has yet to grade (0 in `score` until then)


def columns(course: Union[str, os.PathLike], assignment: str) -> dict[str, str]:
    """{grade cell id: its column}, in notebook order: a test cell's column is the part it scores, a written
    answer's its own id.  The editions have the same grade cells, so their columns line up."""
    path = os.path.join(course, "source", assignment, f"{assignment}.ipynb")
    if not os.path.exists(path):
        return {}
    nb = nbformat.read(path, as_version=4)
    found = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and grade_id(cell):
            found[grade_id(cell)] = part_of(cell) or grade_id(cell)
    return found


def rows(gradebook, coursedir, assignments: Iterable[str] = tuple(editions.EDITIONS),
         students: Sequence[str] = ()) -> tuple[list[Row], list[str]]:
    """(every graded submission of the course's editions in `gradebook`, an open nbgrader `Gradebook`; a line
    for each submission that autograde did not grade).  `coursedir` is nbgrader's ``CourseDirectory``.

    A submission that autograde failed on (a notebook of the other edition, say) still has its gradebook
    entry, with no automatic score: exported, it would be a silent 0.  It is left out and named instead."""
    from nbgrader.api import MissingEntry

    course = coursedir.root
    found, ungraded = [], []
    for assignment in assignments:
        try:
            gradebook.find_assignment(assignment)
        except MissingEntry:
            continue
        named = columns(course, assignment)
        for student in sorted(gradebook.students, key=lambda s: s.id):
            if students and student.id not in students:
                continue
            try:
                submission = gradebook.find_submission(assignment, student.id)
            except MissingEntry:
                continue  # not submitted: no row (the other edition may have one)
            why = _not_autograded(coursedir, student.id, assignment, [nb.name for nb in submission.notebooks])
            if why:
                ungraded.append(why)
                continue
            penalty = float(submission.late_submission_penalty or 0)
            row = Row(student.id, student.last_name or "", student.first_name or "", student.email or "", assignment,
                      str(submission.timestamp or ""), penalty, max(0.0, float(submission.score) - penalty),
                      float(submission.max_score))
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    column = named.get(grade.name, grade.name)
                    row.parts[column] = row.parts.get(column, 0.0) + float(grade.score)
                    if grade.needs_manual_grade:
                        row.awaiting.append(column)
            found.append(row)
    return found, ungraded


def _not_autograded(coursedir, student: str, assignment: str, notebooks: list[str]) -> Optional[str]:
    """Why `student`'s submission of `assignment` has no autograded notebook (None when it has one)."""
    graded = coursedir.format_path(coursedir.autograded_directory, student, assignment)
    if all(os.path.exists(os.path.join(graded, f"{name}.ipynb")) for name in notebooks):
        return None
    submitted = coursedir.format_path(coursedir.submitted_directory, student, assignment)
    cause = "autograde did not finish it (its log says why)"
    for name in notebooks:
        try:
            nb = nbformat.read(os.path.join(submitted, f"{name}.ipynb"), as_version=4)
        except (OSError, ValueError) as exc:
            cause = f"{name}.ipynb cannot be read ({type(exc).__name__})"
            break
        wrong_place = editions.misplaced(nb.metadata, assignment, f"{name}.ipynb")
        if wrong_place:
            cause = wrong_place.replace("<student>", student)
            break
    return (f"{student}'s {assignment} submission is not graded, so it is not in this file: {cause}; "
            f"then run autograde again and export")


def one_per_student(found: list[Row]) -> tuple[list[Row], list[str]]:
    """(one row per student, the lines that say which students submitted more than one edition and which
    exported scores still count an answer a person has not graded as 0)."""
    chosen, notes = {}, []
    for row in sorted(found, key=lambda r: (r.student, r.timestamp)):
        if row.student in chosen:
            notes.append(f"{row.student} submitted {chosen[row.student].edition} and {row.edition}: "
                         f"{row.edition} (submitted last, {row.timestamp}) is exported")
        chosen[row.student] = row
    waiting = [row for row in chosen.values() if row.awaiting]
    if waiting:
        shown = ", ".join(f"{row.student} ({', '.join(row.awaiting)})" for row in sorted(waiting,
                                                                                       key=lambda r: r.student)[:10])
        more = f" and {len(waiting) - 10} more" if len(waiting) > 10 else ""
        notes.append(f"{len(waiting)} student{'s' * (len(waiting) != 1)} with answers not yet graded by hand, "
                     f"counted as 0 in this file: {shown}{more} — grade them in formgrader (Manual Grading), then "
                     "export again")
    return [chosen[s] for s in sorted(chosen)], notes


def _number(value: float) -> str:
    return f"{value:g}"


def write(found: list[Row], fmt: str, out) -> None:
    """Write `found` to the open text file `out` in `fmt` (one of FORMATS)."""
    writer = csv.writer(out, lineterminator="\n")
    if fmt == "csv":
        parts = list(dict.fromkeys(column for row in found for column in row.parts))
        writer.writerow(["student_id", "last_name", "first_name", "email", "edition", "timestamp",
                         "late_submission_penalty", "score", "max_score", *parts])
        for r in found:
            writer.writerow([r.student, r.last_name, r.first_name, r.email, r.edition, r.timestamp,
                             _number(r.late_penalty), _number(r.score), _number(r.max_score),
                             *(_number(r.parts[p]) if p in r.parts else "" for p in parts)])
    elif fmt == "canvas":
        writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", COURSE_TITLE])
        most = max((r.max_score for r in found), default=0.0)
        writer.writerow(["Points Possible", "", "", "", "", _number(most)])
        for r in found:
            name = ", ".join(n for n in (r.last_name, r.first_name) if n) or r.student
            writer.writerow([name, "", "", r.student, "", _number(r.score)])
    elif fmt == "moodle":
        writer.writerow(["Username", "First name", "Last name", "Email address", COURSE_TITLE])
        for r in found:
            writer.writerow([r.student, r.first_name, r.last_name, r.email, _number(r.score)])
    else:
        raise CourseError(f"unknown export format {fmt!r}: choose one of {', '.join(FORMATS)}")


def export(course: Union[str, os.PathLike], fmt: str = "csv", out: Optional[Union[str, os.PathLike]] = None,
           nbgrader_args: Sequence[str] = (), assignments: Sequence[str] = tuple(editions.EDITIONS)
           ) -> tuple[str, int, list[str]]:
    """Write the grades of `assignments` (editions) in `fmt`; returns (the file written, its number of students,
    notes)."""
    from nbgrader.api import Gradebook

    coursedir = load_app(course, nbgrader_args).coursedir
    if not os.path.exists(sqlite_path(coursedir.db_url)):
        raise CourseError(f"no gradebook at {sqlite_path(coursedir.db_url)} — run `sdpa-course autograde` first")
    with Gradebook(coursedir.db_url, coursedir.course_id) as gradebook:
        found, ungraded = rows(gradebook, coursedir, assignments)
        found, notes = one_per_student(found)
        notes = ungraded + notes
    if not found:
        raise CourseError("no graded submission of any edition (" + ", ".join(assignments) +
                          ") in the gradebook — run `sdpa-course autograde` first")
    path = os.fspath(out) if out else os.path.join(course, f"grades-{fmt}.csv")
    with open(path, "w", encoding="utf-8", newline="") as f:  # utf-8: Canvas and Moodle both read it
        write(found, fmt, f)
    return path, len(found), notes


class CourseExportPlugin(ExportPlugin):
    """``nbgrader export``: one row per student who submitted an edition, a column per part (the ``csv``
    format above) instead of nbgrader's row per student and assignment."""

    def export(self, gradebook) -> None:
        dest = self.to or "grades.csv"
        assignments = list(self.assignment or editions.EDITIONS)
        found, ungraded = rows(gradebook, self.parent.coursedir, assignments, [str(s) for s in self.student])
        found, notes = one_per_student(found)
        for note in ungraded + notes:
            self.log.warning(note)
        with open(dest, "w", encoding="utf-8", newline="") as f:
            write(found, "csv", f)
        self.log.info("Exported %d students to %s", len(found), dest)
