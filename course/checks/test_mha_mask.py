"""nn.MultiheadAttention's boolean attn_mask: True = may NOT attend, the opposite of SDPA.

Options (the mha-mask-task cell of lesson/sdpa.zh.md): A allowed, B ~allowed (right),
C allowed.float(), D allowed transposed.
"""

from autograder.grading.assertions import CheckFailed, not_an_answer
from autograder.grading.check_api import points
from autograder.i18n import N_, _

PART = "mha_mask"
ANSWER = "B"
WRONG = {
    "A": N_("在 nn.MultiheadAttention 的布尔 attn_mask 里，True 表示什么？对照上面演示中权重为 0 的位置。"),
    "C": N_("浮点掩码会被直接加到分数上：允许的位置加 1、禁止的位置加 0，什么也没有屏蔽。"),
    "D": N_("转置改变的是哪个查询对应哪个键，而不是 True 的含义。"),
}


@points(2)
def test_mha_mask_answer(student):
    """把 SDPA 约定的布尔掩码交给 nn.MultiheadAttention"""
    value = student.get("mha_mask_answer")
    if not isinstance(value, str) or not value.strip() or value.strip().upper()[0] not in "ABCD":
        raise not_an_answer("mha_mask_answer", value, _("{name}：请填写 A–D 中的一个字母；收到的是 {got}。"))
    choice = value.strip().upper()[0]
    if choice != ANSWER:
        raise CheckFailed(_("{name}：选项不对。{hint}").format(name="mha_mask_answer", hint=_(WRONG[choice])))
