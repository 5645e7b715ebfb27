"""Build the nbgrader source notebook (and the solution notebook) of `sdpa`.

Why a builder: the solution code has one home, ``solutions/sdpa.py``; the
source notebook's solution cells are that module's functions, verbatim, and
the lesson prose lives in ``tools/lesson_text.py``.  Every cell gets a stable
nbgrader ``grade_id``, so the grader can restore a tampered notebook cell by
cell.  Run ``make notebooks`` after editing either file.

Usage: python tools/build_notebooks.py [--check]
"""
import argparse
import inspect
import json
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from solutions import sdpa  # noqa: E402
from tools import lesson_text as text  # noqa: E402

SOURCE = ROOT / "source" / "sdpa" / "sdpa.ipynb"
SOLUTION_NOTEBOOK = ROOT / "solutions" / "sdpa_solution.ipynb"
HIDDEN = "### BEGIN HIDDEN TESTS\nrun_hidden_checks({part!r})\n### END HIDDEN TESTS"


def _meta(grade_id, *, grade=False, solution=False, locked=True, points=None, tags=None):
    nb = {"grade": grade, "solution": solution, "locked": locked, "grade_id": grade_id, "schema_version": 3}
    if points is not None:
        nb["points"] = points
    meta = {"nbgrader": nb}
    if tags:
        meta["tags"] = list(tags)
    return meta


# Answer stubs raise NotImplementedError and visible checks fail until the answer is
# written; this tag makes JupyterLab's "Run All Cells" go on past such a cell instead
# of silently skipping every later cell (the lesson, the heatmap, the other checks).
RUN_ON = ("raises-exception",)


def md(grade_id, source):
    cell = nbformat.v4.new_markdown_cell(source, metadata=_meta(grade_id))
    cell.id = grade_id
    return cell


def code(grade_id, source):
    cell = nbformat.v4.new_code_cell(source.strip("\n"), metadata=_meta(grade_id))
    cell.id = grade_id
    return cell


def solution(grade_id, source):
    cell = nbformat.v4.new_code_cell(source.strip("\n"), metadata=_meta(grade_id, solution=True, locked=False,
                                                                          tags=RUN_ON))
    cell.id = grade_id
    return cell


def scratch(grade_id, source):
    """An unlocked, ungraded code cell for the student's own experiments (not run at grading)."""
    cell = nbformat.v4.new_code_cell(source.strip("\n"), metadata=_meta(grade_id, locked=False, tags=RUN_ON))
    cell.id = grade_id
    return cell


def function_cell(name):
    return solution(name, inspect.getsource(getattr(sdpa, name)))


def check(grade_id, part, points, visible):
    source = visible.strip("\n") + "\n\n" + HIDDEN.format(part=part)
    cell = nbformat.v4.new_code_cell(source, metadata=_meta(grade_id, grade=True, points=points, tags=RUN_ON))
    cell.id = grade_id
    return cell


def written(grade_id, answer, points):
    cell = nbformat.v4.new_markdown_cell(answer, metadata=_meta(grade_id, grade=True, solution=True, locked=False,
                                                                 points=points))
    cell.id = grade_id
    return cell


SETUP = r'''
import decimal
import math
import numbers
import warnings

import torch
import torch.nn.functional as F
import matplotlib.pyplot as plt

torch.set_printoptions(precision=4, sci_mode=False)


class NotDoneYet(AssertionError):
    """上面的单元格还没有完成。"""


def _show_not_done(shell, kind, value, tb, tb_offset=None):
    # 只显示一行提示，不显示检查工具自己的代码
    shell._showtraceback(kind, value, [f"{kind.__name__}: {value}"])


try:
    get_ipython().set_custom_exc((NotDoneYet,), _show_not_done)
except NameError:  # 不在 IPython/Jupyter 里运行时，保持普通的报错
    pass


class visible_check:
    """可见检查的小工具：函数还没实现时给出清楚的提示，而不是一长串报错。"""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is NotImplementedError:
            raise NotDoneYet(f"{self.name} 还没有实现：请先完成上面的单元格，再运行这个检查。") from None
        if kind is None:
            print(f"✓ {self.name} 通过了可见检查（评分时还有隐藏检查）。")
        return False


def check_choice(value, name, letters):
    """选择题的格式检查：一个大写字母的字符串。"""
    if value is ...:
        raise NotDoneYet(f"{name} 还没有填写。")
    assert isinstance(value, str) and value.strip().upper() in list(letters), \
        f"{name} 应是 {letters[0]}–{letters[-1]} 中的一个字母（字符串），现在是 {value!r}。"


def check_integer(value, name):
    """整数答案的格式检查：int、numpy 整数或 0 维整数张量都可以。"""
    if value is ...:
        raise NotDoneYet(f"{name} 还没有填写。")
    plain = value.tolist() if hasattr(value, "tolist") else value
    assert isinstance(plain, numbers.Integral) and not isinstance(plain, bool), \
        f"{name} 应是一个整数，现在是 {value!r}。"
    return int(plain)


def check_number(value, name):
    """数值答案的格式检查：一个实数（int、float、Fraction、numpy 标量或单元素张量）。"""
    if value is ...:
        raise NotDoneYet(f"{name} 还没有填写。")
    plain = value.tolist() if hasattr(value, "tolist") else value
    while isinstance(plain, (list, tuple)) and len(plain) == 1:
        plain = plain[0]
    assert isinstance(plain, (numbers.Real, decimal.Decimal)) and not isinstance(plain, bool), \
        f"{name} 应是一个数，现在是 {value!r}。"
    assert math.isfinite(float(plain)), f"{name} 应是一个有限的数，现在是 {value!r}。"
    return float(plain)


def run_hidden_checks(part):
    """隐藏检查在评分时、在隔离的评分进程中运行；学生的 notebook 里不会调用它。

    教师运行源 notebook 时（装有 autograder 包），这里用同样的检查预览结果。
    """
    try:
        from autograder.grading.preview import preview
    except ImportError:
        return
    preview(part, globals())
'''

