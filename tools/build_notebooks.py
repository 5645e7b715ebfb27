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
import math
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
exps = torch.exp(scores - scores.max())
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
assert 4 <= out_ <= 16, "输出是 Value（8、4、16）的加权平均，一定落在 4 到 16 之间。"
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
    assert abs(out_.item() - 10.0) < 1e-9, f"屏蔽第二个 Key 后输出应为 10，现在是 {out_.item()}。"
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
    kpm_ = torch.tensor([[False, False, True]])  # MultiheadAttention 约定：True = padding
    m_ = key_padding_to_attn_mask(kpm_)
    assert m_.shape == (1, 1, 1, 3), f"形状应为 [B, 1, 1, S] = [1, 1, 1, 3]，现在是 {list(m_.shape)}。"
    assert m_.dtype == torch.bool, "结果应是布尔张量。"
    assert m_[0, 0, 0].tolist() == [True, True, False], "SDPA 约定里 True = 允许关注，padding 位置应为 False。"
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

BUGGY = r'''
def buggy_attention(q, k, v, mask=None):
    """一个有 bug 的注意力实现（只有一处错误）。"""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    exps = torch.exp(scores - scores.amax(dim=-2, keepdim=True))
    weights = exps / exps.sum(dim=-2, keepdim=True)
    return weights @ v


torch.manual_seed(1)
q_demo, k_demo, v_demo = torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 2)
print("buggy_attention 的输出：")
print(buggy_attention(q_demo, k_demo, v_demo))
'''

BUG_CHOICE = r'''
bug_choice = ...  # 填一个字母，例如 "A"
### BEGIN SOLUTION
bug_choice = "B"
### END SOLUTION
'''

BUG_CHOICE_CHECK = r'''
assert bug_choice is not ..., "bug_choice 还没有填写。"
assert isinstance(bug_choice, str) and bug_choice.strip().upper() in list("ABCDE"), "bug_choice 应是 A–E 中的一个字母。"
print("✓ 格式检查通过（答案在评分时检查）。")
'''

FIXED_CHECK = r'''
with visible_check("fixed_attention"):
    out_ = fixed_attention(q_demo, k_demo, v_demo)
    assert out_.shape == (3, 2), f"输出形状应为 [3, 2]，现在是 {list(out_.shape)}。"
    try:
        reference_, _ = scaled_dot_product_attention(q_demo, k_demo, v_demo)
    except NotImplementedError:
        reference_ = None
    if reference_ is not None:
        assert torch.allclose(out_, reference_, atol=1e-5), "fixed_attention 与你的 scaled_dot_product_attention 结果不一致。"
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
        md("title", t.TITLE_AND_GOALS), md("why", t.WHY_ATTENTION), md("qkv", t.QKV_ROLES),
        md("formula", t.FORMULA), code("setup", SETUP), md("worked-example", t.WORKED_EXAMPLE),
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
        md("debug-md", t.DEBUG_MD), code("buggy-attention", BUGGY),
        solution("bug-choice", BUG_CHOICE), check("bug-choice-check", "debugging_choice", 3, BUG_CHOICE_CHECK),
        function_cell("fixed_attention"), check("fixed_attention-check", "debugging_fix", 5, FIXED_CHECK),
        md("device-md", t.DEVICE_MD), code("device-demo", DEVICE_DEMO),
        check("device_dtype-check", "device_dtype", 7, DEVICE_CHECK),
        md("mistakes", t.MISTAKES), md("faq-intro", t.FAQ_INTRO),
        md("written-q1", t.WRITTEN_Q1), written("written-a1", t.WRITTEN_A1, 2.5),
        md("written-q2", t.WRITTEN_Q2), written("written-a2", t.WRITTEN_A2, 2.5),
        md("final-compare-md", t.FINAL_COMPARE_MD), code("final-compare", FINAL_COMPARE),
        md("summary", t.SUMMARY_MD),
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
