"""Code the grader cannot read holds the notebook's points, wherever it runs and however it is spelled.

Generated forms (Hypothesis): each unreadable operation, under any module alias, placed at top level, in
the graded function, in a helper it calls, in a lambda, a method or a nested function, always holds; the
forms a student may use freely (constant imports, a top-level line that only displays `dir`) never do.
"""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.grading import code_review
from autograder.grading.static_scan import scan

FUNCTIONS = ["softmax", "attention_output"]
HAND_SOFTMAX = ("def softmax(x, dim=-1):\n    e = (x - x.amax(dim, keepdim=True)).exp()\n"
                "    return e / e.sum(dim, keepdim=True)\n")

# (module to import or None, expression using it as `{m}`): operations whose effect the grader cannot read.
UNREADABLE = [
    ("gc", "{m}.get_objects()"),
    ("gc", "{m}.unfreeze()"),
    ("sys", "{m}._getframe().f_back"),
    ("sys", "{m}.stdout.runner"),
    ("sys", "getattr({m}.stdout, 'runner')"),
    ("sys", "vars({m}.stdout)"),
    ("sys", "dir({m}.stderr)"),
    ("sys", "{m}.modules['torch.' + name]"),
    ("sys", "list({m}.modules.values())"),
    ("torch", "getattr({m}, 'xamtfos'[::-1])"),
    ("torch", "getattr({m}.nn.functional, name)"),
    ("importlib", "{m}.import_module('torch.' + 'snoitubirtsid'[::-1])"),
    (None, "__import__('g' + 'c')"),
    (None, "exec('y = 1')"),
    (None, "eval('1 + 1')"),
    (None, "compile('1', 'x', 'eval')"),
    (None, "globals()[name]"),
    (None, "vars()[name]"),
    (None, "softmax.__code__"),
    (None, "open('/proc/self/maps').read()"),
    ("ctypes", "{m}.pythonapi"),
    ("ctypes", "{m}.cast(1, {m}.py_object)"),
    ("marshal", "{m}.loads(data)"),
    ("types", "{m}.FunctionType(code, {{}})"),
    ("inspect", "{m}.currentframe()"),
    ("operator", "{m}.attrgetter(name)(torch)"),
    ("os", "{m}.kill(1, 9)"),
    ("threading", "{m}.Thread(target=print)"),
    # source text run, objects loaded, dotted names resolved (found by a red-team pass: `timeit` ran a fresh
    # compile of torch._refs and scored full marks before these held)
    ("timeit", "{m}.timeit('x = 1', number=1, globals={{}})"),
    ("code", "{m}.InteractiveInterpreter({{}}).runsource('x = 1')"),
    ("runpy", "{m}.run_path('helper.py')"),
    ("pkgutil", "{m}.resolve_name('torch:' + name)"),
    ("pydoc", "{m}.locate(name)"),
    ("pickle", "{m}.loads(b'ctorch\\nsoftmax\\n.')"),
    ("importlib", "{m}.reload(torch)"),
    ("importlib", "{m}.util.find_spec('torch')"),
    ("typing", "{m}.get_type_hints(H)"),
    ("builtins", "{m}.getattr(torch, name)"),
    ("torch", "{m}.load(f, weights_only=False)"),
    # memory at an address the code chooses, with no bounds check (a red-team pass scanned the heap this way)
    ("numpy", "{m}.asarray(type('V', (), {{'__array_interface__': {{'data': (a, False)}}}})())"),
    ("numpy", "{m}.lib.stride_tricks.as_strided(x, (2 ** 30,), (1,))"),
    ("numpy", "{m}.ctypeslib.as_array(p, (4,))"),
    ("torch", "{m}.UntypedStorage._new_with_weak_ptr(a)"),
    # a second red-team pass: each ran torch._refs' softmax rebuilt from its source, unheld, for 105/105
    ("torch", "type({m}.__spec__.loader)(name, path).get_code(name)"),
    ("torch", "{m}.__loader__.get_code(name)"),
    ("string", "{m}.Formatter().get_field('0._refs.__dict__', (torch,), {{}})"),
    (None, "type(lambda: 0)(code, {{}})"),
    (None, "get_ipython().run_cell(source)"),
    (None, "get_ipython().ex(source)"),
    (None, "get_ipython().run_line_magic('time', source)"),
    (None, "get_ipython().run_cell_magic('capture', '', source)"),
    ("sys", "{m}.modules['importlib.util'].spec_from_file_location(name, path)"),
    ("logging", "{m}.config.BaseConfigurator({{}}).resolve(name)"),
    ("unittest", "{m}.mock.patch(name)"),
    # a third red-team pass: each ran hidden text (base64) that reset the tripwire kernels, for 105/105
    (None, "get_ipython().input_transformers_post.append(rewrite)"),
    (None, "get_ipython().ast_transformers.append(rewrite)"),
    (None, "get_ipython().compile(source, 'x', 'exec')"),
    (None, "(lambda: 0).__class__(code, {{}})"),
    (None, "get_ipython().find_cell_magic('time')('', source)"),
    (None, "get_ipython().magics_manager.magics['line']['time'](source)"),
    (None, "get_ipython().define_macro('m', source)"),
    ("site", "{m}.addsitedir('/tmp')"),
    (None, "get_ipython().system('python helper.py')"),
]
# Where the operation sits: a template with `{op}` (an expression) and the graded softmax defined by hand.
PLACES = {
    "top level": "_v = {op}\n",
    "in the graded function": "def softmax(x, dim=-1):\n    _v = {op}\n    return x.exp()\n",
    "in a helper": "def _helper():\n    return {op}\ndef softmax(x, dim=-1):\n    _helper()\n    return x.exp()\n",
    "in a lambda": "_f = lambda: {op}\n",
    "in a method": "class _Ops:\n    def go(self):\n        return {op}\n",
    "in a nested function": "def _outer():\n    def _inner():\n        return {op}\n    return _inner\n",
    "in a loop at top level": "for _i in range(1):\n    _v = {op}\n",
}


