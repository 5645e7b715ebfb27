"""Inputs and float64 references shared by the hidden checks.

References come from PyTorch itself (F.scaled_dot_product_attention,
torch.softmax) in float64, so the checks never trust our own solution code
for the expected values.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Optional

import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from .tolerances import Tolerance

F64 = torch.float64


def randn(rng: torch.Generator, *shape: int, dtype: torch.dtype = F64) -> torch.Tensor:
    return torch.randn(*shape, generator=rng, dtype=F64).to(dtype)


def qkv(rng: torch.Generator, batch: tuple[int, ...] = (2, 3), L: int = 5, S: int = 7, d_k: int = 8,
        d_v: int = 4) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random cross-attention inputs: L != S and d_k != d_v by default."""
    return randn(rng, *batch, L, d_k), randn(rng, *batch, S, d_k), randn(rng, *batch, S, d_v)


def random_bool_mask(rng: torch.Generator, shape: Sequence[int], p_keep: float = 0.6,
                     full_row: Optional[int] = None) -> torch.Tensor:
    """Bool mask (True = attend); `full_row` indexes a query row masked out entirely."""
    mask = torch.rand(*shape, generator=rng) < p_keep
    mask[..., 0] |= True  # most rows keep a key...
    if full_row is not None:
        mask[..., full_row, :] = False  # ...but one row keeps none
    return mask


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
         mask: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference output and weights, both from F.scaled_dot_product_attention."""
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    eye = torch.eye(k.shape[-2], dtype=q.dtype).expand(*k.shape[:-1], k.shape[-2])
    weights = F.scaled_dot_product_attention(q, k, eye, attn_mask=mask)
    return out, weights


def bool_masked(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Scores with the positions a boolean mask forbids (False) set to -inf, by torch.masked_fill."""
    return scores.masked_fill(~mask, float("-inf"))


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """torch.softmax with all -inf slices mapped to zeros (torch >= 2.5 SDPA)."""
    out = torch.softmax(x, dim=dim)
    return torch.nan_to_num(out, nan=0.0)


def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return q @ k.transpose(-2, -1)


def scaled(scores_: torch.Tensor, d_k: float) -> torch.Tensor:
    return scores_ / math.sqrt(d_k)


def tolerance(reference: Callable, args: Sequence, dtype: torch.dtype, select: Optional[int] = None,
              **kwargs: Any) -> Tolerance:
    """Tolerance for results in `dtype`, from the reference's own rounding error.

    The reference runs in float64 and in a lower precision (the dtype itself,
    or float32 as a probe when dtype is float64, scaled back by the ratio of
    the machine epsilons): how much rounding alone moves these outputs.
    """
    from . import tolerances

    probe = torch.float32 if dtype == F64 else dtype
    ref64 = reference(*cast(args, F64), **kwargs)
    ref_low = reference(*cast(args, probe), **kwargs)
    if isinstance(ref64, tuple):
        ref64, ref_low = ref64[select or 0], ref_low[select or 0]
    tol = tolerances.derive(ref64, ref_low, probe)
    if dtype == F64:
        return tolerances.rescale(tol, probe, F64)
    return tol


def cast(args: Sequence, dtype: torch.dtype) -> list:
    return [a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]


def _apply_mask(scores_, mask=None):
    if mask is None:
        return scores_
    if mask.dtype == torch.bool:
        return scores_.masked_fill(~mask, float("-inf"))
    return scores_ + mask.to(scores_.dtype)


# The float64 reference of each graded function, for deriving tolerances.
REFERENCES = {
    "attention_scores": scores, "scale_scores": scaled, "apply_mask": _apply_mask, "softmax": softmax,
    "attention_output": lambda w, v: w @ v, "scaled_dot_product_attention": sdpa,
    "fixed_attention": lambda *a: sdpa(*a)[0],
}


def default_tolerance(function: str, args: Sequence, kwargs: dict, select: Optional[int] = None) -> Optional[Tolerance]:
    """Tolerance for a float64 comparison of `function` on `args`, or None."""
    reference = REFERENCES.get(function)
    if reference is None or not any(isinstance(a, torch.Tensor) and a.is_floating_point() for a in args):
        return None
    return tolerance(reference, args, F64, select=select, **kwargs)
