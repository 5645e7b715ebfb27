"""Reference implementation of the student API of assignment ``sdpa``.

This module is the reference for the solution code: the Chinese lesson's
solution cells (``lesson/sdpa.zh.md``) are these functions, verbatim, and the
English lesson's are the same code with English docstrings and messages;
``tests/test_course_layout.py`` fails when they drift apart.  Each function is
self-contained because each one becomes its own notebook cell.
"""
import math

import torch


def attention_scores(q, k):
    """查询与键的原始点积分数（不缩放）。

    q: [..., L, d_k]，k: [..., S, d_k]，返回分数 [..., L, S]。
    前导的批量维、头维可以广播。q 与 k 的最后一维 d_k 不一致时抛出 ValueError。
    """
    ### BEGIN SOLUTION
    if q.dim() < 2 or k.dim() < 2:
        raise ValueError(f"q 和 k 至少要有两维 [..., 位置, 特征]，收到 q{tuple(q.shape)}、k{tuple(k.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q 的最后一维 d_k={q.shape[-1]} 与 k 的最后一维 {k.shape[-1]} 不一致")
    return q @ k.transpose(-2, -1)
    ### END SOLUTION


def scale_scores(scores, d_k):
    """把分数除以 sqrt(d_k)，使分数的尺度不随 d_k 增大。

    scores: [..., L, S]，d_k: 正整数。返回形状与 dtype 都不变的张量。
    """
    ### BEGIN SOLUTION
    if d_k <= 0:
        raise ValueError(f"d_k 必须为正数，收到 {d_k}")
    return scores / math.sqrt(d_k)
    ### END SOLUTION


def apply_mask(scores, mask=None):
    """在 softmax 之前把掩码施加到分数上。

    scores: [..., L, S]。mask 能广播到 scores 的形状，可以是：
    - 布尔张量：True = 允许关注（与 F.scaled_dot_product_attention 相同），
      不允许的位置变为 -inf；
    - 浮点张量：直接加到分数上（0 = 允许，-inf = 禁止）；
    - None：原样返回分数。
    返回新张量，不原地修改输入。
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
    """沿 dim 手写的数值稳定 softmax。

    取指数之前，每个切片先减去它自己沿 dim 的最大值。整个切片都是 -inf 时
    （某个查询没有任何允许的键），输出全 0 而不是 NaN。
    输出的形状、dtype、device 与 x 相同。
    """
    ### BEGIN SOLUTION
    slice_max = x.amax(dim=dim, keepdim=True)
    slice_max = torch.where(torch.isfinite(slice_max), slice_max, torch.zeros_like(slice_max))
    exps = torch.exp(x - slice_max)
    totals = exps.sum(dim=dim, keepdim=True)
    return exps / torch.where(totals > 0, totals, torch.ones_like(totals))
    ### END SOLUTION


def attention_output(weights, v):
    """用权重对值加权求和。

    weights: [..., L, S]，v: [..., S, d_v]，返回输出 [..., L, d_v]。
    键的位置数 S 对不上时抛出 ValueError。
    """
    ### BEGIN SOLUTION
    if weights.shape[-1] != v.shape[-2]:
        raise ValueError(f"权重的最后一维 S={weights.shape[-1]} 与 v 的位置数 {v.shape[-2]} 不一致")
    return weights @ v
    ### END SOLUTION


def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q kᵀ / sqrt(d_k) + M) v，由上面五个函数组合而成。

    q: [..., L, d_k]，k: [..., S, d_k]，v: [..., S, d_v]，mask 能广播到
    [..., L, S]（布尔：True = 允许关注；或加性浮点掩码）。
    返回 (output [..., L, d_v], weights [..., L, S])。没有任何允许键的查询行
    权重与输出全为 0（与 torch >= 2.5 相同）。
    """
    ### BEGIN SOLUTION
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k 的位置数 S={k.shape[-2]} 与 v 的位置数 {v.shape[-2]} 不一致")
    scores = scale_scores(attention_scores(q, k), q.shape[-1])
    weights = softmax(apply_mask(scores, mask), dim=-1)
    return attention_output(weights, v), weights
    ### END SOLUTION


def causal_mask(L, S, device=None):
    """因果掩码，True = 允许关注：查询 i 能看到 j <= i 的键。

    返回布尔张量 [L, S]，左上角对齐，与 F.scaled_dot_product_attention 的
    is_causal=True 完全一致。
    """
    ### BEGIN SOLUTION
    return torch.ones(L, S, dtype=torch.bool, device=device).tril()
    ### END SOLUTION


def key_padding_to_attn_mask(key_padding_mask):
    """把 nn.MultiheadAttention 的 key_padding_mask 转换成 SDPA 约定的布尔掩码。

    key_padding_mask: [B, S] 布尔张量，True = 填充位置（忽略）。
    返回 [B, 1, 1, S] 布尔张量，True = 允许关注，可在头维和查询维上广播。
    """
    ### BEGIN SOLUTION
    if key_padding_mask.dim() != 2:
        raise ValueError(f"key_padding_mask 应为 [B, S]，收到 {tuple(key_padding_mask.shape)}")
    return (~key_padding_mask.bool())[:, None, None, :]
    ### END SOLUTION


def fixed_attention(q, k, v, mask=None):
    """找 bug 练习中你修好的注意力。

    接口与三个候选实现相同：q: [..., L, d_k]，k: [..., S, d_k]，v: [..., S, d_v]，
    mask 为布尔掩码（True = 允许关注）或 None。返回输出 [..., L, d_v]。
    """
    ### BEGIN SOLUTION
    # 修的是 candidate_1：它先求了每一行的总和，再把被屏蔽的键清零，
    # 于是这些键仍然算在分母里。掩码要在 softmax 之前施加。
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    exps = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    total = exps.sum(dim=-1, keepdim=True)
    return (exps / total) @ v
    ### END SOLUTION
