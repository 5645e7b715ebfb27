"""apply_mask(scores, mask): bool True = attend -> -inf elsewhere; float added."""
import torch

from autograder.grading import cases
from autograder.grading.assertions import expect_tensor, expect_unchanged_inputs
from autograder.grading.check_api import points
from autograder.i18n import _

PART = "apply_mask"
FN = "apply_mask"


@points(3)
def test_bool_mask_broadcast(student, rng):
    """布尔掩码 [L, S] 广播到 [B, H, L, S]"""
    s = cases.randn(rng, 2, 3, 5, 7)
    m = cases.random_bool_mask(rng, (5, 7))
    expect_tensor(student.call(FN, s, m), cases.bool_masked(s, m), function=FN, args=(s, m),
                  what=_("布尔掩码（True = 允许关注）"))


@points(2)
def test_float_mask_added(student, rng):
    """浮点掩码直接加到分数上"""
    s = cases.randn(rng, 2, 5, 7)
    m = cases.randn(rng, 5, 7)
    m[0, 3] = float("-inf")
    expect_tensor(student.call(FN, s, m), s + m, function=FN, args=(s, m), what=_("浮点（加性）掩码"))


@points(1)
def test_no_mask_unchanged(student, rng):
    """mask=None 时分数不变"""
    s = cases.randn(rng, 3, 4)
    expect_tensor(student.call(FN, s, None), s, function=FN, args=(s, None), what="mask=None")


@points(2)
def test_padding_shaped_mask(student, rng):
    """padding 形状 [B, 1, 1, S] 的掩码"""
    s = cases.randn(rng, 2, 4, 3, 6)
    m = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    m[0, ..., 4:] = False
    m[1, ..., 2:] = False
    expect_tensor(student.call(FN, s, m), cases.bool_masked(s, m), function=FN, args=(s, m), what=_("[B,1,1,S] 掩码"))


@points(2)
def test_inputs_unchanged(student, rng):
    """布尔掩码的结果正确，且分数与掩码都不被原地修改"""
    s = cases.randn(rng, 4, 5)
    m = cases.random_bool_mask(rng, (4, 5))
    result = student.call(FN, s, m, return_args=True)
    expect_tensor(result, cases.bool_masked(s, m), function=FN, args=(s, m), what=_("布尔掩码"))
    expect_unchanged_inputs(result, (s, m), "apply_mask")
