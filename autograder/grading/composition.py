"""Charge each mistake once: a composite part judged against the student's own helpers, composed correctly.

``scaled_dot_product_attention`` (and the device checks that call it) is
composed from five helpers the student also wrote.  A bug in one helper makes
the composite differ from PyTorch too; without care the same mistake costs
points in every part above it.  So when a composite check fails, the grader
composes the student's *own* helpers correctly -- each called in the sandbox,
on the previous helper's returned tensor -- and compares:

- the composite returned what that composition returns, or raised the same
  exception where the composition raised -- and then, on a case the
  composition can compute (square, float32), returns what it returns there, and
- every difference from PyTorch is a known misconception that a helper shows
  on these very inputs (its mutant reproduces that helper's output, its
  output is right but in another dtype, or it raised for a reason the
  misconception explains),

then the sub-case is *explained*: every sub-case of the check still runs, and
a check whose failing sub-cases are all explained keeps its points, naming the
helper's codes (`ExplainedElsewhere`).  A helper difference that no known
misconception explains is listed as `unexplained`: its helper's part pays for
it from what that part lost, and a person is told.

Why this cannot be gamed: the composition is only evidence of *where* a
difference comes from.  The credit itself is decided afterwards, from the
whole grade (``hidden_checks.settle_charges``): a code explains a composite
only if the part where it lives charged it, and charged at least what that part
charges an honest holder of the code (``honest``) on the same seed.  A helper
that misbehaves only inside the composite, is right except on one cheap check,
detects the grader's own chain calls, or a composite that inlines a bug of its
own, gains nothing: either the difference is not explained, or the points come
off in the home part, at least as many as the honest student loses there.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

from course import FUNCTIONS

from ..i18n import _
from . import cases, tolerances
from .assertions import CheckFailed, TensorSpec, diagnose, text_codes
from .misconceptions import COMPOSITE_HOME

# Where each misconception that a composite may pass on lives: the part that charges it (the registry).
HOME = COMPOSITE_HOME

# The composite and its helpers in the order it uses them, each with its arguments (the course's `helpers`).
COMPOSITE = next(name for name, f in FUNCTIONS.items() if f.helpers)
HELPERS = FUNCTIONS[COMPOSITE].helpers
CHAIN = tuple(name for name, _arguments in HELPERS)


@dataclass
class Composition:
    """The student's helpers composed correctly on one input, and what they got wrong there."""

    output: Optional[torch.Tensor] = None
    weights: Optional[torch.Tensor] = None
    raised: Optional[tuple] = None  # (ename, evalue) of the helper call where the chain stopped
    codes: list = field(default_factory=list)  # misconceptions the helpers show on these inputs
    helpers: list = field(default_factory=list)  # the helpers that show them
    # One group per helper that differs: the codes whose mutants each reproduce that helper's output.
    groups: list = field(default_factory=list)
    # Helpers whose output differs from PyTorch's in a way no known misconception explains.
    unexplained: list = field(default_factory=list)
    # The chain stopped at a helper (it raised, returned no tensor or a constant one): no evidence for a credit.
    stopped: bool = False
    # Helpers that raised NotImplementedError: not written yet, which their own parts already say.
    unfinished: list = field(default_factory=list)


class ExplainedElsewhere(Exception):
    """A check that keeps its points: its differences come from codes charged in their own parts.

    `groups` says which codes are alternatives: each group is one difference, explained by any one of its
    codes (several mutants may reproduce the same output); every group must be paid for.  By default each
    code is a difference of its own.  `unexplained` names helpers whose difference no known misconception
    explains: their own parts' losses must pay for it (``hidden_checks.settle_charges``), and a person is told."""

    def __init__(self, message: str, codes: list, helpers: list, failure: Optional[dict] = None,
                 groups: Optional[list] = None, unexplained: Optional[list] = None):
        super().__init__(message)
        self.message, self.codes, self.helpers = message, list(codes), list(helpers)
        self.groups = [list(g) for g in groups] if groups else [[c] for c in self.codes]
        self.unexplained = list(unexplained or [])
        self.failure = failure or {}  # the failure it explains: what the check reports if the credit is withdrawn


