"""Shape questions: B=2, H=4, L=5, S=7, d_k=8, d_v=16 cross-attention."""
import torch

from autograder.grading.assertions import CheckFailed, TensorSpec, not_an_answer
from autograder.grading.check_api import points
from autograder.i18n import _

PART = "shapes"


def _shape(value, name):
    if isinstance(value, TensorSpec) and value.tensor is not None:
        value = value.tensor.tolist()
    if isinstance(value, (list, tuple)) and all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        return tuple(value)
    raise not_an_answer(name, value, _("{name}：请填写一个由整数组成的元组，例如 (1, 2, 3)；收到的是 {got}。"))


def _expect_shape(student, name, want, wrong=()):
    got = _shape(student.get(name), name)
    if got == want:
        return
    codes = [code for code, shape in wrong if got == shape]
    raise CheckFailed(_("{name}：形状不对。").format(name=name), codes, {_("你的答案"): list(got)})


@points(1)
def test_scores_shape(student):
    """分数的形状"""
    _expect_shape(student, "shape_scores", (2, 4, 5, 7), [("scores-transposed", (2, 4, 7, 5)),
                                                          ("assumes-square", (2, 4, 5, 5))])


@points(1)
def test_weights_shape(student):
    """权重的形状"""
    _expect_shape(student, "shape_weights", (2, 4, 5, 7), [("scores-transposed", (2, 4, 7, 5)),
                                                           ("assumes-square", (2, 4, 7, 7))])


@points(1)
def test_output_shape(student):
    """输出的形状"""
    _expect_shape(student, "shape_output", (2, 4, 5, 16), [("output-used-k", (2, 4, 5, 8)),
                                                           ("scores-transposed", (2, 4, 7, 16))])


@points(1)
def test_padding_mask_shape(student):
    """SDPA 约定的 padding 掩码形状"""
    _expect_shape(student, "shape_padding_mask", (2, 1, 1, 7), [("padding-shape", (2, 7)),
                                                                ("padding-shape", (2, 1, 7)),
                                                                ("padding-shape", (2, 7, 1, 1))])


@points(1)
def test_softmax_dim(student):
    """softmax 的维度"""
    value = student.get("softmax_dim")
    if isinstance(value, TensorSpec) and value.tensor is not None and value.shape == () \
            and not value.tensor.is_floating_point() and value.tensor.dtype != torch.bool:
        value = int(value.tensor)  # numpy.array(-1), torch.tensor(-1)
    if isinstance(value, bool) or not isinstance(value, int):
        raise not_an_answer("softmax_dim", value, _("{name}：请填写一个整数；收到的是 {got}。"))
    if value in (-1, 3):
        return
    codes = ["softmax-wrong-dim"] if value in (-2, 2, -3, 1, -4, 0) else []
    raise CheckFailed(_("softmax_dim：维度不对。"), codes, {_("你的答案"): value})
