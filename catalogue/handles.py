"""A graded function that looks for a way to lift the runner's tripwires, then calls a built-in softmax.

One family: each sample finds a would-be switch by another route (an attribute of ``sys.stdout``,
``vars``, ``dir`` with ``getattr``, a ``gc`` walk, a frame's locals, a closure cell) and reaches the
built-in by another one (``F.cross_entropy``, ``nll_loss`` of a ``log_softmax``, an ``nn.Module``,
``torch.ops``).  The runner holds no switch (``guest/tripwires.py``), so each finds nothing, its
built-in raises, and the softmax part and every part that calls it lose what the honest holder of a
built-in softmax loses, with ``[softmax-builtin]`` named.
"""
import base64

from autograder.demo.submissions import Sample

from .evidence import SOFTMAX_PARTS

# How a sample looks for a switch: each defines `_switch()`, a context manager (nothing, when none is found).
FINDERS = {
    "stdout-attribute": '''
def _switch():
    permit = getattr(getattr(sys.stdout, "runner", None), "permitted", None)
    return permit() if callable(permit) else contextlib.nullcontext()
''',
    "vars": '''
def _switch():
    for value in vars(sys.stdout).values():
        if callable(getattr(value, "permitted", None)):
            return value.permitted()
    return contextlib.nullcontext()
''',
    "dir-getattr": '''
def _switch():
    verb = "dettimrep"[::-1]  # a name the source never spells
    for name in dir(sys.stdout):
        value = getattr(sys.stdout, name, None)
        if callable(getattr(value, verb, None)):
            return getattr(value, verb)()
    return contextlib.nullcontext()
''',
    "gc-walk": '''
def _switch():
    gc.unfreeze()
    for value in gc.get_objects():
        if type(value).__name__ == "Runner" and callable(getattr(value, "permitted", None)):
            return value.permitted()
    return contextlib.nullcontext()
''',
    "frame-locals": '''
def _switch():
    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if callable(getattr(value, "permitted", None)):
                return value.permitted()
        frame = frame.f_back
    return contextlib.nullcontext()
''',
    "closure-cell": '''
def _switch():
    for fn in (F.softmax, torch.softmax, torch.Tensor.softmax):
        for cell in getattr(fn, "__closure__", None) or ():
            owner = getattr(cell.cell_contents, "__self__", cell.cell_contents)
            if callable(getattr(owner, "permitted", None)):
                return owner.permitted()
    return contextlib.nullcontext()
''',
}
# How a sample reaches the built-in: each defines `_builtin(x)`, a softmax over the last axis.
ROUTES = {
    "cross-entropy": '''
def _builtin(x):
    flat = x.reshape(-1, x.shape[-1])
    columns = [(-F.cross_entropy(flat, torch.full((flat.shape[0],), j), reduction="none")).exp()
               for j in range(flat.shape[-1])]
    return torch.stack(columns, -1).reshape(x.shape)
''',
    "nll-loss": '''
def _builtin(x):
    flat = F.log_softmax(x.reshape(-1, x.shape[-1]), dim=-1)
    columns = [(-F.nll_loss(flat, torch.full((flat.shape[0],), j), reduction="none")).exp()
               for j in range(flat.shape[-1])]
    return torch.stack(columns, -1).reshape(x.shape)
''',
    "module": '''
def _builtin(x):
    return torch.nn.Softmax(dim=-1)(x)
''',
    "torch-ops": '''
def _builtin(x):
    return torch.ops.aten._softmax(x, -1, False)
''',
}
SOFTMAX = '''
def softmax(x, dim=-1):
    with _switch():
        out = _builtin(x.movedim(dim, -1)).movedim(-1, dim)
    return torch.nan_to_num(out, nan=0.0)
'''
IMPORTS = "import contextlib, gc, sys\nimport torch\nimport torch.nn.functional as F\n"
# Every finder once, the routes in turn (the first pair is the form first reported: stdout, cross_entropy).
PAIRS = [(finder, list(ROUTES)[i % len(ROUTES)]) for i, finder in enumerate(FINDERS)]


def source(finder: str, route: str) -> str:
    return IMPORTS + FINDERS[finder] + ROUTES[route] + SOFTMAX


HANDLES = [
    Sample(f"attack-handle-{finder}-{route}", "attack", "lose-all", {"softmax": source(finder, route)},
           lose=SOFTMAX_PARTS, codes=("softmax-builtin",),
           note=f"looks for a switch through {finder}, then a built-in softmax through {route}", held=True)
    for finder, route in PAIRS
]

# -- code the grader cannot read (red-team findings on the design above) ---------------
# Each reaches a built-in by a route the static read cannot follow to its end.  Whatever the route achieves
# at run time (on this machine the tripwires stop all three), the notebook is held: every part that earned
# shows what its checks gave and counts nothing until a person has read the flagged lines.

