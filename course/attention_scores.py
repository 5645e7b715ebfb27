"""The part ``attention_scores``: raw dot products Q·Kᵀ, unscaled, with a clear error for a d_k mismatch."""
import math

from autograder.i18n import N_

from .references import scores
from .spec import GradedFunction, Honest, Mistake

PART = "attention_scores"


def _variants(args, kwargs):
    q, k = args[:2]
    d_k = q.shape[-1]
    return {"scores-transposed": [lambda: k @ q.transpose(-2, -1)],
            "scores-scaled-early": [lambda: (q @ k.transpose(-2, -1)) / math.sqrt(d_k),
                                    lambda: (q @ k.transpose(-2, -1)) / d_k]}


FUNCTIONS = (
    GradedFunction("attention_scores", ("q", "k"), axes=(("L", "D"), ("S", "D")), reference=scores,
                   models=("scores-transposed", "scores-scaled-early"), variants=_variants),
)

MISTAKES = (
    Mistake("scores-transposed", N_("分数矩阵的两个位置维反了：算成了 K·Qᵀ（形状 [..., S, L]），而不是 Q·Kᵀ（[..., L, S]）。"),
            N_("用 q @ k.transpose(-2, -1)：行对应查询，列对应 Key。"),
            composite_credit=True, honest=Honest("attention_scores", """
def attention_scores(q, k):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("d_k mismatch")
    return k @ q.transpose(-2, -1)
""")),
    Mistake("scores-scaled-early", N_("attention_scores 里已经做了缩放；这个函数只应返回原始点积。"),
            N_("把除以 sqrt(d_k) 留给 scale_scores。"),
            composite_credit=True, honest=Honest("attention_scores", """
def attention_scores(q, k):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("d_k mismatch")
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
""", also=("scale-by-dk",))),  # scaled twice: attention is divided by d_k
    Mistake("shape-error-missing", N_("形状不匹配时没有抛出 ValueError。"), N_("先检查维度，再用清楚的信息 raise ValueError(...)。"),
            honest=Honest("attention_scores", """
def attention_scores(q, k):
    return q @ k.transpose(-2, -1)
""")),
)
