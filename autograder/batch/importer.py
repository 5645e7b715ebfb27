"""The gradebook's single writer: results from the workers into the real course.

It repeats, in the course's gradebook, the writes the converter made in the
worker's private one (student, submission with its timestamp, then
nbgrader's own `SaveAutoGrades` and `AssignLatePenalties` on the autograded
notebook), checks every auto score against the worker's, and only then
publishes ``autograded/<student>/<assignment>/`` by a rename from staging.
So a student is in ``autograded/`` only once their grades are committed.
"""
from __future__ import annotations

import os
import shutil
import uuid
from typing import TYPE_CHECKING

from .bundle import write_tree
from .coursedir import step_dir

if TYPE_CHECKING:
    from nbgrader.apps.autogradeapp import AutogradeApp

STAGING = ".sdpa-staging"


class ImportMismatch(Exception):
    pass


class Importer:
    """Writes results into the course: the gradebook (single writer) and autograded/."""

    def __init__(self, app: AutogradeApp, assignment: str) -> None:
        from nbgrader.converters import Autograde
        from nbgrader.preprocessors import AssignLatePenalties, SaveAutoGrades

        self.app, self.assignment = app, assignment
        self.create_student = Autograde(coursedir=app.coursedir, parent=app).create_student
        self.coursedir = app.coursedir
        self.staging = os.path.join(step_dir(self.coursedir, self.coursedir.autograded_directory, ".", "."), STAGING)
        self.save_grades = SaveAutoGrades(parent=app)
        self.late_penalties = AssignLatePenalties(parent=app)

    def clean_staging(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)

    def save(self, result: dict) -> tuple[float, float]:
        """Import one successful result; returns (score, max_score)."""
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # nbgrader's SQLAlchemy warnings, printed by every stock run too
            return self._save(result)

    def _save(self, result):
        from nbgrader.api import Gradebook, MissingEntry

        student, coursedir, assignment = result["student"], self.coursedir, self.assignment
        os.makedirs(self.staging, exist_ok=True)
        stage = os.path.join(self.staging, f"{uuid.uuid4().hex[:12]}")
        write_tree(stage, result["files"])
        db_url = coursedir.db_url
        timestamp = coursedir.get_existing_timestamp(
            step_dir(coursedir, coursedir.submitted_directory, student, assignment))
        # What Autograde.init_assignment writes...
        with Gradebook(db_url, coursedir.course_id) as gb:
            if self.create_student:
                gb.update_or_create_student(student)
            else:
                gb.find_student(student)
            if timestamp:
                gb.update_or_create_submission(assignment, student, timestamp=timestamp)
            else:
                gb.update_or_create_submission(assignment, student)
        # ...then what its SaveAutoGrades and AssignLatePenalties steps write, by those very steps.
        import nbformat

        for name in result["notebooks"]:
            nb = nbformat.read(os.path.join(stage, f"{name}.ipynb"), as_version=4)
            resources = {"nbgrader": {"student": student, "assignment": assignment, "notebook": name,
                                      "db_url": db_url}}
            self.save_grades.preprocess(nb, resources)
            self.late_penalties.preprocess(nb, resources)
        with Gradebook(db_url, coursedir.course_id) as gb:
            # Autograde zeroes notebooks of the assignment that were not submitted.
            for notebook in gb.find_assignment(assignment).notebooks:
                if notebook.name not in result["notebooks"]:
                    try:
                        sub = gb.find_submission_notebook(notebook.name, assignment, student)
                    except MissingEntry:
                        continue
                    for grade in sub.grades:
                        grade.auto_score = 0
                        grade.needs_manual_grade = False
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