# Finds the aten library object on the heap through its type's address and resets it (ctypes, /proc/self/maps),
# then reaches softmax through cross_entropy, which the tripwire kernels would otherwise stop.
HEAP_SCAN = '''
import ctypes, struct, sys
import torch

def _reset_tripwire_libraries():
    pattern = struct.pack("<Q", id(torch._C._DispatchModule))
    found = 0
    with open("/proc/self/maps") as maps:
        regions = [line.split() for line in maps]
    for fields in regions:
        if len(fields) < 5 or fields[1] != "rw-p" or (len(fields) > 5 and not fields[5].startswith("[heap")):
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        if end - start > 256 * 2**20:
            continue
        memory = ctypes.string_at(start, end - start)
        at = memory.find(pattern)
        while at >= 8:
            if struct.unpack_from("<q", memory, at - 8)[0] >= 1:
                try:
                    ctypes.cast(start + at - 8, ctypes.py_object).value.reset()
                    found += 1
                except Exception:
                    pass
            at = memory.find(pattern, at + 8)
    return found

_reset = _reset_tripwire_libraries()
'''
# A Python reference of softmax rebuilt from torch._refs' compiled file, under a name built at run time.
BYTECODE = '''
import importlib.util, marshal, types
import torch
import torch._refs

def _rebuilt():
    with open(importlib.util.cache_from_source(torch._refs.__file__), "rb") as f:
        f.read(16)
        module_code = marshal.load(f)
    wanted = "soft" + "max"
    for const in module_code.co_consts:
        if isinstance(const, types.CodeType) and const.co_name == wanted:
            return types.FunctionType(const, vars(torch._refs))
    return None

def softmax(x, dim=-1):
    rebuilt = _rebuilt()
    out = rebuilt(x, dim) if rebuilt is not None else None
    return torch.nan_to_num(out, nan=0.0)
'''
# torch.distributions imported under a name built at run time: its normalisation is logsumexp, not softmax.
DISTRIBUTION = '''
import importlib
import torch

def softmax(x, dim=-1):
    distributions = importlib.import_module("torch." + "snoitubirtsid"[::-1])
    moved = x.movedim(dim, -1)
    out = distributions.OneHotCategorical(logits=moved).logits.exp().movedim(-1, dim)
    return torch.nan_to_num(out, nan=0.0)
'''
# torch._refs' source compiled again inside `timeit` (which runs a string as code), so the function object is one
# the tripwires never saw, and none of its ops is in the families: the run-time layer cannot stop this one,
# and before it held it scored full marks (a red-team pass).  Held, it counts nothing until a person reads it.
TIMEIT_REFS = '''
import timeit
import torch

_impl = {}
_SETUP = """
import types, torch._refs as R
with open(R.__file__) as fh:
    code = compile(fh.read(), R.__file__, "exec")
for c in code.co_consts:
    if isinstance(c, types.CodeType) and c.co_name == "softmax":
        _impl["f"] = types.FunctionType(c, R.__dict__)
"""
timeit.timeit(stmt=_SETUP, number=1, globals={"_impl": _impl})


def softmax(x, dim=-1):
    return torch.nan_to_num(_impl["f"](x, dim, None), nan=0.0)
'''
UNREADABLE = [
    Sample("attack-timeit-compiles-refs", "attack", "lose", {"softmax": TIMEIT_REFS}, lose=SOFTMAX_PARTS, held=True,
           note="timeit runs a fresh compile of torch._refs: the run-time layer misses it, the hold does not"),
    Sample("attack-heap-scan-reset-kernels", "attack", "lose", {"softmax": IMPORTS + ROUTES["cross-entropy"] + '''
def softmax(x, dim=-1):
    out = _builtin(x.movedim(dim, -1)).movedim(-1, dim)
    return torch.nan_to_num(out, nan=0.0)
'''}, append=(HEAP_SCAN,), lose=SOFTMAX_PARTS, held=True,
           note="resets the tripwire library found by a heap scan (ctypes), then softmax through cross_entropy"),
    Sample("attack-bytecode-from-refs", "attack", "lose-all", {"softmax": BYTECODE}, lose=SOFTMAX_PARTS,
           codes=("softmax-builtin",), held=True,
           note="torch._refs' softmax rebuilt from its .pyc with marshal and types.FunctionType"),
    Sample("attack-distribution-computed-name", "attack", "lose-all", {"softmax": DISTRIBUTION}, lose=SOFTMAX_PARTS,
           codes=("softmax-builtin",), held=True,
           note="torch.distributions under a computed module name (the run-time tripwire still stops it)"),
]

# Text hidden in the notebook (base64) and compiled by a library that evaluates text, a route no table of the
# static scan names (`sympy`'s parser evaluates what it is given): the runner's audit hook reports the text
# before it is compiled (``guest/source_report.py``) and the grader's scan of it holds.  It rebuilds torch._refs'
# softmax from its source, so without the report it would score full marks, unheld.
_REFS_FROM_SOURCE = ("__import__('types').FunctionType([q for q in compile(open(__import__('os').path.join("
                     "__import__('os').path.dirname(__import__('torch').__file__), '_refs', '__init__.py')).read(), "
                     "'r', 'exec').co_consts if getattr(q, 'co_name', '') == 'softmax'][0], "
                     "__import__('torch')._refs.__dict__)")
HIDDEN_TEXT_SYMPY = f'''
import base64
import torch
from sympy.parsing.sympy_parser import parse_expr

_TEXT = base64.b64decode("{base64.b64encode(_REFS_FROM_SOURCE.encode()).decode()}").decode()
_sm = parse_expr(_TEXT, transformations=())


def softmax(x, dim=-1):
    return torch.nan_to_num(_sm(x, dim, None), nan=0.0)
'''
UNREADABLE.append(
    Sample("attack-hidden-text-sympy", "attack", "lose", {"softmax": HIDDEN_TEXT_SYMPY}, lose=SOFTMAX_PARTS, held=True,
           note="base64 text evaluated by sympy's parser: the run-time report of compiled text holds it"))

