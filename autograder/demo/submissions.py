"""Sample submissions a class really produces: correct variants and realistic bugs.

Used by `sdpa-course demo`, the benchmark and the tests; the attacks on the
grader live in the sample catalogue (``catalogue/``), not in this package.  Each entry starts from the released
notebook with every answer filled in from the reference solution, then
swaps in other code for some answer cells, appends cells, or edits the
notebook JSON.  `expect` says what grading must give:

- "full": every automatic point;
- "zero": no automatic point;
- "partial": more than zero, less than full, and every code in `codes` shown;
- "lose": full points except that the grade cells in `lose` may lose some;
- "lose-all": the grade cells in `lose` get zero, every other one full marks.

Attacks, bugs and fairness samples may also list `codes`, which feedback must name.
"""
import copy
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import nbformat

from solutions import SOLUTION_NOTEBOOK

from ..grading import honest

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*(?:\n|\Z)", re.M)


@dataclass(frozen=True)
class Sample:
    name: str
    kind: str  # correct | bug | attack | fairness | empty
    expect: str  # full | zero | partial | lose | lose-all
    replace: dict = field(default_factory=dict)  # answer cell grade_id -> source
    append: tuple = ()  # extra code cells, added after the first answer cell
    codes: tuple = ()  # misconception codes that feedback must name
    also: tuple = ()  # for bugs: other codes the evidence may fairly support (anything else is a wrong guess)
    lose: tuple = ()  # grade cells (grade_id) allowed to lose points, for "lose"
    # the notebook holds code the grader cannot read: its points wait for a person; None: the grader's timing
    # decides whether any check earns points for it to hold (a runner that stops itself mid-reply)
    held: Optional[bool] = False
    edit: Optional[Callable] = None  # edits the notebook JSON (dict) in place
    note: str = ""


def _honest(code):
    """The one-bug sample of `code`: its honest answer cell (``grading.honest``), what a refund is measured against."""
    return Sample(f"bug-{code}", "bug", "partial", honest.replacement(code), codes=(code,), also=honest.ALSO[code])


# One sample per mistake the course declares an honest answer for, then the mistakes shown by hand.
BUGS = [
    *(_honest(code) for code in honest.SOURCES),
    Sample("bug-device-mismatch", "bug", "partial", {"apply_mask": """
def apply_mask(scores, mask=None):
    if mask is None:
        return scores
    if mask.dtype == torch.bool:
        fill = torch.full(scores.shape, float("-inf"), dtype=scores.dtype)
        return torch.where(mask, scores, fill)
    return scores + mask.to(scores.dtype)
""", "causal_mask": """
def causal_mask(L, S, device=None):
    return torch.ones(L, S, dtype=torch.bool).tril()
"""}, codes=("device-mismatch",)),
    Sample("bug-softmax-builtin", "bug", "partial", {"softmax": """
def softmax(x, dim=-1):
    return torch.nan_to_num(torch.softmax(x, dim=dim), nan=0.0)
"""}, codes=("softmax-builtin",)),
    Sample("bug-softmax-builtin-getattr", "bug", "partial", {"softmax": """
def softmax(x, dim=-1):
    fn = getattr(x, "soft" + "max")
    return torch.nan_to_num(fn(dim), nan=0.0)
"""}, codes=("softmax-builtin",)),
    Sample("bug-sdpa-builtin", "bug", "partial", {"scaled_dot_product_attention": """
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = scale_scores(attention_scores(q, k), q.shape[-1])
    weights = softmax(apply_mask(scores, mask), dim=-1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), weights
"""}, codes=("sdpa-builtin",)),
    Sample("bug-hand-unscaled", "bug", "partial", {"hand-calc-answers": """
hand_scores = [0.0, 2 * math.log(2), 2 * math.log(5)]
hand_scaled = [0.0, 2 * math.log(2), 2 * math.log(5)]
hand_weights = [1 / 30, 4 / 30, 25 / 30]
hand_output = (8 + 16 + 400) / 30
hand_masked_output = 16 / 3
"""}, codes=("scale-missing",)),
    Sample("bug-hand-masked-zero", "bug", "partial", {"hand-calc-answers": """
hand_scores = [0.0, 2 * math.log(2), 2 * math.log(5)]
hand_scaled = [0.0, math.log(2), math.log(5)]
hand_weights = [1 / 8, 2 / 8, 5 / 8]
hand_output = 12.0
hand_masked_output = 8.0
"""}, codes=("mask-zero-fill",)),
    Sample("bug-shapes-used-k", "bug", "partial", {"shape-answers": """
shape_scores = (2, 4, 5, 7)
shape_weights = (2, 4, 5, 7)
shape_output = (2, 4, 5, 8)
shape_padding_mask = (2, 7)
softmax_dim = -2
"""}, codes=("output-used-k", "padding-shape", "softmax-wrong-dim")),
]

