"""Nothing a student's code can reach lifts the tripwires.

A student cell walks everything it can reach, as an attacker would: every object the collector knows
(after `gc.unfreeze()`), the frames of every thread, `sys.modules` and the attributes of every object
reachable from its globals and `sys` (closure cells, `__wrapped__`, `sys.stdout`).  It tries every
switch it finds (flips the runner's flags, calls anything that sounds like a way out, resets every
dispatcher library, runs every finaliser) and calls every function whose name is in the families.
Then the built-ins must still raise, and no function it found may have computed a softmax or an
attention.  The trusted side must refuse a demo built-in outside a demo cell, whatever the runner thinks.
"""
import pytest

from autograder.sandbox.session import Budget, StudentSession

SETUP = "import torch\nimport torch.nn.functional as F"

WALK = r'''
def _walk():
    # A function of its own: the walk may reset the shell's namespace (IPython's own `reset`).
    import contextlib, gc, sys, types, weakref
    import torch, torch.nn.functional as F
    from forbidden import blocked  # the guest's own family patterns: the walk asks what the runner blocks
    from IPython.core.interactiveshell import InteractiveShell

    x = torch.randn(2, 3, dtype=torch.float64)
    q = torch.randn(1, 2, 3, 4, dtype=torch.float64)

    def _soft(t):
        e = (t - t.amax(-1, keepdim=True)).exp()
        return e / e.sum(-1, keepdim=True)

    def _attention(q_):
        return _soft(q_ @ q_.transpose(-2, -1) / q_.shape[-1] ** 0.5) @ q_

    WANT = [_soft(x), _attention(q), _soft(x).log()]
    LIFTS = ("disarm", "remove_tripwires", "permitted", "_destroy", "reset", "uninstall", "restore", "enable",
             "_del_library", "unfreeze")

    def _computes(value):
        values = value if isinstance(value, (tuple, list)) else (value,)
        return any(isinstance(v, torch.Tensor) and v.shape == w.shape and v.dtype == w.dtype
                   and torch.allclose(v, w, atol=1e-6, equal_nan=False) for v in values for w in WANT)

    gc.unfreeze()
    found = {id(o): o for o in gc.get_objects()}
    roots = [globals(), sys, sys.modules, sys.stdout, sys.stderr, sys.stdin, *sys.modules.values()]
    for frame in sys._current_frames().values():
        while frame is not None:
            roots += [frame, frame.f_locals, frame.f_globals]
            frame = frame.f_back
    queue = list(roots)
    while queue and len(found) < 3_000_000:
        obj = queue.pop()
        if id(obj) in found and obj is not found[id(obj)]:
            continue
        found[id(obj)] = obj
        try:
            more = gc.get_referents(obj)
            if isinstance(obj, types.FunctionType):
                more += [c.cell_contents for c in obj.__closure__ or ()]
            attrs = getattr(obj, "__dict__", None)
            if isinstance(attrs, dict):
                more += list(attrs.values())
        except Exception:
            continue
        queue += [m for m in more if id(m) not in found]

    counts = {"tried": 0, "computed": 0}
    lifted = []

    def attack(obj):
        kind = type(obj)
        if isinstance(obj, weakref.finalize):
            counts["tried"] += 1
            obj()
            return
        if kind.__name__ in ("_DispatchModule", "Library"):
            counts["tried"] += 1
            for name in ("reset", "_destroy"):
                with contextlib.suppress(Exception):
                    getattr(obj, name)()
            return
        module = kind.__module__ if isinstance(kind.__module__, str) else ""
        if issubclass(kind, InteractiveShell):  # IPython's shell: its switches turn on its debugger, no guard off
            module = ""
        if module in ("runner", "tripwires", "warmup", "zygote", "__main__") or module.startswith("torch.library"):
            for name in LIFTS:
                counts["tried"] += 1
                with contextlib.suppress(Exception):
                    result = getattr(obj, name)()
                    if hasattr(result, "__enter__"):
                        result.__enter__()
            attrs = getattr(obj, "__dict__", None)
            for key, value in list(attrs.items()) if isinstance(attrs, dict) else ():
                if isinstance(value, bool):
                    counts["tried"] += 1
                    with contextlib.suppress(Exception):
                        setattr(obj, key, not value)
        name = obj.__name__
        if callable(obj) and isinstance(name, str) and blocked(name) and not isinstance(obj, type):
            for args, kwargs in (((x,), {}), ((x, -1), {}), ((x,), {"dim": -1}), ((x, -1, False), {}),
                                 ((q, q, q), {})):
                try:
                    value = obj(*args, **kwargs)
                except BaseException:
                    continue
                counts["computed"] += 1
                if _computes(value):
                    lifted.append(f"{getattr(obj, '__module__', '?')}.{name}")

    for obj in list(found.values()):
        try:
            attack(obj)
        except BaseException:  # odd objects raise anything from an attribute lookup
            pass

    still = {}
    for label, call in {"torch.softmax": lambda: torch.softmax(x, -1), "F.softmax": lambda: F.softmax(x, -1),
                        "Tensor.softmax": lambda: x.softmax(-1),
                        "aten._softmax": lambda: torch.ops.aten._softmax(x, -1, False),
                        "torch._refs.softmax": lambda: __import__("torch._refs").softmax(x, -1),
                        "F.cross_entropy": lambda: F.cross_entropy(x, torch.tensor([0, 1]), reduction="none"),
                        "F.scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(q, q, q),
                        "nn.MultiheadAttention": lambda: torch.nn.MultiheadAttention(4, 1, batch_first=True)(
                            q[0].float(), q[0].float(), q[0].float())}.items():
        try:
            call()
            still[label] = "computed"
        except BaseException as exc:
            still[label] = type(exc).__name__
    return {"objects": len(found), **counts, "lifted": lifted, "after": still}

walk = _walk()
'''


