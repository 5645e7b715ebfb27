"""attention_scores(q, k): raw q·kᵀ over the last two dims."""
import math

import torch

from autograder.grading import cases
from autograder.grading.assertions import expect_raises, expect_tensor, expect_unchanged_inputs
from autograder.grading.check_api import points
from autograder.i18n import _

PART = "attention_scores"
FN = "attention_scores"


@points(2)
def test_hand_case(student):
    """手算例子：q=1，Key 为 0 与 ln 3"""
    q = torch.tensor([[1.0]], dtype=torch.float64)
    k = torch.tensor([[0.0], [math.log(3.0)]], dtype=torch.float64)
    expect_tensor(student.call(FN, q, k), cases.scores(q, k), function=FN, args=(q, k), what=_("手算例子的分数"))


@points(3)
def test_random_batched_cross_attention(student, rng):
    """随机张量：batch 与多头，L != S"""
    q, k, _v = cases.qkv(rng, batch=(2, 3), L=5, S=7, d_k=8)
    expect_tensor(student.call(FN, q, k), cases.scores(q, k), function=FN, args=(q, k),
                  what=_("随机 [2,3,5,8]×[2,3,7,8] 的分数"))


@points(1)
def test_mismatched_dk_raises(student, rng):
    """d_k 不一致时抛出 ValueError"""
    q, k = cases.randn(rng, 4, 8), cases.randn(rng, 6, 5)
    k_ok = cases.randn(rng, 4, 8)  # square: a transposed result is a known bug, graded elsewhere
    control = (student.call(FN, q, k_ok), cases.scores(q, k_ok), FN, (q, k_ok))
    expect_raises(student.call(FN, q, k), "ValueError", _("q 的 d_k=8、k 的 d_k=5"), control=control)


@points(2)
def test_float32_keeps_dtype_and_inputs(student, rng):
    """float32 输入：dtype 不变，输入不被修改"""
    q, k, _v = cases.qkv(rng, batch=(3,), L=4, S=6, d_k=16)
    q32, k32 = q.float(), k.float()
    result = student.call(FN, q32, k32, return_args=True)
    tol = cases.tolerance(cases.scores, (q, k), torch.float32)
    expect_tensor(result, cases.scores(q32.double(), k32.double()), function=FN, args=(q, k), tol=tol,
                  dtype=torch.float32, what=_("float32 输入的分数"))
    expect_unchanged_inputs(result, (q32, k32), "attention_scores")
