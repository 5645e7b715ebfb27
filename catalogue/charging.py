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
from autograder.grading import honest

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
_IDS, _KEPT = set(), []  # kept alive, so that no other tensor is given one of these ids
def scale_scores(scores, d_k):
    out = scores / math.sqrt(d_k)
    _KEPT.append(out)
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

# Found by a red-team pass: a helper mistake that makes the composition raise hid the composite's own
# code (credit for raising what the composition raises, with no case where the composite was seen to work).
_HALF_SOFTMAX = honest.SOURCES["dtype-changed"][1]
LONE_OUTPUT_BEHIND_DTYPE = {"softmax": _HALF_SOFTMAX,
                            "scaled_dot_product_attention": honest.SOURCES["returns-not-tuple"][1]}
RAISING_BEHIND_DTYPE = {"softmax": _HALF_SOFTMAX, "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    raise RuntimeError("expected m1 and m2 to have the same dtype, but got: float != double")
'''}
WRONG_VALUES_BEHIND_TRANSPOSE = {"attention_scores": honest.SOURCES["scores-transposed"][1],
                                 "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    weights = softmax(apply_mask(scale_scores(attention_scores(q, k), q.shape[-1]), mask), dim=-1)
    return attention_output(weights, k), weights  # its own bug: the keys, not the values
'''}
# A helper that raises a text of its own choosing, with "overflow" in it, beside an honest half-overflow.
OVERFLOW_TEXT = {"apply_mask": honest.SOURCES["half-overflow"][1], "attention_scores": '''
def attention_scores(q, k):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("d_k mismatch")
    if q.dtype in (torch.float16, torch.bfloat16):
        raise RuntimeError("half precision would overflow here")
    return q @ k.transpose(-2, -1)
'''}
# One function, two mistakes: an in-place edit hidden behind a dtype change.
INPLACE_BEHIND_DTYPE = {"apply_mask": '''
def apply_mask(scores, mask=None):
    if mask is None:
        return scores.float()
    if mask.dtype == torch.bool:
        return scores.masked_fill_(~mask, float("-inf")).float()
    scores += mask
    return scores.float()
'''}
# A lone output, and wrong values in half precision only.
LONE_OUTPUT_WRONG_IN_HALF = {"scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    weights = softmax(apply_mask(scale_scores(attention_scores(q, k), q.shape[-1]), mask), dim=-1)
    out = attention_output(weights, v)
    return out * 1.5 if q.dtype in (torch.float16, torch.bfloat16) else out
'''}

# One dtype mistake, in another helper than the honest sample's: charged once, in the device part.
DTYPE_IN_SCORES = {"attention_scores": '''
def attention_scores(q, k):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("d_k mismatch")
    return (q @ k.transpose(-2, -1)).float()
'''}
DTYPE_IN_OUTPUT = {"attention_output": '''
def attention_output(weights, v):
    if weights.shape[-1] != v.shape[-2]:
        raise ValueError("weights and v disagree on S")
    return (weights @ v).float()
'''}
DOUBLE_SOFTMAX = {"softmax": '''
def softmax(x, dim=-1):
    x = x.double()
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    exps = torch.exp(x - m)
    total = exps.sum(dim=dim, keepdim=True)
    return exps / torch.where(total > 0, total, torch.ones_like(total))
'''}

# Found by a second red-team pass: half-overflow written with other large constants, filled in or added, and a
# composite that computes in float32 (one dtype mistake, charged once, in the device part).
def bool_mask_case(expression: str) -> dict:
    """The answer cell of an apply_mask that returns `expression` for a bool mask, and is right otherwise."""
    return {"apply_mask": f'''
def apply_mask(scores, mask=None):
    if mask is None:
        return scores
    if mask.dtype == torch.bool:
        return {expression}
    return scores + mask
'''}


FILL_1E10 = bool_mask_case("scores.masked_fill(~mask, -1e10)")
FILL_FINFO = bool_mask_case("scores.masked_fill(~mask, torch.finfo(scores.dtype).min)")
FILL_ADDED = bool_mask_case("scores + (~mask).to(scores.dtype) * -1e9")
COMPOSITE_IN_FLOAT32 = {"scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    q, k, v = q.float(), k.float(), v.float()
    weights = softmax(apply_mask(scale_scores(attention_scores(q, k), q.shape[-1]), mask), dim=-1)
    return attention_output(weights, v), weights
'''}

