"""Debugging task: name the bug in buggy_attention and fix it."""
import pytest

from autograder.grading import cases
from autograder.grading.assertions import CheckFailed, expect_tensor

ANSWER = "B"  # softmax over the query axis (dim=-2)


@pytest.mark.part("debugging_choice")
@pytest.mark.points(3)
def test_bug_choice(student):
    """选出 buggy_attention 中的错误"""
    choice = student.get("bug_choice")
    if not isinstance(choice, str) or choice.strip().upper()[:1] not in "ABCDE" or not choice.strip():
        raise CheckFailed(f"bug_choice：请填写 A–E 中的一个字母；收到 {choice!r:.40}。")
    if choice.strip().upper()[:1] != ANSWER:
        raise CheckFailed("bug_choice：选项不对。再用一个小例子对比 buggy_attention 与你的实现，看看每行权重的和。")


@pytest.mark.part("debugging_fix")
@pytest.mark.points(5)
def test_fixed_attention(student, rng):
    """fixed_attention 与参考结果一致（含掩码）"""
    q, k, v = cases.qkv(rng, batch=(2,), L=4, S=6, d_k=4, d_v=3)
    for mask in (None, cases.random_bool_mask(rng, (4, 6))):
        args = (q, k, v) if mask is None else (q, k, v, mask)
        out, _ = cases.sdpa(q, k, v, mask)
        expect_tensor(student.call("fixed_attention", *args), out, function="fixed_attention", args=args,
                      what="fixed_attention" + ("（带掩码）" if mask is not None else ""))