CORRECT = [
    Sample("correct-reference", "correct", "full"),
    Sample("solution-notebook", "correct", "full", note="solutions/sdpa_solution.ipynb submitted as it is"),
    Sample("correct-alternatives", "correct", "full", {
        "attention_scores": """
def attention_scores(q, k):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"d_k 不一致: {q.shape[-1]} vs {k.shape[-1]}")
    return torch.einsum("...ld,...sd->...ls", q, k)
""",
        "scale_scores": """
def scale_scores(scores, d_k):
    return scores * (d_k ** -0.5)
""",
        "apply_mask": """
def apply_mask(scores, mask=None):
    if mask is None:
        return scores.clone()
    if torch.broadcast_shapes(mask.shape, scores.shape) != scores.shape:
        raise ValueError("mask does not broadcast")
    if mask.dtype == torch.bool:
        return torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device))
    return scores + mask
""",
        "softmax": """
def softmax(x, dim=-1):
    lse = torch.logsumexp(x, dim=dim, keepdim=True)
    out = torch.exp(x - lse)
    return torch.nan_to_num(out, nan=0.0)
""",
        "attention_output": """
def attention_output(weights, v):
    if weights.size(-1) != v.size(-2):
        raise ValueError("S mismatch")
    return torch.matmul(weights, v)
""",
        "causal_mask": """
def causal_mask(L, S, device=None):
    i = torch.arange(L, device=device)[:, None]
    j = torch.arange(S, device=device)[None, :]
    return j <= i
""",
        "key_padding_to_attn_mask": """
def key_padding_to_attn_mask(key_padding_mask):
    if key_padding_mask.ndim != 2:
        raise ValueError("expected [B, S]")
    return key_padding_mask.logical_not().unsqueeze(1).unsqueeze(1)
""",
    }),
    # Written the slow, plain way (one query, one row at a time): many times the reference's
    # time, and still well inside the limits derived from it (``nbgrader/calibration.py``).
    Sample("correct-loops", "correct", "full", {
        "attention_scores": """
def attention_scores(q, k):
    if q.dim() < 2 or k.dim() < 2 or q.shape[-1] != k.shape[-1]:
        raise ValueError("q 和 k 的形状不匹配")
    rows = []
    for i in range(q.shape[-2]):  # 每次一个查询
        rows.append((q[..., i:i + 1, :] * k).sum(dim=-1))
    return torch.stack(rows, dim=-2) if rows else q @ k.transpose(-2, -1)
""",
        "softmax": """
def softmax(x, dim=-1):
    moved = x.movedim(dim, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    rows = []
    for row in flat:  # 每次一行
        top = row.max() if row.numel() else row.sum()
        top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
        e = torch.exp(row - top)
        total = e.sum()
        rows.append(e / torch.where(total > 0, total, torch.ones_like(total)))
    out = torch.stack(rows) if rows else flat.clone()
    return out.reshape(moved.shape).movedim(-1, dim)
""",
    }),
    Sample("correct-noisy", "correct", "full", append=("""
import sys, warnings
import matplotlib.pyplot as plt
print("debug: 正在调试", file=sys.stderr)
warnings.warn("这是学生自己的警告")
def helper_norm(t):
    return t / t.sum(dim=-1, keepdim=True)
plt.plot([0, 1], [1, 0]); plt.title("my plot"); plt.show()
print("x" * 200)
""",), replace={"softmax": """
def softmax(x, dim=-1):
    import warnings
    print("softmax called", x.shape)
    warnings.warn("softmax 的调试警告")
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=dim, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))
"""}),
]
EMPTY = [Sample("empty-release", "empty", "zero")]

