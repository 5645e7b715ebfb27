"""key_padding_to_attn_mask: [B, S] True = padding -> [B, 1, 1, S] True = attend."""
import torch
import torch.nn.functional as F

from autograder.grading import cases
from autograder.grading.assertions import CheckFailed, TensorSpec, expect_tensor, require_ok
from autograder.grading.check_api import points
from autograder.i18n import _

PART = "key_padding_to_attn_mask"
FN = "key_padding_to_attn_mask"


def _kpm(rng, B=3, S=6):
    lengths = torch.randint(1, S + 1, (B,), generator=rng)
    lengths[0] = S
    return torch.arange(S)[None, :] >= lengths[:, None]


@points(3)
def test_values_and_shape(student, rng):
    """取反并变形为 [B, 1, 1, S]"""
    kpm = _kpm(rng)
    expect_tensor(student.call(FN, kpm), (~kpm)[:, None, None, :], function=FN, args=(kpm,), what=_("转换后的掩码"))


@points(2)
def test_works_with_sdpa(student, rng):
    """返回的掩码原样交给 F.scaled_dot_product_attention，输出正确"""
    kpm = _kpm(rng, B=2, S=5)
    what = _("用于注意力的掩码")
    value = require_ok(student.call(FN, kpm), what)
    missing = value.missing_data(_) if isinstance(value, TensorSpec) else _("没有返回张量")
    if missing:
        raise CheckFailed(_("{what}：{missing}。").format(what=what, missing=missing))
    q, k, v = cases.qkv(rng, batch=(2, 3), L=4, S=5, d_k=4, d_v=2)
    expected, _weights = cases.sdpa(q, k, v, (~kpm)[:, None, None, :])
    try:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=value.tensor)
    except (RuntimeError, IndexError, ValueError, TypeError):
        raise CheckFailed(_("{what}：形状 {shape}、dtype {dtype} 的掩码不能直接用于注意力（需要能广播到 [B, H, L, S]）。").format(
            what=what, shape=list(value.shape), dtype=value.dtype)) from None
    if not torch.allclose(out, expected, rtol=1e-12, atol=1e-12):
        raise CheckFailed(_("{what}：用这个掩码算出的注意力输出与 PyTorch 的不同（布尔掩码 True = 允许关注；浮点掩码会被加到分数上）。").format(
            what=what))
