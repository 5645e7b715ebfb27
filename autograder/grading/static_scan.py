"""A static read of the student's own code cells, done by the trusted grader.

The run-time tripwires live inside the student's process, which the student
controls, so the grader also reads the code before grading, with `ast`:

1. *forbidden*: uses of a built-in softmax or attention (found by name
   pattern, not by a hand list) that a graded function can reach through the
   notebook's top-level names, including names a value is stored into
   (`cache.append(torch.softmax)`, walrus, setattr).  An attribute the
   student defines (`Ops.softmax`, `self.softmax_dim`) is theirs, and a
   string is a name only where a lookup takes it (`getattr`, `vars(m)[...]`)
   or it is a torch/aten path; and uses of the APIs that record, trace or look
   up another function's work (``scan_policy.RECORDING_CHARGED``: make_fx,
   ``torch._decomp``'s tables, ``torch.distributions``, ...), which can replay a
   built-in's work with no forbidden op left in it;
2. *review*: code that tampers with the grader or the process (frame and gc
   walks, module edits, native code, process limits, other pids, dynamic code,
   the runner's internals), anywhere, for a person to look at.

Only a plain reading: deliberate obfuscation can hide from it (the run-time
tripwire is the second layer), but the dynamic tricks it takes are flagged.
Standard library and IPython only; torch is never imported here.
"""
import ast
import dataclasses
import re
from dataclasses import dataclass
from typing import Iterable, Optional

from course import FUNCTIONS

from ..i18n import _
from .scan_ast import (
    GetattrAsAttribute,
    MatchAsAssignments,
    call_arguments,
    flat_targets,
    folded_string,
    immutable_names,
    is_call_to,
    is_ipython_call,
    is_lookup_owner,
    names_read,
    parse_cell,
    root_name,
    short,
    stored_into,
    top_names,
)
from .scan_policy import (
    DISPLAY_CALLS,
    DISPLAY_METHODS,
    HOLDING,
    LABELS,
    LOOKUP_BUILTINS,
    LOOKUP_CALLS,
    NAME_CODE,
    RAW_MEMORY,
    RECONSTRUCTION,
    STAR_NAMES,
    TOP_LEVEL_MODULES,
    family,
    module_code,
)
from .scan_review import RECORDED, ReviewRules

# The graded functions that compute attention (the course's `computes_attention`).
ATTENTION_FUNCTIONS = tuple(name for name, f in FUNCTIONS.items() if f.computes_attention)
# Source one scan reads: it runs in the trusted process, outside the sandbox's time limits, at about 10 s a MiB.
# The release has about 35,000 characters of code; past this, the rest is not read and the notebook is held
# for a person (a red-team notebook of 2 MiB of code held the check service's grader for minutes).
MAX_SCANNED_CHARS = 2 * 2**20


@dataclass(frozen=True)
class Finding:
    cell: int          # index into the `sources` list given to scan()
    line: int          # 1-based line within that cell source
    kind: str          # "forbidden" or "review"
    code: str          # forbidden: "softmax-builtin" | "sdpa-builtin"; review: a category slug
    detail: str        # what was seen, e.g. "torch.nn.functional.softmax", "gc.get_objects"
    binding: str | None  # top-level name whose body/RHS contains it, None for bare top-level code
    # review: whether it holds the notebook's points until a person has read it (`ScanResult.held`).
    # False for a constant import (its names are judged where they are used) and for a line that only
    # displays what `dir`/`vars` find.
    holds: bool = True


@dataclass
class ScanResult:
    findings: list[Finding]                 # everything found, in order
    forbidden: dict[str, list[Finding]]     # graded function -> forbidden findings reachable from it
    review: list[Finding]                   # all review findings (anywhere in student code)
    unparsable: list[int]                   # cells that did not parse (skipped)

    @property
    def held(self) -> list[Finding]:
        """Review findings the grader cannot read to the end: while there is one, no part's points count
        until a person has read it (``scan_policy.HOLDING``)."""
        return [f for f in self.review if f.holds and f.code in HOLDING]


@dataclass
class _Binding:
    findings: list  # forbidden findings inside it
    refs: set       # global names it reads


