"""Inputs and float64 references shared by the hidden checks.

References come from PyTorch itself (F.scaled_dot_product_attention,
torch.softmax) in float64, so the checks never trust our own solution code
for the expected values; the course declares them (``course/references.py``).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Optional

import torch

from course import FUNCTIONS
from course.references import scaled, scores, sdpa, softmax  # noqa: F401 - the checks' references

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


def bool_masked(scores_: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Scores with the positions a boolean mask forbids (False) set to -inf, by torch.masked_fill."""
    return scores_.masked_fill(~mask, float("-inf"))


def tolerance(reference: Callable, args: Sequence, dtype: torch.dtype, select: Optional[int] = None,
              **kwargs: Any) -> Tolerance:
    """Tolerance for results in `dtype`, from the reference's own rounding error.

    The reference runs in float64 and in a lower precision (the dtype itself,
    or float32 as a probe when dtype is float64, scaled back by the ratio of
    the machine epsilons): how much rounding alone moves these outputs.  The
    other correct formulations of the function (`EQUIVALENTS`) are probed
    alike for float64 results, and compared with the reference in float64
    itself (a probe in a lower precision can round away what float64 still
    resolves): a correct answer may round as any of them does, so the widest
    tolerance is kept.  Half-precision results keep the reference's own probe:
    a formulation that rounds worse there (logsumexp in bfloat16) is not one
    the checks should forgive.
    """
    from . import tolerances

    def pick(result):
        return result[select or 0] if isinstance(result, tuple) else result

    probe = torch.float32 if dtype == F64 else dtype
    probed, spread, main64 = [], [], None
    for formulation in (reference, *EQUIVALENTS.get(reference, ())):
        ref64 = pick(formulation(*cast(args, F64), **kwargs))
        if main64 is None or dtype == F64:  # in half precision, the reference's own rounding only
            probed.append(tolerances.derive(ref64, pick(formulation(*cast(args, probe), **kwargs)), probe))
        if main64 is None:
            main64 = ref64
        else:
            spread.append(tolerances.derive(main64, ref64, F64))
    tol = tolerances.widest(probed)
    if dtype == F64:
        tol = tolerances.rescale(tol, probe, F64)
    return tolerances.widest([tol, *spread])


def cast(args: Sequence, dtype: torch.dtype) -> list:
    return [a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]


# Other correct formulations of a reference: tolerances cover the rounding of each (see `tolerance`).
EQUIVALENTS: dict[Callable, tuple[Callable, ...]] = {f.reference: f.equivalents for f in FUNCTIONS.values()
                                                     if f.equivalents}
# The float64 reference of each graded function, for deriving tolerances.
REFERENCES = {name: f.reference for name, f in FUNCTIONS.items() if f.reference is not None}


def default_tolerance(function: str, args: Sequence, kwargs: dict, select: Optional[int] = None) -> Optional[Tolerance]:
    """Tolerance for a float64 comparison of `function` on `args`, or None."""
    reference = REFERENCES.get(function)
    if reference is None or not any(isinstance(a, torch.Tensor) and a.is_floating_point() for a in args):
        return None
    return tolerance(reference, args, F64, select=select, **kwargs)
