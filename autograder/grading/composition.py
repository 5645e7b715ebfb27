"""Charge each mistake once: a composite part against the student's own helpers, composed correctly.

``scaled_dot_product_attention`` (and the parts built on it) is composed from
five helpers the student also wrote.  A bug in one helper makes the composite
differ from PyTorch too; without care the same mistake costs points in every
part above it.  So when a composite check fails, the grader composes the
student's *own* helpers correctly -- each called in the sandbox, on the
previous helper's returned tensor -- and compares:

- the composite equals that composition, and
- every difference from PyTorch is explained by a known misconception that a
  helper shows on these very inputs (its mutant reproduces that helper's
  output), and that misconception lives in that helper (`HOME`),

then the composite is right *as a composition*: its points are kept and the
feedback names the helper where the mistake lives.  Otherwise it fails as
before.  Everything compared is data this process received and checked;
a helper whose output did not arrive gives no credit.

Off by default (``charge_each_mistake_once = False``): a red-team pass showed
that helpers can keep state between calls and misbehave only inside the
composition, while one cheap check of the helper's own part "charges" the
code (a 1-point loss in place of 13).  Until the credit is tied to what the
helper's part really lost, strict end-to-end grading is the safe default.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

from . import cases, tolerances
from .assertions import TensorSpec, diagnose
from .misconceptions import COMPOSITE_HOME

# Where each misconception lives: the helper whose own part charges it (declared in the registry).
HOME = COMPOSITE_HOME

# The helpers in the order the composite uses them.
CHAIN = ("attention_scores", "scale_scores", "apply_mask", "softmax", "attention_output")


@dataclass
class Composition:
    """The student's helpers composed correctly on one input, and what they got wrong there."""

    output: Optional[torch.Tensor]
    weights: Optional[torch.Tensor]
    codes: list = field(default_factory=list)  # misconceptions the helpers show on these inputs
    helpers: list = field(default_factory=list)  # the helpers that show them


class ExplainedElsewhere(Exception):
    """A composite check that keeps its points: its differences come from helpers charged in their own parts."""

    def __init__(self, message: str, codes: list, helpers: list):
        super().__init__(message)
        self.message, self.codes, self.helpers = message, list(codes), list(helpers)


def _tensor(result) -> Optional[torch.Tensor]:
    value = result.value if result.ok and not result.forbidden else None
    if not isinstance(value, TensorSpec) or value.missing_data():
        return None
    return value.tensor


def _same(actual, expected, tol) -> bool:
    """Equal within `tol`; a NaN or inf where the reference has one too is equal (it came from the input)."""
    return actual.shape == expected.shape and bool(torch.isclose(
        actual.to(torch.float64), expected.to(torch.float64), atol=tol.atol, rtol=tol.rtol, equal_nan=True).all())


def compose(student, q, k, v, mask=None) -> Optional[Composition]:
    """Call the student's helpers in order, each on the previous one's output; None without full evidence."""
    inputs = {"attention_scores": (q, k)}
    outputs = {}
    result = Composition(None, None)
    for function in CHAIN:
        if function == "scale_scores":
            inputs[function] = (outputs["attention_scores"], q.shape[-1])
        elif function == "apply_mask":
            inputs[function] = (outputs["scale_scores"], mask)
        elif function == "softmax":
            inputs[function] = (outputs["apply_mask"], -1)
        elif function == "attention_output":
            inputs[function] = (outputs["softmax"], v)
        call = student.call(function, *inputs[function])
        got = _tensor(call)
        if got is None or not got.is_floating_point():
            return None
        outputs[function] = got
        args = inputs[function]
        expected = cases.REFERENCES[function](*args)
        tol = cases.default_tolerance(function, args, {}) or tolerances.floor_for(torch.float64)
        if _same(got, expected, tol):
            continue
        codes = [c for c in diagnose(function, args, {}, got, expected, tol) if HOME.get(c) == function]
        if not codes:
            return None  # a difference no helper misconception explains
        result.codes.extend(c for c in codes if c not in result.codes)
        result.helpers.append(function)
    result.output, result.weights = outputs["attention_output"], outputs["softmax"]
    return result


def explain(student, q, k, v, mask, result, weights: bool = True, what: str = "") -> Optional[ExplainedElsewhere]:
    """`ExplainedElsewhere` when the composite call's `result` equals the composition of the student's
    own helpers and every difference is a helper's misconception."""
    composed = compose(student, q, k, v, mask)
    if composed is None or not composed.codes:
        return None
    value = result.value if result.ok else None
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        return None
    pairs = [(value[0], composed.output)] + ([(value[1], composed.weights)] if weights else [])
    for returned, own in pairs:
        if not isinstance(returned, TensorSpec) or returned.missing_data() \
                or not _same(returned.tensor, own, tolerances.floor_for(torch.float64)):
            return None
    where = "、".join(composed.helpers)
    codes = "".join(f"[{c}]" for c in composed.codes)
    return ExplainedElsewhere(
        f"{what}与 PyTorch 的结果不同，但差异全部来自 {where} 中的 {codes}（已在那一部分扣分）；"
        f"按你自己的函数组合，这一步是对的，不重复扣分。", composed.codes, composed.helpers)


def explain_result(student, grading: dict, result, q, k, v, mask, weights: bool, what: str):
    """`explain` when ``charge_once`` was configured (off by default: see the module docstring)."""
    if not grading.get("charge_once", False) or result.forbidden:
        return None
    return explain(student, q, k, v, mask, result, weights, what)
