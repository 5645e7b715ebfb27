"""A static read of the student's own code cells, done by the trusted grader.

The run-time tripwires live inside the student's process, which the student
controls, so the grader also reads the code before grading, with `ast`:

1. *forbidden*: uses of a built-in softmax or attention (found by name
   pattern, not by a hand list) that a graded function can reach through the
   notebook's top-level names, including names a value is stored into
   (`cache.append(torch.softmax)`, walrus, setattr).  An attribute the
   student defines (`Ops.softmax`, `self.softmax_dim`) is theirs, and a
   string is a name only where a lookup takes it (`getattr`, `vars(m)[...]`)
   or it is a torch/aten path;
2. *review*: code that tampers with the grader or the process (frame and gc
   walks, module edits, native code, process limits, other pids, dynamic code,
   the runner's internals), anywhere, for a person to look at.

Only a plain reading: deliberate obfuscation can hide from it (the run-time
tripwire is the second layer), but the dynamic tricks it takes are flagged.
Standard library and IPython only; torch is never imported here.
"""
import ast
import re
from dataclasses import dataclass
from typing import Iterable, Optional, Union

from IPython.core.inputtransformer2 import TransformerManager

SOFTMAX_FAMILY = re.compile(r"(?i)soft(max|min)")
SDPA_FAMILY = re.compile(r"(?i)(scaled_dot_product|_fused_sdp|flash_attention|efficient_attention|cudnn_attention|"
                         r"multi_?head_?attention|flex_attention|transformer_encoder_layer|_transformer|^transformer)")
# What `from torch... import *` may bind from the two families.
STAR_NAMES = ("softmax", "log_softmax", "softmin", "scaled_dot_product_attention", "multi_head_attention_forward")

# Review tables.  Attribute names suspicious on any object:
REVIEW_ATTRS = {
    "introspection": {"f_back", "f_globals", "f_locals", "f_builtins", "tb_frame", "__globals__", "__closure__",
                      "__code__", "__subclasses__", "__builtins__", "_getframe", "__wrapped__", "__dict__",
                      "getclosurevars", "__getattribute__", "__getattr__"},
    "native-code": {"CDLL", "PyDLL", "cdll", "pydll", "pythonapi", "LoadLibrary", "load_library", "_C",
                    "redispatch"},
    "process-limits": {"setrlimit", "prlimit", "setpriority", "sched_setaffinity", "sched_setscheduler",
                       "sched_setparam"},
    "other-processes": {"killpg", "pthread_kill", "pidfd_open", "pidfd_send_signal"},
    "dynamic-code": {"import_module", "__import__", "attrgetter", "methodcaller", "getattr_static"},
    "grader-internals": {"display_formatter", "display_pub", "displayhook", "user_ns_hidden", "proto_out",
                         "proto_in", "forbidden_used", "blocking", "_aten_library", "_libraries", "_destroy",
                         "install_tripwires"},
}
ATTR_CODE = {name: code for code, names in REVIEW_ATTRS.items() for name in names}
# Qualified names (after the student's import aliases) whose last part is too common to flag alone.
QUALNAME_CODE = {
    **dict.fromkeys(("sys._getframe", "inspect.currentframe", "inspect.stack", "inspect.trace",
                     "inspect.getouterframes"), "introspection"),
    **dict.fromkeys(("os.kill", "os.killpg", "signal.pthread_kill", "os.pidfd_open", "signal.pidfd_send_signal"),
                    "other-processes"),
    **dict.fromkeys(("os.nice", "os.setpriority", "os.sched_setaffinity", "os.sched_setscheduler",
                     "os.sched_setparam", "resource.setrlimit", "resource.prlimit"), "process-limits"),
    **dict.fromkeys(("os.fork", "os.forkpty", "os.posix_spawn", "os.posix_spawnp", "os.system", "os.popen",
                     "os.execv", "os.execve", "os.execl", "os.execle", "os.execlp", "os.execlpe", "os.execvp",
                     "os.execvpe", "os.spawnv", "os.spawnve", "os.spawnl", "os.spawnle", "os.spawnlp", "os.spawnvp",
                     "concurrent.futures.ProcessPoolExecutor"), "process-creation"),
    **dict.fromkeys(("importlib.import_module", "builtins.exec", "builtins.eval", "builtins.compile",
                     "builtins.__import__"), "dynamic-code"),
}
# Modules whose every use is flagged.
MODULE_CODE = {"gc": "introspection", "inspect": "introspection",
               "ctypes": "native-code", "_ctypes": "native-code", "cffi": "native-code",
               "mmap": "native-code", "fcntl": "process-limits", "subprocess": "process-creation",
               "multiprocessing": "process-creation", "pty": "process-creation", "socket": "other-processes",
               "autograder": "grader-internals",
               "wire": "grader-internals", "sandbox_runner": "grader-internals"}