def _tensor(result) -> Optional[torch.Tensor]:
    value = result.value if result.ok and not result.forbidden else None
    if not isinstance(value, TensorSpec) or value.missing_data():
        return None
    return value.tensor


def _reference(function, args):
    """PyTorch's result for one helper on the student's intermediate tensors, or the exception it raises."""
    try:
        if function == "apply_mask" and args[1] is not None \
                and torch.broadcast_shapes(args[0].shape, args[1].shape) != args[0].shape:
            raise ValueError("the mask does not broadcast to the scores' shape")  # masked_fill would widen them
        return cases.REFERENCES[function](*args), None
    except Exception as exc:  # noqa: BLE001 - e.g. shapes a transposed helper left behind
        return None, exc


def _precision(*dtypes):
    """The lowest precision among `dtypes` (the one whose rounding a comparison must allow for)."""
    return max((d for d in dtypes if d.is_floating_point), key=lambda d: torch.finfo(d).eps, default=torch.float64)


def _tolerance(function, args, *dtypes):
    """How far a correct result may be from PyTorch's on these inputs, at the lowest precision involved."""
    inputs = [a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]
    probe = _precision(*inputs, *dtypes)
    if probe == torch.float64:
        return cases.default_tolerance(function, args, {}) or tolerances.floor_for(torch.float64)
    return cases.tolerance(cases.REFERENCES[function], args, probe)


def _helper_codes(function, args, got, expected) -> Optional[list]:
    """Known misconceptions (that a composite may pass on) which explain `got` where PyTorch gives
    `expected`: [] when they agree, None when they differ in a way no such misconception explains."""
    tol = _tolerance(function, args, got.dtype, expected.dtype)
    if got.dtype != expected.dtype:
        # Right values in another dtype: the dtype mistake, and only if the values are right at that precision.
        return ["dtype-changed"] if "dtype-changed" in HOME and tolerances.close_nan_alike(got, expected, tol) else None
    if tolerances.close_nan_alike(got, expected, tol):
        return []
    return [c for c in diagnose(function, args, {}, got, expected, tol) if c in HOME] or None


def compose(student, q, k, v, mask=None) -> Optional[Composition]:
    """Call the student's helpers in order, each on the previous one's output.  A returned tensor that
    differs in a way no known misconception explains goes on down the chain and is listed in `unexplained`;
    a helper that raised, returned no tensor or a constant one where PyTorch computes, for no known reason,
    stops it (`stopped`: no evidence, the helper named); None when a call was forbidden or a helper
    returned where PyTorch raises."""
    outputs = {"q": q, "k": k, "v": v, "mask": mask}
    result = Composition()
    for function, arguments in HELPERS:
        args = arguments(outputs)
        call = student.call(function, *args)
        expected, reference_error = _reference(function, args)
        if call.forbidden:
            return None
        if call.status == "raised":
            if reference_error is None:  # raised where PyTorch computes: only a known reason explains it
                # (only the helper where the code lives raises for it: half-overflow in apply_mask)
                codes = [c for c in text_codes(f"{call.ename} {call.evalue}") if HOME.get(c) == function]
                if not codes and call.ename == "NotImplementedError":  # the release's stub, still there
                    return Composition(unfinished=[function], stopped=True)
                if not codes:
                    return _stopped(function)
                result.codes.extend(c for c in codes if c not in result.codes)
                result.helpers.append(function)
                result.groups.append(codes)
            result.raised = (call.ename, call.evalue)
            return result
        got = _tensor(call)
        if reference_error is None and (got is None or not got.is_floating_point()):
            return _stopped(function)  # no tensor with values where PyTorch computes one
        if reference_error is not None:
            return None  # returned where PyTorch raises
        outputs[function] = got
        codes = _helper_codes(function, args, got, expected)
        if codes is None and _constant(got) and not _constant(expected):
            return _stopped(function)  # erases its input: what follows shows nothing of the composite's code
        if codes is None:
            result.unexplained.append(function)  # a difference no helper misconception explains
            continue
        if codes:
            result.codes.extend(c for c in codes if c not in result.codes)
            result.helpers.append(function)
            result.groups.append(codes)
    result.output, result.weights = outputs["attention_output"], outputs["softmax"]
    return result


