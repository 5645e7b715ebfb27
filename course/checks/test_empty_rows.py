"""Query rows with no allowed key: count them in the lesson's mask, and the -1e9 convention.

The mask is the lesson's ``mask_demo``: a 4 x 4 causal mask and, in sample 1,
two left-padded keys.  Expected values are computed from it here.
"""
import torch

from autograder.grading.assertions import CheckFailed, TensorSpec, expect_number, not_an_answer
from autograder.grading.check_api import points
from autograder.i18n import _

PART = "empty_rows"
REAL_TOKENS = torch.tensor([[True, True, True, True], [False, False, True, True]])
MASK = torch.ones(4, 4, dtype=torch.bool).tril() & REAL_TOKENS[:, None, :]
EMPTY = int((~MASK.any(dim=-1)).sum())
# An empty row filled with -1e9: every score equal, so every weight is the same.
FILLED = torch.full((4,), -1e9, dtype=torch.float64)
FILL_WEIGHT = float((torch.exp(FILLED - FILLED.max()) / torch.exp(FILLED - FILLED.max()).sum())[0])


def _integer(value, name):
    if isinstance(value, TensorSpec) and value.tensor is not None and value.shape == () \
            and not value.tensor.is_floating_point() and value.tensor.dtype != torch.bool:
        value = int(value.tensor)  # (~mask.any(-1)).sum() as a 0-d tensor
    if isinstance(value, bool) or not isinstance(value, int):
        raise not_an_answer(name, value, _("{name}：请填写一个整数；收到的是 {got}。"))
    return value


@points(1)
def test_count_empty_rows(student):
    """mask_demo 中没有任何允许键的查询行数"""
    got = _integer(student.get("n_empty_rows"), "n_empty_rows")
    if got != EMPTY:
        raise CheckFailed(_("n_empty_rows：答案不对。对每一行问“有没有任何一个 True”：~mask_demo.any(dim=-1)。"),
                          [], {_("你的答案"): got})


@points(1)
def test_fill_weight(student):
    """用 -1e9 代替 -inf 时，空行里每个权重的大小"""
    try:
        expect_number(student.get("fill_weight"), FILL_WEIGHT, what="fill_weight")
    except CheckFailed as failed:
        raise CheckFailed(_("{message}这一行的 4 个分数都等于 -1e9，减去最大值后全是 0。").format(message=failed.message),
                          failed.codes, failed.example) from None