NAME_CODE = {"exec": "dynamic-code", "eval": "dynamic-code", "compile": "dynamic-code",
             "__import__": "dynamic-code", "__builtins__": "introspection"}
LOOKUP_BUILTINS = {"getattr", "setattr", "delattr", "vars", "globals"}  # flagged when passed around, not called
GRADER_STRINGS = {"sandbox_runner", "wire", "autograder"}
SO_FILE = re.compile(r"\.so(\.\d+)*$")
# Magics whose body is Python run in the user namespace (scanned as such), and
# magics that run code the scan cannot read (shell, other files, other interpreters).
PYTHON_MAGICS = {"time", "timeit", "prun", "capture"}
FOREIGN_MAGICS = {"run", "load", "loadpy", "sx", "system", "sc", "bash", "sh", "script", "python", "python2",
                  "python3", "pypy", "perl", "ruby", "writefile", "file"}
MODULE_MUTATORS = {"pop", "update", "clear", "setdefault", "popitem", "__setitem__", "__delitem__"}
# Methods that store a value into the object they are called on (`cache.append(torch.softmax)`).
CONTAINER_STORES = {"append", "extend", "insert", "add", "update", "setdefault", "__setitem__", "appendleft",
                    "extendleft", "put", "put_nowait", "push"}
# Calls that look a name up at run time: a string passed to them is a name, not text.
LOOKUP_CALLS = {"getattr", "hasattr", "setattr", "attrgetter", "methodcaller", "getattr_static", "import_module",
                "__getattr__", "__getattribute__", "get", "__getitem__"}
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp,
          ast.DictComp, ast.GeneratorExp)


@dataclass(frozen=True)
class Finding:
    cell: int          # index into the `sources` list given to scan()
    line: int          # 1-based line within that cell source
    kind: str          # "forbidden" or "review"
    code: str          # forbidden: "softmax-builtin" | "sdpa-builtin"; review: a category slug
    detail: str        # what was seen, e.g. "torch.nn.functional.softmax", "gc.get_objects"
    binding: str | None  # top-level name whose body/RHS contains it, None for bare top-level code


@dataclass
class ScanResult:
    findings: list[Finding]                 # everything found, in order
    forbidden: dict[str, list[Finding]]     # graded function -> forbidden findings reachable from it
    review: list[Finding]                   # all review findings (anywhere in student code)
    unparsable: list[int]                   # cells that did not parse (skipped)


@dataclass
class _Binding:
    findings: list  # forbidden findings inside it
    refs: set       # global names it reads


LABELS = {"softmax-builtin": "内置 softmax", "sdpa-builtin": "内置注意力实现", "introspection": "窥探栈帧或对象",
          "module-edit": "改动模块", "native-code": "加载本地代码", "process-limits": "改动进程限制或调度",
          "other-processes": "触及其他进程", "dynamic-code": "动态执行代码", "grader-internals": "触及评分程序内部",
          "process-creation": "另起进程"}


def describe(finding: Finding) -> str:
    """One short Chinese line for students and instructors (cells counted from 1)."""
    label = LABELS.get(finding.code, finding.code)
    return f"第 {finding.cell + 1} 个单元格第 {finding.line} 行：{finding.detail}（{label}）"


def family(name: str) -> str | None:
    """The forbidden code an identifier belongs to; attention wins over softmax."""
    if SDPA_FAMILY.search(name):
        return "sdpa-builtin"
    return "softmax-builtin" if SOFTMAX_FAMILY.search(name) else None