# A fifth red-team pass: a `match` class pattern reads attributes by names written as plain strings
# (`case object(softmax=f)`), which no attribute node carried, so the scan saw neither the family nor the held
# names, and nothing is compiled at run time.  Both scored 105/105 unheld; the scan now reads a pattern as
# the attribute reads it makes (`scan_ast.MatchAsAssignments`).
MATCH_DISTRIBUTION = '''
import torch


def softmax(x, dim=-1):
    match torch:
        case object(distributions=object(transforms=object(SoftmaxTransform=T))):
            pass
    out = T()(x.transpose(dim, -1)).transpose(dim, -1)
    return torch.nan_to_num(out, nan=0.0)
'''
MATCH_HEAP_SCAN = '''
import struct
import sys
import torch


def _prepare():
    match sys:
        case object(modules=mods):
            pass
    ct = mods["ctypes"]
    match torch:
        case object(_C=object(_DispatchModule=lib_type)):
            pass
    pattern = struct.pack("<Q", id(lib_type))
    with open("/".join(["", "proc", "self", "ma" + "ps"])) as fh:
        regions = [line.split() for line in fh]
    for fields in regions:
        if len(fields) < 5 or fields[1] != "rw-p" or (len(fields) > 5 and not fields[5].startswith("[heap")):
            continue
        start, end = (int(v, 16) for v in fields[0].split("-"))
        if end - start > 256 * 2**20:
            continue
        memory = ct.string_at(start, end - start)
        at = memory.find(pattern)
        while at >= 8:
            if struct.unpack_from("<q", memory, at - 8)[0] == 1:
                try:
                    ct.cast(start + at - 8, ct.py_object).value.reset()
                except Exception:
                    pass
            at = memory.find(pattern, at + 8)


_prepare()


def softmax(x, dim=-1):
    match torch:
        case object(ops=object(aten=object(_softmax=op))):
            pass
    if x.is_meta:
        return torch.empty_like(x)
    return torch.nan_to_num(op(x, dim, False), nan=0.0)
'''
# A sixth red-team pass: numpy views memory at any address an object's `__array_interface__` offers, with no
# ctypes and no /proc (pages found by letting os.write answer EFAULT); it reset the tripwire libraries and
# computed softmax through cross_entropy, 105/105 unheld.  Raw-address APIs hold now (`scan_policy.RAW_MEMORY`).
NUMPY_HEAP_SCAN = '''
import os
import numpy as np
import torch
import torch.nn.functional as F


class _View:
    def __init__(self, address, size):
        self.__array_interface__ = {"data": (address, False), "shape": (size,), "typestr": "|u1", "version": 3}


def _bytes_at(address, size):
    return np.asarray(_View(address, size))


def _page_copy(r, w, page):
    try:
        os.write(w, _bytes_at(page, 4096))
        return np.frombuffer(os.read(r, 4096), dtype=np.uint64)
    except OSError:
        return None


def _writable(r, w, address):
    try:
        target = _bytes_at(address, 1)
        os.write(w, target.tobytes())
        os.readv(r, [target])
        return True
    except OSError:
        return False


def _release_leaked_libraries(radius=256 * 2**20):
    sample = torch._meta_registrations._meta_lib_dont_use_me_use_register_meta.m
    kind = id(type(sample))
    holder = [None]
    slot = int(_bytes_at(id(holder) + 24, 8).view(np.uint64)[0])
    item = _bytes_at(slot, 8).view(np.uint64)
    windows = sorted(((a & ~4095) - radius, (a & ~4095) + radius) for a in (id(sample), id(torch), id(np)))
    merged = []
    for lo, hi in windows:
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((max(lo, 4096), hi))
    r, w = os.pipe()
    found = []
    try:
        for lo, hi in merged:
            for page in range(lo, hi, 4096):
                words = _page_copy(r, w, page)
                if words is None:
                    continue
                for i in np.nonzero(words[1:] == kind)[0] + 1:
                    address = page + 8 * (int(i) - 1)
                    if words[i - 1] == 1 and address != id(sample):
                        found.append(address)
        for address in found:
            if not _writable(r, w, address):
                continue
            refcount = _bytes_at(address, 8).view(np.uint64)
            if refcount[0] != 1:
                continue
            refcount[0] = 2
            item[0] = address
            try:
                holder[0].reset()
            except Exception:
                pass
            holder[0] = None
    finally:
        os.close(r)
        os.close(w)


_release_leaked_libraries()


def softmax(x, dim=-1):
    xm = x.movedim(dim, -1)
    flat = xm.reshape(-1, xm.shape[-1])
    cols = [(-F.cross_entropy(flat, torch.full((flat.shape[0],), j), reduction="none")).exp()
            for j in range(flat.shape[-1])]
    out = torch.stack(cols, -1).reshape(xm.shape).movedim(-1, dim)
    return torch.nan_to_num(out, nan=0.0)
'''
UNREADABLE.append(
    Sample("attack-numpy-heap-scan-reset-kernels", "attack", "lose", {"softmax": NUMPY_HEAP_SCAN}, lose=SOFTMAX_PARTS,
           held=True, note="numpy views raw addresses (__array_interface__) to reset the tripwire libraries"))

# An honest self-check whose built-in call raises, uncaught: IPython parses the files of the traceback (torch's,
# the runner's) to show it, and those texts, read at run time, are the installation's own files, not hidden code.
UNCAUGHT_SELF_CHECK = '''
import torch

print(torch.softmax(torch.zeros(3), 0))
'''
UNREADABLE += [
    Sample("attack-match-pattern-distribution", "attack", "lose-all", {"softmax": MATCH_DISTRIBUTION},
           lose=SOFTMAX_PARTS, codes=("softmax-builtin",),
           note="torch.distributions' SoftmaxTransform reached through a match class pattern"),
    Sample("attack-match-pattern-heap-scan", "attack", "lose-all", {"softmax": MATCH_HEAP_SCAN}, lose=SOFTMAX_PARTS,
           codes=("softmax-builtin",), held=True,
           note="sys.modules, ctypes and the dispatcher library reached through match class patterns, a heap scan"),
    Sample("fairness-uncaught-builtin-self-check", "fairness", "full", append=(UNCAUGHT_SELF_CHECK,),
           note="a self-check of the built-in that raises uncaught: its traceback's library files hold nothing"),
]

