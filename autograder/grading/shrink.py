"""The smallest failing example: a failing tensor case shrunk until it is a handful of numbers.

A student learns more from a 1x1x2x2 case than from the 2x3x5x7 one a check happened to use.
After the checks have run (their scores are decided and nothing here changes them), each failed
tensor comparison that recorded a `Replay` is shrunk the way Hypothesis shrinks: greedily, one step
at a time, keeping a step only if the student's function still fails the same way on it --
fewer elements along one named axis (batch, queries L, keys S, features d_k and d_v, all the
tensors that share it at once), then the values rounded to small integers.  Each candidate runs the
student's function again in the sandbox; the reference is PyTorch in this process.  A step budget
(calls, not seconds, so that the feedback is the same on every grader) and a wall-clock cap bound it.
"""
from __future__ import annotations

import time
from typing import Any, Optional

import torch

from course import FUNCTIONS

from ..i18n import _
from . import cases, tolerances
from .assertions import Replay, TensorSpec, attention_pair

MAX_CALLS = 40  # student calls per failed check
MAX_SECONDS = 3.0  # a safety cap for slow functions; the call budget is what normally ends a shrink
SMALL = 3  # values are rounded into [-SMALL, SMALL]
SHOWN = 16  # tensors up to this many elements are shown whole

# The named axes of each graded function's tensor arguments, from the right (leading dims are batch):
# the course's `GradedFunction.axes`.
AXES = {name: f.axes for name, f in FUNCTIONS.items() if f.axes}


def _labels(function, args):
    """Per argument, the axis name of each dim (None for what is not a shrinkable tensor)."""
    templates = AXES.get(function, ())
    out = []
    for position, arg in enumerate(args):
        template = templates[position] if position < len(templates) else None
        if not isinstance(arg, torch.Tensor) or template is None or arg.dim() == 0:
            out.append(None)
            continue
        trailing = list(template[-arg.dim():])
        batch = [f"b{arg.dim() - len(trailing) - i}" for i in range(arg.dim() - len(trailing))]
        out.append(batch + trailing)
    return out


def _narrow(args, labels, axis, size):
    """`args` with every dim named `axis` cut to its first `size` elements (dims of size 1 broadcast: kept)."""
    new = []
    for arg, names in zip(args, labels):
        if names is not None:
            for dim, name in enumerate(names):
                if name == axis and arg.shape[dim] > size:
                    arg = arg.narrow(dim, 0, size)
        new.append(arg)
    return tuple(new)


def _rounded(args):
    return tuple(a.round().clamp(-SMALL, SMALL) if isinstance(a, torch.Tensor) and a.is_floating_point()
                 and torch.isfinite(a).all() else a for a in args)


def _pick(value, select):
    if select is None:
        return value
    pair = attention_pair(value)
    return None if pair is None else pair[select]


class _Attempt:
    """Runs the student's function on candidates and says whether each one still fails the same way."""

    def __init__(self, student, replay: Replay, kind: str):
        self.student, self.replay, self.kind = student, replay, kind
        self.calls, self.started = 0, time.monotonic()
        self.last = None

    def exhausted(self) -> bool:
        return self.calls >= MAX_CALLS or time.monotonic() - self.started > MAX_SECONDS

    def fails(self, args) -> bool:
        try:
            expected = _pick(cases.REFERENCES[self.replay.function](*args, **self.replay.kwargs), self.replay.select)
        except Exception:  # noqa: BLE001 - a candidate PyTorch itself rejects is no example
            return False
        self.calls += 1
        result = self.student.call(self.replay.function, *args, **self.replay.kwargs)
        got = _pick(result.value, self.replay.select) if result.ok and not result.forbidden else None
        if not isinstance(got, TensorSpec) or got.missing_data() or not isinstance(expected, torch.Tensor):
            return False
        if tuple(got.shape) != tuple(expected.shape):
            kind = "shape"
        else:
            tol = cases.default_tolerance(self.replay.function, args, self.replay.kwargs, self.replay.select) \
                or tolerances.floor_for(torch.float64)
            kind = "value" if not tolerances.close(got.tensor, expected, tol) else ""
        if kind != self.kind:
            return False
        self.last = (args, got.tensor, expected)
        return True


def shrink(student, replay: Replay) -> Optional[dict]:
    """The example to show for a failed comparison: shrunk if possible within the budget, else the original
    with a note; None when the original call cannot be replayed (it no longer fails the same way)."""
    for kind in ("value", "shape"):
        attempt = _Attempt(student, replay, kind)
        if attempt.fails(replay.args):
            break
    else:
        return None
    args, labels = replay.args, _labels(replay.function, replay.args)
    axes = list(dict.fromkeys(name for names in labels if names for name in names))
    progress = True
    while progress and not attempt.exhausted():
        progress = False
        for axis in axes:
            sizes = {a.shape[d] for a, names in zip(args, labels) if names for d, n in enumerate(names) if n == axis}
            current = max(sizes, default=1)
            for size in dict.fromkeys((1, current // 2, current - 1)):
                if 0 < size < current and not attempt.exhausted():
                    candidate = _narrow(args, labels, axis, size)
                    if attempt.fails(candidate):
                        args, progress = candidate, True
                        break
    if not attempt.exhausted() and attempt.fails(_rounded(args)):
        args = _rounded(args)
    shown_args, got, expected = attempt.last  # set by the last candidate that failed: the one kept
    example = {_("输入"): _describe(replay.function, shown_args), _("你的输出"): _show(got),
               _("期望输出"): _show(expected)}
    before, after = _shape_text(replay.args), _shape_text(shown_args)
    if before != after:
        example[_("缩小")] = _("这个失败的例子已自动缩小（原来的输入是 {shapes}）").format(shapes=before)
    elif shown_args is not replay.args:
        example[_("缩小")] = _("这个失败的例子的数值已自动化简为小整数（形状不能再小）")
    else:
        example[_("缩小")] = _("没能在时限内把这个例子缩小，显示的是原始输入")
    return example


def _shape_text(args):
    return _("、").join("×".join(map(str, a.shape)) or _("标量") for a in args if isinstance(a, torch.Tensor))


def _describe(function, args) -> str:
    labels = FUNCTIONS[function].parameters if function in FUNCTIONS else ()
    parts = []
    for position, arg in enumerate(args):
        name = labels[position] if position < len(labels) else f"arg{position}"
        parts.append(f"{name}={_show(arg) if isinstance(arg, torch.Tensor) else repr(arg)}")
    return _("，").join(parts)


def _show(value: Any) -> str:
    """A tensor as its dtype, shape and (when small) its values, rounded to 4 significant digits."""
    if not isinstance(value, torch.Tensor):
        return repr(value)
    head = f"{str(value.dtype).replace('torch.', '')}{list(value.shape)}"
    if value.numel() > SHOWN:
        return head
    if value.dtype == torch.bool:
        return f"{head} {value.tolist()}"
    return f"{head} {_rounded_list(value.to(torch.float64).tolist())}"


def _rounded_list(values):
    if isinstance(values, list):
        return "[" + ", ".join(_rounded_list(v) for v in values) + "]"
    return f"{values:.4g}"
