"""Reference implementation of the student API of assignment ``sdpa``.

This module is the single source of truth for the solution code: the source
notebook's solution cells are generated from these functions (see
``tools/build_notebooks.py``) and ``tests/test_course_layout.py`` fails when
they drift apart.  Each function is self-contained because each one becomes
its own notebook cell.
"""
import math

import torch


def attention_scores(q, k):
    """Raw dot-product scores between queries and keys, without scaling.

    q: [..., L, d_k], k: [..., S, d_k] -> scores [..., L, S].
    Leading batch/head dims broadcast. Raises ValueError when d_k differs.
    """
    ### BEGIN SOLUTION
    if q.dim() < 2 or k.dim() < 2:
        raise ValueError(f"q 和 k 至少要有两维 [..., 位置, 特征]，收到 q{tuple(q.shape)}、k{tuple(k.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q 的最后一维 d_k={q.shape[-1]} 与 k 的最后一维 {k.shape[-1]} 不一致")
    return q @ k.transpose(-2, -1)
    ### END SOLUTION


def scale_scores(scores, d_k):
    """Divide the scores by sqrt(d_k) so their size does not grow with d_k.

    scores: [..., L, S], d_k: positive int -> tensor of the same shape and dtype.
    """
    ### BEGIN SOLUTION
    if d_k <= 0:
        raise ValueError(f"d_k 必须为正数，收到 {d_k}")
    return scores / math.sqrt(d_k)
    ### END SOLUTION


def apply_mask(scores, mask=None):
    """Apply an attention mask to the scores before softmax.

    scores: [..., L, S]. mask broadcasts to scores and is either
    - bool: True = may attend (as in F.scaled_dot_product_attention);
      disallowed positions become -inf;
    - float: added to the scores (0 = allowed, -inf = forbidden);
    - None: the scores are returned unchanged.
    Returns a new tensor; the input is never modified in place.
    """
    ### BEGIN SOLUTION
    if mask is None:
        return scores
    if torch.broadcast_shapes(mask.shape, scores.shape) != scores.shape:
        raise ValueError(f"掩码形状 {tuple(mask.shape)} 不能广播到分数形状 {tuple(scores.shape)}")
    if mask.dtype == torch.bool:
        return scores.masked_fill(~mask, float("-inf"))
    return scores + mask.to(dtype=scores.dtype)
    ### END SOLUTION


def softmax(x, dim=-1):
    """Numerically stable softmax along ``dim``, written by hand.

    Subtracts the maximum of each slice along ``dim`` before exp. A slice that
    is entirely -inf (a query with no allowed key) gives zeros, not NaN.
    Output has the shape, dtype and device of x.
    """
    ### BEGIN SOLUTION
    slice_max = x.amax(dim=dim, keepdim=True)
    slice_max = torch.where(torch.isfinite(slice_max), slice_max, torch.zeros_like(slice_max))
    exps = torch.exp(x - slice_max)
    totals = exps.sum(dim=dim, keepdim=True)
    return exps / torch.where(totals > 0, totals, torch.ones_like(totals))
    ### END SOLUTION


def attention_output(weights, v):
    """Weighted sum of the values.

    weights: [..., L, S], v: [..., S, d_v] -> output [..., L, d_v].
    Raises ValueError when the key positions S do not match.
    """
    ### BEGIN SOLUTION
    if weights.shape[-1] != v.shape[-2]:
        raise ValueError(f"权重的最后一维 S={weights.shape[-1]} 与 v 的位置数 {v.shape[-2]} 不一致")
    return weights @ v
    ### END SOLUTION


def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k) + M) v, composed from the five functions above.

    q: [..., L, d_k], k: [..., S, d_k], v: [..., S, d_v], mask broadcast to
    [..., L, S] (bool True = may attend, or additive float).
    Returns (output [..., L, d_v], weights [..., L, S]). Rows without any
    allowed key get zero weights and a zero output (as torch >= 2.5 does).
    """
    ### BEGIN SOLUTION
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k 的位置数 S={k.shape[-2]} 与 v 的位置数 {v.shape[-2]} 不一致")
    scores = scale_scores(attention_scores(q, k), q.shape[-1])
    weights = softmax(apply_mask(scores, mask), dim=-1)
    return attention_output(weights, v), weights
    ### END SOLUTION


def causal_mask(L, S, device=None):
    """Causal mask, True = may attend: query i sees keys j <= i.

    Returns bool [L, S], aligned to the top-left corner exactly like
    ``is_causal=True`` in F.scaled_dot_product_attention.
    """
    ### BEGIN SOLUTION
    return torch.ones(L, S, dtype=torch.bool, device=device).tril()
    ### END SOLUTION


def key_padding_to_attn_mask(key_padding_mask):
    """Convert a MultiheadAttention key_padding_mask to an SDPA bool mask.

    key_padding_mask: [B, S] bool, True = padding (ignore).
    Returns [B, 1, 1, S] bool, True = may attend, broadcasting over heads and
    queries.
    """
    ### BEGIN SOLUTION
    if key_padding_mask.dim() != 2:
        raise ValueError(f"key_padding_mask 应为 [B, S]，收到 {tuple(key_padding_mask.shape)}")
    return (~key_padding_mask.bool())[:, None, None, :]
    ### END SOLUTION


def fixed_attention(q, k, v, mask=None):
    """The debugging task's function with its bug fixed (softmax over keys)."""
    ### BEGIN SOLUTION
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = softmax(scores, dim=-1)
    return weights @ v
    ### END SOLUTION
