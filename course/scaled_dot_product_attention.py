"""The part ``scaled_dot_product_attention``: the five helpers composed into (output, weights)."""
import math

import torch

from autograder.i18n import N_
from solutions import sdpa as solution

from . import references
from .softmax import empty_guarded_naive_softmax, global_max_softmax, guarded, naive_softmax, nan_softmax
from .spec import GradedFunction, Honest, Mistake

PART = "scaled_dot_product_attention"
NEG_INF = float("-inf")


def attention(q, k, v, mask=None, *, scale=None, mask_mode="ref", softmax=solution.softmax, softmax_dim=-1,
              values=None, transposed=False):
    """Reference attention with one step swapped for a buggy version: (output, weights), or None where
    the mistake does not apply to this mask."""
    d_k = q.shape[-1]
    scores = (k @ q.transpose(-2, -1)) if transposed else (q @ k.transpose(-2, -1))
    scores = scores / math.sqrt(d_k) if scale is None else scale(scores)
    if mask is not None and mask_mode != "after":
        if mask_mode == "ref":
            scores = solution.apply_mask(scores, mask)
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


def attention_variants(q, k, v, mask=None):
    """{code: maker or [makers]} of (output, weights) for every mistake the attention models."""
    d_k, d_v, L, S = q.shape[-1], v.shape[-1], q.shape[-2], k.shape[-2]
    variants = {
        "scale-missing": lambda: attention(q, k, v, mask, scale=lambda s: s),
        "scale-by-dk": lambda: attention(q, k, v, mask, scale=lambda s: s / d_k),
        "scale-multiplied": lambda: attention(q, k, v, mask, scale=lambda s: s * math.sqrt(d_k)),
        "scale-wrong-dim": [lambda n=n: attention(q, k, v, mask, scale=lambda s: s / math.sqrt(n))
                            for n in {d_v, L, S} - {d_k}],
        "mask-inverted": lambda: attention(q, k, v, mask, mask_mode="inverted"),
        "mask-zero-fill": lambda: attention(q, k, v, mask, mask_mode="zero"),
        "half-overflow": [lambda: attention(q, k, v, mask, mask_mode="large-negative"),
                          lambda: attention(q, k, v, mask, mask_mode="large-negative-added")],
        "mask-after-softmax": lambda: attention(q, k, v, mask, mask_mode="after"),
        "mask-ignored": lambda: attention(q, k, v, mask, mask_mode="ignored"),
        "fully-masked-nan": lambda: attention(q, k, v, mask, softmax=nan_softmax),
        "softmax-wrong-dim": lambda: attention(q, k, v, mask, softmax_dim=-2),
        "softmax-unstable": [lambda: attention(q, k, v, mask, softmax=naive_softmax),
                             lambda: attention(q, k, v, mask, softmax=lambda x, dim: guarded(naive_softmax(x, dim))),
                             lambda: attention(q, k, v, mask, softmax=empty_guarded_naive_softmax)],
        "softmax-global-max": [lambda: attention(q, k, v, mask, softmax=global_max_softmax),
                               lambda: attention(q, k, v, mask,
                                                 softmax=lambda x, dim: guarded(global_max_softmax(x, dim)))],
        "output-used-k": lambda: attention(q, k, v, mask, values=k),
    }
    if L == S:
        variants["scores-transposed"] = lambda: attention(q, k, v, mask, transposed=True)
    return variants


# Every code `attention_variants` may produce (scores-transposed only where L == S).
ATTENTION_MODELS = ("scale-missing", "scale-by-dk", "scale-multiplied", "scale-wrong-dim", "mask-inverted",
                    "mask-zero-fill", "half-overflow", "mask-after-softmax", "mask-ignored", "fully-masked-nan",
                    "softmax-wrong-dim", "softmax-unstable", "softmax-global-max", "output-used-k",
                    "scores-transposed")


def picked(pick):
    """Variants of a function that returns `pick` of what the attention's variants return."""
    def variants(args, kwargs):
        q, k, v = args[:3]
        mask = args[3] if len(args) > 3 else None
        return {code: [(lambda f=f: pick(f())) for f in (fs if isinstance(fs, list) else [fs])]
                for code, fs in attention_variants(q, k, v, mask).items()}
    return variants


