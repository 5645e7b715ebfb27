"""Tolerances derived from a float64 reference, never guessed.

Following PyTorch's ``test/test_transformers.py``: run the reference once in
float64 and once in the dtype under test; the low-precision reference's own
error, times a fudge factor, is what a correct student implementation may
differ by.  A floor of a few ulps of the dtype keeps exact cases sane.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

FUDGE = 4.0
# A few units in the last place of each dtype (torch.finfo eps), as the floor.
ULPS = 8.0


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float

    def describe(self) -> str:
        return f"atol={self.atol:.1e}, rtol={self.rtol:.1e}"


def floor_for(dtype: torch.dtype) -> Tolerance:
    eps = torch.finfo(dtype).eps
    return Tolerance(atol=ULPS * eps, rtol=ULPS * eps)


def derive(reference64: torch.Tensor, reference_lowp: Optional[torch.Tensor] = None,
           dtype: torch.dtype = torch.float64, fudge: float = FUDGE) -> Tolerance:
    """Tolerance for comparing a student's `dtype` result with `reference64`.

    reference_lowp is the same reference computed in `dtype`; its deviation
    from float64 measures what rounding alone costs for these inputs.
    """
    floor = floor_for(dtype)
    if reference_lowp is None:
        return floor
    ref = reference64.to(torch.float64)
    low = reference_lowp.to(torch.float64)
    finite = torch.isfinite(ref) & torch.isfinite(low)
    if not finite.any():
        return floor
    abs_err = (ref[finite] - low[finite]).abs()
    rel_err = abs_err / ref[finite].abs().clamp_min(torch.finfo(dtype).tiny)
    atol = max(floor.atol, fudge * float(abs_err.max()))
    large = ref[finite].abs() > atol
    rtol = max(floor.rtol, fudge * float(rel_err[large].max()) if large.any() else floor.rtol)
    return Tolerance(atol=atol, rtol=min(rtol, 0.5))


def widest(tols: list[Tolerance]) -> Tolerance:
    """The loosest of several tolerances, in each of atol and rtol."""
    return Tolerance(atol=max(t.atol for t in tols), rtol=max(t.rtol for t in tols))


def rescale(tol: Tolerance, measured_dtype: torch.dtype, target_dtype: torch.dtype) -> Tolerance:
    """Carry a tolerance measured in one precision over to a finer one."""
    ratio = torch.finfo(target_dtype).eps / torch.finfo(measured_dtype).eps
    floor = floor_for(target_dtype)
    return Tolerance(atol=max(floor.atol, tol.atol * ratio), rtol=max(floor.rtol, tol.rtol * ratio))


def close(actual: torch.Tensor, expected: torch.Tensor, tol: Tolerance) -> bool:
    """Elementwise closeness with -inf/inf matched exactly and NaN never equal."""
    actual = actual.to(torch.float64)
    expected = expected.to(torch.float64)
    if actual.shape != expected.shape:
        return False
    return bool(torch.isclose(actual, expected, atol=tol.atol, rtol=tol.rtol).all())


def close_nan_alike(actual: torch.Tensor, expected: torch.Tensor, tol: Tolerance) -> bool:
    """`close`, except that a NaN where the other has one too is equal: for comparing a student's result
    with another result from the same input (the composition of their helpers, their own float64 output),
    where a NaN came from that input."""
    return actual.shape == expected.shape and bool(torch.isclose(
        actual.to(torch.float64), expected.to(torch.float64), atol=tol.atol, rtol=tol.rtol, equal_nan=True).all())


def max_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    diff = (actual.to(torch.float64) - expected.to(torch.float64)).abs()
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    same_inf = torch.isinf(actual.to(torch.float64)) & (actual.to(torch.float64) == expected.to(torch.float64))
    diff = torch.where(same_inf, torch.zeros_like(diff), diff)
    return float(diff.max()) if diff.numel() else 0.0
