"""Built-in results for the course's demo cells, computed here, where no student code runs.

A few provided cells show what PyTorch's own softmax and attention do
(``code_review.cell_roles`` finds them).  The runner never has a built-in it
could hand out: its tripwires raise for good (``guest/tripwires.py``).  So
when such a cell's own code calls one, the runner sends the call here as
plain data and waits for the result.

This side decides, from what it knows itself: it answers only while it waits
for a demo cell it asked the runner to execute (a graded check call, a
student's cell or the visible checks get a refusal), only the functions those
cells use, a bounded number of times per cell, on dense tensors of a bounded
size.  Whatever the student's code does during a demo cell earns nothing:
demo cells are graded nowhere.
"""
from __future__ import annotations

import math
from typing import Any, Callable

from .guest import wire

MAX_CALLS_PER_CELL = 16
MAX_INPUT_ELEMENTS = 2**20  # all tensors of one call together
MAX_SCORES = 2**22  # the attention scores one call would compute


def _functions() -> dict[str, Callable]:
    import torch
    import torch.nn.functional as F

    return {"torch.nn.functional.scaled_dot_product_attention": F.scaled_dot_product_attention,
            "torch.nn.functional.multi_head_attention_forward": F.multi_head_attention_forward,
            "torch.nn.functional.softmax": F.softmax, "torch.softmax": torch.softmax,
            "torch.Tensor.softmax": torch.Tensor.softmax}


class Refused(Exception):
    """A request this side does not compute (the runner raises ForbiddenAPIError for it)."""


class DemoBuiltins:
    """Answers the built-in calls of one demo cell's execution."""

    def __init__(self) -> None:
        self.calls = 0

    def answer(self, header: dict, blobs: list[bytes]) -> tuple[dict, list[bytes]]:
        import torch

        try:
            function = _functions().get(header.get("name"))
            if function is None or self.calls >= MAX_CALLS_PER_CELL:
                raise Refused
            self.calls += 1
            args = [_plain(wire.decode(a, blobs)) for a in _list(header.get("args"))]
            kwargs = header.get("kwargs")
            if not isinstance(kwargs, dict):
                raise Refused
            kwargs = {str(k): _plain(wire.decode(v, blobs)) for k, v in kwargs.items()}
            _check_size(header.get("name"), args, kwargs)
            seed = header.get("seed")
            if not isinstance(seed, int) or not 0 <= seed < 2**63:
                raise Refused
        except (Refused, wire.WireError, TypeError, ValueError, AttributeError):
            return refusal(), []
        try:
            with torch.random.fork_rng(devices=[]), torch.no_grad():
                torch.manual_seed(seed)  # the runner's dropout, drawn from its own seed
                value = function(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the demo's own mistake, shown as PyTorch says it
            return {"status": "error", "evalue": wire.short(f"{type(exc).__name__}: {exc}")}, []
        out = []
        return {"status": "ok", "value": wire.encode(value, out)}, out


def refusal() -> dict:
    return {"status": "refused"}


def _list(value: Any) -> list:
    if not isinstance(value, list):
        raise Refused
    return value


def _plain(value: Any) -> Any:
    """A decoded argument as a plain value: tensors with data, numbers, strings, None and containers of them."""
    if isinstance(value, wire.TensorSpec):
        if value.tensor is None:
            raise Refused
        return value.tensor
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise Refused


def _check_size(name: str, args: list, kwargs: dict) -> None:
    import torch

    tensors = [v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)]
    if sum(t.numel() for t in tensors) > MAX_INPUT_ELEMENTS:
        raise Refused
    if "attention" in name and len(tensors) >= 2:
        query, key = tensors[0], tensors[1]
        if query.dim() == 0 or key.dim() == 0:
            raise Refused
        heads = 1
        if "multi_head" in name:  # multi_head_attention_forward(query, key, value, embed_dim, num_heads, ...)
            heads = args[4] if len(args) > 4 else kwargs.get("num_heads")
        if not isinstance(heads, int) or heads < 1:
            raise Refused
        # every key axis the layouts use ([..., S, E] or [S, N, E]) counted: an upper bound
        keys = max(key.shape[-2] if key.dim() >= 2 else 1, key.shape[0])
        if math.prod(query.shape[:-1]) * keys * heads > MAX_SCORES:
            raise Refused