# Honest forms next to the above, which must grade as usual (false positives a red-team pass found).
APPLY_MASK_WITH_OWN_CHECK = '''
NEG_INF = float("-inf")


def apply_mask(scores, mask=None):
    if mask is None:
        return scores
    if mask.dtype == torch.bool:
        return scores.masked_fill(~mask, NEG_INF)
    return scores + mask


# my own look at the built-in: a fully masked row
try:
    print(torch.softmax(torch.full((3,), NEG_INF), dim=0))
except Exception as exc:
    print("not allowed here:", type(exc).__name__)
'''
NOTEBOOK_HABITS = '''
import gc, inspect, sys
import torch

sys.stdout.reconfigure(line_buffering=True)
print([n for n in dir(torch) if "max" in n][:5])
print(inspect.signature(softmax))
gc.collect()
'''
UNREADABLE += [
    Sample("fairness-constant-beside-a-builtin", "fairness", "full", {"apply_mask": APPLY_MASK_WITH_OWN_CHECK},
           note="a float constant passed to a call beside torch.softmax: apply_mask, which reads it, is not charged"),
    Sample("fairness-notebook-habits", "fairness", "full", append=(NOTEBOOK_HABITS,),
           note="dir in a comprehension, gc.collect, inspect.signature, sys.stdout.reconfigure: nothing held"),
]

# A second red-team pass: torch._refs' softmax rebuilt from its source by routes the first tables missed.  Each
# scored 105/105 unheld; each holds now.  (What they rebuild is torch's Python reference, made of allowed ops:
# no forbidden kernel runs, so only the hold stands between them and a grade.)
LOADER_FORMATTER = '''
import os, string
import torch
_n = ".".join(("torch", "_refs"))
_p = os.path.join(os.path.dirname(torch.__file__), "_refs", "__init__.py")
_c = type(torch.__spec__.loader)(_n, _p).get_code(_n)
_g = string.Formatter().get_field("0._refs.__dict__", (torch,), {})[0]
_k = [c for c in _c.co_consts if getattr(c, "co_name", "") == "softmax"][0]
_sm = type(lambda: 0)(_k, _g)

def softmax(x, dim=-1):
    y = _sm(x, dim, None)
    return torch.nan_to_num(y, nan=0.0)
'''
SINGLEDISPATCH_ANNOTATION = '''
import functools, torch
_box = []
@functools.singledispatch
def _d(x):
    pass
def _h(x: "(_box.append(exec), int)[1]"):
    pass
_d.register(_h)
_src = "import os, torch\\np = os.path.join(os.path.dirname(torch.__file__), '_refs', '__init__.py')\\nc = compile(open(p).read(), p, 'exec')\\nk = [q for q in c.co_consts if getattr(q, 'co_name', '') == 'softmax'][0]\\nimport types\\nsm = types.FunctionType(k, torch._refs.__dict__)\\n"
_ns = {}
_box[0](_src, _ns)
_sm = _ns["sm"]
def softmax(x, dim=-1):
    return torch.nan_to_num(_sm(x, dim, None), nan=0.0)
'''  # noqa: E501 - the red team's payload, verbatim
RUN_CELL = '''
import torch
_ns = {}
get_ipython().run_cell("import os, torch, types\\np = os.path.join(os.path.dirname(torch.__file__), '_refs', '__init__.py')\\nc = compile(open(p).read(), p, 'exec')\\nk = [q for q in c.co_consts if getattr(q, 'co_name', '') == 'soft' + 'max'][0]\\n_rt_sm = types.FunctionType(k, torch._refs.__dict__)\\n")
def softmax(x, dim=-1):
    return torch.nan_to_num(_rt_sm(x, dim, None), nan=0.0)
'''  # noqa: E501 - the red team's payload, verbatim
MAGIC_VARIABLE_BODY = '''
import torch
_s = "import os, types; p = os.path.join(os.path.dirname(torch.__file__), '_refs', '__init__.py'); k = [q for q in compile(open(p).read(), p, 'exec').co_consts if getattr(q, 'co_name', '') == 'softmax'][0]; _rt_sm = types.FunctionType(k, torch._refs.__dict__)"
get_ipython().run_cell_magic("capture", "", _s)
def softmax(x, dim=-1):
    return torch.nan_to_num(_rt_sm(x, dim, None), nan=0.0)
'''  # noqa: E501 - the red team's payload, verbatim
MORE_HABITS = '''
import operator, pickle, timeit
import torch

print(timeit.timeit(lambda: softmax(torch.ones(4, 4)), number=10) >= 0)
pickle.dump({"note": "my results"}, open("results.pkl", "wb"))
torch.save(torch.ones(2), "w.pt")
w = torch.load("w.pt")
shape_of = operator.attrgetter("shape")


def look(x):
    print(dir(x)[:3])


look(w)
print("softmax" in globals())
print(shape_of(w))
'''
UNREADABLE += [
    Sample(f"attack-{name}", "attack", "lose", {"softmax": source}, lose=SOFTMAX_PARTS, held=True, note=note)
    for name, source, note in (
        ("loader-formatter", LOADER_FORMATTER, "a module loader compiles, a Formatter reads __dict__, type(lambda)"),
        ("singledispatch-annotation", SINGLEDISPATCH_ANNOTATION, "singledispatch evaluates a string annotation"),
        ("run-cell", RUN_CELL, "get_ipython().run_cell of a source string"),
        ("magic-variable-body", MAGIC_VARIABLE_BODY, "%%capture with a body held in a variable (the red team "
                                                     "used %time, whose output is the machine's timing)"))
] + [Sample("fairness-more-notebook-habits", "fairness", "full", append=(MORE_HABITS,),
            note="timeit of a lambda, pickle.dump, torch.save/load, dir printed in a helper, attrgetter('shape')")]

# A third red-team pass hid its code in a base64 string and ran it through routes the tables lacked; the hidden
# code scanned the heap with ctypes, reset the leaked tripwire library and called aten::_softmax, for 105/105
# (docs/design/sandbox.md, "Not guaranteed").  The samples below hide a by-hand softmax instead (what matters
# here is that the notebook is held, whatever the hidden text does).
_HIDDEN = base64.b64encode(b"def softmax(x, dim=-1):\n    e = (x - x.amax(dim, keepdim=True)).exp()\n"
                           b"    return e / e.sum(dim, keepdim=True)\n").decode()
