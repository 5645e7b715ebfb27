"""The runner's tripwires are armed for every cell and every check; only a demo's own built-in calls get through.

Each test runs a small notebook in a real sandboxed runner (`StudentSession`) and reads back what the
student's code was able to compute.
"""
import torch

from autograder.sandbox import forkserver
from autograder.sandbox.session import Budget, StudentSession

SETUP = "import torch\nimport torch.nn.functional as F\nx = torch.randn(2, 3)"
RULE = ("_name = 'tluafed.xamtfos_.neta'[::-1]\n"
        "_rule = next(fn for op, fn in torch._decomp.decomposition_table.items() if str(op) == _name)")
CATCH = "except Exception as e:\n    {name} = type(e).__name__"


def _session(cells, demo=()):
    """Cell 0 (the set-up) and the `demo` cells are the course's; a demo cell may show the built-ins."""
    return StudentSession(cells, provided_cells={0, *demo}, demo_cells=demo,
                          budget=Budget(cell_timeout=60, call_timeout=30))


def _errors(outputs, pos):
    return [o.get("ename") for o in outputs.get(pos, []) if o.get("output_type") == "error"]


def test_a_students_cell_cannot_use_a_builtin_even_at_module_level():
    cells = [SETUP, "y = torch.softmax(x, -1)", "z = F.scaled_dot_product_attention(x, x, x)",
             "w = torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)"]
    with _session(cells) as session:
        outputs = session.run_notebook()
        assert _errors(outputs, 1) == ["ForbiddenAPIError"] and _errors(outputs, 2) == ["ForbiddenAPIError"]
        assert session.get("y") is None and session.get("z") is None
        assert session.get("w") is not None  # by hand still works


def test_a_cell_goes_on_past_a_top_level_builtin_and_defines_its_functions_which_stay_armed():
    """A self-check printed above the `def` ran in the student's kernel: grading skips that statement (and what
    fails for want of its value), says so, and the rest of the cell runs; the function it defines is graded as
    written, and any built-in inside it still raises (red team: 34 points lost, unnamed, for a print above a
    correct `softmax`)."""
    cells = [SETUP,
             "ref = torch.softmax(x, 0)\nprint('torch says', ref)\n"
             "def mine(t):\n    return torch.exp(t) / torch.exp(t).sum(-1, keepdim=True)\n"
             "def theirs(t):\n    return torch.softmax(t, -1)\nafter = 1",
             "raise ValueError('stop')\ndef unreached():\n    return 1",
             "print('diff', (mine(x) - ref).abs().max())\ndef later():\n    return 2",
             "try:\n    theirs(x)\n    called = 'ran'\n" + CATCH.format(name="called")]
    with _session(cells) as session:
        outputs = session.run_notebook()
        assert _errors(outputs, 1) == ["ForbiddenAPIError", "NameError"], outputs[1]
        skipped = [o["text"] for o in outputs[1] if o.get("output_type") == "stream"]
        assert len(skipped) == 1 and "草稿单元格" in skipped[0], outputs[1]
        assert session.get("after") == 1 and session.get("ref") is None
        assert session.call("mine", torch.randn(2, 3)).status == "ok"
        assert session.get("called") == "ForbiddenAPIError"
        assert _errors(outputs, 2) == ["ValueError"]  # any other error ends a cell, as in the student's kernel
        assert session.call("unreached").status == "missing"
        assert _errors(outputs, 3) == ["NameError"] and session.call("later").value == 2  # wanted `ref`


def test_a_cell_goes_on_past_an_import_of_a_module_grading_lacks():
    """`import seaborn` above a correct `def` ran in the student's kernel; here the module is missing, and the
    function below it must still be graded (red team: 34 points lost, unnamed).  Other errors still end a cell."""
    cells = [SETUP, "import no_such_module_for_grading as sns\nsns.set_theme()\ndef mine(t):\n    return t * 2",
             "import math\nmath.no_such_function()\ndef unreached():\n    return 1"]
    with _session(cells) as session:
        outputs = session.run_notebook()
        assert _errors(outputs, 1) == ["ModuleNotFoundError", "NameError"], outputs[1]
        notes = [o["text"] for o in outputs[1] if o.get("output_type") == "stream"]
        assert len(notes) == 1 and "没有安装" in notes[0], outputs[1]
        assert session.call("mine", torch.ones(2)).status == "ok"
        assert _errors(outputs, 2) == ["AttributeError"] and session.call("unreached").status == "missing"


def test_a_provided_demo_keeps_its_builtins_but_the_student_function_it_calls_does_not():
    cells = [SETUP, "def mine(t):\n    return torch.softmax(t, -1)",
             "demo = F.softmax(x, -1).sum().item()\ntry:\n    mine(x)\n    theirs = 'ran'\n"
             + CATCH.format(name="theirs") + "\nafter = torch.softmax(x, -1).sum().item()"]
    with _session(cells, demo={2}) as session:
        outputs = session.run_notebook()
        assert _errors(outputs, 2) == []
        assert abs(session.get("demo") - 2.0) < 1e-6 and abs(session.get("after") - 2.0) < 1e-6
        assert session.get("theirs") == "ForbiddenAPIError"