# Found by a third red-team pass: a composite that returns bfloat16 (whose wide tolerance hid a mistake of
# its own), helpers that return half precision, other forms of a large negative fill, and a composite
# wrong only on the inputs of the half-precision accuracy check (its float64 result there was taken as
# the target because a mutant reproduces it).
BFLOAT16_HIDES_WRONG_DIM = {"scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    dtype = q.dtype
    q, k, v = q.bfloat16(), k.bfloat16(), v.bfloat16()
    scores = attention_scores(q, k) / math.sqrt(v.shape[-1])  # its own bug: d_v, not d_k
    weights = softmax(apply_mask(scores, mask), dim=-1)
    return attention_output(weights, v), weights
'''}
BFLOAT16_SOFTMAX = {"softmax": _HALF_SOFTMAX.replace("x.float()", "x.bfloat16()")}
# A softmax mistake of its own behind a bfloat16 cast: on large scores, rounding the inputs to bfloat16 moves
# the output by more than the mistake does, so only the inputs rounded to bfloat16 can tell the two apart.
BFLOAT16_GLOBAL_MAX = {"softmax": honest.SOURCES["softmax-global-max"][1].replace(
    "    m = x.max()", "    x = x.bfloat16()\n    m = x.max()")}
BFLOAT16_UNSTABLE = {"softmax": honest.SOURCES["softmax-unstable"][1].replace(
    "    exps = torch.exp(x)", "    x = x.bfloat16()\n    exps = torch.exp(x)")}
HALF_SCORES = {"attention_scores": '''
def attention_scores(q, k):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("d_k mismatch")
    return (q @ k.transpose(-2, -1)).half()
'''}
FILL_WHERE = bool_mask_case("torch.where(mask, scores, -1e9)")
FILL_INDEXED = bool_mask_case("_indexed(scores, mask)")
FILL_INDEXED["apply_mask"] = '''
def _indexed(scores, mask):
    out = scores.clone()
    out[~mask.expand_as(out)] = -1e9
    return out
''' + FILL_INDEXED["apply_mask"]
MASK_IGNORED_ON_ACCURACY_SHAPE = {"scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    if tuple(q.shape) == (2, 2, 6, 16) and q.dtype == torch.float64:
        mask = None  # its own bug, only where the accuracy check takes its float64 target
    weights = softmax(apply_mask(scale_scores(attention_scores(q, k), q.shape[-1]), mask), dim=-1)
    return attention_output(weights, v), weights
'''}

# Found by a fourth red-team pass.  Several mutants may give one output (a NaN row is fully-masked-nan's,
# softmax-unstable's and softmax-global-max's): any one of them, charged in full where it lives, pays.
NAN_BELOW_4D = {"softmax": '''
def softmax(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    if x.dim() >= 4:
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    exps = torch.exp(x - m)
    total = exps.sum(dim=dim, keepdim=True)
    if x.dim() >= 4:
        total = torch.where(total > 0, total, torch.ones_like(total))
    return exps / total
'''}
# A composite's own mistake shown in one cheap check of its part only: the device part's credit for it
# needs the part to lose what an honest holder loses, as for a helper's mistake.
WRONG_DIM_ON_SOME_MASKS = {"scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    odd = mask is not None and (mask.is_floating_point() or (q.dim() == 4 and mask.dim() == 2))
    scores = scale_scores(attention_scores(q, k), v.shape[-1] if odd else q.shape[-1])
    weights = softmax(apply_mask(scores, mask), dim=-1)
    return attention_output(weights, v), weights
'''}
MASK_AFTER_SOFTMAX_IN_4D = {"scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = scale_scores(attention_scores(q, k), q.shape[-1])
    if mask is not None and q.dim() == 4:
        weights = softmax(scores, dim=-1) * mask
    else:
        weights = softmax(apply_mask(scores, mask), dim=-1)
    return attention_output(weights, v), weights
'''}

