"""scale_scores(scores, d_k): divide by sqrt(d_k)."""
import math

import torch

from autograder.grading import cases
from autograder.grading.assertions import expect_tensor, expect_unchanged_inputs
from autograder.grading.check_api import points
from autograder.i18n import _

PART = "scale_scores"
FN = "scale_scores"


@points(1)
def test_hand_case(student):
    """d_k = 4 时除以 2"""
    s = torch.tensor([[0.0, 2 * math.log(2), 2 * math.log(5)]], dtype=torch.float64)
    expect_tensor(student.call(FN, s, 4), cases.scaled(s, 4), function=FN, args=(s, 4), what="scale_scores(s, 4)")


@points(2)
def test_random_large_dk(student, rng):
    """随机 float64 分数，d_k = 50（平方根不是整数）"""
    # sqrt(50) has no exact float32 form: a constant built in a lower precision shows here, in its own part.
    s = cases.randn(rng, 2, 3, 5, 7) * 8
    expect_tensor(student.call(FN, s, 50), cases.scaled(s, 50), function=FN, args=(s, 50), what="scale_scores(s, 50)")


@points(1)
def test_low_precision_keeps_dtype(student, rng):
    """float16 输入：dtype 不变"""
    s = cases.randn(rng, 4, 6)
    s16 = s.half()
    tol = cases.tolerance(cases.scaled, (s, 16), torch.float16)
    expect_tensor(student.call(FN, s16, 16), cases.scaled(s16.double(), 16), function=FN, args=(s, 16), tol=tol,
                  dtype=torch.float16, what=_("float16 分数"))


@points(1)
def test_inputs_unchanged(student, rng):
    """输入不被原地修改"""
    s = cases.randn(rng, 3, 5)
    result = student.call(FN, s, 9, return_args=True)
    expect_tensor(result, cases.scaled(s, 9), function=FN, args=(s, 9), what="scale_scores(s, 9)")
    expect_unchanged_inputs(result, (s,), "scale_scores")
