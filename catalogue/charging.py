"""Attacks on charge-once: submissions that try to have a mistake charged less than an honest holder pays.

With each mistake charged once, a composite part keeps its points when its difference from PyTorch
comes from a helper's misconception, charged in the helper's own part.  Each sample here is built
so that the composite's credit would be worth more than what the helper's part loses: a helper that
misbehaves only inside the composite (it keeps state, counts calls, recognises its input by identity or
id, or times the calls), a helper wrong on one cheap check only, a composite with a bug of its own
beside correct helpers, a composite whose helpers are captured in default arguments or closures, and a
composite explained on its first sub-case and wrong on a later one.  `HONEST` names the honest
counterpart of each (the one-bug sample of that code, ``autograder.grading.honest``): no attack may
score more than it (``tests/grading/test_charge_once.py``).  The fairness samples at the end are
correct code in unusual forms that must keep every point.
"""
from autograder.demo.submissions import Sample

_INVERTED = 'scores.masked_fill(mask, float("-inf"))'
_RIGHT = 'scores.masked_fill(~mask, float("-inf"))'


def _apply_mask(condition: str, setup: str = "", before: str = "") -> str:
    """An apply_mask that inverts a bool mask when `condition` holds, and is right otherwise."""
    return f'''
{setup}
def apply_mask(scores, mask=None):
{before}    if mask is None:
        return scores
    if mask.dtype != torch.bool:
        return scores + mask
    if {condition}:
        return {_INVERTED}
    return {_RIGHT}
'''


# Remembers scale_scores' last output: wrong only on the very tensor the composite hands it next.
STATEFUL = {"scale_scores": '''
_LAST = [None]
def scale_scores(scores, d_k):
    out = scores / math.sqrt(d_k)
    _LAST[0] = out
    return out
''', "apply_mask": _apply_mask("_LAST[0] is scores")}
# Counts its calls: the grader calls each helper of its own part first, so late calls are the composite's.
CALL_COUNT = {"apply_mask": _apply_mask("_CALLS[0] > 6", setup="_CALLS = [0]", before="    _CALLS[0] += 1\n")}
# Recognises its input by id() (the composite passes scale_scores' output straight on).
OBJECT_ID = {"scale_scores": '''
_IDS = set()
def scale_scores(scores, d_k):
    out = scores / math.sqrt(d_k)
    _IDS.add(id(out))
    return out
''', "apply_mask": _apply_mask("id(scores) in _IDS")}
# Times the calls: the composite calls apply_mask within microseconds of scale_scores.
TIMING = {"scale_scores": '''
import time as _time
_AT = [0.0]
def scale_scores(scores, d_k):
    out = scores / math.sqrt(d_k)
    _AT[0] = _time.perf_counter()
    return out
''', "apply_mask": _apply_mask("_time.perf_counter() - _AT[0] < 0.05")}
# Wrong on one cheap check of its own part only (a [4, 5] mask), and in the composite (3-d masks and
# [L, S] masks with L < 5): the home part loses 2 points where an honest inverted mask loses 7.
ONE_CHEAP_CHECK = {"apply_mask": _apply_mask("tuple(mask.shape) == (4, 5) or mask.dim() == 3 "
                                             "or (mask.dim() == 2 and mask.shape[0] < 5)")}