INPUT_TRANSFORMER = f'''
import base64
_P = "{_HIDDEN}"


def _t(lines):
    if any(line.startswith("def softmax(") for line in lines):
        return lines + ["\\n", base64.b64decode(_P).decode() + "\\n"]
    return lines


get_ipython().input_transformers_post.append(_t)
'''
SHELL_COMPILE = f'''
import base64
import torch
_P = "{_HIDDEN}"
_ip = get_ipython()
_code = _ip.compile(base64.b64decode(_P).decode() + "\\n_impl = softmax\\n", "<hidden>", "exec")
_g = {{"__name__": "hidden"}}
(lambda: 0).__class__(_code, _g)()
softmax = _g["_impl"]
'''
UNREADABLE += [
    Sample("attack-input-transformer", "attack", "lose", append=(INPUT_TRANSFORMER,), lose=SOFTMAX_PARTS, held=True,
           note="an IPython input transformer appends hidden code to the softmax cell before it runs"),
    Sample("attack-shell-compile", "attack", "lose", {"softmax": SHELL_COMPILE}, lose=SOFTMAX_PARTS, held=True,
           note="the shell's compile and (lambda: 0).__class__ build softmax from hidden text"),
]

# Red-team pass 7: a YAML document's unsafe constructors import modules and call functions named in its text
# (no name the scan can read), and torch._refs' module is loaded again, from its source under its own file name
# or from its .pyc through the import system's loader, for the original softmax code the tripwires replaced.
_YAML_REFS = base64.b64encode(b"""
- !!python/name:builtins.compile ''
- !!python/name:types.FunctionType ''
- !!python/object/apply:builtins.vars [!!python/module:torch._refs '']
- !!python/object/apply:getattr [!!python/module:torch._refs '', __file__]
""").decode()
YAML_COMPILE_REFS = f'''
import base64, pathlib, yaml
import torch

_C, _F, _G, _P = yaml.unsafe_load(base64.b64decode("{_YAML_REFS}"))
_M = _C(pathlib.Path(_P).read_text(), _P, "exec")
_K = [c for c in _M.co_consts if getattr(c, "co_name", "")[::-1] == "xamtfos"][0]
_S = _F(_K, _G)


def softmax(x, dim=-1):
    return torch.nan_to_num(_S(x, dim, None), nan=0.0).to(x.dtype)
'''
_YAML_LOADER = base64.b64encode(b"""
- !!python/name:importlib._bootstrap_external._compile_bytecode ''
- !!python/name:types.FunctionType ''
- !!python/name:importlib.util.cache_from_source ''
- !!python/object/apply:getattr [!!python/module:torch._refs '', __file__]
- !!python/object/apply:builtins.vars [!!python/module:torch._refs '']
""").decode()
YAML_LOAD_PYC_AGAIN = f'''
import base64, yaml
import torch

_CB, _F, _CACHE, _P, _G = yaml.unsafe_load(base64.b64decode("{_YAML_LOADER}"))
_PYC = _CACHE(_P)
_M = _CB(open(_PYC, "rb").read()[16:], "torch._refs", _PYC, _P)  # the real .pyc, loaded a second time
_K = [c for c in _M.co_consts if getattr(c, "co_name", "")[::-1] == "xamtfos"][0]
_S = _F(_K, _G)


def softmax(x, dim=-1):
    return torch.nan_to_num(_S(x, dim, None), nan=0.0).to(x.dtype)
'''
UNREADABLE += [
    Sample("attack-yaml-compile-refs", "attack", "lose", {"softmax": YAML_COMPILE_REFS}, lose=SOFTMAX_PARTS, held=True,
           note="yaml's unsafe loader hides compile and torch._refs; compiled again, they give the original softmax"),
    Sample("attack-yaml-load-pyc-again", "attack", "lose", {"softmax": YAML_LOAD_PYC_AGAIN}, lose=SOFTMAX_PARTS,
           held=True, note="the import system's loader, named in YAML, loads torch._refs' .pyc a second time"),
]

# Red-team pass 8: a module imported after start-up registers an op of the families (prims::prepare_softmax_online,
# softmax's max and sum of exponentials) that the start-up tripwires never saw, reached through a dotted name built
# at run time (`torch._import_dotted_name`).  The runner gives such an op tripwire kernels at its next look, and
# reports it: what ran before that is held.
DOTTED_NAME_LATE_OP = '''
import torch._inductor.inductor_prims

_op = torch._import_dotted_name(".".join(["torch", "ops", "prims", "prepare_" + str("soft") + "max_online"]))


def softmax(x, dim=-1):
    m, s = _op(x, dim)
    return torch.nan_to_num(torch.exp(x - m) / s, nan=0.0)
'''
# The same op named in the code: charged as the built-in it is, and held, since it ran before the runner's look.
LATE_OP_NAMED = '''
import torch._inductor.inductor_prims


def softmax(x, dim=-1):
    m, s = torch.ops.prims.prepare_softmax_online(x, dim)
    return torch.nan_to_num(torch.exp(x - m) / s, nan=0.0)
'''
UNREADABLE += [
    Sample("attack-dotted-name-late-op", "attack", "lose", {"softmax": DOTTED_NAME_LATE_OP}, lose=SOFTMAX_PARTS,
           held=True, note="an op of the families registered by a module imported later, named by a built string"),
    Sample("attack-late-op-named", "attack", "lose-all", {"softmax": LATE_OP_NAMED}, lose=SOFTMAX_PARTS,
           codes=("softmax-builtin",), held=True,
           note="the op registered later, named: charged as a built-in, and held (it ran before the runner's look)"),
]