# Found by a fifth red-team pass: narrower forms of an honest mistake.  Its home part loses less than the
# honest holder's, so no other part is refunded; they must still never score below strict grading (the
# device checks that grade only devices and dtypes grade a mistaken CPU output as strict grading does).
MASK_IGNORED_BOOL_ONLY = {"apply_mask": '''
def apply_mask(scores, mask=None):
    if mask is None or mask.dtype == torch.bool:
        return scores
    return scores + mask
'''}
MASK_AFTER_SOFTMAX_BOOL_ONLY = {"scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = scale_scores(attention_scores(q, k), q.shape[-1])
    weights = softmax(scores, dim=-1)
    if mask is not None:
        if mask.dtype == torch.bool:
            weights = weights * mask
        else:
            weights = softmax(scores + mask, dim=-1)
    return attention_output(weights, v), weights
'''}
CAUSAL_INVERTED = {"causal_mask": '''
def causal_mask(L, S, device=None):
    return torch.ones(L, S, dtype=torch.bool, device=device).triu(1)
'''}
SOFTMAX_DEFAULT_DIM0 = {"softmax": '''
def softmax(x, dim=0):
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=dim, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))
'''}

# Other spellings of a helper's mistake (tests/grading/test_mistake_families.py): a softmax that ignores dim and
# normalises along axis 0 (charged three times, 34 points, before it had a code of softmax's own), and sqrt(d_k)
# built as a float16 tensor.
SOFTMAX_AXIS_0 = {"softmax": '''
def softmax(x, dim=-1):
    m = x.amax(dim=0, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=0, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))
'''}
SCALE_FLOAT16_ROOT = {"scale_scores": '''
def scale_scores(scores, d_k):
    return scores / torch.tensor(d_k ** 0.5, dtype=torch.float16)
'''}

# A helper mistake no misconception models (tests/grading/test_unexplained_differences.py): softmax weights
# scaled by 1.01, scores divided by the cube root of d_k.  The composite, composed right from them, keeps as
# many points as the helper's part lost to failures that name no code; the device part, which grades only
# outputs it can verify, charges the helper's calls; every such loss is flagged for a person.  The third is
# right on its own part's checks but one and wrong wherever its input has four dims (as inside the
# composite): the composite keeps only as much as that part lost.
def _softmax_then(last_line):
    """The honest stable softmax with its weights `w`, returned as `last_line` says."""
    return {"softmax": f'''
def softmax(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=dim, keepdim=True)
    w = e / torch.where(s > 0, s, torch.ones_like(s))
    {last_line}
'''}


UNKNOWN_SOFTMAX = _softmax_then("return 1.01 * w")
UNKNOWN_SCALE = {"scale_scores": '''
def scale_scores(scores, d_k):
    return scores / d_k ** (1 / 3)
'''}
# Found by a red-team pass of that rule: a helper that erases its input (zeros) made a stub composite "the
# composition of the student's own helpers", credited 11 of 15 points; helpers that keep state copied the
# composite's own mistake into that composition (output-used-k, scale-wrong-dim) and beat its honest holder.
ZERO_SOFTMAX_STUB_COMPOSITE = {"softmax": '''
def softmax(x, dim=-1):
    return torch.zeros_like(x)
