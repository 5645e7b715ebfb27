"""Unit tests of the grader's static read of student code (`autograder/static_scan.py`)."""
import ast
import json
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import catalogue
from autograder.grading import static_scan
from autograder.grading.static_scan import Finding, scan
from catalogue import evidence

FUNCTIONS = ("attention_scores", "scale_scores", "apply_mask", "softmax", "attention_output",
             "scaled_dot_product_attention", "causal_mask", "key_padding_to_attn_mask", "fixed_attention")

HAND_SOFTMAX = """
def softmax(x, dim=-1):
    \"\"\"Compute softmax by hand.\"\"\"
    softmax_out = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return softmax_out / softmax_out.sum(dim=dim, keepdim=True)
"""
OWN_SDPA = """
def scaled_dot_product_attention(q, k, v, mask=None):
    weights = softmax(apply_mask(scale_scores(attention_scores(q, k), q.shape[-1]), mask), dim=-1)
    return weights @ v, weights
"""


def cells(*sources):
    return [textwrap.dedent(s).strip("\n") + "\n" for s in sources]


def codes(result, function):
    return {f.code for f in result.forbidden[function]}


def solution_answer_cells():
    nb = json.loads(catalogue.SOLUTION_NOTEBOOK.read_text())
    return ["".join(c["source"]) for c in nb["cells"]
            if c["cell_type"] == "code" and c["metadata"].get("nbgrader", {}).get("solution")]


# -- forbidden uses that a graded function reaches -----------------------------------

SOFTMAX_CASES = {
    "direct": ["def softmax(x, dim=-1):\n    return torch.softmax(x, dim=dim)"],
    "functional": ["def softmax(x, dim=-1):\n    return F.softmax(x, dim)"],
    "method": ["def softmax(x, dim=-1):\n    return x.softmax(dim)"],
    "log-softmax": ["def softmax(x, dim=-1):\n    return F.log_softmax(x, dim).exp()"],
    "module": ["def softmax(x, dim=-1):\n    return nn.Softmax(dim=dim)(x)"],
    "helper": ["def helper(x):\n    return F.softmax(x, -1)", "def softmax(x, dim=-1):\n    return helper(x)"],
    "helper-defined-later": ["def softmax(x, dim=-1):\n    return helper(x)", "def helper(x):\n    return F.softmax(x, -1)"],  # noqa: E501 - test data
    "module-alias": ["sm = torch.softmax", "def softmax(x, dim=-1):\n    return sm(x, dim)"],
    "lambda": ["softmax = lambda x, dim=-1: x.softmax(dim)"],
    "callable-class": ["""
        class S:
            def __call__(self, x, dim=-1):
                return torch.softmax(x, dim)
        _s = S()
        def softmax(x, dim=-1):
            return _s(x, dim)
        """],
    "import-alias": ["from torch.nn.functional import softmax as sm\n\ndef softmax(x, dim=-1):\n    return sm(x, dim)"],
    "import-in-function": ["def softmax(x, dim=-1):\n    from torch import softmax as s\n    return s(x, dim)"],
    "import-rebinds": ["from torch import softmax"],
    "star-import": ["from torch.nn.functional import *\n\ndef softmax2(x):\n    return x", "sm = log_softmax",
                    "def softmax(x, dim=-1):\n    return sm(x, dim).exp()"],
    "getattr": ['def softmax(x, dim=-1):\n    return getattr(torch, "softmax")(x, dim)'],
    "getattr-folded": ['def softmax(x, dim=-1):\n    return getattr(x, "soft" + "max")(dim)'],
    "aten-getattr": ['def softmax(x, dim=-1):\n    return torch.ops.aten.__getattr__("_softmax")(x, dim, False)'],
    "aten-string": ['def softmax(x, dim=-1):\n    return torch._C._dispatch_call("aten::_softmax", x, dim)'],
    "masked-softmax": [evidence.MASKED_SOFTMAX],
    "masked-softmax-overload": ["def softmax(x, dim=-1):\n    return torch.ops.aten._masked_softmax.default(x, x > 0, dim)"],  # noqa: E501 - test data
    "refs": ["def softmax(x, dim=-1):\n    return torch._refs.softmax(x, dim)"],
    "decomp": ["def softmax(x, dim=-1):\n    return torch._decomp.decompositions._softmax(x, dim, False)"],
    "safe-softmax": ["def softmax(x, dim=-1):\n    return torch._safe_softmax(x, dim)"],
    "special": ["def softmax(x, dim=-1):\n    return torch.special.softmax(x, dim)"],
    "softmin": ["def softmax(x, dim=-1):\n    return F.softmin(-x, dim)"],
    "with-block": ["with torch.no_grad():\n    sm = torch.softmax", "def softmax(x, dim=-1):\n    return sm(x, dim)"],
    "for-target": ["for sm in [torch.softmax]:\n    pass", "def softmax(x, dim=-1):\n    return sm(x, dim)"],
    "container": ["TOOLS = {}", 'TOOLS["sm"] = torch.softmax', "def softmax(x, dim=-1):\n    return TOOLS['sm'](x, dim)"],  # noqa: E501 - test data
    "global-in-function": ["def setup():\n    global sm\n    sm = torch.softmax\nsetup()",
                           "def softmax(x, dim=-1):\n    return sm(x, dim)"],
    "globals-subscript": ['globals()["sm"] = torch.softmax', "def softmax(x, dim=-1):\n    return sm(x, dim)"],
    "default-argument": ["def softmax(x, dim=-1, f=torch.softmax):\n    return f(x, dim)"],
    "class-attribute": ["class S:\n    fn = staticmethod(F.softmax)", "def softmax(x, dim=-1):\n    return S.fn(x, dim)"],  # noqa: E501 - test data
    "magic-cell-body": ["%%time\ndef softmax(x, dim=-1):\n    return torch.softmax(x, dim)"],
    "magic-line": ["%time sm = torch.softmax", "def softmax(x, dim=-1):\n    return sm(x, dim)"],
    "timeit-setup": ["%%timeit -n 1 sm = torch.softmax\npass", "def softmax(x, dim=-1):\n    return sm(x, dim)"],
    "timeit-options": ["%timeit -n 1 -r 1 sm = torch.softmax", "def softmax(x, dim=-1):\n    return sm(x, dim)"],
    # stored into a name rather than bound to it (red-team findings)
    "list-append": [evidence.CAPTURED_REFS],
    "dict-update": ["_d = {}", "_d.update(f=torch.softmax)", "def softmax(x, dim=-1):\n    return _d['f'](x, dim)"],
    "setattr-holder": ["class H:\n    pass", "setattr(H, 'f', staticmethod(torch.softmax))",
                       "def softmax(x, dim=-1):\n    return H.f(x, dim)"],
    "walrus": ["(_impl := torch._refs.softmax)", "def softmax(x, dim=-1):\n    return _impl(x, dim)"],
    "vars-lookup-stripped": [evidence.LOOKED_UP_NAME],
    "dict-lookup": ['def softmax(x, dim=-1):\n    return F.__dict__["softmax"](x, dim)'],
    # red-team pass 2
    "stored-by-a-function": ["_reg = {}", "def _fill(r):\n    r['f'] = torch.softmax", "_fill(_reg)",
                             "def softmax(x, dim=-1):\n    return _reg['f'](x, dim)"],
    "decoy-attribute": ["class _Decoy:\n    softmax = None", "def softmax(x, dim=-1):\n    return x.softmax(dim)"],
    "aten-path-string": ['def softmax(x, dim=-1):\n    return _table["aten._softmax.default"](x, dim, False)'],
    "forked-helper": ["""
        import os, socket
        def _serve(sock):
            x = torch.load(sock)
            torch.save(torch.softmax(x, -1), sock)
        _mine, _theirs = socket.socketpair()
        if os.fork() == 0:
            _serve(_theirs)
        def softmax(x, dim=-1):
            return _ask(_mine, x)
        """],
    "own-method-name-on-torch": ["class A:\n    def softmax(self):\n        pass",
                                 "def softmax(x, dim=-1):\n    return torch.softmax(x, dim)"],
}


