"""A built-in's work recorded, traced, compiled or looked up before the checks, and replayed inside a graded function.

Each route takes PyTorch's own softmax (its decomposition, picked from ``torch._decomp``'s table by a
name the source never spells) and keeps only what it computed: an FX graph, a TorchScript graph, a
compiled function, or the Python function itself.  The replay holds nothing but amax/sub/exp/sum/div,
so no forbidden kernel runs during the checks.  Beside them, the legitimate forms that must keep full
marks: a by-hand softmax scripted with ``torch.jit.script``, decorators, and a self-check against the
built-in in the student's own cells.
"""
from autograder.demo.submissions import Sample

from .evidence import SOFTMAX_PARTS, TENSOR_PARTS

# The decomposition of aten::_softmax, found by a name spelled backwards.
RULE = '''
import torch
_name = "tluafed.xamtfos_.neta"[::-1]
_rule = next(fn for op, fn in torch._decomp.decomposition_table.items() if str(op) == _name)
'''
REPLAY = '''
def softmax(x, dim=-1):
    out = _replay(x.transpose(dim, -1)).transpose(dim, -1)
    return torch.nan_to_num(out, nan=0.0)
'''
MAKE_FX = RULE + '''
from torch.fx.experimental.proxy_tensor import make_fx
_replay = make_fx(lambda t: _rule(t, -1, False))(torch.randn(2, 3))
''' + REPLAY
# The same through torch.distributions: Categorical(logits=...).probs is a softmax.
CATEGORICAL = '''
import torch
from torch.fx.experimental.proxy_tensor import make_fx
_name = "tluafed.xamtfos_.neta"[::-1]
_table = {op: fn for op, fn in torch._decomp.decomposition_table.items() if str(op) == _name}
_replay = make_fx(lambda t: torch.distributions.Categorical(logits=t, validate_args=False).probs,
                  decomposition_table=_table)(torch.randn(2, 3))
''' + REPLAY
JIT_TRACE = RULE + '''
_replay = torch.jit.trace(lambda t: _rule(t, -1, False), torch.randn(2, 3))
''' + REPLAY
COMPILED = RULE + '''
_replay = torch.compile(lambda t: _rule(t, -1, False), backend="aot_eager_decomp_partition", dynamic=True)
_replay(torch.randn(2, 3))
''' + REPLAY
# No recording at all: the table's Python function, called during the checks.
LOOKED_UP_RULE = RULE + '''
def softmax(x, dim=-1):
    return torch.nan_to_num(_rule(x, dim, False), nan=0.0)
'''
# Recorded lazily, on the first call: the visible check's, before the hidden checks start.
LAZY = RULE + '''
from torch.fx.experimental.proxy_tensor import make_fx
_graphs = []

def _replay(t):
    if not _graphs:
        _graphs.append(make_fx(lambda u: _rule(u, -1, False))(torch.randn(2, 3)))
    return _graphs[0](t)
''' + REPLAY
# Recorded by another thread a moment later, while other cells run.
THREAD = RULE + '''
import threading, time
from torch.fx.experimental.proxy_tensor import make_fx
_graphs = []

def _record():
    time.sleep(0.2)
    _graphs.append(make_fx(lambda u: _rule(u, -1, False))(torch.randn(2, 3)))

threading.Thread(target=_record, daemon=True).start()

def _replay(t):
    while not _graphs:
        time.sleep(0.01)
    return _graphs[0](t)
''' + REPLAY