def scan(sources: list[str], functions: Iterable[str]) -> ScanResult:
    """Scan the student's code cells (in notebook order) for the graded `functions`."""
    trees, unparsable = {}, []
    for index, source in enumerate(sources):
        tree = _parse(source)
        if tree is None:
            unparsable.append(index)
        else:
            trees[index] = tree
    scanner = _Scanner(list(trees.values()))
    for index, tree in trees.items():
        scanner.cell = index
        for stmt in tree.body:
            try:
                scanner.statement(stmt, conditional=False)
            except (RecursionError, ValueError, MemoryError):  # pathological code must not stop grading
                scanner._add(stmt, "review", "dynamic-code", "这一句过于复杂，静态检查无法读完", None)
    forbidden = {name: scanner.reachable(name) for name in functions}
    if any(f.code == "process-creation" for f in scanner.findings):
        # Another process runs code without the runner's tripwires, and talks back through pipes
        # or sockets that no name links: then a forbidden use anywhere counts for every function.
        anywhere = [f for f in scanner.findings if f.kind == "forbidden"]
        forbidden = {name: sorted({id(f): f for f in found + anywhere}.values(),
                                  key=lambda f: (f.cell, f.line, f.code, f.detail))
                     for name, found in forbidden.items()}
    review = [f for f in scanner.findings if f.kind == "review"]
    return ScanResult(scanner.findings, forbidden, review, unparsable)


def _parse(source):
    """The cell as an AST (IPython syntax turned into Python), or None when it cannot be read."""
    if isinstance(source, list):  # a notebook's JSON may store a cell's source as lines
        source = "".join(source)
    try:
        tree = ast.parse(TransformerManager().transform_cell(source))
        return _PythonMagics().visit(tree)
    except Exception:  # SyntaxError, ValueError (NUL bytes), a transformer failing on odd input
        return None


class _PythonMagics(ast.NodeTransformer):
    """Splices the Python bodies of `%time`/`%%time`-like magics in place, so they are read too."""

    def visit_Expr(self, node: ast.Expr) -> Union[ast.AST, list[ast.stmt]]:
        call = node.value
        if not (_is_ipython_call(call, "run_cell_magic", "run_line_magic") and call.args
                and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in call.args)):
            return node
        name, cell = call.args[0].value, call.func.attr == "run_cell_magic"
        if name not in PYTHON_MAGICS or len(call.args) < (3 if cell else 2) or (name == "capture" and not cell):
            return node
        try:
            body = ast.parse(TransformerManager().transform_cell(call.args[-1].value))
        except Exception:
            return node
        ast.increment_lineno(body, node.lineno if cell else node.lineno - 1)
        return self.visit(body).body


def _is_ipython_call(node, *methods):
    """`get_ipython().<method>(...)`, which is what IPython's escapes turn into."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in methods
            and isinstance(node.func.value, ast.Call) and isinstance(node.func.value.func, ast.Name)
            and node.func.value.func.id == "get_ipython")


def _short(text):
    return text if len(text) <= 80 else text[:77] + "..."


def _folded_string(node):
    """The value of a string literal or of a `+` of string literals ("soft" + "max"), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _folded_string(node.left), _folded_string(node.right)
        if left is not None and right is not None:
            return left + right
    return None


def _root(node):
    """The name at the bottom of an attribute/subscript chain (`a` in `a.b[0].c`)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _flat_targets(target):
    if isinstance(target, (ast.Tuple, ast.List)):
        return [t for elt in target.elts for t in _flat_targets(elt)]
    return [target.value] if isinstance(target, ast.Starred) else [target]


def _is_lookup_owner(node):
    """`vars(m)[...]`, `globals().get(...)`, `m.__dict__[...]`: namespaces indexed by name."""
    owner = node.value
    return _is_call_to(owner, "vars", "globals") or (isinstance(owner, ast.Attribute) and owner.attr == "__dict__")


def _is_call_to(node, *names):
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names


# -- scopes: which global names a statement reads ------------------------------------

def _outer_parts(scope):
    """Parts of a nested scope that are evaluated in the enclosing scope."""
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        args = scope.args
        return [*getattr(scope, "decorator_list", []), *args.defaults, *[d for d in args.kw_defaults if d]]
    if isinstance(scope, ast.ClassDef):
        return [*scope.decorator_list, *scope.bases, *[k.value for k in scope.keywords]]
    return [scope.generators[0].iter]


def _inner_parts(scope):
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return list(scope.body)
    if isinstance(scope, ast.Lambda):
        return [scope.body]
    return [child for child in ast.iter_child_nodes(scope)]


def _params(scope):
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return set()
    args = scope.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return {a.arg for a in every if a is not None}


def _reads(nodes, scope=None):
    """Names read from outside `scope` (module level when None): a function's locals do not count."""
    loads, nested, stores, declared = set(), set(), _params(scope), set()
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, SCOPES):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stores.add(node.name)
            stack.extend(_outer_parts(node))
            nested |= _reads(_inner_parts(node), node)
            continue
        if isinstance(node, ast.Name):
            (loads if isinstance(node.ctx, ast.Load) else stores).add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        elif isinstance(node, ast.alias):
            stores.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            stores.add(node.name)
        stack.extend(ast.iter_child_nodes(node))
    if scope is None:
        return loads | nested
    local = stores - declared
    # A class body's names are not visible inside its methods.
    return (loads - local) | (nested if isinstance(scope, ast.ClassDef) else nested - local)


