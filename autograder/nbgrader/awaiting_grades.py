"""`GetGradesShowingAwaiting`: nbgrader's GetGrades, marking the grades a person has not given yet.

nbgrader's feedback shows an ungraded written answer as "(Score: 0.0 / 2.5)", which a student reads
as a zero.  This step records, for each grade cell, whether the gradebook still waits for a person
(`needs_manual_grade`: a written answer not yet graded, or a part held for review), and the feedback
template (``templates/feedback/sdpa_feedback.html.j2``) says "awaiting your instructor's grade" there,
until a score is entered by hand.
"""
from __future__ import annotations

from nbgrader.preprocessors import GetGrades

AWAITING_KEY = "sdpa_awaiting"  # in a cell's nbgrader metadata, for the feedback template


class GetGradesShowingAwaiting(GetGrades):
    """GetGrades; each grade cell also says whether its grade still waits for a person."""

    def _get_score(self, cell, resources):
        super()._get_score(cell, resources)
        grade = self.gradebook.find_grade(cell.metadata["nbgrader"]["grade_id"], self.notebook_id,
                                          self.assignment_id, self.student_id)
        # a score entered by hand counts, whether or not the flag was cleared (formgrader clears it; a
        # script that sets `manual_score` may not)
        cell.metadata.nbgrader[AWAITING_KEY] = bool(grade.needs_manual_grade) and grade.manual_score is None
