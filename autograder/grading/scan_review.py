"""The static scan's rules for what one node means: strings used as names, attributes, imports, calls, targets.

A mixin of `static_scan._Scanner`, which walks the statements and keeps the
name graph; the tables these rules apply are in ``scan_policy.py``.
"""
import ast
import re

from ..sandbox.guest import forbidden
from .scan_ast import folded_string, is_call_to, is_ipython_call, root_name, short
from .scan_policy import (
    ATTR_CODE,
    BACKEND_FLAGS,
    FILE_ATTRIBUTES,
    FOREIGN_MAGICS,
    GRADER_STRINGS,
    HARMLESS,
    IPYTHON_CODE_METHODS,
    MODULE_MUTATORS,
    PYTHON_MAGICS,
    QUALNAME_CODE,
    RAW_MEMORY,
    SO_FILE,
    STREAM_NAMES,
    TIMING_CALLS,
    family,
    module_code,
    recording,
)


def _plain_annotation(text):
    """A string annotation that only names types (`"torch.Tensor"`, `"Literal[-1, 'causal']"`, `"int | None"`):
    evaluating it calls nothing."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return False
    plain = (ast.Expression, ast.Name, ast.Attribute, ast.Subscript, ast.Constant, ast.Tuple, ast.List, ast.BinOp,
             ast.BitOr, ast.UnaryOp, ast.USub, ast.Load, ast.Slice)
    return all(isinstance(node, plain) for node in ast.walk(tree))


# The code of a forbidden finding that is a recording API (see `scan_policy.RECORDING_CHARGED`) until
# `static_scan.scan` knows which graded function reaches it.
RECORDED = "recorded"


class ReviewRules:
    """Needs `qualname`, `module_like` and the first pass's `aliases` (see `static_scan._Scanner`)."""

    def _string(self, node, value, add, python=True, name=False):
        """Family names in strings used as names; /proc, .so and the runner's module names in any text.

        A string is a name when a lookup gets it (`getattr(torch, "softmax")`,
        `vars(F)["softmax"]`) or when it is a torch or aten path; elsewhere
        (`cache["softmax"]`, a message) it is text and costs nothing.
        """
        token = value.strip()
        path = "::" in token or token.startswith(("torch.", "aten.", "ops."))
        if python and path and not re.search(r"\s", token):
            self._recording(node, token, repr(value), add)  # importlib.import_module("torch._decomp")
        if python and not re.search(r"\s", token) and (name or path):
            parts = re.split(r"\.|::", token)
            codes = [family(p) for p in (parts if path else parts[-1:]) if p.isidentifier()]
            if any(codes):
                add(node, "forbidden", "sdpa-builtin" if "sdpa-builtin" in codes else "softmax-builtin", repr(value))
        if python and name:  # `attrgetter("__code__")`, `attrgetter("f.__globals__")` read what the attribute would
            code = next((ATTR_CODE[p] for p in token.split(".") if p in ATTR_CODE), None)
            if code:
                add(node, "review", code, repr(value))
        if value == "/proc" or re.search(r"/proc/(?!self\b)", value):
            add(node, "review", "other-processes", repr(value))
        elif re.search(r"/proc/(self|thread-self)/(task/\d+/)?(maps|smaps|mem|pagemap)", value):
            add(node, "review", "introspection", repr(value))  # the process's own memory: where a heap scan starts
        if SO_FILE.search(value):
            add(node, "review", "native-code", repr(value))
        if value in GRADER_STRINGS:
            add(node, "review", "grader-internals", repr(value))
        if token in RAW_MEMORY:  # `{"__array_interface__": ...}`, `setattr(o, "__array_interface__", ...)`
            add(node, "review", "native-code", repr(value))

    def _review_attribute(self, node, add, skip_module):
        text = ast.unparse(node)
        qual = self.qualname(node)
        if id(node) not in skip_module and self.module_like(root_name(node) or ""):
            self._recording(node, qual, text, add)
            if recording(qual):
                skip_module |= {id(n) for n in ast.walk(node.value)}
        if node.attr in ATTR_CODE:
            add(node, "review", ATTR_CODE[node.attr], text, holds=id(node) not in self.harmless_calls)
        elif qual and RAW_MEMORY & set(qual.split(".")):  # `from numpy import ctypeslib as c; c.as_array(...)`
            add(node, "review", "native-code", text)
        if self.qualname(node.value) in STREAM_NAMES and node.attr not in FILE_ATTRIBUTES:
            add(node, "review", "grader-internals", text)  # behind the runner's stream, not a file method
        if qual in QUALNAME_CODE:
            add(node, "review", QUALNAME_CODE[qual], text, holds=id(node) not in self.harmless_calls)
        if (qual and id(node) not in skip_module and module_code(qual)
                and self.module_like(root_name(node))):
            add(node, "review", module_code(qual), text,
                holds=qual not in HARMLESS and id(node) not in self.harmless_calls)
            skip_module |= {id(n) for n in ast.walk(node.value)}
        if node.attr == "events" and (is_call_to(node.value, "get_ipython")
                                      or (isinstance(node.value, ast.Name) and node.value.id in self.ipython)):
            add(node, "review", "grader-internals", text)

    def _recording(self, node, qual, text, add, followed=True):
        """A recording API (``scan_policy.recording``): flagged, and charged where a graded function reaches it.
        `followed=False` for `import torch._refs`, which binds only `torch`: each use is an attribute chain,
        judged where it is, so the import itself does not hold where no graded function reaches it.  Nor does
        a module the runner's tripwires block whole (`forbidden.BLOCKED_MODULES`: a dropout demo's `Bernoulli`
        in a scratch cell holds nothing; a graded function that reaches it is still charged)."""
        group = recording(qual)
        if group:
            add(node, "review", "recording", text)
        if group == "charged":  # what the runner blocks whole, whatever name reaches it, need not hold anywhere
            add(node, "forbidden", RECORDED, text, holds=followed and not forbidden.blocked_module(qual))

    def _review_imported_name(self, node, add):
        """A name bound by an import, used: `get_objects()` after `from gc import get_objects`."""
        qual = self.aliases.get(node.id, node.id)
        code = QUALNAME_CODE.get(qual) or module_code(qual) or ATTR_CODE.get(qual.split(".")[-1])
        if code:
            add(node, "review", code, qual if qual == node.id else f"{node.id} ({qual})",
                holds=qual not in HARMLESS and id(node) not in self.harmless_calls)

    def _review_import(self, node, add):
        """An import with a constant name only binds names: flagged, but held only where they are used
        (`_review_imported_name`, the attribute rules); a star import hides its names, so it holds."""
        for alias in node.names:
            holds = alias.name == "*"
            if isinstance(node, ast.Import):
                modules, qual = [alias.name], alias.name
            else:
                modules, qual = [node.module or ""], f"{node.module or ''}.{alias.name}"
            self._recording(node, qual if recording(qual) else modules[0], f"import {qual}", add,
                            followed=not (isinstance(node, ast.Import) and alias.asname is None))
            # the name, or a module it comes from (`from torch.nn.attention.flex_attention import create_mask`
            # reads as the attribute chain `torch.nn.attention.flex_attention.create_mask`)
            codes = [family(part) for part in qual.split(".")]
            if any(codes):
                add(node, "forbidden", "sdpa-builtin" if "sdpa-builtin" in codes else "softmax-builtin", qual)
            if module_code(modules[0]) or module_code(qual):
                add(node, "review", module_code(modules[0]) or module_code(qual), f"import {modules[0]}", holds=holds)
            if qual in QUALNAME_CODE or alias.name in ATTR_CODE:
                add(node, "review", QUALNAME_CODE.get(qual) or ATTR_CODE[alias.name], qual, holds=holds)

    def _review_call(self, node, add):
        func, args = node.func, node.args
        if self.qualname(func) in TIMING_CALLS and all(
                isinstance(a, ast.Lambda) or (isinstance(a, ast.Constant) and isinstance(a.value, (int, float)))
                for a in [*args, *(k.value for k in node.keywords)]):
            self.harmless_calls.add(id(func))  # judged when its attribute is (ast.walk reaches the call first)
        callee = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if callee in ("attrgetter", "methodcaller") and args and all(folded_string(a) is not None for a in args[:1]) \
                and (callee == "methodcaller" or all(folded_string(a) is not None for a in args)):
            self.harmless_calls.add(id(func))  # names the scan reads (and charges if they are built-ins)
        if self.qualname(func) in ("torch.load", "torch.serialization.load") and not any(
                k.arg == "weights_only" and not (isinstance(k.value, ast.Constant) and k.value.value is True)
                for k in node.keywords):
            self.harmless_calls.add(id(func))  # tensors only (weights_only, the default since torch 2.6)
        if (isinstance(func, ast.Call) and is_call_to(func, "type") and func.args) or (
                isinstance(func, ast.Attribute) and func.attr == "__class__"):
            add(node, "review", "dynamic-code", "type(…)(…)")  # type(lambda: 0)(code, globals) is FunctionType
        for keyword in node.keywords:  # `code.replace(co_names=...)`, `dict(co_consts=...)`: a code object's parts
            if keyword.arg in ATTR_CODE and keyword.arg.startswith("co_"):
                add(node, "review", ATTR_CODE[keyword.arg], f"{keyword.arg}=…")
        if isinstance(func, ast.Attribute) and func.attr in IPYTHON_CODE_METHODS and self._ipython(func.value):
            add(node, "review", "dynamic-code", f"get_ipython().{func.attr}(…)")
        if isinstance(func, ast.Name) and func.id in ("getattr", "hasattr") and len(args) >= 2 \
                and isinstance(args[1], ast.Constant) and isinstance(args[1].value, str):
            attr = args[1].value  # getattr(f, "__wrapped__") reads what f.__wrapped__ would
            if attr in ATTR_CODE:
                add(node, "review", ATTR_CODE[attr], f"{func.id}(…, {attr!r})")
            owner = self.qualname(args[0])
            if owner in STREAM_NAMES and attr not in FILE_ATTRIBUTES:
                add(node, "review", "grader-internals", f"{func.id}({owner}, {attr!r})")
            if owner and self.module_like(root_name(args[0]) or ""):
                self._recording(node, f"{owner}.{attr}", short(ast.unparse(node)), add)
        if isinstance(func, ast.Attribute) and func.attr in ("insert", "append", "extend") \
                and self.qualname(func.value) == "sys.path":
            add(node, "review", "module-edit", ast.unparse(func))  # then an import may load any file
        if (is_call_to(node, "open") or (isinstance(func, ast.Attribute) and func.attr in ("write_text", "open"))) \
                and any(isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.endswith((".py", ".pyc"))
                        for n in ast.walk(node)):
            add(node, "review", "dynamic-code", short(ast.unparse(node)))  # Python source written to disk
        if isinstance(func, ast.Name) and func.id in ("getattr", "setattr", "delattr") and args:
            if len(args) >= 2 and folded_string(args[1]) is None:  # a name the scan cannot read
                add(node, "review", "dynamic-code", f"{func.id}(…, {ast.unparse(args[1])})")
            if func.id != "getattr" and (self.qualname(args[0]) == "sys.modules"
                                         or (isinstance(args[0], ast.Name) and self.module_like(args[0].id))):
                add(node, "review", "module-edit", f"{func.id}({ast.unparse(args[0])}, …)")
        if not isinstance(func, ast.Attribute):
            return
        if func.attr in MODULE_MUTATORS and self.qualname(func.value) == "sys.modules":
            add(node, "review", "module-edit", ast.unparse(func))
        if func.attr in MODULE_MUTATORS and is_call_to(func.value, "globals", "vars"):
            add(node, "review", "dynamic-code", ast.unparse(func))
        if self.qualname(func) == "os.set_blocking" and args and (
                (isinstance(args[0], ast.Constant) and args[0].value in (0, 1, 2))
                or re.search(r"std(in|out|err)", ast.unparse(args[0]))):
            add(node, "review", "process-limits", ast.unparse(node))
        if is_ipython_call(node, "system", "getoutput"):
            command = folded_string(args[0]) if args else None
            add(node, "review", "dynamic-code", "!" + (command or "…"))  # what runs is not the line (PATH, files)
        if is_ipython_call(node, "run_line_magic", "run_cell_magic") and args:
            name = folded_string(args[0])
            unread = name in PYTHON_MAGICS and folded_string(args[-1]) is None  # a body the scan cannot splice in
            if name is None or name in FOREIGN_MAGICS or unread:
                add(node, "review", "dynamic-code", ("%%" if func.attr == "run_cell_magic" else "%") + str(name))

    def _ipython(self, node):
        """`get_ipython()`, or a name bound to it."""
        return is_call_to(node, "get_ipython") or (isinstance(node, ast.Name) and node.id in self.ipython)

    def _review_annotation(self, annotation, add):
        """A string annotation is evaluated by `typing.get_type_hints` (and `functools.singledispatch`): one
        that is more than a dotted name, or a subscript of them, is source text run."""
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str) \
                and not _plain_annotation(annotation.value):
            add(annotation, "review", "dynamic-code", repr(annotation.value))

    def _review_target(self, target, add):
        """Assignment or deletion targets: sys.modules, module attributes, globals()[...]."""
        if isinstance(target, ast.Subscript):
            if self.qualname(target.value) in ("sys.modules", "sys.path"):
                add(target, "review", "module-edit", f"{self.qualname(target.value)}[...]")
            elif is_call_to(target.value, "globals", "vars"):
                add(target, "review", "dynamic-code", f"{target.value.func.id}()[...]")
        elif isinstance(target, ast.Attribute):
            root = root_name(target)
            if self.qualname(target) in BACKEND_FLAGS:
                return  # a setting read by torch's kernels (`torch.backends.cudnn.deterministic = True`)
            if self.qualname(target) in ("sys.modules", "sys.path") or (root and self.module_like(root)):
                add(target, "review", "module-edit", ast.unparse(target))
