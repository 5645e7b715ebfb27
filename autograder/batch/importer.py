"""The gradebook's single writer: results from the workers into the real course.

It repeats, in the course's gradebook, the writes the converter made in the
worker's private one: the student and the submission with its timestamp
(as ``Autograde.init_assignment`` makes them), then the values nbgrader's
own steps (`SaveAutoGrades`, `AssignLatePenalties`, the zeroing of
notebooks not submitted) left in the worker's copy of this gradebook
(`autograde_entries`), in one transaction.  It checks every auto score
against the worker's, and only then publishes
``autograded/<student>/<assignment>/`` by a rename from staging.  So a
student is in ``autograded/`` only once their grades are committed.

A submission the converter failed on gets what stock ``nbgrader autograde``
leaves for it: the entries its steps wrote before the failure (the worker
reads them from its private gradebook, `written_before_failure`) and no
``autograded/`` folder.  For a notebook nbgrader cannot read (empty,
truncated, not UTF-8, not a notebook) that is the student and a submission
whose grades have no automatic score: 0 points in an export.
"""
from __future__ import annotations

import os
import shutil
import uuid
from typing import TYPE_CHECKING, Any, Optional

from .bundle import write_tree
from .coursedir import autograded_top, step_dir

if TYPE_CHECKING:
    from nbgrader.apps.autogradeapp import AutogradeApp

STAGING = ".sdpa-staging"


class ImportMismatch(Exception):
    pass