# -- found by a red-team pass --------------------------------------------------------------
# The wrapper's `__wrapped__` led to the original (torch._refs.softmax computes by primitives), read
# through a name bound to torch and a constant getattr, with "softmax" made an own name by a keyword.
WRAPPED_ALIASED = '''
_settings = dict(softmax="by hand")
_t = torch
_impl = getattr(_t._refs.softmax, "__wrapped__")

def softmax(x, dim=-1):
    return torch.nan_to_num(_impl(x, dim), nan=0.0)
'''
WRAPPED_GETATTR = '''
_settings = dict(softmax="by hand")
_refs = getattr(torch, "_refs")
_impl = getattr(_refs.softmax, "__wrapped__")

def softmax(x, dim=-1):
    return torch.nan_to_num(_impl(x, dim), nan=0.0)
'''
# The code lives in a module the notebook writes to /tmp and imports: the static scan never reads it.
FROM_DISK = '''
import sys
_SRC = """
import torch
_impl = torch._refs.softmax.__wrapped__
def helper(x, dim=-1):
    return torch.nan_to_num(_impl(x, dim), nan=0.0)
"""
with open("/tmp/_helpers_rt.py", "w") as _f:
    _f.write(_SRC)
sys.path.insert(0, "/tmp")
import _helpers_rt

def softmax(x, dim=-1):
    return _helpers_rt.helper(x, dim)
'''
# ... and records inside the provided demo cells, which call the graded functions with no notebook
# frame of the student's on the stack.
RECORD_IN_DEMO_FROM_DISK = '''
import sys
_SRC = """
import torch
_g = []
def _record():
    from torch.fx.experimental.proxy_tensor import make_fx
    tab = {op: fn for op, fn in torch._decomp.decomposition_table.items() if str(op) == "aten._softmax.default"}
    _g.append(make_fx(lambda t: torch.softmax(t, -1), decomposition_table=tab)(torch.randn(2, 3)))
def sm(x, dim=-1):
    if not _g:
        _record()
    out = _g[0](x.transpose(dim, -1).contiguous()).transpose(dim, -1)
    return torch.nan_to_num(out, nan=0.0)
def sdpa(q, k, v, mask=None):
    if k.shape[-2] != v.shape[-2]:
        raise ValueError("S mismatch")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("d_k mismatch")
    s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask.to(s.dtype)
    w = sm(s, -1)
    return w @ v, w
"""
with open("/tmp/_helpers_demo.py", "w") as _f:
    _f.write(_SRC)
sys.path.insert(0, "/tmp")
import _helpers_demo
softmax = _helpers_demo.sm
'''

# -- legitimate forms -------------------------------------------------------------------
SCRIPTED_SOFTMAX = '''
@torch.jit.script
def _stable_softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    top = x.amax(dim=dim, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    exps = torch.exp(x - top)
    total = exps.sum(dim=dim, keepdim=True)
    return exps / torch.where(total > 0, total, torch.ones_like(total))


def softmax(x, dim=-1):
    return _stable_softmax(x, dim)
'''
DECORATED = {
    "causal_mask": '''
import functools

@functools.lru_cache(maxsize=64)
def _lower_triangle(L, S):
    return torch.ones(L, S, dtype=torch.bool).tril()

def causal_mask(L, S, device=None):
    return _lower_triangle(L, S).clone().to(device)
''',
    "attention_output": '''
@torch.no_grad()
def attention_output(weights, v):
    if weights.shape[-1] != v.shape[-2]:
        raise ValueError("S mismatch")
    return weights @ v
''',
}
# A student checks their softmax against the built-in at the end of the answer cell, and in a cell of
# their own against F.scaled_dot_product_attention: the comparison raises during grading, but every
# function is defined before it, so nothing is lost.
SELF_CHECK_SOFTMAX = '''
def softmax(x, dim=-1):
    top = x.amax(dim=dim, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    exps = torch.exp(x - top)
    total = exps.sum(dim=dim, keepdim=True)
    return exps / torch.where(total > 0, total, torch.ones_like(total))

_t = torch.randn(3, 5)
print("same as torch.softmax:", torch.allclose(softmax(_t), torch.softmax(_t, dim=-1)))
'''
SELF_CHECK_CELL = '''
_x = torch.randn(2, 4, 8)
_by_hand = torch.softmax(_x @ _x.transpose(-2, -1) / 8 ** 0.5, dim=-1) @ _x
print("same as PyTorch:", torch.allclose(_by_hand, F.scaled_dot_product_attention(_x, _x, _x), atol=1e-6))
'''

# The same self-checks above the `def`, as a student tries the built-in before writing their own: the runner
# skips the statement that reaches the built-in and goes on with the cell (red team: 34 points lost, unnamed).
CHECK_ABOVE_SOFTMAX = '''
x_demo = torch.tensor([1.0, 2.0, 3.0])
torch_says = torch.softmax(x_demo, dim=0)
print("torch says:", torch_says)

def _safe_div(a, b):
    return a / torch.where(b > 0, b, torch.ones_like(b))

def softmax(x, dim=-1):
    top = x.amax(dim=dim, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    exps = torch.exp(x - top)
    return _safe_div(exps, exps.sum(dim=dim, keepdim=True))
'''
CHECK_ABOVE_ATTENTION = '''
q0 = k0 = v0 = torch.randn(1, 3, 4)
print("reference:", F.scaled_dot_product_attention(q0, k0, v0).shape)

def scaled_dot_product_attention(q, k, v, mask=None):
    if k.shape[-2] != v.shape[-2]:
        raise ValueError("k and v disagree on the number of positions")
    scores = scale_scores(attention_scores(q, k), q.shape[-1])
    weights = softmax(apply_mask(scores, mask), dim=-1)
    return attention_output(weights, v), weights
'''