def verdict(sample: Sample, cells: dict[str, tuple[Optional[float], float]],
            shown_codes: Iterable[str], held: Optional[dict[str, float]] = None) -> tuple[bool, str]:
    """Whether grading met `sample.expect`; returns (ok, why) for tests and reports.

    cells: {grade_id: (auto_score, max_score)} of the autograded code cells;
    shown_codes: misconception codes that the feedback named;
    held: {grade_id: points its checks gave} of the cells held for review (``record.held_points``).
    A sample that is `held` must have every cell that earned held, counted nowhere; `expect` is then
    judged on what the checks gave.
    """
    held = held or {}
    if sample.held is not None and sample.held != bool(held):
        return False, (f"held {sorted(held)} for review" if held else "expected its points held for review")
    counted = {k: v[0] for k, v in cells.items() if k in held and v[0] is not None}
    if counted:
        return False, f"held cells counted automatic points: {counted}"
    kept = {k: v for k, v in cells.items() if held and k not in held and v[0]}
    if kept:
        return False, f"cells outside the held ones counted points: {kept}"
    cells = {k: ((held[k], top) if k in held else (score, top)) for k, (score, top) in cells.items()}
    earned = sum(score or 0 for score, _ in cells.values())
    possible = sum(top for _, top in cells.values())
    lost = {k: v for k, v in cells.items() if v[0] != v[1]}
    if sample.expect == "full" and earned != possible:
        return False, f"lost points in {lost}"
    if sample.expect == "zero" and earned != 0:
        return False, f"earned {earned} points: {({k: v for k, v in cells.items() if v[0]})}"
    if sample.expect == "partial" and not 0 < earned < possible:
        return False, f"expected partial credit, got {earned}/{possible}"
    if sample.expect in ("lose", "lose-all"):
        outside = {k: v for k, v in lost.items() if k not in sample.lose}
        if outside:
            return False, f"parts outside {sample.lose} lost points: {outside}"
    if sample.expect == "lose-all":
        kept = {k: v for k, v in cells.items() if k in sample.lose and v[0]}
        if kept:
            return False, f"parts in `lose` kept points: {kept}"
    missing = set(sample.codes) - set(shown_codes)
    if missing:
        return False, f"feedback did not name {sorted(missing)} (named {sorted(shown_codes)})"
    extra = set(shown_codes) - set(sample.codes) - set(sample.also)
    if sample.kind == "bug" and extra:
        return False, f"feedback also named {sorted(extra)}, which this bug does not explain"
    return True, ""


def solved_release(release_nb: nbformat.NotebookNode, solution: Path = SOLUTION_NOTEBOOK) -> nbformat.NotebookNode:
    """The released notebook with every answer cell filled from the reference (`solution`: the edition's
    solution notebook; by default the course's, so that every edition is sent the same answer code)."""
    solution = nbformat.read(str(solution), as_version=4)
    answers = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in solution.cells}
    nb = copy.deepcopy(release_nb)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            cell.source = MARKER.sub("", answers[meta["grade_id"]])
    return nb


def build(sample: Sample, release_nb: nbformat.NotebookNode, solution: Path = SOLUTION_NOTEBOOK
          ) -> nbformat.NotebookNode:
    """The submitted notebook of `sample` (a NotebookNode); `solution` as for `solved_release`."""
    if sample.kind == "empty":
        return copy.deepcopy(release_nb)
    if sample.name == "solution-notebook":
        return nbformat.read(str(solution), as_version=4)
    nb = solved_release(release_nb, solution)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in sample.replace:
            cell.source = sample.replace[grade_id].strip("\n")
    first_answer = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("solution"))
    for offset, source in enumerate(sample.append, start=1):
        nb.cells.insert(first_answer + offset, nbformat.v4.new_code_cell(source))
    if sample.edit is not None:
        raw = json.loads(nbformat.writes(nb))
        sample.edit(raw)
        nb = nbformat.from_dict(raw)
    return nb
