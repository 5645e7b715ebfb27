"""The float64 references of the graded functions, and the other correct formulations of each.

References come from PyTorch itself (F.scaled_dot_product_attention,
torch.softmax), so the checks never trust the course's own solution code for
the expected values.  ``autograder.grading.cases`` hands them to the checks.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
         mask: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference output and weights, both from F.scaled_dot_product_attention."""
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    eye = torch.eye(k.shape[-2], dtype=q.dtype).expand(*k.shape[:-1], k.shape[-2])
    weights = F.scaled_dot_product_attention(q, k, eye, attn_mask=mask)
    return out, weights


def sdpa_output(q, k, v, mask=None) -> torch.Tensor:
    """The reference's output alone (the debugging task's fixed function returns only that)."""
    return sdpa(q, k, v, mask)[0]


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """torch.softmax with all -inf slices mapped to zeros (torch >= 2.5 SDPA)."""
    out = torch.softmax(x, dim=dim)
    return torch.nan_to_num(out, nan=0.0)


def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    return q @ k.transpose(-2, -1)


def scaled(scores_: torch.Tensor, d_k: float) -> torch.Tensor:
    return scores_ / math.sqrt(d_k)


def apply_mask(scores_, mask=None):
    if mask is None:
        return scores_
    if mask.dtype == torch.bool:
        return scores_.masked_fill(~mask, float("-inf"))
    return scores_ + mask.to(scores_.dtype)


def weighted_sum(weights: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return weights @ v


def softmax_via_logsumexp(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """exp(x - logsumexp(x)), as ``torch.log_softmax(x).exp()`` computes it: as correct as torch.softmax,
    but the shift is rounded at the scale of x, so a dominant weight is off by about |x| x eps."""
    return torch.nan_to_num(torch.exp(x - torch.logsumexp(x, dim=dim, keepdim=True)), nan=0.0)


def sdpa_via_logsumexp(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                       mask: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention written out with `softmax_via_logsumexp`: (output, weights)."""
    weights = softmax_via_logsumexp(apply_mask(scaled(scores(q, k), q.shape[-1]), mask))
    return weights @ v, weights