class Importer:
    """Writes results into the course: the gradebook (single writer) and autograded/."""

    def __init__(self, app: AutogradeApp, assignment: str) -> None:
        from nbgrader.converters import Autograde

        self.app, self.assignment = app, assignment
        self.create_student = Autograde(coursedir=app.coursedir, parent=app).create_student
        self.coursedir = app.coursedir
        self.staging = os.path.join(autograded_top(self.coursedir), STAGING)

    def clean_staging(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)

    def save(self, result: dict) -> tuple[float, float]:
        """Import one successful result; returns (score, max_score)."""
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # nbgrader's SQLAlchemy warnings, printed by every stock run too
            return self._save(result)

    def _submission_rows(self, gb, student, submission=True):
        """What Autograde.init_assignment writes: the student, then the submission with its timestamp."""
        coursedir, assignment = self.coursedir, self.assignment
        if self.create_student:
            gb.update_or_create_student(student)
        else:
            gb.find_student(student)
        if not submission:
            return
        timestamp = coursedir.get_existing_timestamp(
            step_dir(coursedir, coursedir.submitted_directory, student, assignment))
        if timestamp:
            gb.update_or_create_submission(assignment, student, timestamp=timestamp)
        else:
            gb.update_or_create_submission(assignment, student)

    def _save(self, result):
        from nbgrader.api import Gradebook

        student, coursedir, assignment = result["student"], self.coursedir, self.assignment
        written = result.get("written") or {}
        if not written.get("submission"):
            raise ImportMismatch("the worker sent no gradebook entries for a submission it graded")
        os.makedirs(self.staging, exist_ok=True)
        stage = os.path.join(self.staging, f"{uuid.uuid4().hex[:12]}")
        write_tree(stage, result["files"])
        with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
            self._submission_rows(gb, student)
            self._apply(gb, student, written["values"])
            gb.db.commit()
            for name, expected in result["grades"].items():
                sub = gb.find_submission_notebook(name, assignment, student)
                got = {g.name: g.auto_score for g in sub.grades}
                if got != expected:
                    raise ImportMismatch(f"gradebook import differs from the worker's grades for {name}: "
                                         f"{got} != {expected}")
            submission = gb.find_submission(assignment, student)
            score, max_score = submission.score, submission.max_score
        # Publish: only now does the student appear in autograded/.
        dest = step_dir(coursedir, coursedir.autograded_directory, student, assignment)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        old = None
        if os.path.exists(dest):
            old = os.path.join(self.staging, f"old-{uuid.uuid4().hex[:12]}")
            os.replace(dest, old)
        os.replace(stage, dest)
        if old:
            shutil.rmtree(old, ignore_errors=True)
        return score, max_score


    def save_failed(self, result: dict) -> bool:
        """Leave a submission the converter failed on as stock `nbgrader autograde` does.

        Its ``autograded/`` folder goes (nbgrader removes a failed one), then
        the gradebook gets the entries nbgrader's steps wrote before the
        failure (``result["written"]``, see `written_before_failure`).
        Returns False, and changes nothing, for a failure nbgrader never
        reached (unreadable files, a dead or late worker).
        """
        import warnings

        written = result.get("written")
        if not written:
            return False
        self._unpublish(result["student"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._save_written(result["student"], written)
        return True

    def save_refused(self, student: str) -> None:
        """Leave a submission refused before grading (``notebook.submission``) as stock leaves one its first step
        refused: its autograded/ folder gone, the student and the submission in the gradebook, nothing graded."""
        import warnings

        from nbgrader.api import Gradebook

        self._unpublish(student)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
                self._submission_rows(gb, student)
                gb.db.commit()

    def _unpublish(self, student):
        dest = step_dir(self.coursedir, self.coursedir.autograded_directory, student, self.assignment)
        if os.path.exists(dest):
            os.makedirs(self.staging, exist_ok=True)
            old = os.path.join(self.staging, f"failed-{uuid.uuid4().hex[:12]}")
            os.replace(dest, old)
            shutil.rmtree(old, ignore_errors=True)

    def _save_written(self, student, written):
        from nbgrader.api import Gradebook

        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            if written["student"]:
                self._submission_rows(gb, student, submission=written["submission"])
            self._apply(gb, student, written["values"])
            gb.db.commit()

    def _apply(self, gb, student, values):
        """Set `values` ({(kind, notebook, cell, column): value}, `autograde_entries`) on this student's rows;
        each notebook's rows are read once.  Only the columns `nbgrader autograde` writes."""
        rows = {}
        for (kind, notebook, cell, column), value in values.items():
            if column not in AUTOGRADE_COLUMNS.get(kind, ()):
                raise ImportMismatch(f"the worker sent a value for {kind} column {column!r}")
            if notebook not in rows:
                nb = gb.find_submission_notebook(notebook, self.assignment, student)
                rows[notebook] = {("notebook", ""): nb, **{("grade", g.name): g for g in nb.grades},
                                  **{("comment", c.name): c for c in nb.comments}}
            row = rows[notebook].get((kind, cell))
            if row is None:
                raise ImportMismatch(f"the course's gradebook has no {kind} {cell!r} in {notebook}")
            setattr(row, column, value)


# The columns of a submission that `nbgrader autograde` writes (the rest belong to manual grading).
AUTOGRADE_COLUMNS = {"notebook": ("late_submission_penalty",), "grade": ("auto_score", "needs_manual_grade"),
                     "comment": ("auto_comment",)}


def autograde_entries(db_url: str, course_id: str, assignment: str, student: str) -> dict:
    """One student's gradebook entries that `nbgrader autograde` writes.

    {"student": exists, "submission": exists, "values": {(kind, notebook,
    cell, column): value}} with kind "notebook", "grade" or "comment"
    (cell "" for a notebook) and the columns of `AUTOGRADE_COLUMNS`.
    """
    from nbgrader.api import Gradebook, MissingEntry

    entries: dict[str, Any] = {"student": False, "submission": False, "values": {}}
    with Gradebook(db_url, course_id) as gb:
        try:
            gb.find_student(student)
            entries["student"] = True
            submission = gb.find_submission(assignment, student)
        except MissingEntry:
            return entries
        entries["submission"] = True
        values = entries["values"]
        for notebook in submission.notebooks:
            rows = [("notebook", "", notebook)]
            rows += [("grade", grade.name, grade) for grade in notebook.grades]
            rows += [("comment", comment.name, comment) for comment in notebook.comments]
            for kind, cell, row in rows:
                for column in AUTOGRADE_COLUMNS[kind]:
                    values[(kind, notebook.name, cell, column)] = getattr(row, column)
    return entries


def written_before_failure(converter: Any, assignment: str, student: str) -> Optional[dict]:
    """What nbgrader's converter wrote for `student` before it failed, for `Importer.save_failed`.

    `converter` (``worker.autograde_class``) read the student's entries in
    the worker's private gradebook before it wrote any; the difference from
    them now is what stock `nbgrader autograde` leaves in the gradebook for
    this submission.  None where the converter never began the submission
    or the private gradebook cannot be read.
    """
    before = getattr(converter, "entries_before", None)
    if before is None:
        return None
    try:
        after = autograde_entries(converter.coursedir.db_url, converter.coursedir.course_id, assignment, student)
    except Exception:  # noqa: BLE001 - the failure is reported either way
        return None
    after["values"] = {key: value for key, value in after["values"].items()
                       if key not in before["values"] or before["values"][key] != value}
    return after