@pytest.mark.parametrize("name", SOFTMAX_CASES)
def test_softmax_builtin_is_forbidden(name):
    result = scan(cells(*SOFTMAX_CASES[name]), FUNCTIONS)
    assert "softmax-builtin" in codes(result, "softmax"), result.findings


SDPA_CASES = {
    "functional": ["def scaled_dot_product_attention(q, k, v, mask=None):\n"
                   "    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), None"],
    "builtin-sample": [evidence.BUILTIN_SDPA],
    "flash-cpu-op": ["def scaled_dot_product_attention(q, k, v, mask=None):\n"
                     "    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)[0], None"],
    "fused-choice": ["def scaled_dot_product_attention(q, k, v, mask=None):\n"
                     "    torch._fused_sdp_choice(q, k, v)\n    return q, q"],
    "mha-forward": ["def scaled_dot_product_attention(q, k, v, mask=None):\n"
                    "    return F.multi_head_attention_forward(q, k, v)"],
    "mha-module": ["mha = nn.MultiheadAttention(8, 1)",
                   "def scaled_dot_product_attention(q, k, v, mask=None):\n    return mha(q, k, v)"],
    "native-mha": ["def scaled_dot_product_attention(q, k, v, mask=None):\n"
                   "    return torch._native_multi_head_attention(q, k, v)"],
    "encoder-layer": ["layer = torch.nn.TransformerEncoderLayer(8, 1)",
                      "def scaled_dot_product_attention(q, k, v, mask=None):\n    return layer(q), None"],
    "flex": ["from torch.nn.attention.flex_attention import flex_attention",
             "def scaled_dot_product_attention(q, k, v, mask=None):\n    return flex_attention(q, k, v), None"],
    "flex-attribute": ["def scaled_dot_product_attention(q, k, v, mask=None):\n"
                       "    return torch.nn.attention.flex_attention.flex_attention(q, k, v), None"],
    "via-own-softmax": ["def softmax(x, dim=-1):\n    return torch.softmax(x, dim)", OWN_SDPA],
}