WORKED_EXAMPLE_CODE = r'''
# 课文中的例子：d_k = 1，q = 1，Key 为 0 与 ln 3，Value 为 10 与 20
q = torch.tensor([[1.0]], dtype=torch.float64)
k = torch.tensor([[0.0], [math.log(3.0)]], dtype=torch.float64)
v = torch.tensor([[10.0], [20.0]], dtype=torch.float64)

scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
exps = torch.exp(scores - scores.amax(dim=-1, keepdim=True))  # 每一行减去自己这一行的最大值
weights = exps / exps.sum(dim=-1, keepdim=True)
print("权重:", weights.tolist())          # [[0.25, 0.75]]
print("输出:", (weights @ v).item())      # 17.5
'''

HAND_ANSWERS = r'''
# 用你手算的结果替换 ...（可以写 math.log(2)、1/3 这样的表达式）
hand_scores = ...         # 3 个原始分数
hand_scaled = ...         # 3 个缩放后的分数
hand_weights = ...        # 3 个权重
hand_output = ...         # 输出（一个数）
hand_masked_output = ...  # 屏蔽 k3 之后的输出
### BEGIN SOLUTION
hand_scores = [0.0, 2 * math.log(2), 2 * math.log(5)]
hand_scaled = [0.0, math.log(2), math.log(5)]
hand_weights = [1 / 8, 2 / 8, 5 / 8]
hand_output = 12.0
hand_masked_output = 16 / 3
### END SOLUTION
'''

HAND_CHECK = r'''
import decimal, numbers

def _flat(value):
    value = value.tolist() if hasattr(value, "tolist") else value  # numpy 数组、torch 张量
    if isinstance(value, (list, tuple)):
        return [x for item in value for x in _flat(item)]
    return [value]

def _numbers(value, name, count):
    assert value is not ..., f"{name} 还没有填写。"
    values = _flat(value)
    assert all(isinstance(x, (numbers.Real, decimal.Decimal)) and not isinstance(x, bool) for x in values), \
        f"{name} 应由数字组成（可以是 int、float、Fraction、numpy 数组或张量）。"
    assert len(values) == count, f"{name} 应包含 {count} 个数，现在有 {len(values)} 个。"
    return [float(x) for x in values]

_numbers(hand_scores, "hand_scores", 3)
_numbers(hand_scaled, "hand_scaled", 3)
weights_ = _numbers(hand_weights, "hand_weights", 3)
assert abs(sum(weights_) - 1) < 1e-6, f"权重之和应为 1，现在是 {sum(weights_):.4f}。"
assert all(w >= 0 for w in weights_), "softmax 权重不会是负数。"
out_ = _numbers(hand_output, "hand_output", 1)[0]
assert 4 <= out_ <= 16, "输出是三个值（8、4、16）的加权平均，一定落在 4 到 16 之间。"
_numbers(hand_masked_output, "hand_masked_output", 1)
print("✓ 格式与范围检查通过（答案本身在评分时检查）。")
'''

SHAPE_ANSWERS = r'''
# 用整数元组回答，例如 (1, 2, 3)
shape_scores = ...        # 分数 q @ kᵀ 的形状
shape_weights = ...       # softmax 权重的形状
shape_output = ...        # 注意力输出的形状
shape_padding_mask = ...  # key_padding_to_attn_mask 的输出形状
softmax_dim = ...         # softmax 沿哪一维（负数下标）
### BEGIN SOLUTION
shape_scores = (2, 4, 5, 7)
shape_weights = (2, 4, 5, 7)
shape_output = (2, 4, 5, 16)
shape_padding_mask = (2, 1, 1, 7)
softmax_dim = -1
### END SOLUTION
'''

