"""The run-time tripwires: built-in softmax and attention raise wherever the student's code runs.

Armed for every cell and every check call, module level included, so nothing
the student writes can record, trace, compile or cache a built-in's work
before the checks start.  The few provided cells that demonstrate a built-in
still run armed; there, a built-in call that only the course's own code leads
to (no frame of the student's on the stack, the main thread alone) is let
through, and while it runs a profile hook arms the tripwires again for as long
as any code of the student's runs inside it (a tensor subclass, a callback).
Code that no cell and no file on disk explains (``exec`` strings,
``<timed exec>``) counts as the student's.

Two layers here, both inside the student's process (the trusted grader also
reads the source, ``static_scan.py``): wrappers around every Python entry point
of the families (namespaces by name, and the decomposition tables that hold
the functions themselves), and aten kernels that replace the built-in ones
while armed (installed and removed in about a millisecond, from a plan made
once).
"""
import functools
import importlib
import inspect
import os
import site
import sys
import threading
import warnings
from typing import Callable

from forbidden import KERNEL_KEYS, PY_NAMESPACES, blocked, forbidden_ops
from messages import FORBIDDEN_FUNCTION, FORBIDDEN_KERNEL, _


class ForbiddenAPIError(RuntimeError):
    """Raised when student code reaches a built-in softmax or attention."""


def wrap_python(runner) -> None:
    """Replace the families' Python entry points by wrappers that raise while `runner.blocking`.

    Done before any student code runs, so a reference a notebook captures (`impl = torch._refs.softmax`,
    a decomposition looked up in a table) is the wrapper too.
    """
    import torch

    def guard(name: str, original: Callable) -> Callable:
        def guarded(*args, **kwargs):
            if runner.blocking or threading.current_thread() is not threading.main_thread():
                if runner.permits(sys._getframe(1)):
                    with runner.permitted():
                        return original(*args, **kwargs)
                runner.forbidden_used.append(name)
                raise ForbiddenAPIError(_(FORBIDDEN_FUNCTION).format(name=name))
            return original(*args, **kwargs)
        return guarded

    def tripwire(name: str, original: Callable) -> Callable:
        # Torch reads some of these again through `__wrapped__` (signatures, decorators): it leads to a
        # second guard, never to the original, which a student could otherwise call unguarded.
        inner = functools.update_wrapper(guard(name, original), original)
        del inner.__wrapped__
        try:
            inner.__signature__ = inspect.signature(original)
        except (TypeError, ValueError):  # a builtin without a signature
            pass
        outer = functools.update_wrapper(guard(name, original), original)
        outer.__wrapped__ = inner
        return outer

    for path in PY_NAMESPACES:
        try:
            owner = importlib.import_module(path) if path != "torch.Tensor" else torch.Tensor
        except Exception:  # noqa: BLE001 - a namespace missing in this torch is fine
            continue
        for attr in [a for a in dir(owner) if blocked(a)]:
            value = getattr(owner, attr, None)
            if isinstance(value, type) and issubclass(value, torch.nn.Module):
                if "forward" in vars(value):
                    value.forward = tripwire(f"{path}.{attr}", value.forward)
            elif callable(value) and not isinstance(value, type):
                try:
                    setattr(owner, attr, tripwire(f"{path}.{attr}", value))
                except (AttributeError, TypeError):
                    pass
    # The decomposition tables map an op to the Python function that computes it from simpler ops:
    # a caller that takes the function from there (or traces with the table) reaches no aten kernel.
    import torch._decomp as decomp

    tables = [decomp.decomposition_table, *decomp.global_decomposition_table.values()]
    for table in {id(t): t for t in tables}.values():
        for op in [op for op in table if blocked(str(op))]:
            if callable(table[op]):
                table[op] = tripwire(f"torch._decomp.decomposition_table[{op}]", table[op])


def aten_plan() -> list:
    """(namespace, op name, dispatch key) of every built-in kernel the aten tripwire replaces."""
    import torch

    plan = []
    for qualified in forbidden_ops():
        namespace, name = qualified.split("::", 1)
        for key in KERNEL_KEYS:
            # Only where the op has a kernel: a new composite kernel next to a backend
            # one would make the dispatcher assert instead of reaching the tripwire.
            if torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key):
                plan.append((namespace, name, key))
    return plan


def install_aten(runner) -> dict:
    """Replace every planned kernel by one that raises; returns the libraries (kept alive: destroying one
    removes its kernels, which restores the built-in ones)."""
    import torch

    def aten_tripwire(op_name: str) -> Callable:
        def kernel(*args, **kwargs):
            runner.forbidden_used.append(op_name)
            raise ForbiddenAPIError(_(FORBIDDEN_KERNEL).format(name=op_name))
        return kernel

    libraries = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for namespace, name, key in runner.aten_plan():
            library = libraries.get(namespace)
            if library is None:
                library = libraries[namespace] = torch.library.Library(namespace, "IMPL")
            try:
                library.impl(name, aten_tripwire(f"{namespace}::{name}"), key)
            except Exception:  # noqa: BLE001 - op or key absent in this build
                pass
    return libraries


def _trusted_prefixes() -> tuple:
    """Where the interpreter, the installed packages and the guest files live: read-only in the sandbox."""
    places = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.abspath(__file__)),
              *site.getsitepackages(), *(p for p in sys.path if "site-packages" in p)}
    return tuple(os.path.join(os.path.realpath(p), "") for p in places if p)


TRUSTED_PREFIXES = _trusted_prefixes()


class StudentCodeWatch:
    """Which code is the student's; as a profile hook (inside a permitted built-in call), armed while it runs."""

    def __init__(self, runner) -> None:
        self.runner, self.depth, self.kinds = runner, 0, {}

    def is_students(self, filename: str) -> bool:
        """Anything but a provided cell's code or a file of the Python installation (or of the guest):
        a file the student wrote to scratch or /tmp and imported is the student's too."""
        kind = self.kinds.get(filename)
        if kind is None:
            runner = self.runner
            kind = filename in runner.student_files or not (
                filename in runner.provided_files or filename.startswith("<frozen ")
                or os.path.realpath(filename).startswith(TRUSTED_PREFIXES))
            self.kinds[filename] = kind
        return kind

    def __call__(self, frame, event, arg) -> None:
        if event == "call" and self.is_students(frame.f_code.co_filename):
            self.depth += 1
            if self.depth == 1:
                self.runner.arm()
        elif event == "return" and self.depth and self.is_students(frame.f_code.co_filename):
            self.depth -= 1
            if self.depth == 0:
                self.runner.disarm()

    def __enter__(self) -> "StudentCodeWatch":
        sys.setprofile(self)
        return self

    def __exit__(self, *exc) -> None:
        sys.setprofile(None)
        self.depth = 0