@pytest.mark.parametrize("name", SDPA_CASES)
def test_sdpa_builtin_is_forbidden(name):
    result = scan(cells(*SDPA_CASES[name]), FUNCTIONS)
    assert result.forbidden["scaled_dot_product_attention"], result.findings
    if name == "via-own-softmax":
        assert codes(result, "scaled_dot_product_attention") == {"softmax-builtin"}
    else:
        assert "sdpa-builtin" in codes(result, "scaled_dot_product_attention")


def test_attention_family_wins_over_softmax():
    assert static_scan.family("_scaled_dot_product_flash_attention_for_cpu") == "sdpa-builtin"
    assert static_scan.family("_transformer_softmax") == "sdpa-builtin"
    assert static_scan.family("LogSoftmax") == "softmax-builtin"
    assert static_scan.family("logsumexp") is None


def test_finding_fields():
    result = scan(cells("x = 1", "def helper(x):\n    return F.softmax(x, -1)", "def softmax(x, dim=-1):\n"
                        "    return helper(x)"), FUNCTIONS)
    assert result.forbidden["softmax"] == [Finding(1, 2, "forbidden", "softmax-builtin", "F.softmax", "helper")]
    assert static_scan.describe(result.forbidden["softmax"][0]).startswith("第 2 个单元格第 2 行：F.softmax")


def test_chained_attribute_is_one_finding():
    result = scan(cells("def softmax(x, dim=-1):\n    return torch.ops.aten._masked_softmax.default(x, x, dim)"),
                  FUNCTIONS)
    assert [f.detail for f in result.forbidden["softmax"]] == ["torch.ops.aten._masked_softmax"]


# -- what must not be forbidden -----------------------------------------------------

def test_reference_solution_is_clean():
    result = scan(solution_answer_cells(), FUNCTIONS)
    assert result.findings == [] and result.unparsable == []
    assert set(result.forbidden) == set(FUNCTIONS)
    reference = scan([(catalogue.ROOT / "solutions" / "sdpa.py").read_text()], FUNCTIONS)
    assert reference.findings == []


def correct_sample_sources():
    for sample in catalogue.CORRECT:
        yield from ((sample.name, s) for s in (*sample.replace.values(), *sample.append))


@pytest.mark.parametrize("name,source", list(correct_sample_sources()))
def test_correct_samples_have_no_forbidden(name, source):
    result = scan(solution_answer_cells() + [source], FUNCTIONS)
    assert [f for f in result.findings if f.kind == "forbidden"] == []
    assert result.review == []


@pytest.mark.parametrize("own", [evidence.OWN_NAMES["softmax"], """
    import types
    from collections import namedtuple
    def _by_hand(x, dim=-1):
        e = torch.exp(x - x.amax(dim=dim, keepdim=True))
        return e / e.sum(dim=dim, keepdim=True)
    ops = types.SimpleNamespace(softmax=_by_hand)
    Pair = namedtuple("Pair", "softmax other")
    pair = Pair(_by_hand, None)
    def softmax(x, dim=-1):
        return ops.softmax(x, dim) if x.dim() else pair.softmax(x, dim)
    """])
def test_the_students_own_names_are_not_builtins(own):
    """A method or attribute the student defines, and a string used as data, are not forbidden."""
    result = scan(cells(own, OWN_SDPA), FUNCTIONS)
    assert result.forbidden["softmax"] == [] and result.forbidden["scaled_dot_product_attention"] == []
    assert result.review == []


def test_a_cell_too_deep_to_read_is_flagged_not_fatal():
    result = scan(cells(HAND_SOFTMAX, evidence.DEEP_EXPRESSION), FUNCTIONS)
    assert result.forbidden["softmax"] == [] and [f.code for f in result.review] == ["dynamic-code"]


def test_reaching_the_runner_without_gc_is_flagged():
    result = scan(cells(evidence.UNWIRED_SDPA), FUNCTIONS)
    assert {"introspection", "grader-internals"} <= {f.code for f in result.review}
    assert codes(result, "scaled_dot_product_attention") == {"sdpa-builtin"}


def test_own_softmax_docstring_locals_and_unreachable_comparisons():
    result = scan(cells(HAND_SOFTMAX, OWN_SDPA, """
        q, k, v = torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 2)
        print((scaled_dot_product_attention(q, k, v)[0] - F.scaled_dot_product_attention(q, k, v)).abs().max())
        print(torch.allclose(softmax(q), torch.softmax(q, -1)))
        """), FUNCTIONS)
    assert all(result.forbidden[f] == [] for f in FUNCTIONS)
    top = [f for f in result.findings if f.kind == "forbidden"]
    assert {f.detail for f in top} == {"F.scaled_dot_product_attention", "torch.softmax"}


def test_local_name_does_not_reach_a_global_of_the_same_name():
    result = scan(cells("sm = torch.softmax(torch.ones(3), -1)", """
        def softmax(x, dim=-1):
            sm = torch.exp(x - x.amax(dim=dim, keepdim=True))
            return sm / sm.sum(dim=dim, keepdim=True)
        """), FUNCTIONS)
    assert result.forbidden["softmax"] == []


def test_missing_function_maps_to_empty_list():
    result = scan(cells("x = 1"), ["softmax", "not_defined"])
    assert result.forbidden == {"softmax": [], "not_defined": []}