SHAPE_CHECK = r'''
import numbers

def _integers(value):
    value = value.tolist() if hasattr(value, "tolist") else value  # numpy 数组、torch 张量
    if isinstance(value, (tuple, list)) and all(isinstance(d, numbers.Integral) and not isinstance(d, bool)
                                                for d in value):
        return [int(d) for d in value]
    return None

for name_ in ["shape_scores", "shape_weights", "shape_output", "shape_padding_mask"]:
    value_ = globals()[name_]
    assert value_ is not ..., f"{name_} 还没有填写。"
    assert _integers(value_) is not None, f"{name_} 应是整数元组，例如 (1, 2, 3)。"
assert softmax_dim is not ..., "softmax_dim 还没有填写。"
dim_ = softmax_dim.tolist() if hasattr(softmax_dim, "tolist") else softmax_dim
assert isinstance(dim_, numbers.Integral) and not isinstance(dim_, bool), "softmax_dim 应是一个整数。"
assert len(_integers(shape_scores)) == 4, "q、k 都是四维 [B, H, 位置, 特征]，分数也应是四维。"
print("✓ 格式检查通过（答案本身在评分时检查）。")
'''

SCORES_CHECK = r'''
with visible_check("attention_scores"):
    q_ = torch.tensor([[1.0]], dtype=torch.float64)
    k_ = torch.tensor([[0.0], [math.log(3.0)]], dtype=torch.float64)
    s_ = attention_scores(q_, k_)
    assert s_.shape == (1, 2), f"分数形状应为 [L, S] = [1, 2]，现在是 {list(s_.shape)}。"
    assert torch.allclose(s_, torch.tensor([[0.0, math.log(3.0)]], dtype=torch.float64)), f"q=1 时分数应为 [0, ln3]，现在是 {s_.tolist()}。"
    s_ = attention_scores(torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8))
    assert s_.shape == (2, 3, 5, 7), f"[2,3,5,8] 与 [2,3,7,8] 的分数应为 [2,3,5,7]，现在是 {list(s_.shape)}。"
'''

SCALE_CHECK = r'''
with visible_check("scale_scores"):
    s_ = torch.tensor([[2.0, 4.0]])
    out_ = scale_scores(s_, 4)
    assert torch.allclose(out_, torch.tensor([[1.0, 2.0]])), f"d_k=4 时应除以 2，得到 [1, 2]；现在是 {out_.tolist()}。"
    assert out_.dtype == s_.dtype, "dtype 应保持不变。"
'''

MASK_CHECK = r'''
with visible_check("apply_mask"):
    s_ = torch.tensor([[1.0, 2.0, 3.0]])
    m_ = torch.tensor([[True, False, True]])
    out_ = apply_mask(s_, m_)
    assert out_[0, 1] == float("-inf"), f"mask 为 False 的位置应变成 -inf，现在是 {out_[0, 1].item()}。"
    assert out_[0, 0] == 1.0 and out_[0, 2] == 3.0, "mask 为 True 的位置应保持原值。"
    assert s_[0, 1] == 2.0, "不要原地修改输入的 scores。"
    assert torch.equal(apply_mask(s_, None), s_), "mask=None 时应原样返回分数。"
    add_ = apply_mask(s_, torch.tensor([[0.0, -1.0, 0.5]]))
    assert torch.allclose(add_, torch.tensor([[1.0, 1.0, 3.5]])), "浮点掩码应直接加到分数上。"
'''

SOFTMAX_CHECK = r'''
with visible_check("softmax"):
    w_ = softmax(torch.tensor([[0.0, math.log(3.0)]], dtype=torch.float64))
    assert torch.allclose(w_, torch.tensor([[0.25, 0.75]], dtype=torch.float64)), f"[0, ln3] 的 softmax 应为 [0.25, 0.75]，现在是 {w_.tolist()}。"
    x_ = torch.randn(3, 4, 5)
    assert torch.allclose(softmax(x_, dim=1).sum(dim=1), torch.ones(3, 5)), "沿 dim=1 做 softmax 时，dim=1 上的和应为 1。"
    big_ = softmax(torch.tensor([[1000.0, 1001.0]]))
    assert torch.isfinite(big_).all(), "分数很大时出现了 inf/NaN：先减去最大值。"
    empty_ = softmax(torch.full((1, 3), float("-inf")))
    assert torch.equal(empty_, torch.zeros(1, 3)), f"全为 -inf 的一行应输出全 0，现在是 {empty_.tolist()}。"
'''

OUTPUT_CHECK = r'''
with visible_check("attention_output"):
    w_ = torch.tensor([[0.25, 0.75]])
    v_ = torch.tensor([[10.0], [20.0]])
    out_ = attention_output(w_, v_)
    assert out_.shape == (1, 1) and abs(out_.item() - 17.5) < 1e-5, f"应得到 [[17.5]]，现在是 {out_.tolist()}。"
    assert attention_output(torch.rand(2, 5, 7), torch.randn(2, 7, 3)).shape == (2, 5, 3), "输出形状应为 [..., L, d_v]。"
'''

