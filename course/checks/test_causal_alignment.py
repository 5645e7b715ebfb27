"""Top-left vs bottom-right causal alignment: one KV-cache step with L = 2 new queries, S = 6 keys.

The expected counts come from the two masks themselves (first new query, i = 0).
"""
import torch

from autograder.grading.assertions import CheckFailed, TensorSpec, not_an_answer
from autograder.grading.check_api import points
from autograder.i18n import _

PART = "causal_alignment"
L, S = 2, 6
TOP_LEFT = int(torch.ones(L, S, dtype=torch.bool).tril()[0].sum())
BOTTOM_RIGHT = int(torch.ones(L, S, dtype=torch.bool).tril(S - L)[0].sum())


def _integer(value, name):
    if isinstance(value, TensorSpec) and value.tensor is not None and value.shape == () \
            and not value.tensor.is_floating_point() and value.tensor.dtype != torch.bool:
        value = int(value.tensor)  # numpy.array(5), torch.tensor(5)
    if isinstance(value, bool) or not isinstance(value, int):
        raise not_an_answer(name, value, _("{name}：请填写一个整数；收到的是 {got}。"))
    return value


@points(1)
def test_top_left(student):
    """左上角对齐时第一个新查询能关注的键数"""
    got = _integer(student.get("n_keys_top_left"), "n_keys_top_left")
    if got == TOP_LEFT:
        return
    hint = _("这是右下角对齐的结果。") if got == BOTTOM_RIGHT else _("左上角对齐时，查询 i 只能看到 j ≤ i 的键。")
    raise CheckFailed(_("{name}：答案不对。{hint}").format(name="n_keys_top_left", hint=hint), [], {_("你的答案"): got})


@points(1)
def test_bottom_right(student):
    """右下角对齐时第一个新查询能关注的键数"""
    got = _integer(student.get("n_keys_bottom_right"), "n_keys_bottom_right")
    if got == BOTTOM_RIGHT:
        return
    hint = (_("这是左上角对齐的结果。") if got == TOP_LEFT else
            _("右下角对齐时，查询 i 能看到 j ≤ i + (S − L) 的键；别忘了它自己也算一个。"))
    raise CheckFailed(_("{name}：答案不对。{hint}").format(name="n_keys_bottom_right", hint=hint), [], {_("你的答案"): got})
