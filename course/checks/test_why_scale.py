"""Why scale: what the max-weight and Jacobian-norm curves against d_k show.

Options (the why-scale-task cell of lesson/sdpa.zh.md): A unscaled weights grow uniform, B scaled
weights still saturate, C unscaled saturate and the gradient shrinks while
scaled stay flat (right), D scaling leaves the gradient alone.
"""

from autograder.grading.assertions import CheckFailed, not_an_answer
from autograder.grading.check_api import points
from autograder.i18n import N_, _

PART = "why_scale"
ANSWER = "C"
WRONG = {
    "A": N_("不缩放时，曲线上的平均最大权重是升高还是降低？最大权重越大，权重越集中，而不是越均匀。"),
    "B": N_("再看缩放后的曲线：d_k 从 1 到 512，它基本保持在同一高度。"),
    "D": N_("右边的图是 softmax 雅可比矩阵的范数，它直接决定梯度；两条曲线在大 d_k 时差别很大。"),
}


@points(2)
def test_scale_answer(student):
    """从实验图读出缩放的作用"""
    value = student.get("scale_answer")
    if not isinstance(value, str) or not value.strip() or value.strip().upper()[0] not in "ABCD":
        raise not_an_answer("scale_answer", value, _("{name}：请填写 A–D 中的一个字母；收到的是 {got}。"))
    choice = value.strip().upper()[0]
    if choice != ANSWER:
        raise CheckFailed(_("{name}：结论不对。{hint}").format(name="scale_answer", hint=_(WRONG[choice])))