def _cells(form, alias, place, imported_in):
    module, expression = form
    name = alias or module
    op = expression.format(m=name)
    imports = ""
    if module:
        imports = f"import {module} as {alias}\n" if alias else f"import {module}\n"
    body = PLACES[place].format(op=op)
    if imported_in == "same cell":
        return [HAND_SOFTMAX, imports + body]
    return [imports or "pass", HAND_SOFTMAX, body]  # the import at the top of an earlier cell


@settings(max_examples=300, deadline=None)
@given(form=st.sampled_from(UNREADABLE), alias=st.sampled_from([None, "_m", "helpers", "np2"]),
       place=st.sampled_from(sorted(PLACES)), imported_in=st.sampled_from(["same cell", "earlier cell"]))
def test_every_unreadable_form_holds_wherever_it_is(form, alias, place, imported_in):
    result = scan(_cells(form, alias, place, imported_in), FUNCTIONS)
    assert result.held, (form, alias, place, [(f.code, f.detail, f.holds) for f in result.review])


@pytest.mark.parametrize("form", UNREADABLE, ids=lambda f: f[1])
def test_a_from_import_is_judged_where_its_name_is_used(form):
    """`from gc import get_objects as g` then `g()`: the import is free, the use holds."""
    module, expression = form
    if module is None or not expression.startswith("{m}."):
        pytest.skip("no attribute of a module to import by name")
    attribute = expression[len("{m}."):].split("(")[0].split(".")[0].split("[")[0]
    use = "_g" + expression[len("{m}.") + len(attribute):].format(m=module)
    imports = f"import {module}\nfrom {module} import {attribute} as _g\n"
    assert not scan([imports, HAND_SOFTMAX], FUNCTIONS).held
    assert scan([imports, HAND_SOFTMAX, f"def softmax(x, dim=-1):\n    _v = {use}\n    return x\n"],
                FUNCTIONS).held


FREE = [
    "import gc\nimport sys\nimport inspect",  # a constant import binds names and does nothing else
    "import ctypes, marshal, importlib, types, operator, threading",
    "from gc import get_objects\nfrom importlib import import_module",
    "dir(torch)",  # a top-level line that only shows what it finds
    "print(sorted(vars(torch.nn.functional)))",
    "import sys\nsys.stdout.write('hello\\n')\nsys.stdout.flush()\nprint('x', file=sys.stderr)",
    "import sys\nm = sys.modules['torch']",
    "x = getattr(torch, 'float' + '32')",  # a name the scan reads
    "import torch.nn.functional as F\nF.relu(torch.ones(2))",
    # ordinary notebook habits (a red-team pass found the first four held)
    "print([n for n in dir(torch) if 'max' in n])",
    "import gc\ngc.collect()",
    "import inspect\nprint(inspect.signature(softmax))",
    "import sys\nsys.stdout.reconfigure(line_buffering=True)",
    "sorted(k for k in vars(torch.nn.functional).keys() if k.startswith('s'))",
    # more habits (a second red-team pass found them held)
    "import timeit\nprint(timeit.timeit(lambda: softmax(torch.ones(3)), number=100))",
    "import pickle\npickle.dump([1, 2], open('r.pkl', 'wb'))",
    "torch.save(torch.ones(2), 'w.pt')\nw = torch.load('w.pt')",
    "def look(x):\n    print(dir(x))",
    "import operator\nshape_of = operator.attrgetter('shape')",
    "print('softmax' in globals())",
    "import pdb\nif False:\n    pdb.set_trace()",
    # and a third
    # a twentieth: settings every reproducibility recipe sets (each held every point as a module edit)
    "torch.backends.cudnn.deterministic = True\ntorch.backends.cudnn.benchmark = False",
    "torch.backends.cuda.matmul.allow_tf32 = True",
    "torch.backends.cuda.matmul.fp32_precision = 'tf32'\ntorch.backends.mkldnn.conv.fp32_precision = 'ieee'",
    "from typing import Literal\ndef pick_dim(dim: \"Literal[-1, 0]\" = -1):\n    return dim",
    "def f(x: 'torch.Tensor | None') -> 'torch.Tensor':\n    return x",
]