def test_unconditional_rebinding_replaces():
    result = scan(cells("softmax = torch.softmax", HAND_SOFTMAX, OWN_SDPA), FUNCTIONS)
    assert result.forbidden["softmax"] == result.forbidden["scaled_dot_product_attention"] == []
    assert any(f.code == "softmax-builtin" for f in result.findings)  # still recorded


def test_conditional_rebinding_adds():
    conditional = "if True:\n" + textwrap.indent(HAND_SOFTMAX.strip("\n"), "    ")
    result = scan(cells("softmax = torch.softmax", conditional, OWN_SDPA), FUNCTIONS)
    assert codes(result, "softmax") == codes(result, "scaled_dot_product_attention") == {"softmax-builtin"}
    in_try = "try:\n" + textwrap.indent(HAND_SOFTMAX.strip("\n"), "    ") + "\nexcept Exception:\n    pass"
    assert codes(scan(cells("softmax = torch.softmax", in_try), FUNCTIONS), "softmax") == {"softmax-builtin"}


def test_star_import_before_own_definition_is_replaced():
    result = scan(cells("from torch.nn.functional import *", HAND_SOFTMAX), FUNCTIONS)
    assert result.forbidden["softmax"] == []
    assert codes(result, "scaled_dot_product_attention") == {"sdpa-builtin"}  # bound by the star, never redefined


def test_cycles_terminate():
    result = scan(cells("def a(x):\n    return b(x)", "def b(x):\n    return a(x) + x.softmax(-1)",
                        "def softmax(x, dim=-1):\n    return a(x)"), FUNCTIONS)
    assert codes(result, "softmax") == {"softmax-builtin"}


# -- parsing ---------------------------------------------------------------------------

def test_a_cell_the_grader_cannot_parse_holds():
    """The runner's IPython may run what the grader cannot parse (a `__future__` flag or a transformer from an
    earlier cell, the student's recursion limit): an unparsable cell is a holding note, pointing at its line."""
    result = scan(cells("x = 1\ndef softmax(x:\n    return torch.softmax(x)", HAND_SOFTMAX), FUNCTIONS)
    assert result.unparsable == [0]
    assert [(f.cell, f.line, f.code) for f in result.held] == [(0, 2, "dynamic-code")]
    assert "SyntaxError" in result.held[0].detail and result.forbidden["softmax"] == []


# Code nested past the grader's recursion limit, which a runner with `sys.setrecursionlimit(20000)` compiled (a
# red-team notebook hid the built-in softmax in such a cell, and read nothing held).
DEEP = {
    "unary": lambda n: "x = " + "-" * n + "1",
    "attributes": lambda n: "x = a" + ".b" * n,
    "subscripts": lambda n: "x = a" + "[0]" * n,
    "sums": lambda n: "x = " + "+".join(["a"] * n),
    "calls": lambda n: "x = f" + "()" * n,
}


@settings(max_examples=30, deadline=None, derandomize=True)
@given(shape=st.sampled_from(sorted(DEEP)), depth=st.sampled_from([10, 1000, 4000, 20000]),
       where=st.sampled_from(["cell", "magic"]))
def test_what_the_grader_cannot_parse_is_held_whatever_its_shape(shape, depth, where):
    code = DEEP[shape](depth)
    source = code if where == "cell" else "%time " + code
    try:
        ast.parse(code)
        parses = True
    except (SyntaxError, RecursionError, MemoryError):
        parses = False
    result = scan([source, "import torch\ndef softmax(x):\n    return torch.softmax(x, -1)\n"], FUNCTIONS)
    assert codes(result, "softmax") == {"softmax-builtin"}  # the cells after it are read
    unreadable = [f for f in result.held if f.cell == 0]
    if not parses:  # never skipped in silence (what Python parses but the grader's own walk cannot read holds too)
        assert unreadable, (shape, depth, where)
    if depth == 10:  # and ordinary code holds nothing
        assert not unreadable, (shape, depth, where)


def test_source_given_as_lines():
    result = scan([["def softmax(x, dim=-1):\n", "    return x.softmax(dim)\n"]], FUNCTIONS)
    assert codes(result, "softmax") == {"softmax-builtin"}


def test_magics_do_not_break_parsing():
    result = scan(cells("%matplotlib inline\nimport math", "softmax?", HAND_SOFTMAX + "\n%timeit softmax(x)"),
                  FUNCTIONS)
    assert result.unparsable == [] and result.findings == []
    shell = scan(cells("!pip list\nx = 1"), FUNCTIONS)
    assert shell.unparsable == [] and [(f.code, f.detail) for f in shell.review] == [("dynamic-code", "!pip list")]


def test_timing_magics_with_options_are_read_as_the_code_they_run():
    """`%timeit -n 10 f(x)` runs `f(x)`: its options are not Python (the whole cell was unparsable, and held)."""
    for cell in ("%timeit -n 10 -r 3 softmax(x)", "%prun -q -l 5 softmax(x)", "%%timeit -n 2 y = x * 2\nsoftmax(y)",
                 "%timeit -n 10 torch.softmax(x, -1)"):
        result = scan(cells(HAND_SOFTMAX, cell), FUNCTIONS)
        assert result.unparsable == [] and result.held == [] and result.review == [], (cell, result)
        assert codes(result, "softmax") == set(), (cell, result)


