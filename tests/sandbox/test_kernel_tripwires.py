"""The C++ kernel tripwires: built once per torch, loaded by every runner, no Python handle, no silent start
without them."""
import json
import subprocess
import sys
import textwrap

import pytest

from autograder.sandbox import isolation, kernel_tripwires
from autograder.sandbox.guest import GUEST_DIR

PROBE = textwrap.dedent(r'''
    import gc, json, sys
    sys.path.insert(0, sys.argv[1])
    import torch
    import runner as sandbox_runner

    def handles():
        return sum(type(o).__name__ == "_DispatchModule" for o in gc.get_objects())

    before = handles()
    runner = sandbox_runner.Runner(None, None)
    runner.install_tripwires()
    x = torch.randn(2, 3)
    outcome = {}
    for label, call in {"aten._softmax": lambda: torch.ops.aten._softmax(x, -1, False),
                        "aten._log_softmax": lambda: torch.ops.aten._log_softmax(x, -1, False),
                        "cross_entropy": lambda: torch.nn.functional.cross_entropy(x, torch.tensor([0, 1])),
                        "sdpa": lambda: torch.ops.aten._scaled_dot_product_attention_math(x[None], x[None], x[None]),
                        }.items():
        try:
            call()
            outcome[label] = "computed"
        except BaseException as exc:
            outcome[label] = type(exc).__name__
    # Replacing the callback changes the words, never the fact that the kernel throws.
    import kernel_tripwires

    def quiet():
        runner = None
        return (lambda op_name: runner).__code__  # one free variable, as `report` has

    for obj in gc.get_objects():
        if callable(obj) and getattr(obj, "__name__", "") == "report" and getattr(obj, "__module__", "") == "tripwires":
            obj.__code__ = quiet()
    try:
        torch.ops.aten._softmax(x, -1, False)
        outcome["after replacing report"] = "computed"
    except BaseException as exc:
        outcome["after replacing report"] = type(exc).__name__
    try:
        kernel_tripwires.install([], print)
        outcome["second install"] = "accepted"
    except RuntimeError:
        outcome["second install"] = "refused"
    # An op of the families that a module imported later registers: it computes until the runner's next look.
    import tripwires
    gc.freeze()  # as the zygote's warm-up leaves it: what exists now is out of the collector's lists
    modules_before = set(sys.modules)
    import torch._inductor.inductor_prims as late_module  # registers prims::prepare_softmax_online
    late_op = torch.ops.prims.prepare_softmax_online
    late_op(x, -1)  # (its first call imports what it needs)
    for name in set(sys.modules) - modules_before:  # dropped again, as `mock.patch.dict("sys.modules")` does: the
        del sys.modules[name]                       # look must not depend on sys.modules
    late_op = lambda: torch.ops.prims.prepare_softmax_online(x, -1)
    try:
        late_op()
        outcome["late op before the look"] = "computed"
    except BaseException as exc:
        outcome["late op before the look"] = type(exc).__name__
    prepare = late_module.eager_prepare_softmax  # its Python function, also new since start-up
    outcome["late function before the look"] = "computed" if prepare(x, -1) is not None else "?"
    late = tripwires.cover_late_ops(runner)
    try:
        prepare(x, -1)
        outcome["late function after the look"] = "computed"
    except BaseException as exc:
        outcome["late function after the look"] = type(exc).__name__
    try:
        late_op()
        outcome["late op after the look"] = "computed"
    except BaseException as exc:
        outcome["late op after the look"] = type(exc).__name__
    outcome["found late"] = late
    outcome["a second look"] = tripwires.cover_late_ops()
    import torch.nn.functional as F
    outcome["the hook leads to the runner"] = hasattr(getattr(F, "__course_forbidden_call__"), "__self__")
    print(json.dumps({"outcome": outcome, "new handles": handles() - before,
                      "recorded": runner.forbidden_used[:3], "by hand": float(x.exp().sum())}))
''')


def test_the_kernels_throw_with_no_python_handle_to_lift_them():
    kernel_tripwires.ensure_built()
    done = subprocess.run([sys.executable, "-c", PROBE, str(GUEST_DIR)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["outcome"] == {"aten._softmax": "ForbiddenAPIError", "aten._log_softmax": "ForbiddenAPIError",
                                 "cross_entropy": "ForbiddenAPIError", "sdpa": "ForbiddenAPIError",
                                 "after replacing report": "RuntimeError", "second install": "refused",
                                 "late op before the look": "computed", "late op after the look": "RuntimeError",
                                 "found late": ["prims::prepare_softmax_online"], "a second look": [],
                                 "late function before the look": "computed",
                                 "late function after the look": "ForbiddenAPIError",
                                 "the hook leads to the runner": False}
    assert result["new handles"] == 0  # no dispatcher library object for a heap scan to find and reset
    assert result["recorded"][:2] == ["aten::_softmax", "aten::_log_softmax"]
    assert result["by hand"] > 0
    assert "Overriding a previously registered kernel" not in done.stderr


def test_it_is_rebuilt_when_missing_and_its_build_failure_refuses_grading(tmp_path, monkeypatch):
    monkeypatch.setattr(kernel_tripwires, "MODULE", tmp_path / "kernel_tripwires.so")
    monkeypatch.setattr(kernel_tripwires, "STAMP", tmp_path / "kernel_tripwires.so.key")
    assert not kernel_tripwires.is_built()
    monkeypatch.setenv("CXX", "/bin/false")
    with pytest.raises(kernel_tripwires.BuildError, match="the C.. compiler could not build kernel_tripwires.cpp"):
        kernel_tripwires.ensure_built()
    with pytest.raises(isolation.IsolationRefused) as refused:
        isolation.require(allow_unisolated=True)  # accepting no isolation does not accept weaker tripwires
    assert str(refused.value).startswith(isolation.REFUSED) and "\n" not in str(refused.value)
    assert not (tmp_path / "kernel_tripwires.so").exists()  # nothing half-built is left to load


def test_a_stale_build_is_not_taken_for_a_good_one(tmp_path, monkeypatch):
    monkeypatch.setattr(kernel_tripwires, "MODULE", tmp_path / "kernel_tripwires.so")
    monkeypatch.setattr(kernel_tripwires, "STAMP", tmp_path / "kernel_tripwires.so.key")
    (tmp_path / "kernel_tripwires.so").write_bytes(b"built for another torch")
    (tmp_path / "kernel_tripwires.so.key").write_text("another key")
    assert not kernel_tripwires.is_built()
    (tmp_path / "kernel_tripwires.so.key").write_text(kernel_tripwires.build_key())
    assert kernel_tripwires.is_built()
