"""Reading a notebook cell's AST for the static scan: parsing IPython syntax, names a statement reads or binds.

Pure functions over `ast` nodes; what they find is judged in `static_scan`.
"""
import ast
from typing import Optional, Union

from IPython.core.inputtransformer2 import TransformerManager

from .scan_policy import CONTAINER_STORES, PYTHON_MAGICS

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp,
          ast.DictComp, ast.GeneratorExp)


def parse_cell(source):
    """The cell as an AST (IPython syntax turned into Python).  Raises what parsing raised: a cell the grader
    cannot parse is not one the runner could not run (the runner's IPython keeps `__future__` flags and
    transformers from earlier cells, and its recursion limit is the student's), so `static_scan` holds it."""
    if isinstance(source, list):  # a notebook's JSON may store a cell's source as lines
        source = "".join(source)
    return PythonMagics().visit(ast.parse(TransformerManager().transform_cell(source)))


class PythonMagics(ast.NodeTransformer):
    """Splices the Python bodies of `%time`/`%%time`-like magics in place, so they are read too."""

    def visit_Expr(self, node: ast.Expr) -> Union[ast.AST, list[ast.stmt]]:
        magic = python_magic(node.value)
        if magic is None:
            return node
        spliced = []
        for text, next_line in magic_python(*magic):
            body = ast.parse(TransformerManager().transform_cell(text))  # raises as `parse_cell`
            ast.increment_lineno(body, node.lineno if next_line else node.lineno - 1)
            spliced += self.visit(body).body
        return spliced or node


def python_magic(call) -> Optional[tuple[str, str, Optional[str]]]:
    """(name, line, cell body or None) of `get_ipython().run_line_magic(...)` / `run_cell_magic(...)` with string
    constants for one of `PYTHON_MAGICS`, else None."""
    if not (is_ipython_call(call, "run_cell_magic", "run_line_magic") and call.args
            and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in call.args)):
        return None
    cell = call.func.attr == "run_cell_magic"
    if call.args[0].value not in PYTHON_MAGICS or len(call.args) < (3 if cell else 2):
        return None
    return call.args[0].value, call.args[1].value, call.args[2].value if cell else None


def magic_python(name: str, line: str, cell: Optional[str]) -> list[tuple[str, bool]]:
    """The Python texts that `%name line` (or `%%name line` over `cell`) runs, as IPython's magic cuts them out,
    each with whether it starts on the line after the magic's: `%timeit`'s and `%prun`'s options are not code
    (`%timeit -n 10 f(x)` runs `f(x)`), and `%%timeit`'s line is its set-up.  Options IPython refuses run
    nothing."""
    from IPython.core import magic_arguments
    from IPython.core.error import UsageError
    from IPython.core.magic import Magics
    from IPython.core.magics.execution import ExecutionMagics

    class _Options:  # what `Magics.parse_options` reads of its magic: no default options
        options_table: dict = {}

    try:
        if name == "time":  # its options parsed, and its words joined again by single spaces (red team)
            _, words = magic_arguments.parse_argstring(ExecutionMagics.time, line, partial=True)
            line = " ".join(words)
            return [(line, False)] if cell is None else [] if line else [(cell, True)]
        if name == "timeit":
            _, stmt = Magics.parse_options(_Options(), line, "n:r:tcp:qo", posix=False, strict=False,
                                           preserve_non_opts=True)
            return [(stmt, False)] if cell is None else [(stmt, False), (cell, True)]
        if name == "prun":
            _, stmt = Magics.parse_options(_Options(), line, "D:l:rs:T:q", list_all=True, posix=False)
            return [(stmt if cell is None else stmt + "\n" + cell, False)]
    except (UsageError, ValueError):
        return []
    return [(cell, True)] if name == "capture" and cell is not None else []


def is_ipython_call(node, *methods):
    """`get_ipython().<method>(...)`, which is what IPython's escapes turn into."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in methods
            and isinstance(node.func.value, ast.Call) and isinstance(node.func.value.func, ast.Name)
            and node.func.value.func.id == "get_ipython")


def short(text):
    return text if len(text) <= 80 else text[:77] + "..."


def folded_string(node):
    """The value of a string literal or of a `+` of string literals ("soft" + "max"), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = folded_string(node.left), folded_string(node.right)
        if left is not None and right is not None:
            return left + right
    return None