def describe(finding: Finding) -> str:
    """One short Chinese line for students and instructors (cells counted from 1)."""
    label = _(LABELS[finding.code]) if finding.code in LABELS else finding.code
    return _("第 {cell} 个单元格第 {line} 行：{detail}（{label}）").format(
        cell=finding.cell + 1, line=finding.line, detail=finding.detail, label=label)


def scan(sources: list[str], functions: Iterable[str], parse=parse_cell) -> ScanResult:
    """Scan the student's code cells (in notebook order) for the graded `functions`; `parse` reads one
    source (a cell, with IPython's syntax, by default) into a tree, and raises what it cannot read."""
    trees, unparsable, unread = {}, [], None
    budget = MAX_SCANNED_CHARS
    failed = []
    for index, source in enumerate(sources):
        budget -= len(source)
        if budget < 0:
            unread = index
            break
        try:
            tree = parse(source)
        except Exception as exc:  # noqa: BLE001 - SyntaxError, RecursionError, MemoryError (the parser's stack
            unparsable.append(index)  # or the reader's cap), a transformer failing on odd input: all hold
            failed.append((index, exc))
            continue
        trees[index] = GetattrAsAttribute().visit(MatchAsAssignments().visit(tree))
    scanner = _Scanner(list(trees.values()))
    for index, tree in trees.items():
        scanner.cell = index
        for stmt in tree.body:
            try:
                scanner.statement(stmt, conditional=False)
            except (RecursionError, ValueError, MemoryError):  # pathological code must not stop grading
                scanner._add(stmt, "review", "dynamic-code", _("这一句过于复杂，静态检查无法读完"), None)
    for index, exc in failed:
        # What the grader cannot parse holds: the runner may have run it (an earlier cell's
        # `sys.setrecursionlimit`, a `__future__` import, an IPython transformer), and a red-team notebook hid the
        # built-in softmax in a cell nested past the grader's recursion limit.
        line = getattr(exc, "lineno", None) if isinstance(exc, SyntaxError) else None
        scanner.findings.append(Finding(index, line if isinstance(line, int) and line > 0 else 1, "review",
                                        "dynamic-code", _("评分程序解析不了这段代码（{error}），没有读它").format(
                                            error=type(exc).__name__), None))
    if unread is not None:
        scanner.findings.append(Finding(unread, 1, "review", "dynamic-code", _(
            "从这里起的代码超过了静态检查读的 {limit} 个字符，没有读").format(limit=MAX_SCANNED_CHARS), None))
    forbidden = {name: scanner.reachable(name) for name in functions}
    reached = {id(f) for found in forbidden.values() for f in found}
    for finding in [f for f in scanner.findings if f.code == RECORDED and f.holds and id(f) not in reached]:
        # A recording API that replays a built-in's work (`RECORDING_CHARGED`) has no tripwire behind it: where
        # no graded function is seen to reach it, it may reach one by a route no name links (an argument a
        # helper stores, an exception's args: red team), so it holds.
        scanner.findings.append(dataclasses.replace(finding, kind="review", code="recording-unfollowed"))
    if any(f.code in ("process-creation", "threads") for f in scanner.findings):
        # Another process or thread runs code outside the checks' calls, and hands back what it made
        # through pipes, sockets or objects that no name links: then a forbidden use anywhere counts
        # for every function.
        anywhere = [f for f in scanner.findings if f.kind == "forbidden"]
        forbidden = {name: sorted({id(f): f for f in found + anywhere}.values(),
                                  key=lambda f: (f.cell, f.line, f.code, f.detail))
                     for name, found in forbidden.items()}
    # A recording API is charged as the built-in softmax where any function but attention reaches it
    # (attention reaches what its softmax does), and as built-in attention where only attention does.
    softmaxish = {id(f) for name, found in forbidden.items() if name not in ATTENTION_FUNCTIONS for f in found}
    forbidden = {name: [dataclasses.replace(f, code="softmax-builtin" if id(f) in softmaxish or
                                            name not in ATTENTION_FUNCTIONS else "sdpa-builtin")
                        if f.code == RECORDED else f for f in found]
                 for name, found in forbidden.items()}
    review = [f for f in scanner.findings if f.kind == "review"]
    return ScanResult(scanner.findings, forbidden, review, unparsable)


