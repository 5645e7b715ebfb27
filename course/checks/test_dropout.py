"""Dropout on attention weights: inverted scaling in training, and F.scaled_dot_product_attention in eval().

Options for dropout_sdpa_answer (the dropout-task cell of lesson/sdpa.zh.md): A eval() stops it,
B it still drops (right: the function cannot see the module's mode),
C it raises, D random numbers are frozen.
"""

from autograder.grading.assertions import CheckFailed, expect_number, not_an_answer
from autograder.grading.check_api import points
from autograder.i18n import _

PART = "dropout"
P, WEIGHT = 0.2, 0.4
KEPT = WEIGHT / (1 - P)  # survivors are divided by 1 - p


@points(1)
def test_kept_value(student):
    """训练模式下，未被置零的权重的大小"""
    try:
        expect_number(student.get("dropout_kept_value"), KEPT, what="dropout_kept_value")
    except CheckFailed as failed:
        raise CheckFailed(_("{message}训练时没被置零的权重要除以 1 − p，让它的期望保持不变。").format(message=failed.message),
                          failed.codes, failed.example) from None


@points(1)
def test_sdpa_in_eval(student):
    """eval() 之后 F.scaled_dot_product_attention(dropout_p=0.1) 的行为"""
    value = student.get("dropout_sdpa_answer")
    if not isinstance(value, str) or not value.strip() or value.strip().upper()[0] not in "ABCD":
        raise not_an_answer("dropout_sdpa_answer", value, _("{name}：请填写 A–D 中的一个字母；收到的是 {got}。"))
    if value.strip().upper()[0] != "B":
        raise CheckFailed(_("dropout_sdpa_answer：选项不对。回到上面的演示：调用 eval() 之后，同一输入运行两次的结果一样吗？"))