def _constant(tensor) -> bool:
    """Every element the same (zeros, say; a single number counts): where PyTorch's output is not, an output
    that keeps nothing of its input, so nothing after it tells the composite's own code from a stub's."""
    flat = tensor.reshape(-1)
    return flat.numel() > 0 and bool(torch.isclose(flat, flat[:1].expand_as(flat), equal_nan=True).all())


def _stopped(function) -> Composition:
    """A composition that stopped at a helper that raised, returned no tensor or a constant one, where
    PyTorch computes, for no known reason: nothing is explained, but the helper is named (`Composition.stopped`)."""
    return Composition(unexplained=[function], stopped=True)


def _matches(result, composed: Composition, weights: bool) -> bool:
    """The composite call's `result` is what the composition gave: the same exception, or the same tensors."""
    if composed.raised is not None:
        return result.status == "raised" and not result.forbidden and (result.ename, result.evalue) == composed.raised
    value = result.value if result.ok and not result.forbidden else None
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        return False
    pairs = [(value[0], composed.output)] + ([(value[1], composed.weights)] if weights else [])
    for returned, own in pairs:
        if not isinstance(returned, TensorSpec) or returned.missing_data() or returned.tensor.dtype != own.dtype \
                or not tolerances.close_nan_alike(returned.tensor, own, tolerances.floor_for(torch.float64)):
            return False
    return True


def _square(q, k, v, mask):
    """The same case with as many keys as queries (None when it already has)."""
    L, S = q.shape[-2], k.shape[-2]
    if L == S:
        return None
    n = min(L, S)
    if mask is not None:
        mask = mask[..., :n] if mask.shape[-1] > 1 else mask
        mask = mask[..., :n, :] if mask.dim() > 1 and mask.shape[-2] > 1 else mask
    return q[..., :n, :], k[..., :n, :], v[..., :n, :], mask


def _in(dtype):
    """The same case in `dtype` (None when it already is)."""
    def cast(q, k, v, mask):
        if q.dtype == dtype:
            return None
        return tuple(t.to(dtype) if t is not None and t.is_floating_point() else t for t in (q, k, v, mask))
    return cast


def _square_in(dtype):
    return lambda *case: _in(dtype)(*(_square(*case) or case))


# Cases a composition that raised may compute: a helper that assumes L == S, or one that returns another
# dtype (its output meets a tensor of the input's dtype) computes where every input has its dtype.
_PRECISIONS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
WITNESSES = (_square, *map(_in, _PRECISIONS), *map(_square_in, _PRECISIONS))


def _witnessed(student, q, k, v, mask, weights) -> bool:
    """A composite that raised where its helpers' composition raises is right *as a composition* only if,
    on every case the composition can compute (as many keys as queries, another precision, or both), it
    returns exactly what the composition returns: raising alone shows nothing of its own code."""
    seen = False
    for make in WITNESSES:
        case = make(q, k, v, mask)
        if case is None:
            continue
        composed = compose(student, *case)
        if composed is None or composed.stopped or composed.raised is not None:
            continue
        call = student.call(COMPOSITE, *(case if case[3] is not None else case[:3]))
        if not _matches(call, composed, weights):
            return False
        seen = True
    return seen