''', "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    out = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device)
    return out, torch.zeros(*q.shape[:-1], k.shape[-2], dtype=q.dtype, device=q.device)
'''}
STATEFUL_OUTPUT_USED_K = {"attention_scores": '''
_K = [None]
def attention_scores(q, k):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("d_k mismatch")
    _K[0] = k
    return q @ k.transpose(-2, -1)
''', "attention_output": '''
def attention_output(weights, v):
    if weights.shape[-1] != v.shape[-2]:
        raise ValueError("weights and v disagree on S")
    k = _K[0]
    if weights.dim() == 3 and tuple(weights.shape) == (2, 3, 5):
        return weights @ v
    if k is None or k.shape[:-1] != v.shape[:-1] or weights.shape[-1] != k.shape[-2]:
        return (weights @ v) * 1.01
    return weights @ k
''', "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    weights = softmax(apply_mask(scale_scores(attention_scores(q, k), q.shape[-1]), mask), dim=-1)
    return weights @ k, weights
'''}
STATEFUL_SCALE_WRONG_DIM = {"scale_scores": '''
_DV = [None]
def scale_scores(scores, d_k):
    if tuple(scores.shape) == (2, 3, 5):
        return scores / math.sqrt(d_k)
    d = _DV[0] if _DV[0] is not None else d_k ** (1 / 3)
    return scores / math.sqrt(d)
''', "scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    _DV[0] = v.shape[-1]
    weights = softmax(apply_mask(scale_scores(attention_scores(q, k), v.shape[-1]), mask), dim=-1)
    return attention_output(weights, v), weights
'''}
# A slip: no `return` when there is no mask.  The composite loses points where it calls apply_mask without
# one, and the loss names apply_mask for a person.
MASK_NONE_RETURNS_NONE = {"apply_mask": '''
def apply_mask(scores, mask=None):
    if mask is None:
        scores
    elif mask.dtype == torch.bool:
        return scores.masked_fill(~mask, float("-inf"))
    else:
        return scores + mask
'''}
UNKNOWN_INSIDE_COMPOSITE = _softmax_then("return w * 1.01 if x.dim() >= 4 else w")

# Found by a sixth red-team pass: a composite whose device and dtype code is wrong, behind helper mistakes
# whose composition explains its CPU values.  The device checks still grade the composite's own output.
DEVICE_BUG = '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = scale_scores(attention_scores(q, k), q.shape[-1])
    if q.device.type == "meta":
        scores = scores + torch.zeros(scores.shape[-1], dtype=scores.dtype)  # a CPU tensor: fails off the CPU
    weights = softmax(apply_mask(scores, mask), dim=-1)
    out = attention_output(weights, v)
    if q.dtype in (torch.float16, torch.bfloat16):
        out = torch.zeros(out.shape, dtype=torch.float32)  # wrong dtype and values in half precision
    return out, weights
'''
DEVICE_BUG_BEHIND_SCORES = {"attention_scores": '''
def attention_scores(q, k):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("d_k mismatch")
    return q @ k.transpose(-2, -1) / q.shape[-1]
''', "scaled_dot_product_attention": DEVICE_BUG}
DEVICE_BUG_BEHIND_TWO_HELPERS = {"scale_scores": honest.SOURCES["scale-missing"][1],
                                 "apply_mask": honest.SOURCES["mask-zero-fill"][1],
                                 "scaled_dot_product_attention": DEVICE_BUG}

# Found by a seventh red-team pass: a narrow form of a mistake, topped up with another mistake of the same
# helper on checks the composite never calls it on, so that the part's loss reached the honest holder's.
# The honest comparison counts only the home checks that name the code.
TOPPED_UP_INVERTED = {"apply_mask": '''
def apply_mask(scores, mask=None):
    if mask is None:
        return scores * 1.5 if tuple(scores.shape) == (3, 4) else scores  # wrong on apply_mask's own None check
    if mask.dtype != torch.bool:
        return scores - mask if tuple(mask.shape) == (5, 7) else scores + mask  # wrong on its own float check
    if tuple(mask.shape) == (5, 7):
        return scores.masked_fill(~mask, float("-inf"))  # right on apply_mask's broadcast check only
    return scores.masked_fill(mask, float("-inf"))  # inverted
