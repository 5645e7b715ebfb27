"""A graded function that looks for a way to lift the runner's tripwires, then calls a built-in softmax.

One family: each sample finds a would-be switch by another route (an attribute of ``sys.stdout``,
``vars``, ``dir`` with ``getattr``, a ``gc`` walk, a frame's locals, a closure cell) and reaches the
built-in by another one (``F.cross_entropy``, ``nll_loss`` of a ``log_softmax``, an ``nn.Module``,
``torch.ops``).  The runner holds no switch (``guest/tripwires.py``), so each finds nothing, its
built-in raises, and the softmax part and every part that calls it lose what the honest holder of a
built-in softmax loses, with ``[softmax-builtin]`` named.
"""
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
           note=f"looks for a switch through {finder}, then a built-in softmax through {route}")
    for finder, route in PAIRS
]
