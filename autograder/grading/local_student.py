"""An in-process stand-in for `StudentSession`, for trusted code only.

The hidden checks talk to a "student" through `call` and `get`.  Grading
always uses the sandboxed session; this class runs functions from a plain
namespace in the current process, which is right only for code we trust:
the reference solution and our own mutants (unit tests, `make gpu-check`).
Results still go through the wire encoding, so checks see exactly the data
shapes they see in real grading.  `device_map` lets a CPU-only machine walk
the CUDA code path (e.g. {"cuda": "cpu"}).
"""
from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Optional

import torch

from ..notebook.cells import grade_id, is_answer_cell
from ..sandbox.guest import wire
from ..sandbox.session import CallResult


class LocalStudent:
    def __init__(self, namespace: Mapping[str, Any], device_map: Optional[dict[str, str]] = None) -> None:
        self.namespace = dict(namespace)
        self.device_map = device_map or {}
        self.calls = []

    def _place(self, value, device):
        if isinstance(value, torch.Tensor):
            target = self.device_map.get(device, device)
            if target == "meta":
                return torch.empty(value.shape, dtype=value.dtype, device="meta")
            return value.clone().to(target)
        return value

    def call(self, fn: str, *args: Any, on_device: str = "cpu", return_args: bool = False,
             **kwargs: Any) -> CallResult:
        self.calls.append((fn, on_device))
        function = self.namespace.get(fn)
        if not callable(function):
            return CallResult("missing")
        args = [self._place(a, on_device) for a in args]
        kwargs = {k: self._place(v, on_device) for k, v in kwargs.items()}
        blobs = []
        try:
            value = function(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - reported as data, like the runner does
            return CallResult("raised", ename=type(exc).__name__, evalue=str(exc),
                              exception_names=wire.exception_names(exc))
        encoded = wire.encode(value, blobs)
        after = [wire.encode(a, blobs) if isinstance(a, torch.Tensor) else None for a in args] if return_args else []
        decoded = wire.decode(encoded, blobs)
        if isinstance(decoded, wire.TensorSpec) or isinstance(decoded, tuple):
            decoded = _relabel(decoded, self.device_map, on_device)
        return CallResult("ok", value=decoded, args_after=[wire.decode(a, blobs) for a in after])

    def get(self, name: str) -> Any:
        if name not in self.namespace:
            return None
        blobs = []
        return wire.decode(wire.encode(self.namespace[name], blobs), blobs)


def _relabel(value, device_map, requested):
    """Report mapped devices under the requested name (cpu standing in for cuda)."""
    if isinstance(value, tuple):
        return tuple(_relabel(v, device_map, requested) for v in value)
    if isinstance(value, wire.TensorSpec) and requested in device_map and value.device.startswith(
            device_map[requested]):
        value.device = requested
    return value


def reference_namespace() -> dict[str, Any]:
    """Globals of the solution notebook's setup and answer cells (trusted code), in a fresh namespace."""
    namespace = {}
    for code in _reference_code():
        exec(code, namespace)  # noqa: S102 - our own code
    return namespace


@functools.lru_cache(maxsize=1)
def _reference_code() -> tuple:
    import nbformat

    from solutions import SOLUTION_NOTEBOOK

    return tuple(compile(cell.source, grade_id(cell) or "cell", "exec")
                 for cell in nbformat.read(str(SOLUTION_NOTEBOOK), as_version=4).cells
                 if cell.cell_type == "code" and (grade_id(cell) == "setup" or is_answer_cell(cell)))