# Correct helpers, and a composite that leaves out the scaling in its own code.
INLINED_BUG = {"scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = attention_scores(q, k)  # the scale step is missing here, not in scale_scores
    weights = softmax(apply_mask(scores, mask), dim=-1)
    return attention_output(weights, v), weights
'''}
# The composite keeps an inverted apply_mask in a default argument; the apply_mask that is graded is right.
CAPTURED_DEFAULT = {"scaled_dot_product_attention": '''
def _inverted(scores, mask=None):
    if mask is None:
        return scores
    if mask.dtype != torch.bool:
        return scores + mask
    return scores.masked_fill(mask, float("-inf"))

def scaled_dot_product_attention(q, k, v, mask=None, _mask=_inverted):
    scores = scale_scores(attention_scores(q, k), q.shape[-1])
    weights = softmax(_mask(scores, mask), dim=-1)
    return attention_output(weights, v), weights
'''}
# The same through a closure.
CAPTURED_CLOSURE = {"scaled_dot_product_attention": '''
def _make(fill):
    def attend(q, k, v, mask=None):
        scores = scale_scores(attention_scores(q, k), q.shape[-1])
        if mask is not None and mask.dtype == torch.bool:
            scores = scores.masked_fill(mask, fill)
        elif mask is not None:
            scores = scores + mask
        weights = softmax(scores, dim=-1)
        return attention_output(weights, v), weights
    return attend

scaled_dot_product_attention = _make(float("-inf"))
'''}
# An honest inverted mask, and a composite explained on its first hand case but wrong on q = 0.
LATE_SUBCASE = {**{"apply_mask": _apply_mask("True")}, "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = scale_scores(attention_scores(q, k), q.shape[-1])
    weights = softmax(apply_mask(scores, mask), dim=-1)
    out = attention_output(weights, v)
    if not bool(q.any()):
        out = out * 0  # its own bug, on a later sub-case only
    return out, weights
'''}

# Correct code in forms a student may write: helpers captured in default arguments and closures.
FAIR_DEFAULT = {"scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None, _scores=attention_scores, _scale=scale_scores,
                                 _mask=apply_mask, _softmax=softmax, _out=attention_output):
    weights = _softmax(_mask(_scale(_scores(q, k), q.shape[-1]), mask), dim=-1)
    return _out(weights, v), weights
'''}
FAIR_CLOSURE = {"scaled_dot_product_attention": '''
def _compose(*steps):
    scores_fn, scale_fn, mask_fn, softmax_fn, out_fn = steps
    def attend(q, k, v, mask=None):
        weights = softmax_fn(mask_fn(scale_fn(scores_fn(q, k), q.shape[-1]), mask), dim=-1)
        return out_fn(weights, v), weights
    return attend

scaled_dot_product_attention = _compose(attention_scores, scale_scores, apply_mask, softmax, attention_output)
'''}

CHARGING = [
    Sample("attack-charge-stateful-helper", "attack", "partial", STATEFUL),
    Sample("attack-charge-call-count", "attack", "partial", CALL_COUNT),
    Sample("attack-charge-object-id", "attack", "partial", OBJECT_ID),
    Sample("attack-charge-timing", "attack", "partial", TIMING),
    Sample("attack-charge-one-cheap-check", "attack", "partial", ONE_CHEAP_CHECK, codes=("mask-inverted",)),
    Sample("attack-charge-inlined-bug", "attack", "partial", INLINED_BUG),
    Sample("attack-charge-captured-default", "attack", "partial", CAPTURED_DEFAULT),
    Sample("attack-charge-captured-closure", "attack", "partial", CAPTURED_CLOSURE),
    Sample("attack-charge-late-subcase", "attack", "partial", LATE_SUBCASE, codes=("mask-inverted",)),
    Sample("fairness-helpers-in-defaults", "fairness", "full", FAIR_DEFAULT),
    Sample("fairness-helpers-in-closure", "fairness", "full", FAIR_CLOSURE),
]

# Each attack's honest counterpart: the misconception it shows, held honestly everywhere.
HONEST = {
    "attack-charge-stateful-helper": "mask-inverted",
    "attack-charge-call-count": "mask-inverted",
    "attack-charge-object-id": "mask-inverted",
    "attack-charge-timing": "mask-inverted",
    "attack-charge-one-cheap-check": "mask-inverted",
    "attack-charge-inlined-bug": "scale-missing",
    "attack-charge-captured-default": "mask-inverted",
    "attack-charge-captured-closure": "mask-inverted",
    "attack-charge-late-subcase": "mask-inverted",
}
