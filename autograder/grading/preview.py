"""Instructor preview: run one part's hidden checks inside the source notebook.

The source notebook's hidden-test lines call ``run_hidden_checks(part)``;
when the instructor runs that notebook with this package installed, the
checks run in-process against the notebook's own functions and print the
feedback a student would get.  It is a preview for authoring the exercise,
trusted code only: grading never comes here (it strips the hidden lines and
scores in `TrustedScoring`), and the forbidden-API tripwires of the sandboxed
runner are not active in this mode.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .feedback import render_text
from .hidden_checks import run_checks
from .local_student import LocalStudent

if TYPE_CHECKING:
    from .hidden_checks import PartResult


def preview(part: str, namespace: dict) -> PartResult:
    import torch

    results = run_checks(LocalStudent(namespace), [part], seed_key=("sdpa", "instructor-preview"),
                         context={"cuda": torch.cuda.is_available()})
    result = results[part]
    print("[教师预览，不计分] " + render_text(part, result, result.max_points, result.points))
    return result