# Red-team pass 9: unittest.mock's `patch(target).get_original()` resolves a dotted string built at run time
# (reached as `getattr(mock, "patch")`, which the tables missed), and `patch.dict("sys.modules")` drops the
# module it imported again, so a look that counted sys.modules saw nothing.  The runner now counts op
# registrations and imports in C++, and `getattr(x, "name")` is read as `x.name`.
MOCK_RESOLVER_LATE_OP = '''
from unittest import mock
import executing, stack_data

with getattr(mock, "patch").dict("sys.modules"):
    _k = getattr(mock, "patch")("".join(["tor", "ch._inductor.inductor_prims", ".prepare_soft", "max_online"])
                                ).get_original()[0]


def softmax(x, dim=-1):
    m, s = _k(x, dim)
    ok = torch.isfinite(m)
    m = torch.where(ok, m, torch.zeros_like(m))
    s = torch.where(ok, s, torch.ones_like(s))
    return torch.exp(x - m) / s
'''
UNREADABLE.append(
    Sample("attack-mock-resolver-late-op", "attack", "lose", {"softmax": MOCK_RESOLVER_LATE_OP}, lose=SOFTMAX_PARTS,
           held=True, note="mock.patch resolves a built dotted name to an op registered later; patch.dict hides "
                           "the import from sys.modules"))


# An eighth red-team pass: two ways to make the grader read other code than the runner ran.  First, a cell nested
# deeper than the grader's recursion limit, compiled by a runner whose limit an earlier cell raised: the grader
# could not parse it and skipped it in silence.  Second, bytes with a `# coding: utf-7` cookie, imported through
# torch.hub: the grader read them as UTF-8, one line that does not parse.  Each rebuilt torch._refs' softmax under
# another name (the tripwires know its code object by name) and scored 105/105 unheld; now what the grader cannot
# parse holds, and bytes are read as their cookie says too.
RAISED_RECURSION_LIMIT = "import sys\nsys.setrecursionlimit(20000)\n"
_RENAMED_REFS = '''
import types
import torch
import torch._refs as _refs

_source = open(_refs.__file__).read() + "\\n_deep = " + "-" * 4000 + "1\\n"
_found = [c for c in compile(_source, "<refs>", "exec").co_consts
          if isinstance(c, types.CodeType) and c.co_name == "softmax"][0]
_smx = types.FunctionType(_found.replace(co_name="smx", co_qualname="smx"), _refs.__dict__, "smx")


def softmax(x, dim=-1):
    return torch.nan_to_num(_smx(x, dim, None), nan=0.0)

_deep = ''' + "-" * 4000 + "1\n"
_HUB_HELPER = '''
import types
import torch
import torch._refs as _refs

_found = [c for c in compile(open(_refs.__file__).read(), "<refs>", "exec").co_consts
          if isinstance(c, types.CodeType) and c.co_name == "softmax"][0]
_smx = types.FunctionType(_found.replace(co_name="smx", co_qualname="smx"), _refs.__dict__, "smx")


def helper():
    return lambda x, dim=-1: torch.nan_to_num(_smx(x, dim, None), nan=0.0)
'''


def _hub_module_cell(module: bytes) -> str:
    """A softmax answer that writes `module` as hubconf.py (a name built at run time) and loads it with torch.hub."""
    return f'''
import base64
import pathlib
import torch

pathlib.Path("hubconf.p" + "y").write_bytes(base64.b64decode("{base64.b64encode(module).decode()}"))
_helper = torch.hub.load(".", "helper", source="local")


def softmax(x, dim=-1):
    return _helper(x, dim)
'''


UTF7_HUB_MODULE = _hub_module_cell(b"# coding: utf-7\npass+AAo-\n" + _HUB_HELPER.encode("utf-7"))
# A ninth pass: the cookie behind a bare carriage return, which Python reads as a line end and tokenize's
# readline did not, and the whole module in one UTF-7 comment: as UTF-8 it is comments only, and parses.
CR_COOKIE_HUB_MODULE = _hub_module_cell(b"\r# coding: utf-7\n#+" + base64.b64encode(
    ("\n" + _HUB_HELPER).encode("utf-16-be")).rstrip(b"=") + b"-\n")
UNREADABLE += [
    Sample("attack-deep-nesting-renamed-refs", "attack", "lose", {"softmax": _RENAMED_REFS},
           append=(RAISED_RECURSION_LIMIT,), lose=SOFTMAX_PARTS, held=True,
           note="a cell nested past the grader's recursion limit, which an earlier cell raised for the runner"),
    Sample("attack-utf7-hub-module", "attack", "lose", {"softmax": UTF7_HUB_MODULE}, lose=SOFTMAX_PARTS, held=True,
           note="a module written as UTF-7 bytes and loaded by torch.hub: read as its cookie says, it holds"),
    Sample("attack-cr-cookie-hub-module", "attack", "lose", {"softmax": CR_COOKIE_HUB_MODULE}, lose=SOFTMAX_PARTS,
           held=True, note="a UTF-7 cookie behind a bare carriage return: the bytes are read as Python reads them"),
]