def _displays_only(expr) -> bool:
    """An expression statement that only shows what `dir`/`vars` find: `dir(torch)`, `print(sorted(vars(m)))`,
    `[n for n in dir(torch) if "max" in n]`.  Reads, compares and string methods only: no other call, no
    walrus (it would bind a name), no lambda."""
    def plain(node):
        if isinstance(node, ast.Call):
            func = node.func
            called = (isinstance(func, ast.Name) and func.id in DISPLAY_CALLS) or (
                isinstance(func, ast.Attribute) and func.attr in DISPLAY_METHODS and plain(func.value))
            return called and all(plain(a) for a in node.args) and all(plain(k.value) for k in node.keywords)
        if isinstance(node, (ast.NamedExpr, ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom)):
            return False
        if isinstance(node, ast.Attribute):
            return plain(node.value)
        return all(plain(child) for child in ast.iter_child_nodes(node))

    return plain(expr) and any(is_call_to(n, "dir", "vars", "globals", "locals") for n in ast.walk(expr))


# -- the scanner ---------------------------------------------------------------------

class _Scanner(ReviewRules):
    """Walks top-level statements in notebook order, recording findings and the name graph."""

    def __init__(self, trees: list[ast.Module]) -> None:
        self.cell = 0
        self.harmless_calls = set()  # ids of callee nodes whose call is readable (`timeit.timeit(lambda: ...)`)
        self.findings, self.seen, self.position = [], {}, {}
        self.bindings = {}  # name -> [_Binding] in effect (replaced or unioned in notebook order)
        self.aliases, self.imported, self.module_vars, self.ipython, self.bound = {}, set(), set(), set(), set()
        self.docstrings, self.magic_text = set(), set()  # strings that are not Python string literals
        self.own_attributes = set()  # attribute names the student defines (methods, self.x = ...)
        self.looked_up = set()  # ids of string nodes used as names by a run-time lookup
        self.called = set()  # ids of Name nodes in call position
        self.top_level = {n for tree in trees for stmt in tree.body for n in top_names(stmt)}
        self.defined = {stmt.name for tree in trees for stmt in ast.walk(tree)
                        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        self.immutable = immutable_names(trees)  # `NEG_INF = float("-inf")`: no call can store into them
        for node in (n for tree in trees for n in ast.walk(tree)):
            self._learn(node)
        for node in (n for tree in trees for n in ast.walk(tree)):
            self._learn_module_alias(node)

    def _learn_module_alias(self, node):
        """`_t = torch`, `_r = torch._refs`, `_r = getattr(torch, "_refs")`: a name the student binds to a
        module (or a module's attribute) is read as that module."""
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            return
        value, suffix = node.value, ""
        if is_call_to(value, "getattr") and len(value.args) == 2 and isinstance(value.args[1], ast.Constant) \
                and isinstance(value.args[1].value, str):
            value, suffix = value.args[0], "." + value.args[1].value
        qual = self.qualname(value) if isinstance(value, (ast.Name, ast.Attribute)) else None
        if qual and self.module_like(root_name(value) or ""):
            self.aliases[node.targets[0].id] = qual + suffix
            self.module_vars.add(node.targets[0].id)

    def _learn(self, node):
        """First pass over all cells: aliases, module-like names, docstrings, magic arguments."""
        if isinstance(node, ast.Call):
            self.called.add(id(node.func))
            # SimpleNamespace(softmax=...), dict(softmax=...), namedtuple("Ops", "softmax"): the student's names
            self.own_attributes |= {k.arg for k in node.keywords if k.arg}
            if (getattr(node.func, "id", None) or getattr(node.func, "attr", None)) in ("namedtuple",
                                                                                         "make_dataclass"):
                for arg in node.args[1:2]:
                    for n in ast.walk(arg):
                        if isinstance(n, ast.Constant) and isinstance(n.value, str):
                            self.own_attributes |= set(re.split(r"[\s,]+", n.value))
            callee = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if callee in LOOKUP_CALLS and not (callee in ("get", "__getitem__") and not is_lookup_owner(node.func)):
                self.looked_up |= {id(n) for arg in node.args for n in ast.walk(arg)}
        if isinstance(node, ast.Subscript) and is_lookup_owner(node):
            self.looked_up |= {id(n) for n in ast.walk(node.slice)}
        if is_ipython_call(node, "run_line_magic", "run_cell_magic", "system", "getoutput"):
            self.magic_text |= {id(arg) for arg in node.args}
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                self.docstrings.add(id(first.value))
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                self.aliases[bound] = alias.name if alias.asname else bound
                self.imported.add(bound)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name != "*":
                    self.aliases[alias.asname or alias.name] = f"{node.module or ''}.{alias.name}".lstrip(".")
                    self.imported.add(alias.asname or alias.name)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            self.bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.bound.add(node.name)
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        self.own_attributes.add(item.name)
                    elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                        targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                        self.own_attributes |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            self.own_attributes.add(node.attr)
        elif isinstance(node, ast.arg):
            self.bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            self.bound.add(node.name)
        elif isinstance(node, ast.Assign):
            value = node.value
            names = {t.id for t in node.targets if isinstance(t, ast.Name)}
            if is_call_to(value, "get_ipython"):
                self.ipython |= names
            imported = is_call_to(value, "__import__") or (
                isinstance(value, ast.Call) and self.qualname(value.func) == "importlib.import_module")
            if imported or (isinstance(value, ast.Subscript) and self.qualname(value.value) == "sys.modules"):
                self.module_vars |= names

    def qualname(self, node: ast.AST) -> Optional[str]:
        """`os.kill` for `o.kill` after `import os as o`; None unless a plain dotted name."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        names = ".".join([self.aliases.get(node.id, node.id), *reversed(parts)]).split(".")
        if self.module_like(node.id):
            # A module reached as another module's attribute is that module (`F.torch.distributions` is
            # `torch.distributions`, `torch.os.popen` is `os.popen`): every table is keyed by a module's own
            # name (red team: `F.torch.distributions.Categorical`, `torch.os.popen` matched none)
            for index in range(len(names) - 2, 0, -1):
                if names[index] in TOP_LEVEL_MODULES:
                    return ".".join(names[index:])
        return ".".join(names)

    def _owns(self, attribute):
        """Whether `attribute`'s object is the student's: self/cls, or a module-level name they made.

        A parameter (`x.softmax` on a tensor argument) or torch itself never is.
        """
        root = attribute.value
        while isinstance(root, (ast.Attribute, ast.Subscript, ast.Call)):
            root = root.func if isinstance(root, ast.Call) else root.value
        if not isinstance(root, ast.Name):
            return False
        return root.id in ("self", "cls") or (root.id in self.top_level and not self.module_like(root.id))

    def module_like(self, name: str) -> bool:
        """Imported, taken from sys.modules, or not created by the student (the setup cell's torch, F)."""
        return name in self.imported or name in self.module_vars or name not in self.bound

    # -- top level: bindings -----------------------------------------------------

    def statement(self, stmt: ast.stmt, conditional: bool) -> None:
        """Record one top-level statement (compound ones: their bodies count as top level, conditionally)."""
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            return self._import(stmt, conditional)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return self._bind([stmt], [stmt.name], [], conditional)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            flat = [t for target in targets for t in flat_targets(target)]
            names = [t.id for t in flat if isinstance(t, ast.Name)]
            roots = [root_name(t) for t in flat if not isinstance(t, ast.Name) and root_name(t)]
            roots += [t.slice.value for t in flat if isinstance(t, ast.Subscript)  # globals()["sm"] = ...
                      and is_call_to(t.value, "globals", "vars") and isinstance(t.slice, ast.Constant)
                      and isinstance(t.slice.value, str)]
            if isinstance(stmt, ast.AugAssign) or (isinstance(stmt, ast.AnnAssign) and stmt.value is None):
                names, roots = [], names + roots  # reads the old value: adds to it
            return self._bind([stmt], names, roots, conditional)
        body_fields = [(f, v) for f, v in ast.iter_fields(stmt) if isinstance(v, list) and v
                       and isinstance(v[0], (ast.stmt, ast.ExceptHandler, ast.match_case))]
        if not body_fields:
            return self._bind([stmt], [], [], conditional)
        body_ids = {id(v) for _, v in body_fields}
        header = [v for _, v in ast.iter_fields(stmt) if id(v) not in body_ids]
        header = [n for v in header for n in (v if isinstance(v, list) else [v]) if isinstance(n, ast.AST)]
        owners = []
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            owners = [t.id for t in flat_targets(stmt.target) if isinstance(t, ast.Name)]
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            owners = [n.id for item in stmt.items if item.optional_vars is not None
                      for n in ast.walk(item.optional_vars) if isinstance(n, ast.Name)]
        self._bind(header, [], owners, True)
        for _field, block in body_fields:
            for child in block:
                if isinstance(child, (ast.ExceptHandler, ast.match_case)):
                    parts = [p for p in (getattr(child, "type", None), getattr(child, "pattern", None),
                                         getattr(child, "guard", None)) if p is not None]
                    self._bind(parts, [], [], True)
                    for inner in child.body:
                        self.statement(inner, True)
                else:
                    self.statement(child, True)

    def _import(self, stmt, conditional):
        """Each alias of a top-level import is its own binding (a star import from torch binds the families)."""
        for alias in stmt.names:
            if alias.name == "*":
                if (stmt.module or "").split(".")[0] == "torch":
                    for name in STAR_NAMES:
                        found = self._add(stmt, "forbidden", family(name), f"{stmt.module}.{name} (import *)", name)
                        self._register(name, _Binding([found], set()), conditional)
                self._inspect([stmt], None)
                continue
            single = type(stmt)(names=[alias], **{k: v for k, v in ast.iter_fields(stmt) if k != "names"})
            ast.copy_location(single, stmt)
            if isinstance(stmt, ast.Import) and not alias.asname and "." in alias.name:
                self._inspect([single], None)  # `import torch.x.softmax` binds `torch`, not the softmax
                self._register(alias.name.split(".")[0], _Binding([], set()), conditional)
            else:
                self._bind([single], [alias.asname or alias.name.split(".")[0]], [], conditional)

    def _bind(self, nodes, names, extra_owners, conditional):
        """Inspect `nodes`; `names` get a new binding, `extra_owners` have theirs extended.

        A function that declares `global x` may rebind x when called, so it extends x too.
        """
        extra_owners = extra_owners + [name for node in nodes for n in ast.walk(node)
                                       if isinstance(n, ast.Global) for name in n.names]
        extra_owners += [name for name in stored_into(nodes) if name not in names]
        # `fill(registry)`: the callee may store into its argument (a function or class passed is not filled)
        extra_owners += [name for name in call_arguments(nodes) if name not in names + extra_owners
                         and name not in self.defined and name not in self.immutable]
        owner = (names + extra_owners)[0] if names + extra_owners else None
        found = [f for f in self._inspect(nodes, owner) if f.kind == "forbidden"]
        reads = names_read(nodes)
        for name in names:
            self._register(name, _Binding(found, reads), conditional)
        for name in extra_owners:
            self._register(name, _Binding(found, reads), True)

    def _register(self, name, binding, conditional):
        if conditional:
            self.bindings.setdefault(name, []).append(binding)
        else:
            self.bindings[name] = [binding]

    def reachable(self, name: str) -> list[Finding]:
        """Forbidden findings of `name`'s bindings and of every binding they reach by name."""
        found, seen, todo = {}, {name}, [name]
        while todo:
            for binding in self.bindings.get(todo.pop(), []):
                found.update((id(f), f) for f in binding.findings)
                fresh = binding.refs - seen
                seen |= fresh
                todo.extend(fresh)
        return sorted(found.values(), key=lambda f: (f.cell, f.line, f.code, f.detail))

    # -- findings ----------------------------------------------------------------

    def _add(self, node, kind, code, detail, binding, holds=True):
        finding = Finding(self.cell, getattr(node, "lineno", 1), kind, code, short(detail), binding, holds)
        key = (finding.cell, finding.line, finding.code, finding.detail)
        if key not in self.seen:
            self.seen[key] = finding
            self.position[key] = len(self.findings)
            self.findings.append(finding)
        elif holds and not self.seen[key].holds:  # the same text seen again where it does hold (by its position:
            self.findings[self.position[key]] = self.seen[key] = finding  # a search was quadratic, red team)
        return self.seen[key]

    def _inspect(self, nodes, owner):
        """Every finding inside `nodes` (all depths); returns them."""
        out, skip_forbidden, skip_module = [], set(), set()
        attribute_owners, constant_keys = set(), set()  # Names judged with their attribute; `m["key"]`
        displayed = set()  # nodes of an expression statement that only displays (`print(dir(x))` anywhere)

        def add(node, kind, code, detail, holds=True):
            out.append(self._add(node, kind, code, detail, owner, holds))

        for node in (n for top in nodes for n in ast.walk(top)):
            if isinstance(node, ast.Expr) and _displays_only(node.value):
                displayed |= {id(n) for n in ast.walk(node.value)}
            if isinstance(node, ast.Attribute):
                attribute_owners.add(id(node.value))
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                    and isinstance(node.slice.value, str):
                constant_keys.add(id(node.value))
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in self.imported \
                    and id(node) not in attribute_owners:
                self._review_imported_name(node, add)
            if isinstance(node, (ast.arg, ast.AnnAssign)):
                self._review_annotation(node.annotation, add)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._review_annotation(node.returns, add)
            spelled = node.id if isinstance(node, ast.Name) else node.name if isinstance(
                node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else None
            if spelled in RAW_MEMORY:  # `__array_interface__ = ...` in a class body, `def __array_interface__`
                add(node, "review", "native-code", spelled)
            elif spelled in RECONSTRUCTION:  # `def __reduce_ex__(self, protocol)`
                add(node, "review", "dynamic-code", spelled)
            key = folded_string(node.slice) if isinstance(node, ast.Subscript) else None
            if key and module_code(key) and self.qualname(node.value) == "sys.modules":
                add(node, "review", module_code(key), f"sys.modules[{key!r}]")  # a held module
            if isinstance(node, (ast.Attribute, ast.Name)) and isinstance(node.ctx, ast.Load) \
                    and self.qualname(node) == "sys.modules" and id(node) not in constant_keys:
                add(node, "review", "dynamic-code", short(ast.unparse(node)))  # modules found by a computed key
            if isinstance(node, ast.Attribute):
                code = family(node.attr)
                if code and node.attr in self.own_attributes and self._owns(node):
                    code = None  # the student's own method or attribute (`Ops.softmax`, `self.softmax_dim`)
                if code and id(node) not in skip_forbidden:
                    add(node, "forbidden", code, ast.unparse(node))
                    skip_forbidden |= {id(n) for n in ast.walk(node.value) if isinstance(n, ast.Attribute)}
                self._review_attribute(node, add, skip_module)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in NAME_CODE:
                add(node, "review", NAME_CODE[node.id], node.id)
            elif isinstance(node, ast.Call) and is_call_to(node, "vars", "dir", "globals", "locals"):
                # run-time discovery: names found, not written
                add(node, "review", "dynamic-code", short(ast.unparse(node)), holds=id(node) not in displayed)
                self._review_call(node, add)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in LOOKUP_BUILTINS \
                    and id(node) not in self.called:
                add(node, "review", "dynamic-code", _("{name}（作为值使用）").format(name=node.id))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in self.docstrings:
                self._string(node, node.value, add, python=id(node) not in self.magic_text,
                             name=id(node) in self.looked_up)
            elif isinstance(node, ast.BinOp):
                folded = folded_string(node)
                if folded is not None:
                    self._string(node, folded, add, name=id(node) in self.looked_up)
            elif isinstance(node, ast.Subscript) and (is_call_to(node.value, "vars", "globals")
                                                      or (isinstance(node.value, ast.Attribute)
                                                          and node.value.attr == "__dict__")):
                add(node, "review", "dynamic-code", short(ast.unparse(node)))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                self._review_import(node, add)
            elif isinstance(node, ast.Call):
                self._review_call(node, add)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Delete)):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                for target in (t for group in targets for t in flat_targets(group)):
                    self._review_target(target, add)
        return out
