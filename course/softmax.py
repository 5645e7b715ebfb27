"""The part ``softmax``: a numerically stable softmax along `dim`, all -inf slices giving zeros."""
import torch

from autograder.i18n import N_
from solutions import sdpa as solution

from . import references
from .spec import GradedFunction, Honest, Mistake

PART = "softmax"


# Models of the softmax mistakes (the attention part's models swap them in as well).
def naive_softmax(x, dim=-1):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def global_max_softmax(x, dim=-1):
    e = torch.exp(x - x.max())
    return e / e.sum(dim=dim, keepdim=True)


def nan_softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def guarded(weights):
    """The same bug with the usual 0/0 guard: NaN slices become zeros."""
    return torch.nan_to_num(weights, nan=0.0)


def empty_guarded_naive_softmax(x, dim=-1):
    """No max subtracted, but empty (all -inf) slices guarded: overflow still gives inf/inf = NaN."""
    e = torch.exp(x)
    total = e.sum(dim=dim, keepdim=True)
    return torch.where(total > 0, e / total, torch.zeros_like(e))


def _other_dims(x, dim):
    d = dim % x.dim()
    return [o for o in range(x.dim()) if o != d]


def _variants(args, kwargs):
    x = args[0]
    dim = args[1] if len(args) > 1 else kwargs.get("dim", -1)
    # Another axis than `dim`, with the guard for all -inf slices or without it.
    return {"softmax-dim-ignored": [f for d in _other_dims(x, dim)
                                    for f in (lambda d=d: solution.softmax(x, dim=d),
                                              lambda d=d: nan_softmax(x, d))],
            "softmax-unstable": [lambda: naive_softmax(x, dim), lambda: guarded(naive_softmax(x, dim)),
                                 lambda: empty_guarded_naive_softmax(x, dim)],
            "softmax-global-max": [lambda: global_max_softmax(x, dim),
                                   lambda: guarded(global_max_softmax(x, dim))],
            "fully-masked-nan": [lambda: nan_softmax(x, dim)]}


FUNCTIONS = (
    GradedFunction("softmax", ("x", "dim"), axes=(("L", "S"), None), reference=references.softmax,
                   equivalents=(references.softmax_via_logsumexp,),
                   models=("softmax-dim-ignored", "softmax-unstable", "softmax-global-max", "fully-masked-nan"),
                   variants=_variants),
)

MISTAKES = (
    Mistake("fully-masked-nan", N_("某一行的所有位置都被屏蔽时，输出了 NaN，而应输出全 0。"),
            N_("-inf - (-inf) 得 NaN：行最大值为 -inf 时改用 0，并在总和为 0 时避免 0/0。"),
            composite_credit=True, honest=Honest("softmax", """
def softmax(x, dim=-1):
    exps = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return exps / exps.sum(dim=dim, keepdim=True)
""")),
    Mistake("softmax-dim-ignored",
            N_("softmax 没有沿参数 dim 指定的那一维归一化：dim 被忽略、写死成了某一维，或者默认值不是 -1。"),
            N_("max 和 sum 都用参数 dim（keepdim=True），默认值与 F.softmax 的用法一致：dim=-1。"),
            composite_credit=True, honest=Honest("softmax", """
def softmax(x, dim=-1):
    m = x.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    exps = torch.exp(x - m)
    total = exps.sum(dim=-1, keepdim=True)
    return exps / torch.where(total > 0, total, torch.ones_like(total))
""")),
    Mistake("softmax-unstable", N_("softmax 没有先减去最大值，大分数时 exp 溢出成 inf/NaN。"),
            N_("先减去沿 dim 的最大值（keepdim=True），再取 exp。"),
            composite_credit=True, honest=Honest("softmax", """
def softmax(x, dim=-1):
    exps = torch.exp(x)
    total = exps.sum(dim=dim, keepdim=True)
    return torch.where(total > 0, exps / total, torch.zeros_like(exps))
""")),
    Mistake("softmax-global-max", N_("减去的是整个张量的最大值，而不是每个切片自己的最大值；尺度不同的行会下溢成 0/0。"),
            N_("用 x.amax(dim=dim, keepdim=True)。"),
            composite_credit=True, honest=Honest("softmax", """
def softmax(x, dim=-1):
    m = x.max()
    m = m if torch.isfinite(m) else torch.zeros_like(m)
    exps = torch.exp(x - m)
    total = exps.sum(dim=dim, keepdim=True)
    return exps / torch.where(total > 0, total, torch.ones_like(total))
""")),
    Mistake("softmax-builtin",
            N_("使用了内置的 softmax（torch.softmax / F.softmax / Tensor.softmax 等），本题要求手写。"),
            N_("用 exp、减最大值和求和自己实现。")),
)