# A tenth pass: code the runner ran that no text showed.  A lambda's code with the names it reads replaced
# (`code.replace(co_names=...)`), made into a function; and generator code renamed like IPython's own frames, in a
# file named like IPython's, so that a syntax tree rewritten after `ast.parse` passed for IPython's compile of a
# cell.  Both built torch._refs' operations into a softmax and scored 105/105 unheld.  The audit hook reports
# code objects and functions built from the student's code, and knows IPython's frames by their code objects.
_REFS = "bytes([95, 114, 101, 102, 115]).decode()"  # "_refs", spelled so that no text shows it
CODE_NAMES_REPLACED = f'''
import torch


def _template():
    yield lambda a, dim=-1: torch.Q.exp(a - torch.Q.amax(a, dim, keepdim=True)) / torch.Q.sum(
        torch.Q.exp(a - torch.Q.amax(a, dim, keepdim=True)), dim, keepdim=True)


_code = [c for c in _template().gi_code.co_consts if type(c) is type(_template().gi_code)][0]
_code = _code.replace(co_names=tuple({_REFS} if n == "Q" else n for n in _code.co_names))
_function_type = type(_template)
_helper = _function_type(_code, {{"torch": torch}})


def softmax(x, dim=-1):
    return torch.nan_to_num(_helper(x, dim), nan=0.0)
'''
FORGED_IPYTHON_FRAMES = f'''
import ast
import torch
from IPython.core.compilerop import CachingCompiler

_LIKE_IPYTHON = "/x/IPython/core/interactiveshell.py"
_names = {{"torch": torch, "next": next}}


def _compiles(compiler, tree):
    yield compiler(tree, "<t>", "eval")


def _runs(inner, compiler, tree):
    yield next(inner(compiler, tree))


_function_type = type(_compiles)
_inner = _function_type(_compiles(0, 0).gi_code.replace(co_name="run_ast_nodes", co_filename=_LIKE_IPYTHON), _names)
_outer = _function_type(_runs(0, 0, 0).gi_code.replace(co_name="run_cell_async", co_filename=_LIKE_IPYTHON), _names)
_tree = ast.parse("lambda a, dim=-1: torch.Q.exp(a - torch.Q.amax(a, dim, keepdim=True)) / torch.Q.sum("
                  "torch.Q.exp(a - torch.Q.amax(a, dim, keepdim=True)), dim, keepdim=True)", mode="eval")
for _node in ast.walk(_tree):
    if getattr(_node, "attr", "") == "Q":
        _node.attr = {_REFS}
_helper = _function_type(next(_outer(_inner, CachingCompiler(), _tree)), _names)()


def softmax(x, dim=-1):
    return torch.nan_to_num(_helper(x, dim), nan=0.0)
'''
# The same code and function, built by a library frame that calls what it is handed (a thread pool's worker):
# the runner reported only constructors called from the student's own frames (red team, with `copy.copy`).
LIBRARY_BUILDS_CODE = f'''
import torch
from concurrent.futures import ThreadPoolExecutor


def _template():
    yield lambda a, dim=-1: torch.Q.exp(a - torch.Q.amax(a, dim, keepdim=True)) / torch.Q.sum(
        torch.Q.exp(a - torch.Q.amax(a, dim, keepdim=True)), dim, keepdim=True)


_code = [c for c in _template().gi_code.co_consts if type(c) is type(_template().gi_code)][0]
with ThreadPoolExecutor(1) as _pool:
    _code = _pool.submit(_code.replace, co_names=tuple({_REFS} if n == "Q" else n for n in _code.co_names)).result()
    _helper = _pool.submit(type(_template), _code, {{"torch": torch}}).result()


def softmax(x, dim=-1):
    return torch.nan_to_num(_helper(x, dim), nan=0.0)
'''
# A recording API that replays the built-in's work (`Categorical`: logits minus their logsumexp, no tripwired
# kernel) handed to the graded softmax by routes no name links, or from a file torch.hub imports, or the
# built-in inside TorchScript compiled from a string by torch's own parser (red team: 105/105, nothing held).
CATEGORICAL_THROUGH_AN_ARGUMENT = """
import torch
from torch.distributions import Categorical

_ops = {}


def _register(key, value):
    _ops[key] = value


_register("dist", Categorical)


def softmax(x, dim=-1):
    moved = x.movedim(dim, -1)
    return torch.nan_to_num(_ops["dist"](logits=moved, validate_args=False).logits.exp(), nan=0.0).movedim(-1, dim)
"""
CATEGORICAL_THROUGH_AN_EXCEPTION = """
import torch
from torch.distributions import Categorical

try:
    raise LookupError(Categorical)
except LookupError as _caught:
    _kept = _caught.args[0]


def softmax(x, dim=-1):
    moved = x.movedim(dim, -1)
    return torch.nan_to_num(_kept(logits=moved, validate_args=False).logits.exp(), nan=0.0).movedim(-1, dim)
"""
CATEGORICAL_FROM_A_HUB_FILE = """
import os
import torch

_HUBCONF = '''
import torch
from torch.distributions import Categorical


def made():
    def run(x, dim=-1):
        moved = x.movedim(dim, -1)
        return torch.nan_to_num(Categorical(logits=moved, validate_args=False).logits.exp(), nan=0.0).movedim(-1, dim)
    return run
'''
os.makedirs("hub_dir", exist_ok=True)
with open(os.path.join("hub_dir", "hubconf.p" + "y"), "w") as _file:
    _file.write(_HUBCONF)
_run = torch.hub.load(os.path.abspath("hub_dir"), "made", source="local", trust_repo=True)


def softmax(x, dim=-1):
    return _run(x, dim)
"""
SCRIPT_FROM_A_STRING = r"""
import torch

_TEXT = "def run(x: torch.Tensor, dim: int):\n    return torch.ops.aten.soft" + "max(x, dim)\n"
_unit = torch.jit.CompilationUnit(_TEXT)


def softmax(x, dim=-1):
    return torch.nan_to_num(_unit.run(x, dim), nan=0.0)
"""
# torch._refs' pieces of a softmax, named only inside pickles that a library unpickles under another name
# (`jupyter_client`'s `pickle_unpacker` is `pickle.loads`): the static read sees bytes (red team).
PICKLED_REFS_BY_ANOTHER_NAME = """
import torch
from jupyter_client.session import pickle_unpacker

_amax, _exp, _sum = (pickle_unpacker(b"ctorch._re" + b"fs\\n" + name + b"\\n.") for name in (b"amax", b"exp", b"sum"))


def softmax(x, dim=-1):
    shifted = _exp(x - _amax(x, dim, True))
    return torch.nan_to_num(shifted / _sum(shifted, dim, True), nan=0.0)
"""
UNREADABLE += [
    Sample("attack-code-names-replaced", "attack", "lose", {"softmax": CODE_NAMES_REPLACED}, lose=SOFTMAX_PARTS,
           held=True, note="a lambda's code with its names replaced by code.replace, made into a function"),
    Sample("attack-forged-ipython-frames", "attack", "lose", {"softmax": FORGED_IPYTHON_FRAMES}, lose=SOFTMAX_PARTS,
           held=True, note="a rewritten syntax tree compiled from frames renamed like IPython's"),
    Sample("attack-library-builds-code", "attack", "lose", {"softmax": LIBRARY_BUILDS_CODE}, lose=SOFTMAX_PARTS,
           held=True, note="code.replace and the function type called by a thread pool's worker, not the student"),
    Sample("attack-categorical-through-an-argument", "attack", "lose", {"softmax": CATEGORICAL_THROUGH_AN_ARGUMENT},
           lose=SOFTMAX_PARTS, codes=("softmax-builtin",),
           note="Categorical stored by a helper that was handed it: no name links it; the runner blocks it"),
    Sample("attack-categorical-through-an-exception", "attack", "lose",
           {"softmax": CATEGORICAL_THROUGH_AN_EXCEPTION}, lose=SOFTMAX_PARTS, codes=("softmax-builtin",),
           note="Categorical carried out of an except clause in the exception's args; the runner blocks it"),
    Sample("attack-categorical-from-a-hub-file", "attack", "lose", {"softmax": CATEGORICAL_FROM_A_HUB_FILE},
           lose=SOFTMAX_PARTS, held=True, note="a hubconf.py written by the cell and imported by torch.hub"),
    Sample("attack-pickled-refs-by-another-name", "attack", "lose", {"softmax": PICKLED_REFS_BY_ANOTHER_NAME},
           lose=SOFTMAX_PARTS, held=True, note="torch._refs named in pickles that jupyter_client unpickles"),
    Sample("attack-script-from-a-string", "attack", "lose", {"softmax": SCRIPT_FROM_A_STRING}, lose=SOFTMAX_PARTS,
           held=True, note="TorchScript compiled from a string by torch's own parser: no text the grader reads"),
]