def _call_arguments(nodes):
    """Names passed as arguments to calls that run at module level."""
    out, stack = [], [n for n in nodes if not isinstance(n, SCOPES)]
    while stack:
        node = stack.pop()
        if isinstance(node, SCOPES):
            stack.extend(_outer_parts(node))
            continue
        if isinstance(node, ast.Call):
            out += [a.id for a in node.args + [k.value for k in node.keywords] if isinstance(a, ast.Name)]
        stack.extend(ast.iter_child_nodes(node))
    return list(dict.fromkeys(out))


def _top_names(stmt):
    """Names a module-level statement binds (compound statements' bodies included)."""
    for node in ast.walk(stmt):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            yield node.id


def _stored_into(nodes):
    """Global names a module-level statement puts a value into without binding them.

    `cache.append(torch.softmax)`, `setattr(holder, "f", F.softmax)` and
    `(impl := torch.softmax)` all make what they store reachable through that name.
    """
    out, stack = [], [n for n in nodes if not isinstance(n, SCOPES)]  # a def's or class's own name is bound already
    while stack:
        node = stack.pop()
        if isinstance(node, SCOPES):
            stack.extend(_outer_parts(node))  # only what runs at module level
            continue
        if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            out.append(node.target.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CONTAINER_STORES:
            out.append(_root(node.func.value))
        elif _is_call_to(node, "setattr") and node.args:
            out.append(_root(node.args[0]))
        stack.extend(ast.iter_child_nodes(node))
    return [name for name in dict.fromkeys(out) if name]


# -- the scanner ---------------------------------------------------------------------

class _Scanner:
    """Walks top-level statements in notebook order, recording findings and the name graph."""

    def __init__(self, trees: list[ast.Module]) -> None:
        self.cell = 0
        self.findings, self.seen = [], {}
        self.bindings = {}  # name -> [_Binding] in effect (replaced or unioned in notebook order)
        self.aliases, self.imported, self.module_vars, self.ipython, self.bound = {}, set(), set(), set(), set()
        self.docstrings, self.magic_text = set(), set()  # strings that are not Python string literals
        self.own_attributes = set()  # attribute names the student defines (methods, self.x = ...)
        self.looked_up = set()  # ids of string nodes used as names by a run-time lookup
        self.called = set()  # ids of Name nodes in call position
        self.top_level = {n for tree in trees for stmt in tree.body for n in _top_names(stmt)}
        self.defined = {stmt.name for tree in trees for stmt in ast.walk(tree)
                        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        for node in (n for tree in trees for n in ast.walk(tree)):
            self._learn(node)

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
            if callee in LOOKUP_CALLS and not (callee in ("get", "__getitem__") and not _is_lookup_owner(node.func)):
                self.looked_up |= {id(n) for arg in node.args for n in ast.walk(arg)}
        if isinstance(node, ast.Subscript) and _is_lookup_owner(node):
            self.looked_up |= {id(n) for n in ast.walk(node.slice)}
        if _is_ipython_call(node, "run_line_magic", "run_cell_magic", "system", "getoutput"):
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
            if _is_call_to(value, "get_ipython"):
                self.ipython |= names
            imported = _is_call_to(value, "__import__") or (
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
        return ".".join([self.aliases.get(node.id, node.id), *reversed(parts)])

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
            flat = [t for target in targets for t in _flat_targets(target)]
            names = [t.id for t in flat if isinstance(t, ast.Name)]
            roots = [_root(t) for t in flat if not isinstance(t, ast.Name) and _root(t)]
            roots += [t.slice.value for t in flat if isinstance(t, ast.Subscript)  # globals()["sm"] = ...
                      and _is_call_to(t.value, "globals", "vars") and isinstance(t.slice, ast.Constant)
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
            owners = [t.id for t in _flat_targets(stmt.target) if isinstance(t, ast.Name)]
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            owners = [n.id for item in stmt.items if item.optional_vars is not None
                      for n in ast.walk(item.optional_vars) if isinstance(n, ast.Name)]
        self._bind(header, [], owners, True)
        for _, block in body_fields:
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
        extra_owners += [name for name in _stored_into(nodes) if name not in names]
        # `fill(registry)`: the callee may store into its argument (a function or class passed is not filled)
        extra_owners += [name for name in _call_arguments(nodes) if name not in names + extra_owners
                         and name not in self.defined]
        owner = (names + extra_owners)[0] if names + extra_owners else None
        found = [f for f in self._inspect(nodes, owner) if f.kind == "forbidden"]
        reads = _reads(nodes)
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

    def _add(self, node, kind, code, detail, binding):
        finding = Finding(self.cell, getattr(node, "lineno", 1), kind, code, _short(detail), binding)
        key = (finding.cell, finding.line, finding.code, finding.detail)
        if key not in self.seen:
            self.seen[key] = finding
            self.findings.append(finding)
        return self.seen[key]

    def _inspect(self, nodes, owner):
        """Every finding inside `nodes` (all depths); returns them."""
        out, skip_forbidden, skip_module = [], set(), set()

        def add(node, kind, code, detail):
            out.append(self._add(node, kind, code, detail, owner))

        for node in (n for top in nodes for n in ast.walk(top)):
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
            elif isinstance(node, ast.Call) and _is_call_to(node, "vars") and node.args:
                add(node, "review", "dynamic-code", _short(ast.unparse(node)))
                self._review_call(node, add)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in LOOKUP_BUILTINS \
                    and id(node) not in self.called:
                add(node, "review", "dynamic-code", f"{node.id}（作为值使用）")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in self.docstrings:
                self._string(node, node.value, add, python=id(node) not in self.magic_text,
                             name=id(node) in self.looked_up)
            elif isinstance(node, ast.BinOp):
                folded = _folded_string(node)
                if folded is not None:
                    self._string(node, folded, add, name=id(node) in self.looked_up)
            elif isinstance(node, ast.Subscript) and (_is_call_to(node.value, "vars", "globals")
                                                      or (isinstance(node.value, ast.Attribute)
                                                          and node.value.attr == "__dict__")):
                add(node, "review", "dynamic-code", _short(ast.unparse(node)))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                self._review_import(node, add)
            elif isinstance(node, ast.Call):
                self._review_call(node, add)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Delete)):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                for target in (t for group in targets for t in _flat_targets(group)):
                    self._review_target(target, add)
        return out

    def _string(self, node, value, add, python=True, name=False):
        """Family names in strings used as names; /proc, .so and the runner's module names in any text.

        A string is a name when a lookup gets it (`getattr(torch, "softmax")`,
        `vars(F)["softmax"]`) or when it is a torch or aten path; elsewhere
        (`cache["softmax"]`, a message) it is text and costs nothing.
        """
        token = value.strip()
        path = "::" in token or token.startswith(("torch.", "aten.", "ops."))
        if python and not re.search(r"\s", token) and (name or path):
            parts = re.split(r"\.|::", token)
            codes = [family(p) for p in (parts if path else parts[-1:]) if p.isidentifier()]
            if any(codes):
                add(node, "forbidden", "sdpa-builtin" if "sdpa-builtin" in codes else "softmax-builtin", repr(value))
        if value == "/proc" or re.search(r"/proc/(?!self\b)", value):
            add(node, "review", "other-processes", repr(value))
        if SO_FILE.search(value):
            add(node, "review", "native-code", repr(value))
        if value in GRADER_STRINGS:
            add(node, "review", "grader-internals", repr(value))

    def _review_attribute(self, node, add, skip_module):
        text = ast.unparse(node)
        qual = self.qualname(node)
        if node.attr in ATTR_CODE:
            add(node, "review", ATTR_CODE[node.attr], text)
        if qual in QUALNAME_CODE:
            add(node, "review", QUALNAME_CODE[qual], text)
        if (qual and id(node) not in skip_module and qual.split(".")[0] in MODULE_CODE
                and self.module_like(_root(node))):
            add(node, "review", MODULE_CODE[qual.split(".")[0]], text)
            skip_module |= {id(n) for n in ast.walk(node.value)}
        if node.attr == "events" and (_is_call_to(node.value, "get_ipython")
                                      or (isinstance(node.value, ast.Name) and node.value.id in self.ipython)):
            add(node, "review", "grader-internals", text)

    def _review_import(self, node, add):
        for alias in node.names:
            if isinstance(node, ast.Import):
                modules, qual = [alias.name], alias.name
            else:
                modules, qual = [node.module or ""], f"{node.module or ''}.{alias.name}"
                if family(alias.name):
                    add(node, "forbidden", family(alias.name), qual)
            codes = [family(part) for part in qual.split(".")] if isinstance(node, ast.Import) else []
            if any(codes):
                add(node, "forbidden", "sdpa-builtin" if "sdpa-builtin" in codes else "softmax-builtin", qual)
            top = modules[0].split(".")[0]
            if top in MODULE_CODE:
                add(node, "review", MODULE_CODE[top], f"import {modules[0]}")
            if qual in QUALNAME_CODE or alias.name in ATTR_CODE:
                add(node, "review", QUALNAME_CODE.get(qual) or ATTR_CODE[alias.name], qual)

    def _review_call(self, node, add):
        func, args = node.func, node.args
        if isinstance(func, ast.Name) and func.id in ("getattr", "setattr", "delattr") and args:
            if len(args) >= 2 and not (isinstance(args[1], ast.Constant) and isinstance(args[1].value, str)):
                add(node, "review", "dynamic-code", f"{func.id}(…, {ast.unparse(args[1])})")
            if func.id != "getattr" and (self.qualname(args[0]) == "sys.modules"
                                         or (isinstance(args[0], ast.Name) and self.module_like(args[0].id))):
                add(node, "review", "module-edit", f"{func.id}({ast.unparse(args[0])}, …)")
        if not isinstance(func, ast.Attribute):
            return
        if func.attr in MODULE_MUTATORS and self.qualname(func.value) == "sys.modules":
            add(node, "review", "module-edit", ast.unparse(func))
        if func.attr in MODULE_MUTATORS and _is_call_to(func.value, "globals", "vars"):
            add(node, "review", "dynamic-code", ast.unparse(func))
        if self.qualname(func) == "os.set_blocking" and args and (
                (isinstance(args[0], ast.Constant) and args[0].value in (0, 1, 2))
                or re.search(r"std(in|out|err)", ast.unparse(args[0]))):
            add(node, "review", "process-limits", ast.unparse(node))
        if _is_ipython_call(node, "system", "getoutput"):
            add(node, "review", "dynamic-code", "!" + (_folded_string(args[0]) or "…") if args else "!")
        if _is_ipython_call(node, "run_line_magic", "run_cell_magic") and args:
            name = _folded_string(args[0])
            if name is None or name in FOREIGN_MAGICS:
                add(node, "review", "dynamic-code", ("%%" if func.attr == "run_cell_magic" else "%") + str(name))

    def _review_target(self, target, add):
        """Assignment or deletion targets: sys.modules, module attributes, globals()[...]."""
        if isinstance(target, ast.Subscript):
            if self.qualname(target.value) == "sys.modules":
                add(target, "review", "module-edit", "sys.modules[...]")
            elif _is_call_to(target.value, "globals", "vars"):
                add(target, "review", "dynamic-code", f"{target.value.func.id}()[...]")
        elif isinstance(target, ast.Attribute):
            root = _root(target)
            if self.qualname(target) == "sys.modules" or (root and self.module_like(root)):
                add(target, "review", "module-edit", ast.unparse(target))
