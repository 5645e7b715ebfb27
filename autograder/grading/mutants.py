"""Executable models of each misconception, used as evidence for diagnosis.

For every graded function we keep small, deliberately wrong variants: what a
student who holds misconception X would compute.  When a check fails, the
grader runs the variants on the same inputs (in the trusted process, in
float64) and names a code only if that variant reproduces the student's
output while the correct answer does not.  No match, no code: we never guess.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from solutions import sdpa as ref

NEG_INF = float("-inf")


def _naive_softmax(x, dim=-1):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def _global_max_softmax(x, dim=-1):
    e = torch.exp(x - x.max())
    return e / e.sum(dim=dim, keepdim=True)


def _nan_softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def _guarded(weights):
    """The same bug with the usual 0/0 guard: NaN slices become zeros."""
    return torch.nan_to_num(weights, nan=0.0)


def _empty_guarded_naive_softmax(x, dim=-1):
    """No max subtracted, but empty (all -inf) slices guarded: overflow still gives inf/inf = NaN."""
    e = torch.exp(x)
    total = e.sum(dim=dim, keepdim=True)
    return torch.where(total > 0, e / total, torch.zeros_like(e))


def _other_dims(x, dim):
    d = dim % x.dim()
    return [o for o in range(x.dim()) if o != d]


def _attention(q, k, v, mask=None, *, scale=None, mask_mode="ref", softmax=ref.softmax, softmax_dim=-1,
               values=None, transposed=False):
    """Reference attention with one step swapped for a buggy version."""
    d_k = q.shape[-1]
    scores = (k @ q.transpose(-2, -1)) if transposed else (q @ k.transpose(-2, -1))
    scores = scores / math.sqrt(d_k) if scale is None else scale(scores)
    if mask is not None and mask_mode != "after":
        if mask_mode == "ref":
            scores = ref.apply_mask(scores, mask)
        elif mask_mode == "inverted" and mask.dtype == torch.bool:
            scores = scores.masked_fill(mask, NEG_INF)
        elif mask_mode == "zero" and mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, 0.0)
        elif mask_mode == "large-negative" and mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, -1e9)
        elif mask_mode == "large-negative-added" and mask.dtype == torch.bool:
            scores = scores + (~mask).to(scores.dtype) * -1e9
        elif mask_mode == "ignored":
            pass
        else:
            return None
    weights = softmax(scores, dim=softmax_dim)
    if mask is not None and mask_mode == "after":
        if mask.dtype != torch.bool:
            return None
        weights = weights * mask
    out = weights @ (v if values is None else values)
    return out, weights


def _sdpa_variants(q, k, v, mask=None):
    d_k, d_v, L, S = q.shape[-1], v.shape[-1], q.shape[-2], k.shape[-2]
    variants = {
        "scale-missing": lambda: _attention(q, k, v, mask, scale=lambda s: s),
        "scale-by-dk": lambda: _attention(q, k, v, mask, scale=lambda s: s / d_k),
        "scale-multiplied": lambda: _attention(q, k, v, mask, scale=lambda s: s * math.sqrt(d_k)),
        "scale-wrong-dim": [lambda n=n: _attention(q, k, v, mask, scale=lambda s: s / math.sqrt(n))
                            for n in {d_v, L, S} - {d_k}],
        "mask-inverted": lambda: _attention(q, k, v, mask, mask_mode="inverted"),
        "mask-zero-fill": lambda: _attention(q, k, v, mask, mask_mode="zero"),
        "half-overflow": [lambda: _attention(q, k, v, mask, mask_mode="large-negative"),
                          lambda: _attention(q, k, v, mask, mask_mode="large-negative-added")],
        "mask-after-softmax": lambda: _attention(q, k, v, mask, mask_mode="after"),
        "mask-ignored": lambda: _attention(q, k, v, mask, mask_mode="ignored"),
        "fully-masked-nan": lambda: _attention(q, k, v, mask, softmax=_nan_softmax),
        "softmax-wrong-dim": lambda: _attention(q, k, v, mask, softmax_dim=-2),
        "softmax-unstable": [lambda: _attention(q, k, v, mask, softmax=_naive_softmax),
                             lambda: _attention(q, k, v, mask,
                                                softmax=lambda x, dim: _guarded(_naive_softmax(x, dim))),
                             lambda: _attention(q, k, v, mask, softmax=_empty_guarded_naive_softmax)],
        "softmax-global-max": [lambda: _attention(q, k, v, mask, softmax=_global_max_softmax),
                               lambda: _attention(q, k, v, mask,
                                                  softmax=lambda x, dim: _guarded(_global_max_softmax(x, dim)))],
        "output-used-k": lambda: _attention(q, k, v, mask, values=k),
    }
    if L == S:
        variants["scores-transposed"] = lambda: _attention(q, k, v, mask, transposed=True)
    return variants


# A fill this negative is a "large constant" in place of -inf (float16's lowest is -65504).
LARGE_NEGATIVE = -1e4


def fitted(function: str, args: Sequence, kwargs: dict, actual: torch.Tensor) -> dict[str, list[Callable]]:
    """Variants whose constant is read from the student's own output: half-overflow is a class (one large
    finite negative constant in place of -inf, filled in or added), not the one value -1e9."""
    a = list(args) + [kwargs[name] for name in ("mask",) if name in kwargs]
    if function != "apply_mask" or len(a) < 2 or not isinstance(a[1], torch.Tensor) or a[1].dtype != torch.bool:
        return {}
    scores, mask = a[0], a[1]
    try:
        shape = torch.broadcast_shapes(scores.shape, mask.shape)
    except RuntimeError:
        return {}
    if tuple(actual.shape) != tuple(shape):
        return {}
    hidden = (~mask).expand(shape)
    filled = _one_constant(actual[hidden])
    added = _one_constant((actual.to(torch.float64) - scores.to(torch.float64).expand(shape))[hidden])
    makers = []
    if filled is not None:
        makers.append(lambda: scores.masked_fill(~mask, filled))
    if added is not None:
        makers.append(lambda: scores + added * (~mask).to(scores.dtype))
    return {"half-overflow": makers} if makers else {}


def _one_constant(values: torch.Tensor):
    """The one large negative constant all `values` hold, or None."""
    if values.numel() == 0:
        return None
    first = float(values.reshape(-1)[0])
    if not math.isfinite(first) or first > LARGE_NEGATIVE:
        return None
    same = torch.isclose(values.to(torch.float64), torch.tensor(first, dtype=torch.float64), rtol=1e-6, atol=0)
    return first if bool(same.all()) else None


# Precisions below float64 in which a student may build the constant sqrt(d_k).
LOW_PRECISIONS = (torch.float32, torch.bfloat16, torch.float16)


def _low_precision_scale(scores, d_k) -> list[Callable]:
    """Dividing by sqrt(d_k) made a tensor of a lower precision than the scores (``torch.tensor(d_k)`` is
    float32), or multiplying by its reciprocal made so: only what differs from the right answer."""
    exact = math.sqrt(d_k)
    found = []
    for low in LOW_PRECISIONS:
        if torch.finfo(low).eps <= torch.finfo(scores.dtype).eps:
            continue
        root = float(torch.tensor(exact, dtype=low))
        reciprocal = float(torch.tensor(1 / exact, dtype=low))
        found += [lambda r=root: scores / r] if root != exact else []
        found += [lambda r=reciprocal: scores * r] if reciprocal != 1 / exact else []
    return found


def variants(function: str, args: Sequence, kwargs: dict) -> dict[str, list[Callable]]:
    """{code: [callable producing the buggy output]} for one student function."""
    a = list(args) + [kwargs[name] for name in ("mask",) if name in kwargs]
    if function == "attention_scores":
        q, k = a[:2]
        d_k = q.shape[-1]
        return {"scores-transposed": [lambda: k @ q.transpose(-2, -1)],
                "scores-scaled-early": [lambda: (q @ k.transpose(-2, -1)) / math.sqrt(d_k),
                                        lambda: (q @ k.transpose(-2, -1)) / d_k]}
    if function == "scale_scores":
        scores, d_k = a[:2]
        return {"scale-missing": [lambda: scores], "scale-by-dk": [lambda: scores / d_k],
                "scale-multiplied": [lambda: scores * math.sqrt(d_k)],
                "scale-low-precision": _low_precision_scale(scores, d_k)}
    if function == "apply_mask":
        scores, mask = a[0], (a[1] if len(a) > 1 else None)
        if mask is None:
            return {}
        out = {"mask-ignored": [lambda: scores]}
        if mask.dtype == torch.bool:
            out["mask-inverted"] = [lambda: scores.masked_fill(mask, NEG_INF)]
            out["mask-zero-fill"] = [lambda: scores.masked_fill(~mask, 0.0)]
            out["half-overflow"] = [lambda: scores.masked_fill(~mask, -1e9)]
        return out
    if function == "softmax":
        x = a[0]
        dim = a[1] if len(a) > 1 else kwargs.get("dim", -1)
        # Another axis than `dim`, with the guard for all -inf slices or without it.
        return {"softmax-dim-ignored": [f for d in _other_dims(x, dim)
                                        for f in (lambda d=d: ref.softmax(x, dim=d), lambda d=d: _nan_softmax(x, d))],
                "softmax-unstable": [lambda: _naive_softmax(x, dim), lambda: _guarded(_naive_softmax(x, dim)),
                                     lambda: _empty_guarded_naive_softmax(x, dim)],
                "softmax-global-max": [lambda: _global_max_softmax(x, dim),
                                       lambda: _guarded(_global_max_softmax(x, dim))],
                "fully-masked-nan": [lambda: _nan_softmax(x, dim)]}
    if function in ("scaled_dot_product_attention", "fixed_attention"):
        q, k, v = a[:3]
        mask = a[3] if len(a) > 3 else None
        raw = _sdpa_variants(q, k, v, mask)
        pick = (lambda r: r) if function == "scaled_dot_product_attention" else (lambda r: None if r is None else r[0])
        return {code: [(lambda f=f: pick(f())) for f in (fs if isinstance(fs, list) else [fs])]
                for code, fs in raw.items()}
    if function == "causal_mask":
        L, S = a[:2]
        ones = torch.ones(L, S, dtype=torch.bool)
        return {"causal-off-by-one": [lambda: ones.tril(-1), lambda: ones.tril(1)],
                "causal-bottom-right": [lambda: ones.tril(S - L)],
                "mask-inverted": [lambda: ~ones.tril()]}
    if function == "key_padding_to_attn_mask":
        kpm = a[0]
        return {"padding-polarity": [lambda: kpm[:, None, None, :], lambda: kpm]}
    return {}