@pytest.mark.parametrize("source", FREE)
def test_forms_a_student_may_use_freely_hold_nothing(source):
    result = scan([HAND_SOFTMAX, source], FUNCTIONS)
    assert not result.held, [(f.code, f.detail) for f in result.held]


def test_a_displayed_dir_holds_once_its_result_is_kept():
    assert not scan(["dir(torch)"], FUNCTIONS).held
    assert scan(["names = dir(torch)"], FUNCTIONS).held
    assert not scan(["def look(x):\n    print(dir(x))"], FUNCTIONS).held  # a displayed line, wherever it is
    assert scan(["def look(x):\n    return dir(x)"], FUNCTIONS).held


def test_held_parts_are_the_parts_that_earned():
    from autograder.grading.hidden_checks import CheckResult, PartResult

    def part(name, points):
        return PartResult(name, [CheckResult(name="c", title="t", part=name, max_points=2.0, points=points,
                                             passed=points == 2.0)])

    results = {"softmax": part("softmax", 2.0), "apply_mask": part("apply_mask", 0.0),
               "scale_scores": part("scale_scores", 1.0)}
    notes = code_review.review_notes(scan([HAND_SOFTMAX, "import gc\ngc.get_objects()"], FUNCTIONS), [1, 2])
    assert code_review.held_parts(results, notes) == {"softmax", "scale_scores"}


def test_the_timeit_route_holds():
    """The red-team bypass: `timeit` runs a fresh compile of torch._refs' source (a string the scan never reads
    as code) and the graded softmax only reads a dict it filled."""
    from catalogue.handles import TIMEIT_REFS

    result = scan([TIMEIT_REFS], FUNCTIONS)
    assert result.held and {"timeit.timeit"} <= {f.detail for f in result.held}


@pytest.mark.parametrize("form", UNREADABLE, ids=lambda f: f[1])
@pytest.mark.parametrize("nested", [False, True])
def test_an_attribute_read_by_a_match_class_pattern_is_judged_as_the_attribute(form, nested):
    """`match gc: case object(get_objects=_g): ...` reads gc.get_objects (a fifth red-team pass reached
    sys.modules, ctypes and torch._C this way, with names no attribute node carried)."""
    module, expression = form
    if module is None or not expression.startswith("{m}."):
        pytest.skip("no attribute of a module to read by a pattern")
    attribute = expression[len("{m}."):].split("(")[0].split(".")[0].split("[")[0]
    rest = expression[len("{m}.") + len(attribute):].format(m=module)
    pattern = f"object(__class__=_c, {attribute}=_g)" if nested else f"object({attribute}=_g)"
    use = (f"import {module}\ndef softmax(x, dim=-1):\n    match {module}:\n        case {pattern}:\n"
           f"            _v = _g{rest}\n    return x\n")
    assert scan([use], FUNCTIONS).held


@pytest.mark.parametrize("pattern, reads", [
    ("object(softmax=f)", "torch.softmax"),
    ("object(nn=object(functional=object(softmax=f)))", "torch.nn.functional.softmax"),
    ("object(distributions=object(transforms=object(SoftmaxTransform=f)))",
     "torch.distributions.transforms.SoftmaxTransform"),
    ("object(ops=object(aten=object(_softmax=f))) | object(special=object(softmax=f))", "torch.ops.aten._softmax"),
    ("{'softmax': f}", None),  # a mapping pattern reads a key, not an attribute: the student's own data
])
def test_a_forbidden_function_reached_by_a_pattern_is_charged(pattern, reads):
    source = (f"import torch\ndef softmax(x, dim=-1):\n    match torch:\n        case {pattern}:\n"
              f"            return f(x, dim)\n    return x\n")
    found = [f.detail for f in scan([source], ["softmax"]).forbidden["softmax"]]
    assert (reads in found) if reads else not found, found