SDPA_CHECK = r'''
with visible_check("scaled_dot_product_attention"):
    q_ = torch.tensor([[1.0]], dtype=torch.float64)
    k_ = torch.tensor([[0.0], [math.log(3.0)]], dtype=torch.float64)
    v_ = torch.tensor([[10.0], [20.0]], dtype=torch.float64)
    out_, w_ = scaled_dot_product_attention(q_, k_, v_)
    assert abs(out_.item() - 17.5) < 1e-9, f"课文例子的输出应为 17.5，现在是 {out_.item()}。"
    out_, _ = scaled_dot_product_attention(q_, k_, v_, torch.tensor([[True, False]]))
    assert abs(out_.item() - 10.0) < 1e-9, f"屏蔽第二个键后输出应为 10，现在是 {out_.item()}。"
    out_, _ = scaled_dot_product_attention(torch.zeros(1, 1, dtype=torch.float64), k_, v_)
    assert abs(out_.item() - 15.0) < 1e-9, f"q=0 时输出应为 15，现在是 {out_.item()}。"
    out_, w_ = scaled_dot_product_attention(torch.randn(2, 4, 5, 8), torch.randn(2, 4, 7, 8), torch.randn(2, 4, 7, 3))
    assert out_.shape == (2, 4, 5, 3) and w_.shape == (2, 4, 5, 7), "交叉注意力的输出应为 [2,4,5,3]，权重为 [2,4,5,7]。"
'''

CAUSAL_CHECK = r'''
with visible_check("causal_mask"):
    m_ = causal_mask(3, 3)
    assert m_.dtype == torch.bool, "掩码应是布尔张量。"
    assert torch.equal(m_, torch.tensor([[True, False, False], [True, True, False], [True, True, True]])), \
        f"3×3 因果掩码不对：\n{m_.int()}"
    assert causal_mask(2, 4).shape == (2, 4), "causal_mask(L, S) 的形状应为 [L, S]。"
'''

PADDING_CHECK = r'''
with visible_check("key_padding_to_attn_mask"):
    kpm_ = torch.tensor([[False, False, True]])  # MultiheadAttention 约定：True = 填充位置
    m_ = key_padding_to_attn_mask(kpm_)
    assert m_.shape == (1, 1, 1, 3), f"形状应为 [B, 1, 1, S] = [1, 1, 1, 3]，现在是 {list(m_.shape)}。"
    assert m_.dtype == torch.bool, "结果应是布尔张量。"
    assert m_[0, 0, 0].tolist() == [True, True, False], "SDPA 约定里 True = 允许关注，填充位置应为 False。"
'''

HEATMAP = r'''
try:
    torch.manual_seed(0)
    L_, S_ = 6, 6
    q_, k_, v_ = torch.randn(L_, 8), torch.randn(S_, 8), torch.randn(S_, 4)
    _, w_ = scaled_dot_product_attention(q_, k_, v_, causal_mask(L_, S_))
    fig, ax = plt.subplots(figsize=(4.5, 3.8))
    image = ax.imshow(w_.detach().numpy(), cmap="viridis", vmin=0, vmax=1)
    ax.set_xlabel("key position j")
    ax.set_ylabel("query position i")
    ax.set_title("causal attention weights")
    fig.colorbar(image, ax=ax)
    plt.show()
except NotImplementedError:
    print("先完成上面的函数，再运行这个单元格来画热力图。")
'''

CANDIDATES = r'''
def candidate_1(q, k, v, mask=None):
    """候选实现 1。"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    exps = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    total = exps.sum(dim=-1, keepdim=True)
    if mask is not None:
        exps = exps.masked_fill(~mask, 0.0)
    return (exps / total) @ v


def candidate_2(q, k, v, mask=None):
    """候选实现 2。"""
    scores = torch.einsum("...ld,...sd->...ls", q / math.sqrt(q.shape[-1]), k)
    if mask is not None:
        scores = scores + torch.log(mask.to(scores.dtype))
    scores = scores - scores.amax(dim=-1, keepdim=True)
    return (scores.exp() / scores.exp().sum(dim=-1, keepdim=True)) @ v


def candidate_3(q, k, v, mask=None):
    """候选实现 3。"""
    scores = q @ k.mT * q.shape[-1] ** -0.5
    if mask is not None:
        scores = torch.where(mask, scores, scores.amin(dim=-1, keepdim=True))
    exps = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    return (exps / exps.sum(dim=-1, keepdim=True)) @ v


# 探针输入：2 个样本，L = 4 个查询，S = 6 个键，d_k = 8，d_v = 3
torch.manual_seed(1)
q_probe, k_probe, v_probe = torch.randn(2, 4, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 3)
mask_probe = torch.rand(4, 6) < 0.5
mask_probe[:, 0] = True  # 每个查询至少可以关注第 0 个键
print("mask_probe（1 = 允许关注）：")
print(mask_probe.int())
'''

DIAGNOSIS = r'''
# 诊断：在这里写代码检查三个候选实现（这个单元格不计分，评分时也不运行）。
# 下面是一个开头：行和探针，只试了 candidate_1、不带掩码。请补上掩码探针、另外两个候选和带掩码的情况。
eye_ = torch.eye(6).expand(2, 6, 6)  # 值取单位矩阵：输出的每一行就是这个查询的权重
w_ = candidate_1(q_probe, k_probe, eye_)
print("candidate_1（无掩码）每个查询的权重之和：")
print(w_.sum(dim=-1))
'''

