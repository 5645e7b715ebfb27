"""causal_mask(L, S, device): bool [L, S], True = may attend, top-left aligned."""
import torch

from autograder.grading.assertions import expect_tensor
from autograder.grading.check_api import points

PART = "causal_mask"
FN = "causal_mask"


def _ref(L, S):
    return torch.ones(L, S, dtype=torch.bool).tril()


@points(2)
def test_square(student):
    """L = S = 4"""
    expect_tensor(student.call(FN, 4, 4), _ref(4, 4), function=FN, args=(4, 4), what="causal_mask(4, 4)")


@points(2)
def test_rectangular_top_left(student):
    """L != S 时与 is_causal=True 一样左上角对齐"""
    for L, S in ((3, 5), (5, 3)):
        expect_tensor(student.call(FN, L, S), _ref(L, S), function=FN, args=(L, S), what=f"causal_mask({L}, {S})")


@points(1)
def test_dtype_is_bool(student):
    """结果是布尔张量（True = 允许关注）"""
    expect_tensor(student.call(FN, 3, 3), _ref(3, 3), function=FN, args=(3, 3), what="causal_mask(3, 3)")