def explain(student, q, k, v, mask, result, weights: bool = True, what: str = "",
            failure: Optional[CheckFailed] = None) -> Optional[ExplainedElsewhere]:
    """`ExplainedElsewhere` when the composite call's `result` equals the composition of the student's
    own helpers and every difference is a helper's misconception (or one its own part paid for); where the
    chain stopped at a helper for no known reason, that helper is named on `failure` instead."""
    composed = compose(student, q, k, v, mask)
    if composed is not None and composed.stopped:
        if failure is not None and composed.unfinished:  # named: nothing for a person to read
            new = [h for h in composed.unfinished if h not in failure.unfinished]
            failure.unfinished += new
            if new:
                failure.message += _("（用到的 {helpers} 还没有实现，所以这一步还没有结果。）").format(
                    helpers=_("、").join(new))
        if failure is not None:  # a person reads the helper: the loss here is not named by any code
            new = [h for h in composed.unexplained if h not in failure.unexplained]
            failure.unexplained += new
            if new:
                failure.message += _("（用到的 {helpers} 在这里的输出不对，评分程序认不出是哪种误解；"
                                     "已标记给助教审阅。）").format(helpers=_("、").join(new))
        return None
    if composed is None or not (composed.codes or composed.unexplained) or not _matches(result, composed, weights):
        return None
    if composed.raised is not None and not _witnessed(student, q, k, v, mask, weights):
        return None
    messages = []
    if composed.codes:
        messages.append(_("{what}与 PyTorch 的结果不同，但差异全部来自 {helpers} 中的 {codes}（在它所在的部分扣分）；"
                          "按你自己的函数组合，这一步是对的，不重复扣分。").format(
            what=what, helpers=_("、").join(composed.helpers), codes="".join(f"[{c}]" for c in composed.codes)))
    if composed.unexplained:
        messages.append(unexplained_message(what, composed.unexplained))
    return ExplainedElsewhere("\n".join(messages), composed.codes, composed.helpers, groups=composed.groups,
                              unexplained=composed.unexplained)


def unexplained_message(what: str, helpers: list) -> str:
    """What a composite check says when its difference comes from helpers no known misconception explains."""
    return _("{what}与 PyTorch 的结果不同，差异来自 {helpers} 的输出，但评分程序认不出是哪种误解：按你自己的函数"
             "组合，这一步是对的，只在 {helpers} 自己的部分扣分；已标记给助教审阅。").format(
        what=what, helpers=_("、").join(helpers))


def explain_result(student, grading: dict, result, q, k, v, mask, weights: bool, what: str,
                   failure: Optional[Exception] = None):
    """`explain` unless the course grades strictly end to end (``charge_once`` configured off); `failure`
    is the `CheckFailed` it would explain."""
    if not grading.get("charge_once", True) or result.forbidden:
        return None
    explained = explain(student, q, k, v, mask, result, weights, what, failure)
    if explained is not None and failure is not None:
        explained.failure = {"message": failure.message, "codes": failure.codes, "example": failure.example}
    return explained


class SubCases:
    """Every sub-case of a check runs before its credit is decided: an explained sub-case does not end it.

    ``run`` calls one sub-case; a failure nothing explains propagates at once (the check fails), an
    explained one (`ExplainedElsewhere`, or with each mistake charged once a `CheckFailed` whose
    `explained_by` accounts for it) is kept; ``settle`` raises one `ExplainedElsewhere` for all at the end.
    """

    def __init__(self, grading: dict) -> None:
        self.charge_once = grading.get("charge_once", True)
        self.explained = []

    def run(self, subcase, *args, **kwargs):
        try:
            return subcase(*args, **kwargs)
        except ExplainedElsewhere as explained:
            self.explained.append(explained)
        except CheckFailed as failure:
            if not (self.charge_once and failure.explained_by):
                raise
            self.explained.append(ExplainedElsewhere(failure.message, failure.explained_by, [], {
                "message": failure.message, "codes": failure.codes, "example": failure.example}))
        return None

    def settle(self) -> None:
        if not self.explained:
            return
        codes = list(dict.fromkeys(c for e in self.explained for c in e.codes))
        helpers = list(dict.fromkeys(h for e in self.explained for h in e.helpers))
        groups = [list(g) for g in dict.fromkeys(tuple(g) for e in self.explained for g in e.groups)]
        unexplained = list(dict.fromkeys(h for e in self.explained for h in e.unexplained))
        raise ExplainedElsewhere("\n".join(dict.fromkeys(e.message for e in self.explained)), codes, helpers,
                                 next((e.failure for e in self.explained if e.failure), None), groups=groups,
                                 unexplained=unexplained)
