"""`SaveAutoGradesWithHolds`: nbgrader's SaveAutoGrades, with the held parts left to a person.

`TrustedScoring` holds every part of a notebook whose code the grader cannot
read to the end (``grading/code_review.py``): its cell output says 0, so a
stock SaveAutoGrades counts nothing, and this step also clears the automatic
score and marks the grade "needs manual grade".  Formgrader then lists the
submission for review, shows the flagged lines in the cell's output, and the
grade counts once an instructor enters a score.
"""
from __future__ import annotations

from nbgrader.preprocessors import SaveAutoGrades
from nbgrader.utils import is_grade

from .trusted_scoring import HELD_KEY


class SaveAutoGradesWithHolds(SaveAutoGrades):
    """SaveAutoGrades; a grade cell `TrustedScoring` held gets no automatic score and needs a person."""

    def preprocess_cell(self, cell, resources, cell_index):
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if is_grade(cell) and grade_id in resources.get(HELD_KEY, ()):
            grade = self.gradebook.find_grade(grade_id, self.notebook_id, self.assignment_id, self.student_id)
            grade.auto_score = None
            grade.needs_manual_grade = True
            self.gradebook.db.commit()
        return cell, resources