def output_shape_codes(args, shape):
    """An output whose last axis is k's d_k where v's d_v differs: the weights multiplied K, not V."""
    if len(args) < 3:
        return []
    k, v = args[1], args[2]
    return ["output-used-k"] if len(shape) >= 1 and shape[-1] == k.shape[-1] != v.shape[-1] else []


# How the composite uses the helpers, in order: each helper's arguments from the composite's inputs
# (q, k, v, mask) and the helpers' outputs so far (keyed by the helper's name).
HELPERS = (
    ("attention_scores", lambda io: (io["q"], io["k"])),
    ("scale_scores", lambda io: (io["attention_scores"], io["q"].shape[-1])),
    ("apply_mask", lambda io: (io["scale_scores"], io["mask"])),
    ("softmax", lambda io: (io["apply_mask"], -1)),
    ("attention_output", lambda io: (io["softmax"], io["v"])),
)

FUNCTIONS = (
    GradedFunction("scaled_dot_product_attention", ("q", "k", "v", "mask"),
                   axes=(("L", "D"), ("S", "D"), ("S", "E"), ("L", "S")), reference=references.sdpa,
                   equivalents=(references.sdpa_via_logsumexp,), models=ATTENTION_MODELS,
                   variants=picked(lambda r: r), shape_codes=output_shape_codes, computes_attention=True,
                   helpers=HELPERS),
)


def _attention_answer(body: str) -> str:
    return f"""
def scaled_dot_product_attention(q, k, v, mask=None):
{body}"""


MISTAKES = (
    Mistake("scale-wrong-dim", N_("缩放用的维度不是 d_k（用成了 d_v、L 或 S）。"),
            N_("d_k 是 q 和 k 的最后一维：q.shape[-1]。"),
            honest=Honest(PART, _attention_answer("""\
    scores = scale_scores(attention_scores(q, k), v.shape[-1])
    weights = softmax(apply_mask(scores, mask), dim=-1)
    return attention_output(weights, v), weights
"""))),
    Mistake("mask-after-softmax", N_("掩码在 softmax 之后才施加，剩下的权重不再和为 1。"),
            N_("先把被屏蔽的分数设为 -inf，再做 softmax。"),
            honest=Honest(PART, _attention_answer("""\
    scores = scale_scores(attention_scores(q, k), q.shape[-1])
    weights = softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask
    return attention_output(weights, v), weights
"""))),
    Mistake("softmax-wrong-dim", N_("softmax 沿错误的维度归一化（例如沿查询维），形状没错但含义变了。"),
            N_("沿 Key 位置维（dim=-1）归一化，并尊重参数 dim。"),
            honest=Honest(PART, _attention_answer("""\
    scores = scale_scores(attention_scores(q, k), q.shape[-1])
    weights = softmax(apply_mask(scores, mask), dim=-2)
    return attention_output(weights, v), weights
"""))),
    Mistake("sdpa-builtin",
            N_("使用了内置的注意力（F.scaled_dot_product_attention / nn.MultiheadAttention），本题要求自己组合各步。"),
            N_("用你自己写的五个函数组合出注意力。")),
    Mistake("output-used-k", N_("加权求和用了 K 而不是 V。"), N_("输出是 weights @ v。"),
            honest=Honest(PART, _attention_answer("""\
    scores = scale_scores(attention_scores(q, k), q.shape[-1])
    weights = softmax(apply_mask(scores, mask), dim=-1)
    return weights @ k, weights
"""))),
    Mistake("assumes-square", N_("代码默认 L == S（查询数等于 Key 数）；交叉注意力里两者可以不同。"),
            N_("分清 q.shape[-2]（L）与 k.shape[-2]（S）。"),
            composite_credit=True, honest=Honest(PART, _attention_answer("""\
    L = q.shape[-2]
    scores = scale_scores(attention_scores(q, k), q.shape[-1]).reshape(*q.shape[:-1], L)
    weights = softmax(apply_mask(scores, mask), dim=-1)
    return attention_output(weights, v), weights
"""))),
    Mistake("returns-not-tuple", N_("scaled_dot_product_attention 应返回 (output, weights) 两个张量。"),
            N_("return output, weights"),
            composite_credit=True, honest=Honest(PART, _attention_answer("""\
    scores = scale_scores(attention_scores(q, k), q.shape[-1])
    return attention_output(softmax(apply_mask(scores, mask), dim=-1), v)
"""))),
)
