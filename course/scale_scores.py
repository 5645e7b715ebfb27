"""The part ``scale_scores``: the scores divided by sqrt(d_k)."""
import math

import torch

from autograder.i18n import N_

from .references import scaled
from .spec import GradedFunction, Honest, Mistake

PART = "scale_scores"

# Precisions below float64 in which a student may build the constant sqrt(d_k).
LOW_PRECISIONS = (torch.float32, torch.bfloat16, torch.float16)


def _low_precision_scale(scores, d_k):
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


def _variants(args, kwargs):
    scores, d_k = args[:2]
    return {"scale-missing": [lambda: scores], "scale-by-dk": [lambda: scores / d_k],
            "scale-multiplied": [lambda: scores * math.sqrt(d_k)],
            "scale-low-precision": _low_precision_scale(scores, d_k)}


FUNCTIONS = (
    GradedFunction("scale_scores", ("scores", "d_k"), axes=(("L", "S"), None), reference=scaled,
                   models=("scale-missing", "scale-by-dk", "scale-multiplied", "scale-low-precision"),
                   variants=_variants),
)

MISTAKES = (
    Mistake("scale-missing", N_("没有把分数除以 sqrt(d_k)。"), N_("缩放一步是 scores / math.sqrt(d_k)。"),
            composite_credit=True, honest=Honest("scale_scores", """
def scale_scores(scores, d_k):
    return scores
""")),
    Mistake("scale-by-dk", N_("分数除以了 d_k，而不是 sqrt(d_k)。"), N_("用 math.sqrt(d_k)（或 d_k ** 0.5）。"),
            composite_credit=True, honest=Honest("scale_scores", """
def scale_scores(scores, d_k):
    return scores / d_k
""")),
    Mistake("scale-multiplied", N_("分数乘以了 sqrt(d_k)，方向反了。"), N_("缩放是除法：scores / math.sqrt(d_k)。"),
            composite_credit=True, honest=Honest("scale_scores", """
def scale_scores(scores, d_k):
    return scores * math.sqrt(d_k)
""")),
    Mistake("scale-low-precision",
            N_("缩放用的 sqrt(d_k) 是低精度（float32 或 float16）张量：float64 的分数只得到了 float32 精度的结果。"),
            N_("用 Python 的 math.sqrt(d_k)，或按分数的 dtype 建张量（见“GPU 与低精度”一节）。"),
            composite_credit=True, honest=Honest("scale_scores", """
def scale_scores(scores, d_k):
    return scores / torch.sqrt(torch.tensor(d_k, dtype=torch.float32))
""")),
)