VERDICTS = r'''
# 每个候选填一个字母："A"、"B"、"C" 或 "D"
verdict_1 = ...
verdict_2 = ...
verdict_3 = ...
### BEGIN SOLUTION
verdict_1 = "B"
verdict_2 = "A"
verdict_3 = "C"
### END SOLUTION
'''

VERDICTS_CHECK = r'''
for name_ in ("verdict_1", "verdict_2", "verdict_3"):
    check_choice(globals()[name_], name_, "ABCD")
print("✓ 格式检查通过（答案在评分时检查）。")
'''

FIXED_CHECK = r'''
with visible_check("fixed_attention"):
    for mask_ in (None, mask_probe):
        out_ = fixed_attention(q_probe, k_probe, v_probe, mask_)
        assert out_.shape == (2, 4, 3), f"输出形状应为 [2, 4, 3]，现在是 {list(out_.shape)}。"
        try:
            reference_, _ = scaled_dot_product_attention(q_probe, k_probe, v_probe, mask_)
        except NotImplementedError:
            reference_ = None
        if reference_ is not None:
            assert torch.allclose(out_, reference_, atol=1e-5), \
                f"fixed_attention 与你的 scaled_dot_product_attention 结果不一致（{'有' if mask_ is not None else '无'}掩码）。"
'''

WHY_SCALE = r'''
# 实验：S = 16 个键，查询和键的分量独立取自 N(0, 1)，比较不缩放与除以 sqrt(d_k)
torch.manual_seed(0)
n_keys, n_queries = 16, 2000
dims = [2 ** i for i in range(10)]  # 1, 2, 4, ..., 512


def row_softmax(x):
    exps = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return exps / exps.sum(dim=-1, keepdim=True)


def jacobian_norm(p):
    """每个查询的雅可比矩阵 diag(p) - p pᵀ 的 Frobenius 范数。"""
    jac = torch.diag_embed(p) - p[..., :, None] * p[..., None, :]
    return jac.flatten(-2).norm(dim=-1)


curves = {"no scaling": ([], []), "divided by sqrt(d_k)": ([], [])}
for d in dims:
    q_ = torch.randn(n_queries, d)
    k_ = torch.randn(n_keys, d)
    raw_ = q_ @ k_.transpose(-2, -1)
    for label, s_ in (("no scaling", raw_), ("divided by sqrt(d_k)", raw_ / math.sqrt(d))):
        p_ = row_softmax(s_)
        curves[label][0].append(p_.amax(dim=-1).mean().item())
        curves[label][1].append(jacobian_norm(p_).mean().item())

print(" d_k | 平均最大权重：不缩放  缩放 | 雅可比范数：不缩放  缩放")
for i, d in enumerate(dims):
    (m0, g0), (m1, g1) = [(curves[label][0][i], curves[label][1][i]) for label in curves]
    print(f"{d:4d} |              {m0:.3f}  {m1:.3f} |            {g0:.3f}  {g1:.3f}")

# d_k doubles from one point to the next: equally spaced positions, labelled with d_k
steps = range(len(dims))
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
for (label, (peak, grad)), style in zip(curves.items(), ("o-", "s--")):
    axes[0].plot(steps, peak, style, label=label)
    axes[1].plot(steps, grad, style, label=label)
axes[0].axhline(1 / n_keys, color="gray", lw=0.8, ls=":", label="uniform (1/16)")
axes[0].set(xlabel="d_k", ylabel="mean of the largest weight", ylim=(0, 1.05))
axes[1].set(xlabel="d_k", ylabel="mean Frobenius norm of the Jacobian", ylim=(0, None))
axes[0].legend(loc="upper left")
axes[1].legend(loc="lower left")
for ax in axes:
    ax.set_xticks(steps, [str(d) for d in dims])
plt.show()
'''

SCALE_ANSWER = r'''
scale_answer = ...  # 填一个字母
### BEGIN SOLUTION
scale_answer = "C"
### END SOLUTION
'''

SCALE_ANSWER_CHECK = r'''
check_choice(scale_answer, "scale_answer", "ABCD")
print("✓ 格式检查通过（答案在评分时检查）。")
'''

CAUSAL_ALIGN_DEMO = r'''
L_demo, S_demo = 3, 5
top_left = torch.ones(L_demo, S_demo, dtype=torch.bool).tril()
bottom_right = torch.ones(L_demo, S_demo, dtype=torch.bool).tril(diagonal=S_demo - L_demo)
print("左上角对齐（is_causal=True，causal_upper_left），1 = 可以关注：")
print(top_left.int())
print("右下角对齐（causal_lower_right）：")
print(bottom_right.int())

# 同样的查询、键、值：左上角对齐下每个查询都少看了 S - L = 2 个键，所以每个查询的输出都不同
torch.manual_seed(4)
q_, k_, v_ = torch.randn(1, L_demo, 8), torch.randn(1, S_demo, 8), torch.randn(1, S_demo, 2)
by_top_left = F.scaled_dot_product_attention(q_, k_, v_, attn_mask=top_left)
by_bottom_right = F.scaled_dot_product_attention(q_, k_, v_, attn_mask=bottom_right)
print("每个查询两种输出的最大差异:", (by_top_left - by_bottom_right).abs().amax(dim=-1)[0].tolist())
'''