def test_magic_body_keeps_cell_lines():
    result = scan(cells("%%time\nx = 1\ny = torch.softmax(x, -1)"), FUNCTIONS)
    assert [(f.line, f.detail) for f in result.findings] == [(3, "torch.softmax")]


# -- review ---------------------------------------------------------------------------

REVIEW_CASES = [
    ("introspection", "import gc\nobjs = gc.get_objects()", "gc.get_objects"),
    ("introspection", "import sys\nf = sys._getframe(1).f_back", "sys._getframe"),
    ("introspection", "import inspect\nframe = inspect.currentframe()", "inspect.currentframe"),
    ("introspection", "g = scale_scores.__globals__", "scale_scores.__globals__"),
    ("introspection", "kids = object.__subclasses__()", "object.__subclasses__"),
    ("module-edit", 'import sys\nsys.modules["torch"] = None', "sys.modules[...]"),
    ("module-edit", 'import sys\nsys.modules.pop("wire", None)', "sys.modules.pop"),
    ("module-edit", "torch.allclose = lambda *a, **k: True", "torch.allclose"),
    ("module-edit", "import numpy as np\nnp.allclose = lambda *a: True", "np.allclose"),
    ("module-edit", 'setattr(torch, "equal", lambda *a: True)', "setattr(torch, …)"),
    ("module-edit", "import builtins\nbuiltins.print = len", "builtins.print"),
    ("native-code", "import ctypes", "import ctypes"),
    ("native-code", "from cffi import FFI", "import cffi"),
    ("native-code", 'lib = torch.ops.load_library("/tmp/evil.so")', "'/tmp/evil.so'"),
    ("process-limits", "import resource\nresource.setrlimit(resource.RLIMIT_AS, (1, 1))", "resource.setrlimit"),
    ("process-limits", "import os\nos.nice(19)", "os.nice"),
    ("process-limits", "import os\nos.sched_setaffinity(0, {0})", "os.sched_setaffinity"),
    ("process-limits", "import fcntl\nfcntl.fcntl(1, 1031, 4096)", "fcntl.fcntl"),
    ("process-limits", "import os\nos.set_blocking(1, False)", "os.set_blocking(1, False)"),
    ("other-processes", 'status = open("/proc/2/status").read()', "'/proc/2/status'"),
    ("other-processes", 'pid = 7\nstat = open(f"/proc/{pid}/stat").read()', "'/proc/'"),
    ("other-processes", "import os, signal\nos.kill(1, signal.SIGSTOP)", "os.kill"),
    ("other-processes", "from os import kill", "os.kill"),
    ("other-processes", "import signal\nsignal.pidfd_send_signal(3, 9)", "signal.pidfd_send_signal"),
    ("dynamic-code", 'exec("x = 1")', "exec"),
    ("dynamic-code", 'f = eval("len")', "eval"),
    ("dynamic-code", 'm = __import__("os")', "__import__"),
    ("dynamic-code", 'import importlib\nm = importlib.import_module("os")', "importlib.import_module"),
    ("dynamic-code", 'name = "x"\ny = getattr(torch, name)', "getattr(…, name)"),
    ("dynamic-code", 'globals()["softmax"] = len', "globals()[...]"),
    ("dynamic-code", "%%bash\necho hi", "%%bash"),
    ("dynamic-code", "%store -r kept", "%store"),  # unpickles a file the student wrote (red team)
    ("dynamic-code", "%alias_magic r run\n%r helper.py", "%alias_magic"),  # a held magic under another name
    ("dynamic-code", "%autocall 2", "%autocall"),  # IPython rewrites later lines the scan reads as written
    # copy.copy calls what __reduce_ex__ returns from an installed frame (red team: it built a function there)
    ("dynamic-code", "class Box:\n    def __reduce_ex__(self, protocol):\n        return (len, ())",
     "__reduce_ex__"),
    ("dynamic-code", "import dis\ncode = dis.Bytecode(len).codeobj", "dis.Bytecode(len).codeobj"),
    # a lookup by a name the scan reads, of what the attribute would read; a code object's parts by keyword
    ("introspection", "from operator import attrgetter\ncode = attrgetter('__co' + 'de__')(len)", "'__code__'"),
    ("introspection", "import operator\nf = operator.attrgetter('g.__globals__')", "'g.__globals__'"),
    ("introspection", "import operator\nf = operator.methodcaller('replace', co_names=('T',))", "co_names=…"),
    ("grader-internals", "ip = get_ipython()\nip.events.register('post_run_cell', print)", "ip.events"),
    ("grader-internals", "get_ipython().display_formatter.formatters.clear()", "get_ipython().display_formatter"),
    ("grader-internals", "def f(r):\n    return r.proto_out", "r.proto_out"),
    ("grader-internals", 'import sys\nw = sys.modules["wire"]', "'wire'"),
]


@pytest.mark.parametrize("code,source,detail", REVIEW_CASES)
def test_review_categories(code, source, detail):
    result = scan([source], FUNCTIONS)
    assert (code, detail) in {(f.code, f.detail) for f in result.review}, result.review
    assert all(f.kind == "review" for f in result.review)


