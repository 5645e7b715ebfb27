"""Fairness: whatever form of a right answer the visible check accepts, the hidden check accepts.

One catalogue of answer forms (ints, floats, Fraction, Decimal, numpy
scalars and arrays, tensors, lists and tuples; and forms both must refuse)
goes through the release notebook's visible check cell, run here as the
student runs it, and through the hidden check, fed through the wire as in
grading.  Their verdicts must agree on every form.
"""
import math
from decimal import Decimal
from fractions import Fraction

import nbformat
import numpy as np
import pytest
import torch

from autograder.demo import course
from autograder.grading.assertions import CheckFailed
from autograder.grading.local_student import LocalStudent, reference_namespace
from autograder.sandbox.guest import wire
from course.checks import test_hand_calculation as hand
from course.checks import test_shapes as shapes

RIGHT = {"hand_scores": [0.0, 2 * math.log(2), 2 * math.log(5)], "hand_scaled": [0.0, math.log(2), math.log(5)],
         "hand_weights": [Fraction(1, 8), Fraction(2, 8), Fraction(5, 8)], "hand_output": 12,
         "hand_masked_output": 16 / 3, "shape_scores": (2, 4, 5, 7), "shape_weights": (2, 4, 5, 7),
         "shape_output": (2, 4, 5, 16), "shape_padding_mask": (2, 1, 1, 7), "softmax_dim": -1}
W = [0.125, 0.25, 0.625]
NUMBER_FORMS = {  # name -> (form, hidden-check function)
    "weights list of Fraction": ("hand_weights", [Fraction(1, 8), Fraction(1, 4), Fraction(5, 8)]),
    "weights tuple": ("hand_weights", tuple(W)),
    "weights list of Decimal": ("hand_weights", [Decimal("0.125"), Decimal("0.25"), Decimal("0.625")]),
    "weights numpy array": ("hand_weights", np.array(W)),
    "weights float32 numpy array": ("hand_weights", np.array(W, dtype=np.float32)),
    "weights tensor": ("hand_weights", torch.tensor(W)),
    "weights [1, 3] tensor": ("hand_weights", torch.tensor([W])),
    "weights list of numpy scalars": ("hand_weights", [np.float64(x) for x in W]),
    "weights list of 0-d tensors": ("hand_weights", [torch.tensor(x) for x in W]),
    "weights list of 1-element arrays": ("hand_weights", [np.array([x]) for x in W]),
    "output int": ("hand_output", 12),
    "output Decimal": ("hand_output", Decimal(12)),
    "output Fraction": ("hand_output", Fraction(12)),
    "output numpy scalar": ("hand_output", np.float32(12)),
    "output 0-d tensor": ("hand_output", torch.tensor(12.0)),
    "output 1-element array": ("hand_output", np.array([12.0])),
    "output one-item list": ("hand_output", [12.0]),
    "masked output 0-d array": ("hand_masked_output", np.array(16 / 3)),
    # refused by both
    "weights as strings": ("hand_weights", ["0.125", "0.25", "0.625"]),
    "output as string": ("hand_output", "12"),
    "output as bool": ("hand_output", True),
    "weights with a None": ("hand_weights", [0.125, None, 0.625]),
    "weights bool tensor": ("hand_weights", torch.tensor([True, False, True])),
    "weights too many": ("hand_weights", W + [0.0]),
    "output complex": ("hand_output", complex(12, 0)),
}
SHAPE_FORMS = {
    "tuple": ("shape_scores", (2, 4, 5, 7)),
    "list": ("shape_scores", [2, 4, 5, 7]),
    "torch.Size": ("shape_scores", torch.Size([2, 4, 5, 7])),
    "numpy int array": ("shape_scores", np.array([2, 4, 5, 7])),
    "int tensor": ("shape_scores", torch.tensor([2, 4, 5, 7])),
    "numpy ints in a tuple": ("shape_scores", tuple(np.int64(x) for x in (2, 4, 5, 7))),
    "dim numpy int": ("softmax_dim", np.int64(-1)),
    "dim 0-d int tensor": ("softmax_dim", torch.tensor(-1)),
    "dim 0-d numpy array": ("softmax_dim", np.array(-1)),
    "dim 3": ("softmax_dim", 3),
    # refused by both
    "float tuple": ("shape_scores", (2.0, 4.0, 5.0, 7.0)),
    "float tensor": ("shape_scores", torch.tensor([2.0, 4.0, 5.0, 7.0])),
    "string": ("shape_scores", "(2, 4, 5, 7)"),
    "bools": ("shape_scores", (True, True, True, True)),
    "dim float": ("softmax_dim", -1.0),
    "dim bool": ("softmax_dim", True),
    "dim 1-element tensor": ("softmax_dim", torch.tensor([-1])),
}
HIDDEN = {"hand_weights": hand.test_weights, "hand_output": hand.test_output,
          "hand_masked_output": hand.test_masked_output, "shape_scores": shapes.test_scores_shape,
          "softmax_dim": shapes.test_softmax_dim}


def _visible_cell(grade_id):
    nb = nbformat.read(str(course.ROOT / "assignments" / "sdpa" / "sdpa.ipynb"), as_version=4)
    return next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _visible(name, value):
    namespace = {**reference_namespace(), **RIGHT, name: value}
    cell = _visible_cell("hand-calc-check" if name.startswith("hand") else "shapes-check")
    try:
        exec(cell, namespace)  # noqa: S102 - the release's own check cell
    except AssertionError:
        return False
    return True


def _hidden(name, value):
    student = LocalStudent({**RIGHT, name: value})
    try:
        HIDDEN[name](student)
    except CheckFailed:
        return False
    return True


@pytest.mark.parametrize("form", sorted(NUMBER_FORMS) + sorted(SHAPE_FORMS))
def test_visible_and_hidden_checks_agree(form):
    name, value = NUMBER_FORMS.get(form) or SHAPE_FORMS[form]
    visible, hidden = _visible(name, value), _hidden(name, value)
    assert visible == hidden, f"{form}: visible check {'accepts' if visible else 'refuses'}, hidden " \
                              f"{'accepts' if hidden else 'refuses'}"


def test_the_catalogue_has_both_verdicts():
    verdicts = {_hidden(*forms[f]) for forms in (NUMBER_FORMS, SHAPE_FORMS) for f in forms}
    assert verdicts == {True, False}


def test_a_subclass_of_valueerror_is_a_valueerror():
    from course.checks import test_attention_scores as scores

    namespace = reference_namespace()
    exec("class ShapeMismatch(ValueError):\n    pass\n"  # noqa: S102 - trusted test code
         "def attention_scores(q, k):\n    if q.shape[-1] != k.shape[-1]:\n        raise ShapeMismatch('d_k')\n"
         "    return q @ k.transpose(-2, -1)\n", namespace)
    scores.test_mismatched_dk_raises(LocalStudent(namespace), torch.Generator().manual_seed(0))


def test_wire_sends_exact_numbers_as_floats():
    blobs = []
    sent = wire.encode([Fraction(1, 8), Decimal("0.25"), np.float64(0.625), np.int64(-1)], blobs)
    assert wire.decode(sent, blobs) == [0.125, 0.25, 0.625, -1]
