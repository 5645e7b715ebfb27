"""attention_output(weights, v): weights @ v."""
import torch

from autograder.grading import cases
from autograder.grading.assertions import expect_raises, expect_tensor
from autograder.grading.check_api import points
from autograder.i18n import _

PART = "attention_output"
FN = "attention_output"


@points(2)
def test_hand_case(student):
    """权重 [0.25, 0.75]，Value 10 与 20 → 17.5"""
    w = torch.tensor([[0.25, 0.75]], dtype=torch.float64)
    v = torch.tensor([[10.0], [20.0]], dtype=torch.float64)
    expect_tensor(student.call(FN, w, v), w @ v, function=FN, args=(w, v), what=_("手算例子的输出"))


@points(2)
def test_random_batched(student, rng):
    """随机权重，batch 与多头，S=7，d_v=4"""
    w = cases.softmax(cases.randn(rng, 2, 3, 5, 7))
    v = cases.randn(rng, 2, 3, 7, 4)
    expect_tensor(student.call(FN, w, v), w @ v, function=FN, args=(w, v), what=_("随机权重的输出"))


@points(1)
def test_mismatched_positions_raise(student, rng):
    """S 不一致时抛出 ValueError"""
    w, v = cases.randn(rng, 3, 5), cases.randn(rng, 6, 2)
    v_ok = cases.randn(rng, 5, 2)
    control = (student.call(FN, w, v_ok), w @ v_ok, FN, (w, v_ok))
    expect_raises(student.call(FN, w, v), "ValueError", _("权重 [3,5] 与 v [6,2]"), control=control)
