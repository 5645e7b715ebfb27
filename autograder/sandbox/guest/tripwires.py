"""The run-time tripwires: built-in softmax and attention raise in the runner, for good.

Installed once, in the zygote's warm-up, before any student code exists, and
never removed.  The process that runs the student's code therefore holds no
switch, no original function and no library handle that could lift them
(``docs/design/sandbox.md``, "No off switch"):

- every Python function of torch whose name is in the families gets a new
  body that hands the call to `runner.forbidden_call` (its code object is
  replaced, so every reference to it, in a module, a decomposition table, a
  closure or a decorator's ``__wrapped__``, reaches the new body);
- every other entry point of the families in the namespaces the runner
  watches (``torch.softmax``, ``Tensor.softmax``,
  ``F.scaled_dot_product_attention``, ...: functions written in C) is replaced
  there by a function that does the same; the C function itself still exists,
  but it only reaches the aten kernels;
- every aten kernel of the families is overridden by one that raises,
  registered from C++ (``kernel_tripwires.cpp``) through dispatcher libraries
  that have no Python object: nothing can deregister them, and the built-in
  kernels they override stay out of reach.

`forbidden_call` raises, unless a provided cell that demonstrates a built-in
made the call with its own code: then it asks the trusted grader for the
result, which the grader gives only while it runs such a cell
(``sandbox/demo_builtins.py``).  So a student's code that fakes the runner's
view of who is calling gains nothing: the decision is the grader's.
"""
import gc
import importlib
import os
import site
import sys
import types
import warnings
from typing import Callable

from forbidden import (
    BLOCKED_ENTRY_POINTS,
    KERNEL_KEYS,
    PY_NAMESPACES,
    blocked,
    blocked_module,
    code_of_blocked,
    forbidden_ops,
)
from messages import FORBIDDEN_KERNEL, _

# The global each replaced body calls, set in its module's namespace (a name outside the families).
HOOK = "__course_forbidden_call__"
HERE = os.path.dirname(os.path.abspath(__file__))
NEW_BODY = os.path.join(HERE, "tripwire-")  # the file name of every new body: tripwire-<module>.<name>
LIBRARIES = ("torch", "functorch")  # whose Python functions of the families get a new body


class ForbiddenAPIError(RuntimeError):
    """Raised when student code reaches a built-in softmax or attention."""


