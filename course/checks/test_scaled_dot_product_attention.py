"""scaled_dot_product_attention(q, k, v, mask): compared with F.scaled_dot_product_attention."""
import math

import torch

from autograder.grading import cases, composition, tolerances
from autograder.grading.assertions import (
    CheckFailed,
    TensorSpec,
    attention_output,
    attention_pair,
    expect_tensor,
    record_dtype_only,
    require_ok,
)
from autograder.grading.check_api import points
from autograder.i18n import _

PART = "scaled_dot_product_attention"
FN = "scaled_dot_product_attention"


def _check(student, grading, q, k, v, mask=None, what="", weights=True):
    args = (q, k, v) if mask is None else (q, k, v, mask)
    result = student.call(FN, *args)
    out, w = cases.sdpa(q, k, v, mask)
    try:
        expect_tensor(result, out, function=FN, args=args, select=0, what=_("{what}的输出").format(what=what))
        if weights:
            expect_tensor(result, w, function=FN, args=args, select=1, what=_("{what}的权重").format(what=what))
    except CheckFailed as failure:
        explained = composition.explain_result(student, grading, result, q, k, v, mask, weights, what, failure)
        if explained is not None:
            raise explained from None
        raise
    return result


@points(3)
def test_hand_cases(student, grading):
    """手算例子：17.5；屏蔽第二个 Key → 10；q = 0 → 15"""
    k = torch.tensor([[0.0], [math.log(3.0)]], dtype=torch.float64)
    v = torch.tensor([[10.0], [20.0]], dtype=torch.float64)
    one, zero = torch.tensor([[1.0]], dtype=torch.float64), torch.tensor([[0.0]], dtype=torch.float64)
    subcases = composition.SubCases(grading)
    subcases.run(_check, student, grading, one, k, v, what="q=1")
    subcases.run(_check, student, grading, one, k, v, torch.tensor([[True, False]]), what=_("屏蔽第二个 Key"))
    subcases.run(_check, student, grading, zero, k, v, what="q=0")
    subcases.settle()


@points(3)
def test_random_cross_attention(student, grading, rng):
    """随机张量：batch、多头、L != S、d_k != d_v"""
    q, k, v = cases.qkv(rng, batch=(2, 3), L=5, S=7, d_k=8, d_v=4)
    try:
        _check(student, grading, q, k, v, what=_("随机交叉注意力"))
    except CheckFailed as failure:
        sq, sk, sv = cases.qkv(rng, batch=(2, 3), L=6, S=6, d_k=8, d_v=4)
        square = student.call(FN, sq, sk, sv)
        ref_out, _weights = cases.sdpa(sq, sk, sv)
        pair = attention_pair(square.value) if square.ok else None
        if pair is not None and isinstance(pair[0], TensorSpec) \
                and pair[0].tensor is not None and pair[0].shape == tuple(ref_out.shape) \
                and torch.allclose(pair[0].tensor.double(), ref_out, rtol=0, atol=1e-9):
            failure.codes.append("assumes-square")
        raise


@points(2)
def test_bool_mask(student, grading, rng):
    """布尔掩码（True = 允许关注）"""
    q, k, v = cases.qkv(rng, batch=(2,), L=4, S=6, d_k=5, d_v=3)
    _check(student, grading, q, k, v, cases.random_bool_mask(rng, (2, 4, 6)), what=_("布尔掩码"))


@points(1)
def test_float_mask(student, grading, rng):
    """浮点（加性）掩码"""
    q, k, v = cases.qkv(rng, batch=(2,), L=4, S=6, d_k=5, d_v=3)
    _check(student, grading, q, k, v, cases.randn(rng, 4, 6), what=_("浮点掩码"))


@points(2)
def test_causal_no_leakage(student, grading, rng):
    """因果掩码下，改变未来的 Key/Value 不影响前面的输出"""
    q, k, v = cases.qkv(rng, batch=(2,), L=6, S=6, d_k=4, d_v=4)
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    subcases = composition.SubCases(grading)
    subcases.run(_check, student, grading, q, k, v, mask, what=_("因果掩码"), weights=False)
    k2, v2 = k.clone(), v.clone()
    k2[..., 4:, :] += 5.0
    v2[..., 4:, :] -= 7.0
    out, _weights = cases.sdpa(q, k, v, mask)
    what = _("因果掩码（修改了位置 4 及之后的键和值）")
    changed = student.call(FN, q, k2, v2, mask)
    try:
        second = attention_output(require_ok(changed, what))
        if not isinstance(second, TensorSpec) or second.missing_data() or second.shape != tuple(out.shape):
            raise CheckFailed(_("{what}：输出不是形状为 {shape}、带数值的张量（实际为 {got!r:.80}），无法比较前 4 个查询。").format(
                what=what, shape=list(out.shape), got=second))
        precision = second.tensor.dtype if second.tensor.is_floating_point() else torch.float64
        if precision != torch.float64:  # the dtype is graded by the device part; compare at the one returned
            record_dtype_only(CheckFailed(_("{what}：输出 dtype 应与输入一致（float64），实际为 {dtype}。").format(
                what=what, dtype=second.dtype),
                                          ["dtype-changed"], explained_by=["dtype-changed"]))
        tol = cases.tolerance(cases.sdpa, (q, k, v, mask), precision)
        if not tolerances.close(second.tensor[..., :4, :], out[..., :4, :], tol):
            raise CheckFailed(_("因果掩码：修改位置 4 及之后的键和值，改变了前 4 个查询的输出（信息泄漏）。"))
    except CheckFailed as failure:
        # The student's own helpers, composed correctly, may do the same (charged where they live).
        explained = composition.explain_result(student, grading, changed, q, k2, v2, mask, False, what, failure)
        if explained is None:
            raise
        subcases.explained.append(explained)
    subcases.settle()


@points(2)
def test_fully_masked_rows_give_zeros(student, grading, rng):
    """没有任何可关注位置的行：权重与输出全为 0"""
    q, k, v = cases.qkv(rng, batch=(2,), L=4, S=5, d_k=4, d_v=3)
    mask = cases.random_bool_mask(rng, (4, 5), full_row=2)
    # Inputs chosen so that each related bug leaves a different trace:
    k[..., 1, :] = 1.0
    q[..., 0, :] = 1e3  # row 0 scores 2000 on key 1: exp overflows (unstable / global-max softmax)
    mask[0, 1] = True
    q[..., 3, :] = -1e2 * k[..., 0, :]  # row 3 may only see key 0, whose score is very negative:
    mask[3] = False  # a 0 fill (instead of -inf) would move its weight to the masked keys
    mask[3, 0] = True
    _check(student, grading, q, k, v, mask, what=_("含全屏蔽行"))


@points(2)
def test_large_scores_and_padding(student, grading, rng):
    """大分数（1e4 量级）与 [B,1,1,S] padding 掩码"""
    q, k, v = cases.qkv(rng, batch=(2, 2), L=3, S=5, d_k=4, d_v=2)
    q = q * 100
    k = k * 100
    pad = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    pad[1, ..., 3:] = False
    _check(student, grading, q, k, v, pad, what=_("大分数与 padding"))