def test_a_demo_replayed_for_a_retried_check_never_computes_on_the_checks_inputs():
    """A check's inputs must never reach a built-in.  A check call that runs past its limit is retried on a
    fresh runner, every cell replayed first, demo cells with their built-ins; a student function the demo cell
    calls before its built-in could hand it inputs the timed-out call saved.  Nothing the call saved survives:
    the zygote resets /tmp (and scratch, /dev/shm) between two runners of one student too."""
    cells = [SETUP,
             "import os, time\n"
             "def pick():\n"
             "    return torch.load('/tmp/seen.pt') if os.path.exists('/tmp/seen.pt') else torch.zeros(2, 3)\n"
             "def mine(t):\n"
             "    if os.path.exists('/tmp/seen.pt') and torch.equal(torch.load('/tmp/seen.pt'), t):\n"
             "        return out_\n"
             "    torch.save(t, '/tmp/seen.pt')\n"
             "    time.sleep(60)",
             "x_ = pick()\nout_ = F.softmax(x_, -1)"]
    server = forkserver.ForkServer(reply_timeout=3.0)  # as grading runs: runners forked in one sandbox
    server.warm()
    try:
        with StudentSession(cells, provided_cells={0, 2}, demo_cells={2}, runner_source=server,
                            budget=Budget(cell_timeout=60, call_timeout=4)) as session:
            session.run_notebook()
            assert session.get("out_") is not None  # the demo's first run got its answer
            hidden = torch.randn(2, 3)
            result = session.call("mine", hidden)
            assert session.report.retries == 1  # the retry's replay happened
            assert result.status == "timeout", result  # the retried call found nothing saved, and saved again
            assert session.get("x_").tensor.abs().sum() == 0  # the replayed demo ran on its own inputs
    finally:
        server.close()


def test_a_decomposition_taken_from_the_table_is_blocked_in_checks_and_cannot_be_recorded():
    cells = [SETUP, RULE + "\ndef by_rule(t):\n    return _rule(t, -1, False)",
             "from torch.fx.experimental.proxy_tensor import make_fx\n_graph = make_fx(by_rule)(torch.randn(2, 3))"]
    with _session(cells) as session:
        outputs = session.run_notebook()
        assert _errors(outputs, 2) == ["ForbiddenAPIError"] and session.get("_graph") is None
        result = session.call("by_rule", torch.randn(2, 3))
        assert not result.ok and result.forbidden


def test_a_callback_into_student_code_is_armed_and_a_thread_never_gets_a_builtin():
    cells = [SETUP,
             "import threading\nseen = []\ndef late():\n    try:\n        torch.softmax(x, -1)\n"
             "        seen.append('ran')\n    except Exception as e:\n        seen.append(type(e).__name__)\n"
             "class Probe:\n    def __call__(self, t):\n        return torch.softmax(t, -1)",
             "t = threading.Thread(target=late)\nt.start()\nt.join()\n"
             "try:\n    Probe()(x)\n    via_callback = 'ran'\n" + CATCH.format(name="via_callback")]
    with _session(cells, demo={2}) as session:
        session.run_notebook()
        assert session.get("seen") == ["ForbiddenAPIError"]
        assert session.get("via_callback") == "ForbiddenAPIError"


def test_checks_are_armed_after_a_demo_cell_used_the_builtins():
    cells = [SETUP, "def mine(t):\n    return torch.softmax(t, -1)", "ok = torch.softmax(x, -1).sum().item()"]
    with _session(cells, demo={2}) as session:
        session.run_notebook()
        assert abs(session.get("ok") - 2.0) < 1e-6
        result = session.call("mine", torch.randn(2, 3))
        assert not result.ok and result.forbidden


def test_student_code_inside_a_permitted_builtin_call_is_armed_again():
    """A tensor subclass of the student's, handed to the demo's F.softmax, runs armed inside it."""
    cells = [SETUP,
             "class Sneaky(torch.Tensor):\n    @classmethod\n"
             "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
             "        global inside\n        try:\n            torch.ops.aten._softmax(torch.ones(2, 2), -1, False)\n"
             "            inside = 'ran'\n        except Exception as e:\n            inside = type(e).__name__\n"
             "        return super().__torch_function__(func, types, args, kwargs or {})\n"
             "x = torch.randn(2, 3).as_subclass(Sneaky)",
             "demo = F.softmax(x, -1)"]
    with _session(cells, demo={2}) as session:
        session.run_notebook()
        assert session.get("inside") == "ForbiddenAPIError"


def test_a_demo_cell_does_not_let_a_builtin_through_while_another_thread_runs():
    cells = [SETUP, "import threading, time\nthreading.Thread(target=time.sleep, args=(3,), daemon=True).start()",
             "try:\n    F.softmax(x, -1)\n    demo = 'ran'\n" + CATCH.format(name="demo")]
    with _session(cells, demo={2}) as session:
        session.run_notebook()
        assert session.get("demo") == "ForbiddenAPIError"