def install(runner) -> None:
    """Make every entry point of the families call `runner.forbidden_call` and every kernel raise, for good.

    Called in the zygote's warm-up, before the collector freezes what it imported: the functions are found
    by walking every object of the process, which frozen objects would escape.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path in PY_NAMESPACES:  # their functions must exist to be found
            if path != "torch.Tensor":
                try:
                    importlib.import_module(path)
                except Exception:  # noqa: BLE001 - a namespace missing in this torch is fine
                    pass
        hook = _hook(runner)
        _HOOKS[:] = [hook]
        for fn in [o for o in gc.get_objects() if isinstance(o, types.FunctionType)]:
            # A method of a softmax class computes one whatever its own name (`SoftmaxTransform._call`).
            if _in_library(fn) and (blocked(fn.__name__) or code_of_blocked(fn.__qualname__) == "softmax-builtin"
                                    or blocked_module(fn.__module__)):
                replace_body(fn, hook)
        _replace_entry_points(hook)
        _override_kernels(runner)


def _hook(runner) -> Callable:
    """What every new body calls, set in its module's globals: a plain function (a bound method's
    `__self__` would hand any module's reader the runner; a closure's cell is read only by means that hold)."""
    forbidden_call = runner.forbidden_call

    def course_forbidden_call(name, args, kwargs):
        return forbidden_call(name, args, kwargs)
    return course_forbidden_call


def _in_library(fn: types.FunctionType) -> bool:
    module = fn.__module__
    return isinstance(module, str) and module.split(".")[0] in LIBRARIES


def replace_body(fn: types.FunctionType, hook: Callable) -> None:
    """Give `fn` a body that returns `hook(name, args, kwargs)`; its closure cells stay (Python checks their
    number) but the new body reads none of them."""
    name = f"{fn.__module__}.{fn.__qualname__}"
    freevars = fn.__code__.co_freevars
    lines = ["def outer():", *(f"    {var} = None" for var in freevars), "    def body(*args, **kwargs):"]
    if freevars:
        lines.append(f"        ({', '.join(freevars)},)")
    lines += [f"        return {HOOK}({name!r}, args, kwargs)", "    return body"]
    namespace = {}
    # Named as a file of the guest: not the student's code, and left out of the tracebacks a student sees.
    exec(compile("\n".join(lines), NEW_BODY + name, "exec"), namespace)  # noqa: S102
    code = namespace["outer"]().__code__
    if code.co_freevars != freevars:
        raise RuntimeError(f"cannot give {name} a new body: closure {freevars} became {code.co_freevars}")
    fn.__globals__[HOOK] = hook
    fn.__code__ = code
    fn.__defaults__ = fn.__kwdefaults__ = None


def _replace_entry_points(hook: Callable) -> None:
    """Entry points of the families that are not Python functions (those have a new body already)."""
    import torch
    import torch._decomp as decomp

    for path in PY_NAMESPACES:
        try:
            owner = importlib.import_module(path) if path != "torch.Tensor" else torch.Tensor
        except Exception:  # noqa: BLE001 - a namespace missing in this torch is fine
            continue
        for attr in [a for a in dir(owner) if blocked(a)]:
            value = getattr(owner, attr, None)
            if callable(value) and not isinstance(value, (type, types.FunctionType)):
                try:
                    setattr(owner, attr, entry_point(f"{path}.{attr}", hook))
                except (AttributeError, TypeError):
                    pass
    for path, attrs in BLOCKED_ENTRY_POINTS.items():  # a Python function gets a new body, a C one a stand-in
        owner = sys.modules.get(path)
        for attr in attrs:
            value = getattr(owner, attr, None)
            if isinstance(value, types.FunctionType):
                replace_body(value, hook)
            elif callable(value) and not isinstance(value, type):
                setattr(owner, attr, entry_point(f"{path}.{attr}", hook))
    # The decomposition tables map an op to the Python function that computes it from simpler ops.
    tables = [decomp.decomposition_table, *decomp.global_decomposition_table.values()]
    for table in {id(t): t for t in tables}.values():
        for op in [op for op in table if blocked(str(op))]:
            if callable(table[op]) and not isinstance(table[op], types.FunctionType):
                table[op] = entry_point(f"torch._decomp.decomposition_table[{op}]", hook)


def entry_point(name: str, hook: Callable) -> Callable:
    """A function in place of a C entry point: it holds the name and the hook, never the original."""
    def guarded(*args, **kwargs):
        return hook(name, args, kwargs)
    guarded.__name__ = guarded.__qualname__ = name.rsplit(".", 1)[-1]
    return guarded


def aten_plan(ops=None) -> list:
    """(namespace, op name, dispatch key) of every built-in kernel the aten tripwire replaces (of `ops`,
    default every op of the families registered now)."""
    import torch

    plan = []
    for qualified in forbidden_ops() if ops is None else ops:
        namespace, name = qualified.split("::", 1)
        for key in KERNEL_KEYS:
            # Only where the op has a kernel: a new composite kernel next to a backend one would make the
            # dispatcher assert instead of reaching the tripwire.  No meta kernel over a composite one (what
            # torch.library refuses too).
            if torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key) and not (
                    key == "Meta" and torch._C._dispatch_has_kernel_for_dispatch_key(
                        qualified, "CompositeImplicitAutograd")):
                plan.append((namespace, name, key))
    return plan


def _override_kernels(runner) -> None:
    """Override every planned kernel by one that raises, registered from C++ (``kernel_tripwires.cpp``):
    the dispatcher libraries that hold them have no Python object, so nothing can deregister them."""
    import kernel_tripwires  # built on the trusted side, mounted beside this file

    def report(op_name: str) -> None:
        runner.forbidden_used.append(op_name)
        raise ForbiddenAPIError(_(FORBIDDEN_KERNEL).format(name=op_name))

    ops = forbidden_ops()
    plan = aten_plan(ops)
    registered = kernel_tripwires.install(plan, report)
    if not registered and plan:
        raise RuntimeError("no kernel tripwire could be registered")
    _COVERED.update(ops)
    _SEEN[:] = list(kernel_tripwires.counts())


_HOOKS = []  # the hook the new bodies call (one, made at install)
_COVERED = set()  # ops of the families with tripwire kernels
_SEEN = [0, 0]  # ops registered and modules imported (`kernel_tripwires.counts()`) at the last look


def _cover_late_functions(hook: Callable) -> list:
    """New bodies for the functions of the families (and methods of softmax classes) of torch created since
    start-up: a module imported later defines them.  The warm-up's objects are frozen (out of the
    collector's lists), so the walk sees only what was made since, wherever it is held (a module dropped
    from sys.modules again included).  Returns those that could not be given one, to be reported."""
    failed = []
    for fn in [o for o in gc.get_objects() if isinstance(o, types.FunctionType)]:
        if _in_library(fn) and not fn.__code__.co_filename.startswith(NEW_BODY) and (
                blocked(fn.__name__) or code_of_blocked(fn.__qualname__) == "softmax-builtin"):
            try:
                replace_body(fn, hook)
            except Exception:  # noqa: BLE001 - whatever stops it, the function is reported instead
                failed.append(f"function {fn.__module__}.{fn.__qualname__} (no new body)"[:160])
    return failed


def cover_late_ops(runner=None) -> list:
    """Ops of the families registered since the tripwires were installed (a module imported later registers
    its own, as `torch._inductor.inductor_prims` does `prims::prepare_softmax_online`): each gets tripwire
    kernels now, and is returned, for the grader to hold what may have used it before.  Ops come from
    registrations, counted in C++ (`kernel_tripwires.counts()`), so the registry is read only when one was
    made; the Python functions of the families in the modules imported since (`runner` given) get new bodies
    whenever an import was counted."""
    import kernel_tripwires

    ops, imports = kernel_tripwires.counts()  # kept in C++: no Python code can hold them back
    if [ops, imports] == _SEEN:
        return []
    failed = []
    if runner is not None and imports != _SEEN[1]:
        failed = _cover_late_functions(_HOOKS[0] if _HOOKS else _hook(runner))
    if ops == _SEEN[0]:
        _SEEN[1] = imports
        return failed
    _SEEN[:] = [ops, imports]
    late = [op for op in forbidden_ops() if op not in _COVERED]
    if late:
        kernel_tripwires.extend(aten_plan(late))
        _COVERED.update(late)
    return late + failed


def _trusted_prefixes() -> tuple:
    """Where the interpreter, the installed packages and the guest files live: read-only in the sandbox."""
    places = {sys.prefix, sys.base_prefix, sys.exec_prefix, HERE,
              *site.getsitepackages(), *(p for p in sys.path if "site-packages" in p)}
    return tuple(os.path.join(os.path.realpath(p), "") for p in places if p)


TRUSTED_PREFIXES = _trusted_prefixes()


class StudentCode:
    """Which code is the student's: anything but a provided cell's code or a file of the Python installation
    (or of the guest); a file the student wrote to scratch or /tmp and imported is the student's too."""

    def __init__(self, runner) -> None:
        self.runner, self.kinds = runner, {}

    def __call__(self, filename: str) -> bool:
        kind = self.kinds.get(filename)
        if kind is None:
            runner = self.runner
            kind = filename in runner.student_files or not (
                filename in runner.provided_files or filename.startswith("<frozen ")
                or os.path.realpath(filename).startswith(TRUSTED_PREFIXES))
            self.kinds[filename] = kind
        return kind
