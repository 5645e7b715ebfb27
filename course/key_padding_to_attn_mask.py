"""The part ``key_padding_to_attn_mask``: MultiheadAttention's padding mask as an SDPA mask [B, 1, 1, S]."""
from autograder.i18n import N_

from .spec import GradedFunction, Honest, Mistake

PART = "key_padding_to_attn_mask"


def _variants(args, kwargs):
    kpm = args[0]
    return {"padding-polarity": [lambda: kpm[:, None, None, :], lambda: kpm]}


FUNCTIONS = (
    GradedFunction("key_padding_to_attn_mask", ("key_padding_mask",), models=("padding-polarity",),
                   variants=_variants, shape_codes=lambda args, shape: ["padding-shape"] if shape != () else []),
)

MISTAKES = (
    Mistake("padding-polarity", N_("padding 掩码的极性没有转换：MultiheadAttention 里 True 表示屏蔽，SDPA 里 True 表示允许。"),
            N_("取反（~key_padding_mask），再变形为 [B, 1, 1, S]。"),
            honest=Honest(PART, """
def key_padding_to_attn_mask(key_padding_mask):
    return key_padding_mask.bool()[:, None, None, :]
""")),
    Mistake("padding-shape", N_("padding 掩码的形状不对，无法正确广播到 [B, H, L, S]。"),
            N_("用 [:, None, None, :] 变成 [B, 1, 1, S]。"),
            honest=Honest(PART, """
def key_padding_to_attn_mask(key_padding_mask):
    return ~key_padding_mask.bool()
""")),
)