@pytest.mark.parametrize("source", [
    "import os\npath = '/proc/self/status'\nos.waitpid(-1, os.WNOHANG)",
    "class Box:\n    def __init__(self):\n        self.value = 1\nb = Box()\nb.value = 2",
    'x = getattr(torch, "float32")\nimport sys\nprint(sys.modules["torch"])',
    "import re\npattern = re.compile('a+')\nmodel_eval = torch.nn.Linear(2, 2).eval()",
    "x = torch.stack([torch.ones(2)])",
])
def test_ordinary_code_is_not_flagged(source):
    assert scan([source], FUNCTIONS).review == []


def test_a_lookup_by_an_ordinary_name_holds_nothing():
    source = "import operator\nshape_of = operator.attrgetter('shape', 'dtype')\nfirst = operator.itemgetter(0)"
    assert scan([source], FUNCTIONS).held == []


def test_review_findings_deduplicated_and_short():
    result = scan(["import gc\ngc.get_objects(); gc.get_objects()", "x = '/proc/1/" + "a" * 200 + "'"], FUNCTIONS)
    assert [f.detail for f in result.review].count("gc.get_objects") == 1
    assert all(len(f.detail) <= 80 for f in result.findings)


def attack_sources():
    for sample in catalogue.ATTACKS:
        for source in sample.append:
            if any(word in source for word in ("ctypes", "os.kill", "gc.")):
                yield sample.name, source


@pytest.mark.parametrize("name,source", list(attack_sources()))
def test_attacks_are_flagged_for_review(name, source):
    assert scan([source], FUNCTIONS).review


def test_evidence_attacks_are_caught():
    disarm = next(s for s in catalogue.EVIDENCE if s.name == "attack-disarm-tripwires")
    result = scan(solution_answer_cells() + list(disarm.replace.values()) + list(disarm.append), FUNCTIONS)
    assert codes(result, "softmax") == {"softmax-builtin"}
    assert codes(result, "scaled_dot_product_attention") == {"sdpa-builtin"}
    assert {"introspection", "grader-internals"} <= {f.code for f in result.review}
    for source in (evidence.STOP_AND_SMALL_PIPE, evidence.OUTPUT_FLOOD, evidence.ZYGOTE_STATE,
                   evidence.STRIP_TENSOR_DATA):
        assert scan([source], FUNCTIONS).review, source


# -- recording, tracing and compiling APIs ---------------------------------------------
RULE = """
_name = "tluafed.xamtfos_.neta"[::-1]
_rule = next(fn for op, fn in torch._decomp.decomposition_table.items() if str(op) == _name)
"""


@pytest.mark.parametrize("source", [
    RULE + "def softmax(x, dim=-1):\n    return _rule(x, dim, False)",
    "from torch.fx.experimental.proxy_tensor import make_fx\n_g = make_fx(lambda t: t.exp())(torch.ones(2))\n"
    "def softmax(x, dim=-1):\n    return _g(x)",
    "import torch.distributions as D\ndef softmax(x, dim=-1):\n    return D.Categorical(logits=x).probs",
    "import importlib\n_m = importlib.import_module('torch._decomp')\ndef softmax(x, dim=-1):\n    return _m",
    "from torch import _refs as r\ndef softmax(x, dim=-1):\n    return r.exp(x) / r.exp(x).sum(dim, keepdim=True)",
])
def test_a_recording_api_a_graded_function_reaches_is_charged_as_the_builtin(source):
    result = scan(cells(source, OWN_SDPA), FUNCTIONS)
    assert codes(result, "softmax") == {"softmax-builtin"}
    assert codes(result, "scaled_dot_product_attention") == {"softmax-builtin"}  # through its softmax
    assert "recording" in {f.code for f in result.review}
    assert result.forbidden["attention_scores"] == []


def test_a_recording_only_attention_reaches_is_charged_as_builtin_attention():
    source = RULE + "def scaled_dot_product_attention(q, k, v, mask=None):\n    return _rule(q, -1, False), q"
    result = scan(cells(HAND_SOFTMAX, source), FUNCTIONS)
    assert codes(result, "scaled_dot_product_attention") == {"sdpa-builtin"}
    assert result.forbidden["softmax"] == []


@pytest.mark.parametrize("source", [
    "@torch.jit.script\ndef _own(x: torch.Tensor) -> torch.Tensor:\n    return x.exp()\n"
    "def softmax(x, dim=-1):\n    return _own(x) / _own(x).sum(dim, keepdim=True)",
    "_own = torch.compile(lambda x: x.exp())\n"
    "def softmax(x, dim=-1):\n    return _own(x) / _own(x).sum(dim, keepdim=True)",
])
def test_compiling_the_students_own_code_is_flagged_but_not_charged(source):
    result = scan(cells(source), FUNCTIONS)
    assert result.forbidden["softmax"] == []
    assert {f.code for f in result.review} == {"recording"}


@pytest.mark.parametrize("source", [
    "import functools\n@functools.lru_cache(maxsize=None)\ndef _ones(n):\n    return n\n",
    "options = {}\nmode = options.get('library', None)\nother = options.get('export')",
    "@torch.no_grad()\ndef attention_output(w, v):\n    return w @ v",
])
def test_caches_decorators_and_plain_keys_are_not_recording(source):
    result = scan(cells(source, HAND_SOFTMAX), FUNCTIONS)
    assert result.forbidden["softmax"] == [] and result.review == []