CAUSAL_ALIGN_ANSWERS = r'''
n_keys_top_left = ...      # 一个 int
n_keys_bottom_right = ...  # 一个 int
### BEGIN SOLUTION
n_keys_top_left = 1
n_keys_bottom_right = 5
### END SOLUTION
'''

CAUSAL_ALIGN_CHECK = r'''
top_ = check_integer(n_keys_top_left, "n_keys_top_left")
bottom_ = check_integer(n_keys_bottom_right, "n_keys_bottom_right")
assert 0 <= top_ <= 6 and 0 <= bottom_ <= 6, "一共只有 S = 6 个键，能关注的键数在 0 到 6 之间。"
print("✓ 格式与范围检查通过（答案在评分时检查）。")
'''

MHA_DEMO = r'''
torch.manual_seed(5)
mha = torch.nn.MultiheadAttention(embed_dim=4, num_heads=1, batch_first=True)
x_ = torch.randn(1, 3, 4)  # 1 个样本、3 个位置的自注意力
blocked = torch.ones(3, 3, dtype=torch.bool).triu(diagonal=1)  # 上三角（j > i）为 True
with torch.no_grad():
    _, weights_mha = mha(x_, x_, x_, attn_mask=blocked)
print("传给 attn_mask 的布尔掩码（1 = True）：")
print(blocked.int())
print("nn.MultiheadAttention 返回的权重：")
print(weights_mha[0])
'''

MHA_ANSWER = r'''
mha_mask_answer = ...  # 填一个字母
### BEGIN SOLUTION
mha_mask_answer = "B"
### END SOLUTION
'''

MHA_CHECK = r'''
check_choice(mha_mask_answer, "mha_mask_answer", "ABCD")
print("✓ 格式检查通过（答案在评分时检查）。")
'''

EMPTY_ROWS_DEMO = r'''
causal_demo = torch.ones(4, 4, dtype=torch.bool).tril()
real_tokens = torch.tensor([[True, True, True, True],     # 样本 0：没有填充
                            [False, False, True, True]])  # 样本 1：开头补了 2 个填充位置
mask_demo = causal_demo & real_tokens[:, None, :]  # [2, 4, 4]，True = 允许关注
print("mask_demo（1 = 允许关注）：")
print(mask_demo.int())

torch.manual_seed(6)
q_, k_, v_ = torch.randn(2, 4, 8), torch.randn(2, 4, 8), torch.randn(2, 4, 3)
print("样本 1 的输出，F.scaled_dot_product_attention：")
print(F.scaled_dot_product_attention(q_, k_, v_, attn_mask=mask_demo)[1])
scores_ = (q_ @ k_.transpose(-2, -1) / math.sqrt(8)).masked_fill(~mask_demo, float("-inf"))
print("样本 1 的输出，文档参考代码的做法（填 -inf 后直接做普通 softmax）：")
print((torch.softmax(scores_, dim=-1) @ v_)[1])
try:
    out_, _ = scaled_dot_product_attention(q_, k_, v_, mask_demo)
    print("样本 1 的输出，你的 scaled_dot_product_attention：")
    print(out_[1])
except NotImplementedError:
    print("（完成 scaled_dot_product_attention 之后，这里还会打印你的结果。）")
'''

EMPTY_ROWS_ANSWERS = r'''
n_empty_rows = ...  # 用代码从 mask_demo 算出（一个 int）
fill_weight = ...   # 一个数
### BEGIN SOLUTION
# int((~mask_demo.any(dim=-1)).sum()) 得到 2：样本 1 的前两个查询只能看到填充位置
n_empty_rows = 2
# 这一行的 4 个分数都是 -1e9，减去最大值后全为 0，softmax 给出均匀权重
fill_weight = 1 / 4
### END SOLUTION
'''

EMPTY_ROWS_CHECK = r'''
rows_ = check_integer(n_empty_rows, "n_empty_rows")
assert 0 <= rows_ <= 8, "mask_demo 一共只有 2 × 4 = 8 个查询行。"
weight_ = check_number(fill_weight, "fill_weight")
assert 0 <= weight_ <= 1, "softmax 权重在 0 到 1 之间。"
print("✓ 格式与范围检查通过（答案在评分时检查）。")
'''