# A softmax computed by a second interpreter, with no tripwires and no audit hook, started through IPython's shell
# (red-team pass 18: 105/105 each): a default alias whose line the shell runs whole, an alias of the student's
# own, and a read-only-looking `!ls` after a program named `ls` was put first on PATH.  No program starts in a
# runner (`guest/no_programs.py`), so the server never answers; and every shell line and alias holds.
SOFTMAX_SERVER = '''
import base64, os, stat, sys, time
SERVE = """
import os, time, torch
open("/tmp/srv_ready", "w").close()
while True:
    if os.path.exists("/tmp/srv_ask"):
        x, d = torch.load("/tmp/srv_in.pt")
        torch.save(torch.softmax(x, d).nan_to_num(0.0), "/tmp/srv_tmp.pt")
        os.remove("/tmp/srv_ask")
        os.rename("/tmp/srv_tmp.pt", "/tmp/srv_out.pt")
    time.sleep(0.0005)
"""
with open("/tmp/srv.txt", "w") as out:
    out.write(SERVE)
with open("/tmp/start.txt", "w") as out:
    out.write("setsid nohup " + sys.executable + " /tmp/srv.txt > /dev/null 2>&1 < /dev/null &\\nsleep 1\\n")
{start}
waited = time.time()
while not os.path.exists("/tmp/srv_ready") and time.time() - waited < 7:
    time.sleep(0.01)

def softmax(x, dim=-1):
    torch.save((x.detach().cpu(), dim), "/tmp/srv_in.pt")
    open("/tmp/srv_ask", "w").close()
    while not os.path.exists("/tmp/srv_out.pt"):
        time.sleep(0.0002)
    answer = torch.load("/tmp/srv_out.pt")
    os.remove("/tmp/srv_out.pt")
    return answer.to(x.device)
'''
LS_FIRST_ON_PATH = '''os.makedirs("/tmp/bin", exist_ok=True)
with open("/tmp/bin/ls", "w") as out:
    out.write("#!/bin/sh\\nsh /tmp/start.txt\\n")
os.chmod("/tmp/bin/ls", stat.S_IRWXU)
os.environ["PATH"] = "/tmp/bin:" + os.environ["PATH"]
!ls'''
UNREADABLE += [
    Sample(f"attack-softmax-server-{name}", "attack", "lose", {"softmax": SOFTMAX_SERVER.replace("{start}", start)},
           lose=SOFTMAX_PARTS, held=True, note=f"torch.softmax in a second interpreter started by {how}")
    for name, start, how in [("shell-alias", "%cat /dev/null; sh /tmp/start.txt; true", "IPython's %cat alias"),
                             ("own-alias", "%alias begin sh /tmp/start.txt\n%begin", "an alias of the student's"),
                             ("ls-on-path", LS_FIRST_ON_PATH, "`!ls`, with a program of that name first on PATH")]]

# Code run where the runner's audit hook does not watch (red-team pass 19): a subinterpreter (each interpreter
# has its own audit hooks; the red team ran ctypes there, into torch's CPU softmax).  Its creation is reported.
SUBINTERPRETER = '''
import _xxsubinterpreters as interpreters
elsewhere = interpreters.create()
interpreters.run_string(elsewhere, "unseen = 6 * 7")
interpreters.destroy(elsewhere)
'''
UNREADABLE.append(Sample("attack-subinterpreter", "attack", "full", append=(SUBINTERPRETER,), held=True,
                      note="code run in a subinterpreter, past the runner's audit hook"))
