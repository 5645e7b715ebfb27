"""The part ``causal_mask``: a boolean [L, S] mask, query i attends to keys j <= i (top-left aligned)."""
import torch

from autograder.i18n import N_

from .spec import GradedFunction, Honest, Mistake

PART = "causal_mask"


def _variants(args, kwargs):
    L, S = args[:2]
    ones = torch.ones(L, S, dtype=torch.bool)
    return {"causal-off-by-one": [lambda: ones.tril(-1), lambda: ones.tril(1)],
            "causal-bottom-right": [lambda: ones.tril(S - L)],
            "mask-inverted": [lambda: ~ones.tril()]}


FUNCTIONS = (
    GradedFunction("causal_mask", ("L", "S", "device"),
                   models=("causal-off-by-one", "causal-bottom-right", "mask-inverted"), variants=_variants),
)

MISTAKES = (
    Mistake("causal-off-by-one", N_("因果掩码错位了一格：对角线被屏蔽，或者多看了一个未来位置。"),
            N_("查询 i 可以看到 j <= i 的 Key：torch.ones(L, S).tril()。"),
            honest=Honest(PART, """
def causal_mask(L, S, device=None):
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(-1)
""")),
    Mistake("causal-bottom-right", N_("因果掩码按右下角对齐了；本题与 is_causal=True 一样按左上角对齐。"),
            N_("用 tril() 且 diagonal=0，不要用 S - L 的偏移。"),
            honest=Honest(PART, """
def causal_mask(L, S, device=None):
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(S - L)
""")),
)