def _session(cells, demo=()):
    return StudentSession(cells, provided_cells={0, *demo}, demo_cells=demo,
                          budget=Budget(cell_timeout=180, call_timeout=30, total_seconds=400))


def test_nothing_reachable_from_a_student_cell_lifts_a_tripwire():
    with _session([SETUP, WALK]) as session:
        outputs = session.run_notebook()
        walk = session.get("walk")
        assert walk is not None, outputs[1]
    assert walk["objects"] > 100_000 and walk["tried"] > 0  # it did walk the process
    assert walk["lifted"] == []
    assert {label: outcome for label, outcome in walk["after"].items() if outcome != "ForbiddenAPIError"} == {}


def test_the_grader_refuses_a_builtin_outside_a_demo_cell_whatever_the_runner_believes():
    """The student flips the runner's own view (a demo cell is running, nothing of theirs on the stack)."""
    ask = ("import gc\ngc.unfreeze()\n_r = next(o for o in gc.get_objects() if type(o).__name__ == 'Runner')\n"
           "_r._exec_demo = True\n_r.permits = lambda frame: True\n"
           "def mine(t):\n    return F.softmax(t, -1)\n"
           "try:\n    _direct = _r._ask_grader('torch.softmax', (torch.ones(2, 2), -1), {})\n"
           "except Exception as e:\n    _direct = type(e).__name__\n")
    with _session([SETUP, ask]) as session:
        session.run_notebook()
        assert session.get("_direct") == "ForbiddenAPIError"
        import torch

        result = session.call("mine", torch.randn(2, 3))
        assert not result.ok and result.ename == "ForbiddenAPIError" and result.forbidden


@pytest.mark.parametrize("demo", [True, False])
def test_a_demo_cell_gets_each_builtin_it_shows_and_only_there(demo):
    cells = [SETUP, "torch.manual_seed(0)\nq_ = torch.randn(1, 3, 4)\n"
             "mha = torch.nn.MultiheadAttention(4, 1, batch_first=True)\n"
             "with torch.no_grad():\n    _, w_ = mha(q_, q_, q_)\n"
             "o_ = F.scaled_dot_product_attention(q_, q_, q_, attn_mask=torch.ones(3, 3, dtype=torch.bool).tril())\n"
             "s_ = torch.softmax(q_, dim=-1)\nt_ = q_.softmax(-1)\n"
             "d1_ = F.scaled_dot_product_attention(q_, q_, q_, dropout_p=0.5)\n"
             "d2_ = F.scaled_dot_product_attention(q_, q_, q_, dropout_p=0.5)\n"
             "rows = float(w_.sum(-1).mean()) + float(s_.sum(-1).mean()) + float(t_.sum(-1).mean())\n"
             "dropout_differs = bool((d1_ != d2_).any())"]
    with _session(cells, demo={1} if demo else set()) as session:
        outputs = session.run_notebook()
        errors = [o.get("ename") for o in outputs[1] if o.get("output_type") == "error"]
        if demo:
            assert errors == [] and abs(session.get("rows") - 3.0) < 1e-5
            assert session.get("dropout_differs") is True  # each call its own dropout, as in PyTorch
        else:
            # each statement that reaches a built-in raises (the cell goes on past it, and past the names
            # those statements would have bound)
            assert errors.count("ForbiddenAPIError") == 6 and set(errors) == {"ForbiddenAPIError", "NameError"}
            assert session.get("rows") is None and session.get("q_") is not None