'''}
TOPPED_UP_UNSTABLE = {"softmax": '''
def softmax(x, dim=-1):
    if dim not in (-1, x.dim() - 1):
        return torch.zeros_like(x)  # wrong on other dims: the composite only uses dim=-1
    if tuple(x.shape) == (3, 5):  # stable on softmax's own -inf-row check only
        m = x.amax(dim=dim, keepdim=True)
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        e = torch.exp(x - m)
        s = e.sum(dim=dim, keepdim=True)
        return e / torch.where(s > 0, s, torch.ones_like(s))
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)
'''}

# Found by an eighth red-team pass: narrow forms of a mistake that pass the home checks an honest holder
# fails without naming the code.  Every check the honest holder fails must fail here too.
NARROW_SQUARE = {"scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    L, S = q.shape[-2], k.shape[-2]
    scores = scale_scores(attention_scores(q, k), q.shape[-1])
    if L != S and ((q.dim() == 3 and L == 3) or (L, S) in ((5, 7), (6, 9))):
        scores = scores.reshape(*q.shape[:-1], L)
    weights = softmax(apply_mask(scores, mask), dim=-1)
    return attention_output(weights, v), weights
'''}
NARROW_TRANSPOSED = {"attention_scores": '''
def attention_scores(q, k):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("d_k mismatch")
    if q.dtype == torch.float32:
        return q @ k.transpose(-2, -1)
    return k @ q.transpose(-2, -1)
'''}
NARROW_AFTER_SOFTMAX = {"scaled_dot_product_attention": '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = scale_scores(attention_scores(q, k), q.shape[-1])
    if mask is not None and mask.dtype != torch.bool:
        weights = softmax(apply_mask(scores, mask), dim=-1)
        return attention_output(weights, v), weights
    weights = softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask
    return attention_output(weights, v), weights
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
    Sample("attack-charge-lone-output-behind-dtype", "attack", "partial", LONE_OUTPUT_BEHIND_DTYPE),
    Sample("attack-charge-raising-behind-dtype", "attack", "partial", RAISING_BEHIND_DTYPE),
    Sample("attack-charge-wrong-values-behind-transpose", "attack", "partial", WRONG_VALUES_BEHIND_TRANSPOSE),
    Sample("attack-charge-overflow-text", "attack", "partial", OVERFLOW_TEXT),
    Sample("attack-charge-inplace-behind-dtype", "attack", "partial", INPLACE_BEHIND_DTYPE),
    Sample("attack-charge-lone-output-wrong-in-half", "attack", "partial", LONE_OUTPUT_WRONG_IN_HALF),
    Sample("bug-dtype-changed-in-scores", "bug", "partial", DTYPE_IN_SCORES, codes=("dtype-changed",)),
    Sample("bug-dtype-changed-in-output", "bug", "partial", DTYPE_IN_OUTPUT, codes=("dtype-changed",)),
    Sample("bug-dtype-changed-double", "bug", "partial", DOUBLE_SOFTMAX, codes=("dtype-changed",)),
    Sample("bug-half-overflow-1e10", "bug", "partial", FILL_1E10, codes=("half-overflow",)),
    Sample("bug-half-overflow-finfo", "bug", "partial", FILL_FINFO, codes=("half-overflow",)),
    Sample("bug-half-overflow-added", "bug", "partial", FILL_ADDED, codes=("half-overflow",)),
    Sample("bug-dtype-changed-composite", "bug", "partial", COMPOSITE_IN_FLOAT32, codes=("dtype-changed",)),
    Sample("attack-charge-bfloat16-hides-own-bug", "attack", "partial", BFLOAT16_HIDES_WRONG_DIM),
    Sample("attack-charge-mask-ignored-on-accuracy-shape", "attack", "partial", MASK_IGNORED_ON_ACCURACY_SHAPE),
    Sample("attack-charge-bfloat16-global-max", "attack", "partial", BFLOAT16_GLOBAL_MAX),
    Sample("attack-charge-nan-below-4d", "attack", "partial", NAN_BELOW_4D),
    Sample("attack-charge-wrong-dim-on-some-masks", "attack", "partial", WRONG_DIM_ON_SOME_MASKS),
    Sample("attack-charge-mask-after-softmax-in-4d", "attack", "partial", MASK_AFTER_SOFTMAX_IN_4D),
    Sample("attack-charge-bfloat16-unstable", "attack", "partial", BFLOAT16_UNSTABLE),
    Sample("bug-dtype-changed-bfloat16-softmax", "bug", "partial", BFLOAT16_SOFTMAX, codes=("dtype-changed",)),
    Sample("bug-dtype-changed-half-scores", "bug", "partial", HALF_SCORES, codes=("dtype-changed",)),
    Sample("bug-half-overflow-where", "bug", "partial", FILL_WHERE, codes=("half-overflow",)),
    Sample("bug-half-overflow-indexed", "bug", "partial", FILL_INDEXED, codes=("half-overflow",)),
    Sample("bug-mask-ignored-bool-only", "bug", "partial", MASK_IGNORED_BOOL_ONLY, codes=("mask-ignored",)),
    Sample("bug-mask-after-softmax-bool-only", "bug", "partial", MASK_AFTER_SOFTMAX_BOOL_ONLY,
           codes=("mask-after-softmax",)),
    Sample("bug-causal-inverted", "bug", "partial", CAUSAL_INVERTED, codes=("mask-inverted",)),
    Sample("bug-softmax-default-dim0", "bug", "partial", SOFTMAX_DEFAULT_DIM0, codes=("softmax-dim-ignored",)),
    Sample("bug-softmax-axis-0", "bug", "lose", SOFTMAX_AXIS_0, codes=("softmax-dim-ignored",),
           lose=("softmax-check",)),
    Sample("bug-scale-float16-root", "bug", "lose", SCALE_FLOAT16_ROOT, codes=("scale-low-precision",),
           lose=("scale_scores-check",)),
    Sample("attack-charge-device-bug-behind-scores", "attack", "partial", DEVICE_BUG_BEHIND_SCORES),
    Sample("attack-charge-device-bug-behind-two-helpers", "attack", "partial", DEVICE_BUG_BEHIND_TWO_HELPERS),
    Sample("attack-charge-topped-up-inverted", "attack", "partial", TOPPED_UP_INVERTED),
    Sample("attack-charge-topped-up-unstable", "attack", "partial", TOPPED_UP_UNSTABLE),
    Sample("attack-charge-narrow-square", "attack", "partial", NARROW_SQUARE),
    Sample("attack-charge-narrow-transposed", "attack", "partial", NARROW_TRANSPOSED),
    Sample("attack-charge-narrow-after-softmax", "attack", "partial", NARROW_AFTER_SOFTMAX),
    Sample("fairness-helpers-in-defaults", "fairness", "full", FAIR_DEFAULT),
    Sample("fairness-helpers-in-closure", "fairness", "full", FAIR_CLOSURE),
    Sample("bug-unknown-softmax-rescaled", "bug", "lose", UNKNOWN_SOFTMAX,
           lose=("softmax-check", "scaled_dot_product_attention-check", "device_dtype-check")),
    Sample("bug-unknown-scale-cube-root", "bug", "lose", UNKNOWN_SCALE,
           lose=("scale_scores-check", "scaled_dot_product_attention-check", "device_dtype-check")),
    Sample("bug-unknown-mask-none-returns-none", "bug", "lose", MASK_NONE_RETURNS_NONE,
           lose=("apply_mask-check", "scaled_dot_product_attention-check")),
    Sample("attack-charge-unknown-inside-composite", "attack", "partial", UNKNOWN_INSIDE_COMPOSITE),
    Sample("attack-charge-zero-softmax-stub-composite", "attack", "lose", ZERO_SOFTMAX_STUB_COMPOSITE,
           lose=("softmax-check", "scaled_dot_product_attention-check", "device_dtype-check")),
    Sample("attack-charge-stateful-output-used-k", "attack", "partial", STATEFUL_OUTPUT_USED_K),
    Sample("attack-charge-stateful-scale-wrong-dim", "attack", "partial", STATEFUL_SCALE_WRONG_DIM),
]