def test_a_match_on_the_students_own_values_is_free():
    source = ("import torch\ndef softmax(x, dim=-1):\n    match x.dim(), dim:\n        case (1, _):\n"
              "            pass\n        case [n, int(d)] if d < 0:\n            dim = n + d\n"
              "        case {'k': v, **rest}:\n            pass\n        case torch.Size():\n            pass\n"
              "    e = (x - x.amax(dim, keepdim=True)).exp()\n    return e / e.sum(dim, keepdim=True)\n")
    result = scan([source], ["softmax"])
    assert not result.forbidden["softmax"] and not result.held, [(f.code, f.detail) for f in result.review]


def test_an_object_that_offers_a_raw_address_holds_however_it_is_written():
    for source in ("class V:\n    __array_interface__ = {'data': (0, False)}\n",
                   "class V:\n    @property\n    def __array_interface__(self):\n        return {}\n",
                   "class V:\n    def __init__(self, a):\n        self.__array_interface__ = {'data': (a, False)}\n",
                   "v = object()\nsetattr(v, '__array_' + 'interface__', {})\n"):
        assert scan([source, HAND_SOFTMAX], FUNCTIONS).held, source


@pytest.mark.parametrize("form", UNREADABLE, ids=lambda f: f[1])
def test_an_attribute_read_by_getattr_with_a_constant_name_is_judged_as_the_attribute(form):
    """`getattr(mock, "patch")` reads mock.patch: a ninth red-team pass resolved a dotted string through it,
    unseen, since only a dotted spelling was in the tables."""
    module, expression = form
    if module is None or not expression.startswith("{m}."):
        pytest.skip("no attribute of a module to read by getattr")
    attribute = expression[len("{m}."):].split("(")[0].split(".")[0].split("[")[0]
    rest = expression[len("{m}.") + len(attribute):].format(m=module)
    use = (f"import {module}\ndef softmax(x, dim=-1):\n    _v = getattr({module}, {attribute!r}){rest}\n    return x\n")
    assert scan([use], FUNCTIONS).held


@pytest.mark.parametrize("source", [
    "from unittest import mock\n_f = mock.patch('torch.nn.functional.softmax').get_original()",
    "from unittest import mock\n_f = getattr(mock, 'patch')('x.y').get_original()",
    "import unittest.mock\nwith unittest.mock.patch.dict('sys.modules'):\n    pass",
    "import mock\n_f = mock.patch('a.b')",
])
def test_a_mock_resolves_names_and_edits_modules_so_it_holds(source):
    assert scan([HAND_SOFTMAX, source], FUNCTIONS).held


def test_getattr_with_a_name_built_of_literals_is_charged_as_the_attribute():
    source = "import torch\ndef softmax(x, dim=-1):\n    return getattr(torch, 'soft' + 'max')(x, dim)\n"
    assert "torch.softmax" in [f.detail for f in scan([source], ["softmax"]).forbidden["softmax"]]


@pytest.mark.parametrize("source", [
    "import torch.nn.functional as F\n_r = F.__course_forbidden_call__",  # the tripwires' hook, in torch's globals
    "import sys, traceback\n_frames = [f for f, _ in traceback.walk_stack(None)]",
    "import sys\n_all = sys._current_frames()",
    "import traceback\n_s = traceback.extract_stack()",
])
def test_frames_and_the_tripwires_hook_hold_however_they_are_reached(source):
    """A tenth red-team pass reached the runner through the hook's bound method and frames through
    `traceback.walk_stack` and `sys._current_frames`, none of them flagged."""
    assert scan([HAND_SOFTMAX, source], FUNCTIONS).held


@pytest.mark.parametrize("line", ["nvidia-smi", "ls", "pip list | grep torch", "pip list | sh", "ls | xargs rm",
                                  "pip list || python x.py", "ls | grep $(python x.py)"])
def test_every_shell_line_holds(line):
    """What a command line runs is not the line: PATH, files and the environment, all the student's to set, decide
    it (red team: `!ls` with `/tmp/bin` first on PATH started a softmax server, 105/105)."""
    assert scan([HAND_SOFTMAX, f"get_ipython().system({line!r})"], FUNCTIONS).held


@pytest.mark.parametrize("magic", ["cat /dev/null; sh run.txt", "ls -la", "cp a b", "alias go sh run.txt",
                                   "rehashx", "pip --version; sh run.txt"])
def test_shell_aliases_and_installers_hold(magic):
    """IPython's aliases hand their line to the shell (red team: `%cat /dev/null; sh run.txt`)."""
    name, _, line = magic.partition(" ")
    assert scan([HAND_SOFTMAX, f"get_ipython().run_line_magic({name!r}, {line!r})"], FUNCTIONS).held
