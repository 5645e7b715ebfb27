"""What the lesson's multiple-choice answers rely on holds for the numbers its cells print.

The why-scale exercise asks the student to read a table the experiment cell prints; its right answer (C)
makes claims about those numbers, including a threshold ("once d_k is past 8").  Each edition's cell is run
here as written and its table read back, so an edit of the experiment or of the option's text that makes
them disagree fails.
"""
import contextlib
import io
import math
import re

import jupytext
import matplotlib
import pytest
import torch

from autograder.notebook.editions import lesson_file
from tools.build_notebooks import ROOT

matplotlib.use("Agg")
OPTION_C = {"sdpa_en": r"- C\..*past (\d+)", "sdpa": r"- C\..*超过 (\d+) 之后"}


def _cell(assignment, grade_id):
    nb = jupytext.read(ROOT / lesson_file(assignment), fmt="md:myst")
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _table(assignment):
    """{d_k: (largest weight unscaled, scaled, Jacobian norm unscaled, scaled)} as the cell prints it."""
    import matplotlib.pyplot as plt

    printed = io.StringIO()
    namespace = {"torch": torch, "math": math, "plt": plt, "display": lambda *a: None,
                 "Described": lambda fig, text: plt.close(fig)}
    with contextlib.redirect_stdout(printed):
        exec(_cell(assignment, "why-scale").source, namespace)  # noqa: S102 - the course's own cell
    rows = re.findall(r"^\s*(\d+) \|\s+([\d.]+)\s+([\d.]+) \|\s+([\d.]+)\s+([\d.]+)$", printed.getvalue(), re.M)
    return {int(d): tuple(float(v) for v in values) for d, *values in rows}


@pytest.mark.parametrize("assignment", ["sdpa", "sdpa_en"])
def test_the_why_scale_answer_holds_for_the_printed_table(assignment):
    table = _table(assignment)
    dims = sorted(table)
    assert dims == [2 ** i for i in range(10)]
    peak, peak_scaled, grad, grad_scaled = (list(col) for col in zip(*(table[d] for d in dims)))
    task = _cell(assignment, "why-scale-task").source
    past = int(re.search(OPTION_C[assignment], task).group(1))
    # C: unscaled, the largest weight climbs towards 1; the gradient shrinks at every step past the threshold,
    # and not before it (the threshold is where the table turns); scaled, both stay roughly constant.
    assert all(b > a for a, b in zip(peak, peak[1:])) and peak[-1] > 0.9
    turn = dims.index(past)
    assert all(b < a for a, b in zip(grad[turn:], grad[turn + 1:]))
    assert grad[turn] >= grad[turn - 1] - 1e-3
    assert max(peak_scaled) / min(peak_scaled) < 1.5 and max(grad_scaled) / min(grad_scaled) < 1.2
    # A (weights closer to uniform, gradient grows) and B (scaled weights still tend to 1) are contradicted,
    # and so is D (scaling leaves the gradient alone).
    assert peak[-1] > peak[0] and grad[-1] < grad[0]
    assert peak_scaled[-1] < 0.5
    assert grad_scaled[-1] > 3 * grad[-1]