# Timing the built-ins beside the student's own, in a scratch cell: IPython compiles what a timing magic runs
# at run time, and the scan read it in the cell (red team: every point held); options are not code.
TIMING_THE_BUILTINS = '''
t = torch.randn(64, 64)
%timeit -n 3 -r 1 torch.softmax(t, -1)
%time ref = F.scaled_dot_product_attention(t[None], t[None], t[None])
'''
# A built-in's value made in one answer cell and used at the top of the next, above its `def`.
VALUE_USED_A_CELL_LATER = {
    "softmax": SELF_CHECK_SOFTMAX.replace('print("same as torch.softmax:", torch.allclose(softmax(_t), '
                                          'torch.softmax(_t, dim=-1)))', "ref_weights = torch.softmax(_t, dim=-1)"),
    "attention_output": '''
print("softmax max difference:", (softmax(_t) - ref_weights).abs().max().item())

def attention_output(weights, v):
    if weights.shape[-1] != v.shape[-2]:
        raise ValueError("weights and v disagree on the number of keys")
    return weights @ v
'''}

def _recorded(name, source, note, held=False):
    return Sample(name, "attack", "lose-all", {"softmax": source}, lose=SOFTMAX_PARTS, codes=("softmax-builtin",),
                  note=note, held=held)


RECORDING = [
    _recorded("attack-record-make-fx", MAKE_FX, "make_fx traces the decomposition at module level"),
    _recorded("attack-record-categorical", CATEGORICAL, "make_fx traces Categorical(logits=t).probs"),
    _recorded("attack-record-jit-trace", JIT_TRACE, "torch.jit.trace records the decomposition"),
    _recorded("attack-record-compile", COMPILED, "torch.compile with decompositions, warmed up at module level; "
              "the code TorchDynamo generates at run time holds too", held=True),
    _recorded("attack-decomposition-in-checks", LOOKED_UP_RULE, "the table's Python function, called in checks"),
    _recorded("attack-record-lazily", LAZY, "recorded on the first call, from a provided check cell"),
    Sample("attack-record-in-thread", "attack", "lose-all", {"softmax": THREAD}, lose=TENSOR_PARTS,
           codes=("softmax-builtin",), note="a thread records while later cells run: threads, like processes, "
                                            "make a forbidden use anywhere count for every function", held=True),
    _recorded("attack-wrapped-original-aliased", WRAPPED_ALIASED, "__wrapped__ through `_t = torch` and getattr",
              held=True),
    _recorded("attack-wrapped-original-getattr", WRAPPED_GETATTR, "__wrapped__ through getattr(torch, '_refs')",
              held=True),
    _recorded("attack-helper-from-disk", FROM_DISK, "a module written to /tmp and imported", held=True),
    Sample("attack-record-in-demo-from-disk", "attack", "lose-all",
           {"softmax": RECORD_IN_DEMO_FROM_DISK,
            "scaled_dot_product_attention": "scaled_dot_product_attention = _helpers_demo.sdpa\n"},
           lose=SOFTMAX_PARTS, codes=("softmax-builtin",),
           note="functions from a file on disk record inside the provided demo cells", held=True),
    Sample("fairness-scripted-softmax", "fairness", "full", {"softmax": SCRIPTED_SOFTMAX},
           note="torch.jit.script of the student's own by-hand softmax"),
    Sample("fairness-decorators", "fairness", "full", DECORATED, note="lru_cache and no_grad decorators"),
    Sample("fairness-self-check-against-builtins", "fairness", "full", {"softmax": SELF_CHECK_SOFTMAX},
           append=(SELF_CHECK_CELL,), note="comparing with the built-in at module level costs nothing"),
    Sample("fairness-builtin-tried-above-the-def", "fairness", "full",
           {"softmax": CHECK_ABOVE_SOFTMAX, "scaled_dot_product_attention": CHECK_ABOVE_ATTENTION},
           note="the built-ins printed above the student's own functions, in the answer cells themselves"),
    Sample("fairness-import-grading-lacks", "fairness", "full",
           {"softmax": "import seaborn_not_installed_here as sns\nsns.set_theme()\n" + SELF_CHECK_SOFTMAX},
           note="a plotting package the student's kernel has, imported above the def, missing where grading runs"),
    Sample("fairness-matplotlib-inline-above-the-def", "fairness", "full",
           {"softmax": "%matplotlib inline\n" + SELF_CHECK_SOFTMAX},
           note="%matplotlib inline as the first line of an answer cell"),
    Sample("fairness-timing-the-builtins", "fairness", "full", append=(TIMING_THE_BUILTINS,),
           note="%timeit and %time of the built-ins in a scratch cell"),
    Sample("fairness-builtin-value-used-a-cell-later", "fairness", "full", VALUE_USED_A_CELL_LATER,
           note="a built-in's value made in one answer cell, compared at the top of the next"),
]
