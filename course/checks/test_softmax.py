"""softmax(x, dim): by hand, stable, honours dim, all -inf slice -> zeros."""
import math

import torch

from autograder.grading import cases
from autograder.grading.assertions import expect_tensor, expect_unchanged_inputs
from autograder.grading.check_api import points
from autograder.i18n import _

PART = "softmax"
FN = "softmax"


@points(2)
def test_hand_cases(student):
    """[0, ln 3] → [0.25, 0.75]；[0, 0] → [0.5, 0.5]"""
    x = torch.tensor([[0.0, math.log(3.0)], [0.0, 0.0]], dtype=torch.float64)
    expect_tensor(student.call(FN, x), cases.softmax(x), function=FN, args=(x,), what="softmax([[0, ln3], [0, 0]])")


@points(3)
def test_random_last_dim(student, rng):
    """随机张量，沿最后一维，每行和为 1"""
    x = cases.randn(rng, 2, 3, 5, 7) * 3
    expect_tensor(student.call(FN, x), cases.softmax(x), function=FN, args=(x,), what=_("softmax(x)（dim=-1）"))


@points(2)
def test_dim_is_honoured(student, rng):
    """参数 dim 被遵守（dim=0 与 dim=1）"""
    x = cases.randn(rng, 4, 5, 6)
    for dim in (0, 1):
        expect_tensor(student.call(FN, x, dim=dim), cases.softmax(x, dim), function=FN, args=(x,),
                      kwargs={"dim": dim}, what=f"softmax(x, dim={dim})")


@points(2)
def test_large_scores_are_stable(student, rng):
    """大分数（约 1e4）与尺度不同的行：没有 inf/NaN"""
    x = cases.randn(rng, 3, 6)
    x[0] = x[0] * 1e4
    x[1] = x[1] + 1e4
    expect_tensor(student.call(FN, x), cases.softmax(x), function=FN, args=(x,), what=_("大分数的 softmax"))


@points(2)
def test_fully_masked_slice_gives_zeros(student, rng):
    """全为 -inf 的一行输出全 0（不是 NaN）"""
    x = cases.randn(rng, 3, 5)
    x[0] = x[0] * 1e3 + 2e3  # exp overflows here: tells this bug apart from an unstable or global-max softmax
    x[1] = float("-inf")
    x[2, :2] = float("-inf")
    expect_tensor(student.call(FN, x), cases.softmax(x), function=FN, args=(x,), what=_("含全 -inf 行的 softmax"))


@points(1)
def test_float32_keeps_dtype_and_inputs(student, rng):
    """float32 输入：dtype 不变，输入不被修改"""
    x = cases.randn(rng, 4, 7)
    x32 = x.float()
    result = student.call(FN, x32, return_args=True)
    tol = cases.tolerance(cases.softmax, (x,), torch.float32)
    expect_tensor(result, cases.softmax(x32.double()), function=FN, args=(x,), tol=tol, dtype=torch.float32,
                  what="float32 softmax")
    expect_unchanged_inputs(result, (x32,), "softmax")