def test_a_thread_makes_a_forbidden_use_anywhere_count_for_every_function():
    source = RULE + "import threading\nthreading.Thread(target=lambda: _rule(x, -1, False)).start()"
    result = scan(cells(source, HAND_SOFTMAX), FUNCTIONS)
    assert codes(result, "softmax") == {"softmax-builtin"} and codes(result, "attention_scores") == {"softmax-builtin"}
    assert {"threads", "recording"} <= {f.code for f in result.review}


@pytest.mark.parametrize("source, code", [
    ('_settings = dict(softmax="by hand")\n_t = torch\n_impl = getattr(_t._refs.softmax, "__wrapped__")\n'
     "def softmax(x, dim=-1):\n    return _impl(x, dim)", "softmax-builtin"),
    ('_refs = getattr(torch, "_refs")\ndef softmax(x, dim=-1):\n    return _refs.exp(x)', "softmax-builtin"),
])
def test_a_name_bound_to_a_module_is_read_as_that_module(source, code):
    result = scan(cells(source), FUNCTIONS)
    assert codes(result, "softmax") == {code}


@pytest.mark.parametrize("source, category", [
    ('f = getattr(scale_scores, "__wrapped__")', "introspection"),
    ('import sys\nsys.path.insert(0, "/tmp")', "module-edit"),
    ('with open("/tmp/helper.py", "w") as fh:\n    fh.write("x = 1")', "dynamic-code"),
])
def test_ways_to_reach_code_the_scan_cannot_read_are_flagged(source, category):
    assert category in {f.code for f in scan(cells(source), FUNCTIONS).review}


def test_a_constant_passed_to_a_call_beside_a_builtin_is_not_charged():
    """`print(torch.softmax(torch.full((3,), NEG_INF), dim=0))` at top level: NEG_INF holds a float, which no call
    can fill, so apply_mask, which reads it, does not reach the built-in (a red-team false positive)."""
    cell = ('NEG_INF = float("-inf")\n\n\ndef apply_mask(scores, mask=None):\n'
            '    if mask is None:\n        return scores\n    return scores.masked_fill(~mask, NEG_INF)\n\n\n'
            'print(torch.softmax(torch.full((3,), NEG_INF), dim=0))\n')
    assert scan([cell], ["apply_mask"]).forbidden["apply_mask"] == []
    # a name that is rebound to something else, or a list a call may fill, still counts
    refilled = cell.replace('NEG_INF = float("-inf")', 'NEG_INF = float("-inf")\nNEG_INF = []')
    assert scan([refilled], ["apply_mask"]).forbidden["apply_mask"]


def test_code_past_what_one_scan_reads_holds_the_notebook_for_a_person(monkeypatch):
    """The scan runs in the trusted process, outside the sandbox's time limits: a red-team notebook of 2 MiB of
    code held the check service's grader for minutes.  Past `MAX_SCANNED_CHARS` the rest is not read, and the
    notebook is held where that starts, as for any code the scan cannot read."""
    monkeypatch.setattr(static_scan, "MAX_SCANNED_CHARS", 2_000)
    honest = "def softmax(x, dim=-1):\n    e = x.exp()\n    return e / e.sum(dim, keepdim=True)\n"
    assert not scan([honest], ["softmax"]).held
    filler = "x = 1\n" * 400  # 2,400 characters: past the bound
    hidden = "import torch.nn.functional as F\ndef softmax(x, dim=-1):\n    return F.softmax(x, dim)\n"
    result = scan([honest, filler, hidden], ["softmax"])
    (held,) = result.held
    assert (held.cell, held.code) == (1, "dynamic-code") and "2000" in held.detail, held
    assert result.forbidden["softmax"] == []  # not read: the hold is what stops its points counting


# A charged recording API (`scan_policy.RECORDING_CHARGED`: no run-time tripwire behind it) obtained one way and
# handed to the graded softmax another: a red-team pass laundered `Categorical` through a helper's argument and an
# exception's args (105/105, nothing held).  Whatever the pair, it is charged where it is seen to be reached, or
# it holds: never neither.
# (`torch.distributions` itself is blocked whole by the runner's tripwires, whatever name reaches it: the
# tripwire probe; it is charged where reached and holds nothing elsewhere.)
OBTAINED = {"from-import": "from torch._refs import exp as H0",
            "module-alias": "import torch._refs as R\nH0 = R.exp",
            "fx": "import torch.fx as fx\nH0 = fx.symbolic_trace"}
HANDED = {
    "argument-stored": ("_ops = {}\ndef _keep(value):\n    _ops['h'] = value\n_keep(H0)", "_ops['h']"),
    "exception-args": ("try:\n    raise ValueError(H0)\nexcept ValueError as _err:\n    _held = _err.args[0]", "_held"),
    "classmethod-setter": ("class _Reg:\n    kept = None\n    @classmethod\n    def put(cls, value):\n"
                           "        cls.kept = value\n_Reg.put(H0)", "_Reg.kept"),
    "appended-in-a-helper": ("_box = []\ndef _put(value):\n    _box.append(value)\n_put(H0)", "_box[0]"),
    "decorator": ("def _with(value):\n    def wrap(f):\n        f.kept = value\n        return f\n    return wrap\n"
                  "@_with(H0)\ndef _holder():\n    pass", "_holder.kept"),
    "default-argument": ("def _make(value=H0):\n    return value", "_make()"),
    "direct": ("", "H0"),
}