def root_name(node):
    """The name at the bottom of an attribute/subscript chain (`a` in `a.b[0].c`)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def flat_targets(target):
    if isinstance(target, (ast.Tuple, ast.List)):
        return [t for elt in target.elts for t in flat_targets(elt)]
    return [target.value] if isinstance(target, ast.Starred) else [target]


def is_lookup_owner(node):
    """`vars(m)[...]`, `globals().get(...)`, `m.__dict__[...]`: namespaces indexed by name."""
    owner = node.value
    return is_call_to(owner, "vars", "globals") or (isinstance(owner, ast.Attribute) and owner.attr == "__dict__")


def is_call_to(node, *names):
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names


# -- scopes: which global names a statement reads ------------------------------------

def outer_parts(scope):
    """Parts of a nested scope that are evaluated in the enclosing scope."""
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        args = scope.args
        return [*getattr(scope, "decorator_list", []), *args.defaults, *[d for d in args.kw_defaults if d]]
    if isinstance(scope, ast.ClassDef):
        return [*scope.decorator_list, *scope.bases, *[k.value for k in scope.keywords]]
    return [scope.generators[0].iter]


def inner_parts(scope):
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return list(scope.body)
    if isinstance(scope, ast.Lambda):
        return [scope.body]
    return [child for child in ast.iter_child_nodes(scope)]


def parameters(scope):
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return set()
    args = scope.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return {a.arg for a in every if a is not None}


def names_read(nodes, scope=None):
    """Names read from outside `scope` (module level when None): a function's locals do not count."""
    loads, nested, stores, declared = set(), set(), parameters(scope), set()
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, SCOPES):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stores.add(node.name)
            stack.extend(outer_parts(node))
            nested |= names_read(inner_parts(node), node)
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


# Built-ins that only read their arguments: a name passed to them is not given anything.
READ_ONLY_CALLS = {"getattr", "hasattr", "isinstance", "issubclass", "len", "id", "type", "repr", "str", "callable"}


def call_arguments(nodes):
    """Names passed as arguments to calls that run at module level (a call may store into them)."""
    out, stack = [], [n for n in nodes if not isinstance(n, SCOPES)]
    while stack:
        node = stack.pop()
        if isinstance(node, SCOPES):
            stack.extend(outer_parts(node))
            continue
        if isinstance(node, ast.Call) and not is_call_to(node, *READ_ONLY_CALLS):
            out += [a.id for a in node.args + [k.value for k in node.keywords] if isinstance(a, ast.Name)]
        stack.extend(ast.iter_child_nodes(node))
    return list(dict.fromkeys(out))


IMMUTABLE_CALLS = {"float", "int", "str", "bool", "complex", "bytes", "frozenset"}