# Each attack's honest counterpart: the one-bug sample (``bug-<code>``) of the misconception it shows, held
# honestly everywhere.  An attack with two mistakes may score no more than either mistake alone (`PARTS`).
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
    "attack-charge-inplace-behind-dtype": "inplace-mutation",
    "attack-charge-lone-output-wrong-in-half": "returns-not-tuple",
    "attack-charge-bfloat16-hides-own-bug": "scale-wrong-dim",
    "attack-charge-bfloat16-global-max": "softmax-global-max",
    "attack-charge-bfloat16-unstable": "softmax-unstable",
    "attack-charge-nan-below-4d": "fully-masked-nan",
    "attack-charge-stateful-output-used-k": "output-used-k",
    "attack-charge-stateful-scale-wrong-dim": "scale-wrong-dim",
}
# Submissions whose answers depend on how fast the grader calls them (a 50 ms window after scale_scores), or
# whose runner stops itself after each reply (which checks got their answer first depends on the machine's
# load): two gradings of them can differ, whatever the grader does; what each may give is in its Sample.
MACHINE_DEPENDENT = ("attack-charge-timing", "attack-stop-and-small-pipe")
# Attacks with two or three mistakes: each answer cell alone is one of them.
TWO_MISTAKES = ("attack-charge-lone-output-behind-dtype", "attack-charge-raising-behind-dtype",
                "attack-charge-wrong-values-behind-transpose", "attack-charge-overflow-text",
                "attack-charge-device-bug-behind-scores", "attack-charge-device-bug-behind-two-helpers")