DROPOUT_DEMO = r'''
torch.manual_seed(7)
drop = torch.nn.Dropout(p=0.5)
row = torch.full((8,), 0.125)  # 一行均匀的权重，和为 1

drop.train()
trained = drop(row)
print("训练模式:", trained.tolist(), " 和 =", round(trained.sum().item(), 4))
drop.eval()
evaluated = drop(row)
print("评估模式:", evaluated.tolist(), " 和 =", round(evaluated.sum().item(), 4))
print("F.dropout(training=False):", F.dropout(row, p=0.5, training=False).tolist())


class TinyAttention(torch.nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=self.p)  # 没有读取 self.training


tiny = TinyAttention(0.5).eval()
q_, k_, v_ = (torch.randn(1, 4, 8) for _ in range(3))
first_, second_ = tiny(q_, k_, v_), tiny(q_, k_, v_)
print("调用 eval() 之后，同一输入运行两次的最大差异:", (first_ - second_).abs().max().item())
'''

DROPOUT_ANSWERS = r'''
dropout_kept_value = ...   # 一个数
dropout_sdpa_answer = ...  # 填一个字母
### BEGIN SOLUTION
dropout_kept_value = 0.4 / (1 - 0.2)
dropout_sdpa_answer = "B"
### END SOLUTION
'''

DROPOUT_CHECK = r'''
kept_ = check_number(dropout_kept_value, "dropout_kept_value")
assert kept_ >= 0, "dropout 之后的权重不会是负数。"
check_choice(dropout_sdpa_answer, "dropout_sdpa_answer", "ABCD")
print("✓ 格式检查通过（答案在评分时检查）。")
'''

DEVICE_DEMO = r'''
device = "cuda" if torch.cuda.is_available() else "cpu"
print("运行设备:", device)
try:
    torch.manual_seed(0)
    q64, k64, v64 = (torch.randn(2, 4, 16, 32, dtype=torch.float64) for _ in range(3))
    reference, _ = scaled_dot_product_attention(q64, k64, v64, causal_mask(16, 16))
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        q_, k_, v_ = (t.to(device=device, dtype=dtype) for t in (q64, k64, v64))
        out_, _ = scaled_dot_product_attention(q_, k_, v_, causal_mask(16, 16, device=device))
        error = (out_.double().cpu() - reference).abs().max().item()
        print(f"{str(dtype):16s} 输出 dtype={out_.dtype}, 设备={out_.device}, 与 float64 的最大误差 {error:.2e}")
except NotImplementedError:
    print("先完成上面的函数，再运行这个单元格。")

# 为什么用 -inf 而不是 -1e9，为什么要减去最大值：
half = torch.tensor([10.0, 12.0], dtype=torch.float16)
print("float16 的 exp([10, 12]):", torch.exp(half).tolist(), "← 12 已经溢出成 inf")
print("先减去最大值:", torch.exp(half - half.max()).tolist())
try:
    half.masked_fill(torch.tensor([False, True]), -1e9)
except RuntimeError as error:
    print("float16 放不下 -1e9:", str(error).splitlines()[0])
'''

DEVICE_CHECK = r'''
with visible_check("设备与精度"):
    for dtype_ in (torch.float16, torch.bfloat16):
        q_, k_, v_ = (torch.randn(2, 3, 4, dtype=dtype_) for _ in range(3))
        out_, w_ = scaled_dot_product_attention(q_, k_, v_, causal_mask(3, 3))
        assert out_.dtype == dtype_ and w_.dtype == dtype_, f"{dtype_} 输入的输出 dtype 变成了 {out_.dtype}/{w_.dtype}。"
        assert torch.isfinite(out_).all(), f"{dtype_} 下出现了 inf/NaN。"
'''

FINAL_COMPARE = r'''
try:
    torch.manual_seed(2)
    q_, k_, v_ = torch.randn(2, 4, 5, 8), torch.randn(2, 4, 7, 8), torch.randn(2, 4, 7, 3)
    padding_ = torch.tensor([[False] * 7, [False] * 4 + [True] * 3])
    mask_ = causal_mask(5, 7) & key_padding_to_attn_mask(padding_)
    mine_, _ = scaled_dot_product_attention(q_, k_, v_, mask_)
    theirs_ = F.scaled_dot_product_attention(q_, k_, v_, attn_mask=mask_)
    print("与 F.scaled_dot_product_attention 的最大差异:", (mine_ - theirs_).abs().max().item())
except NotImplementedError:
    print("先完成上面的函数，再运行这个单元格。")
'''