def immutable_names(trees):
    """Names whose every binding, in every cell, is a number, string, or tuple of them (`NEG_INF =
    float("-inf")`, `D = 4`): a call they are passed to cannot store anything into them."""
    def immutable(value):
        if isinstance(value, ast.Constant):
            return True
        if isinstance(value, ast.UnaryOp):
            return immutable(value.operand)
        if isinstance(value, ast.Tuple):
            return all(immutable(e) for e in value.elts)
        return (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in IMMUTABLE_CALLS
                and not value.keywords and all(isinstance(a, ast.Constant) for a in value.args))

    stores, constants = {}, {}
    for node in (n for tree in trees for n in ast.walk(tree)):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            stores[node.id] = stores.get(node.id, 0) + 1
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:  # a function that may rebind it
                stores[name] = stores.get(name, 0) + 1
        elif isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                               ast.arg)):
            for name in ([a.asname or a.name.split(".")[0] for a in node.names] if isinstance(
                    node, (ast.Import, ast.ImportFrom)) else [getattr(node, "name", None) or node.arg]):
                stores[name] = stores.get(name, 0) + 1
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and immutable(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    constants[target.id] = constants.get(target.id, 0) + 1
    return {name for name, count in constants.items() if stores.get(name) == count}


def top_names(stmt):
    """Names a module-level statement binds (compound statements' bodies included)."""
    for node in ast.walk(stmt):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            yield node.id


def stored_into(nodes):
    """Global names a module-level statement puts a value into without binding them.

    `cache.append(torch.softmax)`, `setattr(holder, "f", F.softmax)` and
    `(impl := torch.softmax)` all make what they store reachable through that name.
    """
    out, stack = [], [n for n in nodes if not isinstance(n, SCOPES)]  # a def's or class's own name is bound already
    while stack:
        node = stack.pop()
        if isinstance(node, SCOPES):
            stack.extend(outer_parts(node))  # only what runs at module level
            continue
        if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            out.append(node.target.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CONTAINER_STORES:
            out.append(root_name(node.func.value))
        elif is_call_to(node, "setattr") and node.args:
            out.append(root_name(node.args[0]))
        stack.extend(ast.iter_child_nodes(node))
    return [name for name in dict.fromkeys(out) if name]


# Classes whose one positional sub-pattern matches the subject itself (`case int(n)`: n is the subject).
SELF_MATCHING = {"bool", "bytearray", "bytes", "dict", "float", "frozenset", "int", "list", "set", "str", "tuple"}


class GetattrAsAttribute(ast.NodeTransformer):
    """Spells `getattr(x, "name")` (a name the scan reads: a literal, or literals added) as `x.name`, so every
    rule about attributes applies to it: a module or function reached that way (`getattr(mock, "patch")`)
    is judged as if written with a dot.  A default stays beside it, as the second item of a tuple."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if not (isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) in (2, 3)
                and not node.keywords):
            return node
        name = folded_string(node.args[1])
        if name is None or not name.isidentifier():
            return node
        read = ast.Attribute(value=node.args[0], attr=name, ctx=ast.Load())
        out = read if len(node.args) == 2 else ast.Tuple(elts=[read, node.args[2]], ctx=ast.Load())
        return ast.fix_missing_locations(ast.copy_location(out, node))


class MatchAsAssignments(ast.NodeTransformer):
    """Spells each `match` statement out as the reads and bindings it makes, so they are read like any others.

    A class pattern reads attributes by names written as plain strings (`case object(softmax=f)` reads
    `subject.softmax` into `f`), which no `Attribute` node carries.  Each case becomes a conditional block
    that first assigns every name the pattern captures from the expression it reads (`f = subject.softmax`),
    then runs the guard and the body.  A positional sub-pattern of any other class reads the attribute named
    by the class's `__match_args__`, which is spelled as `getattr(subject, Cls.__match_args__[i])`.
    """

    def visit_Match(self, node: ast.Match) -> list[ast.stmt]:
        self.generic_visit(node)
        if isinstance(node.subject, (ast.Name, ast.Attribute)):  # read as written: `torch.distributions`
            subject, out = node.subject, [ast.Expr(value=node.subject)]
        else:
            subject = ast.Name(id="_match_subject_", ctx=ast.Load())
            out = [ast.Assign(targets=[ast.Name(id="_match_subject_", ctx=ast.Store())], value=node.subject)]
        for case in node.cases:
            reads = []
            self._bind(case.pattern, subject, reads)
            body = reads + ([ast.Expr(value=case.guard)] if case.guard is not None else []) + case.body
            out.append(ast.If(test=ast.Constant(value=True), body=body, orelse=[]))
        for stmt in out:
            ast.copy_location(stmt, node)
            ast.fix_missing_locations(stmt)
        return out

    def _bind(self, pattern, path, reads):
        def assign(name, value):
            reads.append(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=value))

        if isinstance(pattern, ast.MatchAs):
            if pattern.pattern is not None:
                self._bind(pattern.pattern, path, reads)
            if pattern.name:
                assign(pattern.name, path)
        elif isinstance(pattern, ast.MatchOr):
            for alternative in pattern.patterns:
                self._bind(alternative, path, reads)
        elif isinstance(pattern, ast.MatchValue):
            reads.append(ast.Expr(value=pattern.value))
        elif isinstance(pattern, ast.MatchSequence):
            for index, item in enumerate(pattern.patterns):
                if isinstance(item, ast.MatchStar):
                    if item.name:
                        assign(item.name, ast.Call(func=ast.Name(id="list", ctx=ast.Load()), args=[path], keywords=[]))
                else:
                    self._bind(item, ast.Subscript(value=path, slice=ast.Constant(value=index), ctx=ast.Load()), reads)
        elif isinstance(pattern, ast.MatchMapping):
            for key, item in zip(pattern.keys, pattern.patterns):
                self._bind(item, ast.Subscript(value=path, slice=key, ctx=ast.Load()), reads)
            if pattern.rest:
                assign(pattern.rest, path)
        elif isinstance(pattern, ast.MatchClass):
            reads.append(ast.Expr(value=pattern.cls))
            self_matching = isinstance(pattern.cls, ast.Name) and pattern.cls.id in SELF_MATCHING
            for index, item in enumerate(pattern.patterns):
                attribute = path if self_matching else ast.Call(
                    func=ast.Name(id="getattr", ctx=ast.Load()),
                    args=[path, ast.Subscript(value=ast.Attribute(value=pattern.cls, attr="__match_args__",
                                                                   ctx=ast.Load()),
                                              slice=ast.Constant(value=index), ctx=ast.Load())], keywords=[])
                self._bind(item, attribute, reads)
            for name, item in zip(pattern.kwd_attrs, pattern.kwd_patterns):
                self._bind(item, ast.Attribute(value=path, attr=name, ctx=ast.Load()), reads)