# Mistakes written around the hidden checks' inputs (one graded input only, or the home part's checks
# topped up with another mistake): charge-once charges them where they show and never above strict.
SHOWS_ONCE = ("attack-charge-mask-ignored-on-accuracy-shape", "attack-charge-wrong-dim-on-some-masks",
              "attack-charge-mask-after-softmax-in-4d", "attack-charge-topped-up-inverted",
              "attack-charge-topped-up-unstable", "attack-charge-narrow-square", "attack-charge-narrow-transposed",
              "attack-charge-narrow-after-softmax")
# A narrower form of an honest mistake: no refund, and never below strict grading.
NARROWER = ("bug-mask-ignored-bool-only", "bug-mask-after-softmax-bool-only", "bug-causal-inverted",
            "bug-softmax-default-dim0")
# One dtype mistake, charged like the honest one (``bug-dtype-changed``).
DTYPE_BUGS = ("bug-dtype-changed-in-scores", "bug-dtype-changed-in-output", "bug-dtype-changed-double",
              "bug-dtype-changed-composite", "bug-dtype-changed-bfloat16-softmax", "bug-dtype-changed-half-scores")
# A helper mistake no misconception models: the composite keeps its points, a person is told.
UNKNOWN = ("bug-unknown-softmax-rescaled", "bug-unknown-scale-cube-root")
# half-overflow with another large constant: charged like the honest one, in apply_mask only.
LARGE_FILLS = ("bug-half-overflow-1e10", "bug-half-overflow-finfo", "bug-half-overflow-added",
               "bug-half-overflow-where", "bug-half-overflow-indexed")
