"""The part ``apply_mask``: masked positions set to -inf (boolean mask, True = attend), float masks added."""
import math

import torch

from autograder.i18n import N_

from . import references
from .spec import GradedFunction, Honest, Mistake

PART = "apply_mask"
NEG_INF = float("-inf")
# A fill this negative is a "large constant" in place of -inf (float16's lowest is -65504).
LARGE_NEGATIVE = -1e4


def _variants(args, kwargs):
    scores, mask = args[0], (args[1] if len(args) > 1 else None)
    if mask is None:
        return {}
    out = {"mask-ignored": [lambda: scores]}
    if mask.dtype == torch.bool:
        out["mask-inverted"] = [lambda: scores.masked_fill(mask, NEG_INF)]
        out["mask-zero-fill"] = [lambda: scores.masked_fill(~mask, 0.0)]
        out["half-overflow"] = [lambda: scores.masked_fill(~mask, -1e9)]
    return out


def _fitted(args, kwargs, actual):
    """half-overflow is a class (one large finite negative constant in place of -inf, filled in or added),
    not the one value -1e9: its constant is read from the student's own output."""
    if len(args) < 2 or not isinstance(args[1], torch.Tensor) or args[1].dtype != torch.bool:
        return {}
    scores, mask = args[0], args[1]
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


FUNCTIONS = (
    GradedFunction("apply_mask", ("scores", "mask"), axes=(("L", "S"), ("L", "S")), reference=references.apply_mask,
                   models=("mask-ignored", "mask-inverted", "mask-zero-fill", "half-overflow"),
                   variants=_variants, fitted=_fitted),
)


def _masking(fill: str) -> str:
    """An apply_mask answer that fills the boolean mask's positions as `fill` says, and adds float masks."""
    return f"""
def apply_mask(scores, mask=None):
    if mask is None:
        return scores
    if mask.dtype == torch.bool:
        return {fill}
    return scores + mask
"""


MISTAKES = (
    Mistake("mask-inverted", N_("布尔掩码的含义用反了：把 True 当成了“屏蔽”。"),
            N_("在 F.scaled_dot_product_attention 的约定里 True 表示“允许关注”，被屏蔽的是 False 的位置。"),
            composite_credit=True, honest=Honest("apply_mask", _masking('scores.masked_fill(mask, float("-inf"))'))),
    Mistake("mask-zero-fill", N_("被屏蔽的位置填了 0，而不是 -inf；0 是完全合法的分数，softmax 后仍有权重。"),
            N_("用 float('-inf') 填充被屏蔽的位置。"),
            composite_credit=True, honest=Honest("apply_mask", _masking("scores.masked_fill(~mask, 0.0)"))),
    Mistake("mask-ignored", N_("掩码没有起作用：结果与不加掩码时相同。"), N_("检查 mask 是否真的被用到了分数上。"),
            composite_credit=True, honest=Honest("apply_mask", """
def apply_mask(scores, mask=None):
    return scores
""")),
    Mistake("inplace-mutation", N_("函数原地修改了输入张量。"), N_("返回新张量：用 masked_fill 而不是 masked_fill_，不要对输入赋值。"),
            honest=Honest("apply_mask", """
def apply_mask(scores, mask=None):
    if mask is None:
        return scores
    if mask.dtype == torch.bool:
        return scores.masked_fill_(~mask, float("-inf"))
    scores += mask
    return scores
""")),
    Mistake("half-overflow", N_("用了 -1e9 之类的大常数：float16 放不下，会报错或溢出。"), N_("用 float('-inf')。"),
            composite_credit=True, honest=Honest("apply_mask", _masking("scores.masked_fill(~mask, -1e9)"))),
)