@pytest.mark.parametrize("handed", HANDED)
@pytest.mark.parametrize("obtained", OBTAINED)
def test_a_charged_recording_api_is_charged_where_reached_or_held(obtained, handed):
    setup, use = HANDED[handed]
    source = f"{OBTAINED[obtained]}\n{setup}\n\ndef softmax(x, dim=-1):\n    return {use}(x)\n"
    result = scan([source], FUNCTIONS)
    charged = codes(result, "softmax")
    held = [f for f in result.held if f.code == "recording-unfollowed"]
    assert charged or held, (result.forbidden["softmax"], result.review)
    assert not held or not charged or obtained == "module-alias", "held and charged for one use"


def test_a_recording_module_imported_and_never_used_holds_nothing():
    assert scan(["import torch._refs\nimport torch.fx\nx = 1"], FUNCTIONS).held == []


@pytest.mark.parametrize("source, detail", [
    ("import torch, base64, io\nm = torch.jit.load(io.BytesIO(base64.b64decode('AA==')))", "torch.jit.load"),
    ("from torch import jit\nunit = jit.CompilationUnit('def f(x):\\n    return x')", "jit.CompilationUnit"),
    ("import torch\nf = torch.hub.load('helper_dir', 'sm', source='local')", "torch.hub.load"),
    ("from torch.hub import load as fetch\nf = fetch('d', 'sm', source='local')", "fetch (torch.hub.load)"),
    ("import torch.package\nimporter = torch.package.PackageImporter('x.pt')", "torch.package.PackageImporter"),
])
def test_code_torch_builds_from_bytes_or_another_files_text_holds(source, detail):
    """TorchScript loaded or compiled by torch's own parser, and a `hubconf.py` torch.hub imports: no text the
    scan read (red team: a TorchScript archive whose fused softmax ran oneDNN's kernel past the tripwires)."""
    held = scan([source], FUNCTIONS).held
    assert any(f.code == "dynamic-code" and f.detail == detail for f in held), held


def test_a_name_imported_from_a_forbidden_module_is_forbidden_where_used():
    """`from torch.nn.attention.flex_attention import create_mask` reads as the attribute chain it names
    (red team: the chain was charged, the import was not)."""
    result = scan(["from torch.nn.attention.flex_attention import create_mask as cm\n"
                   "def causal_mask(n):\n    return cm(None, 1, 1, n, n)\n"], FUNCTIONS)
    assert codes(result, "causal_mask") == {"sdpa-builtin"} and not result.forbidden["softmax"]


@pytest.mark.parametrize("source, category", [
    ("p = torch.os.popen('python -c 1 &')", "process-creation"),
    ("ctx = torch.multiprocessing.get_context('spawn')", "process-creation"),
    ("m = torch.sys.modules[name]", "dynamic-code"),
    ("m = F.torch.jit.load(blob)", "dynamic-code"),
    ("f = F.torch.hub.load('d', 'made', source='local')", "dynamic-code"),
    ("import numpy as np\nk = np.os.kill", "other-processes"),
])
def test_a_module_reached_as_another_modules_attribute_is_read_as_itself(source, category):
    """Red team: `F.torch.distributions`, `torch.os.popen`, `F.torch.jit.load` matched no table, which are keyed
    by a module's own name; read from the module they reach, they hold as the plain spelling does."""
    assert category in {f.code for f in scan([source], FUNCTIONS).held}


def test_a_charged_api_reached_through_another_module_is_charged():
    source = "def softmax(x, dim=-1):\n    return F.torch.distributions.Categorical(logits=x).logits.exp()\n"
    assert codes(scan([source], FUNCTIONS), "softmax") == {"softmax-builtin"}


def test_ordinary_module_attributes_are_not_read_as_other_modules():
    source = ("import numpy as np\nrng = np.random.default_rng(0)\ntorch.random.manual_seed(0)\n"
              "with torch.profiler.profile() as prof:\n    pass\n"
              "class Box:\n    pass\nb = Box()\nb.os = 1\ny = b.os.real\n")
    assert scan([source], FUNCTIONS).held == []


def test_a_module_the_runner_blocks_whole_is_charged_where_reached_and_holds_nothing_elsewhere():
    """A dropout demo's `Bernoulli` in a scratch cell (red team: held an honest notebook); the runner raises for
    any function of `torch.distributions`, however reached, so a graded function cannot use it unseen."""
    demo = scan(["import torch.distributions as D\nmask = D.Bernoulli(0.5).sample((3,))"], FUNCTIONS)
    assert demo.held == [] and not any(demo.forbidden.values())
    used = scan(["def softmax(x, dim=-1):\n    return torch.distributions.Categorical(logits=x).logits.exp()\n"],
                FUNCTIONS)
    assert codes(used, "softmax") == {"softmax-builtin"}
