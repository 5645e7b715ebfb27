"""Debugging task: diagnose three candidate implementations, then fix a broken one.

candidate_1 sums each row before it zeroes the masked keys (rows sum to less
than 1 under a mask); candidate_2 is correct (log of the mask as an additive
mask); candidate_3 fills masked scores with the row's smallest score, so
masked keys keep a non-zero weight.  Options (the debug-md cell of lesson/sdpa.zh.md):
A no error, B some rows do not sum to 1, C masked keys get weight,
D rows and masks fine but values differ.
"""

from autograder.grading import cases
from autograder.grading.assertions import CheckFailed, expect_tensor, not_an_answer
from autograder.grading.check_api import part, points
from autograder.i18n import N_, _

LETTERS = "ABCD"
VERDICTS = {"verdict_1": "B", "verdict_2": "A", "verdict_3": "C"}
HINTS = {  # what to probe when a verdict is wrong
    "verdict_1": N_("带掩码运行它，看看每个查询的权重之和。"),
    "verdict_2": N_("有掩码、无掩码各运行一次，与你的 scaled_dot_product_attention 比较；写法奇怪不等于有错。"),
    "verdict_3": N_("带掩码运行它，看看掩码为 False 的位置分到的权重。"),
}


def _choice(student, name):
    value = student.get(name)
    if not isinstance(value, str) or not value.strip() or value.strip().upper()[0] not in LETTERS:
        raise not_an_answer(name, value, _("{name}：请填写 A–D 中的一个字母；收到的是 {got}。"))
    return value.strip().upper()[0]


def _verdict(student, name):
    if _choice(student, name) != VERDICTS[name]:
        raise CheckFailed(_("{name}：结论不对。{hint}值取单位矩阵时，输出就是权重。").format(name=name, hint=_(HINTS[name])))


@part("debugging_choice")
@points(1)
def test_verdict_candidate_1(student):
    """candidate_1 的诊断结论"""
    _verdict(student, "verdict_1")


@part("debugging_choice")
@points(1)
def test_verdict_candidate_2(student):
    """candidate_2 的诊断结论"""
    _verdict(student, "verdict_2")


@part("debugging_choice")
@points(1)
def test_verdict_candidate_3(student):
    """candidate_3 的诊断结论"""
    _verdict(student, "verdict_3")


@part("debugging_fix")
@points(5)
def test_fixed_attention(student, rng):
    """fixed_attention 与参考结果一致（含掩码）"""
    q, k, v = cases.qkv(rng, batch=(2,), L=4, S=6, d_k=4, d_v=3)
    for mask in (None, cases.random_bool_mask(rng, (4, 6))):
        args = (q, k, v) if mask is None else (q, k, v, mask)
        out, _weights = cases.sdpa(q, k, v, mask)
        expect_tensor(student.call("fixed_attention", *args), out, function="fixed_attention", args=args,
                      what=_("fixed_attention（带掩码）") if mask is not None else "fixed_attention")