def build_source():
    t = text
    cells = [
        md("title", t.TITLE_AND_GOALS), md("prerequisites", t.PREREQUISITES), md("glossary", t.GLOSSARY),
        md("why", t.WHY_ATTENTION), md("qkv", t.QKV_ROLES),
        md("formula", t.FORMULA), code("setup", SETUP),
        md("why-scale-md", t.WHY_SCALE_MD), code("why-scale", WHY_SCALE), md("why-scale-task", t.WHY_SCALE_TASK),
        solution("scale-answer", SCALE_ANSWER), check("why-scale-check", "why_scale", 2, SCALE_ANSWER_CHECK),
        md("worked-example", t.WORKED_EXAMPLE),
        code("worked-example-code", WORKED_EXAMPLE_CODE),
        md("hand-calc-task", t.HAND_CALC_TASK), solution("hand-calc-answers", HAND_ANSWERS),
        check("hand-calc-check", "hand_calculation", 10, HAND_CHECK),
        md("shapes-task", t.SHAPES_TASK), solution("shape-answers", SHAPE_ANSWERS),
        check("shapes-check", "shapes", 5, SHAPE_CHECK),
        md("impl-intro", t.IMPL_INTRO),
        md("scores-md", t.SCORES_MD), function_cell("attention_scores"),
        check("attention_scores-check", "attention_scores", 8, SCORES_CHECK),
        md("scale-md", t.SCALE_MD), function_cell("scale_scores"),
        check("scale_scores-check", "scale_scores", 5, SCALE_CHECK),
        md("mask-md", t.MASK_MD), function_cell("apply_mask"),
        check("apply_mask-check", "apply_mask", 10, MASK_CHECK),
        md("softmax-md", t.SOFTMAX_MD), function_cell("softmax"),
        check("softmax-check", "softmax", 12, SOFTMAX_CHECK),
        md("output-md", t.OUTPUT_MD), function_cell("attention_output"),
        check("attention_output-check", "attention_output", 5, OUTPUT_CHECK),
        md("sdpa-md", t.SDPA_MD), function_cell("scaled_dot_product_attention"),
        check("scaled_dot_product_attention-check", "scaled_dot_product_attention", 15, SDPA_CHECK),
        md("masks-md", t.MASKS_MD), function_cell("causal_mask"),
        check("causal_mask-check", "causal_mask", 5, CAUSAL_CHECK),
        function_cell("key_padding_to_attn_mask"),
        check("key_padding_to_attn_mask-check", "key_padding_to_attn_mask", 5, PADDING_CHECK),
        md("heatmap-md", t.HEATMAP_MD), code("heatmap", HEATMAP),
        md("causal-align-md", t.CAUSAL_ALIGN_MD), code("causal-align-demo", CAUSAL_ALIGN_DEMO),
        md("causal-align-task", t.CAUSAL_ALIGN_TASK), solution("causal-align-answers", CAUSAL_ALIGN_ANSWERS),
        check("causal-align-check", "causal_alignment", 2, CAUSAL_ALIGN_CHECK),
        md("mha-mask-md", t.MHA_MASK_MD), code("mha-mask-demo", MHA_DEMO),
        md("mha-mask-task", t.MHA_MASK_TASK), solution("mha-mask-answer", MHA_ANSWER),
        check("mha-mask-check", "mha_mask", 2, MHA_CHECK),
        md("empty-rows-md", t.EMPTY_ROWS_MD), code("empty-rows-demo", EMPTY_ROWS_DEMO),
        md("empty-rows-task", t.EMPTY_ROWS_TASK), solution("empty-rows-answers", EMPTY_ROWS_ANSWERS),
        check("empty-rows-check", "empty_rows", 2, EMPTY_ROWS_CHECK),
        md("debug-md", t.DEBUG_MD), code("candidates", CANDIDATES), scratch("diagnosis", DIAGNOSIS),
        solution("bug-choice", VERDICTS), check("bug-choice-check", "debugging_choice", 3, VERDICTS_CHECK),
        function_cell("fixed_attention"), check("fixed_attention-check", "debugging_fix", 5, FIXED_CHECK),
        md("dropout-md", t.DROPOUT_MD), code("dropout-demo", DROPOUT_DEMO),
        md("dropout-task", t.DROPOUT_TASK), solution("dropout-answers", DROPOUT_ANSWERS),
        check("dropout-check", "dropout", 2, DROPOUT_CHECK),
        md("device-md", t.DEVICE_MD), code("device-demo", DEVICE_DEMO),
        check("device_dtype-check", "device_dtype", 7, DEVICE_CHECK),
        md("mistakes", t.MISTAKES), md("faq-intro", t.FAQ_INTRO),
        md("written-q1", t.WRITTEN_Q1), written("written-a1", t.WRITTEN_A1, 2.5),
        md("written-q2", t.WRITTEN_Q2), written("written-a2", t.WRITTEN_A2, 2.5),
        md("final-compare-md", t.FINAL_COMPARE_MD), code("final-compare", FINAL_COMPARE),
        md("summary", t.SUMMARY_MD), md("references", t.REFERENCES_MD),
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata = {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
                   "language_info": {"name": "python"}}
    return nb


def solution_notebook(nb):
    """The source notebook minus hidden-test regions: what a perfect student submits."""
    out = nbformat.from_dict(json.loads(json.dumps(nb)))
    for cell in out.cells:
        cell.source = re.sub(r"\n*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", "", cell.source, flags=re.S)
    return out


def render(nb):
    return nbformat.writes(nb) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed notebooks are stale")
    args = parser.parse_args()
    source = build_source()
    targets = {SOURCE: render(source), SOLUTION_NOTEBOOK: render(solution_notebook(source))}
    stale = [path for path, content in targets.items() if not path.exists() or path.read_text() != content]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is stale: run `make notebooks`", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(targets[path])
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
