"""key_padding_to_attn_mask: [B, S] True = padding -> [B, 1, 1, S] True = attend."""
import pytest
import torch

from autograder.grading import cases
from autograder.grading.assertions import expect_tensor

PART = "key_padding_to_attn_mask"
FN = "key_padding_to_attn_mask"


def _kpm(rng, B=3, S=6):
    lengths = torch.randint(1, S + 1, (B,), generator=rng)
    lengths[0] = S
    return torch.arange(S)[None, :] >= lengths[:, None]


@pytest.mark.points(3)
def test_values_and_shape(student, rng):
    """取反并变形为 [B, 1, 1, S]"""
    kpm = _kpm(rng)
    expect_tensor(student.call(FN, kpm), (~kpm)[:, None, None, :], function=FN, args=(kpm,), what="转换后的掩码")


@pytest.mark.points(2)
def test_works_with_sdpa(student, rng):
    """转换结果可直接用于注意力（与 MultiheadAttention 一致）"""
    kpm = _kpm(rng, B=2, S=5)
    result = student.call(FN, kpm)
    expected = (~kpm)[:, None, None, :]
    value = expect_tensor(result, expected, function=FN, args=(kpm,), what="用于注意力的掩码")
    q, k, v = cases.qkv(rng, batch=(2, 3), L=4, S=5, d_k=4, d_v=2)
    out, _ = cases.sdpa(q, k, v, value.tensor)
    ref, _ = cases.sdpa(q, k, v, expected)
    assert torch.equal(out, ref)
