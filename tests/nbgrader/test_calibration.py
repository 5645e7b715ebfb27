"""Time limits from the reference solution: derived, bounded, and never charged for a slow moment."""
import os
import time

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from autograder.nbgrader import calibration
from autograder.nbgrader.calibration import ReferenceTimes, cell_key
from autograder.sandbox.session import Budget, StudentSession

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def _cell(source, grade_id=None, solution=False, locked=False):
    cell = new_code_cell(source)
    if grade_id:
        cell.metadata["nbgrader"] = {"grade_id": grade_id, "solution": solution, "locked": locked, "grade": False}
    return cell


def _notebook():
    return new_notebook(cells=[
        _cell("import torch", "setup", locked=True),  # setup: before the first answer
        _cell("def f(x): ...", "ans-f", solution=True),
        _cell("plot()", "demo", locked=True),  # provided, shows output only
        _cell("x = 1"),  # added by the student: the reference has no such cell
        _cell("def g(x): ...", "ans-g", solution=True),
    ])


def test_limits_are_a_multiple_of_the_reference_within_floor_and_ceiling():
    nb = _notebook()
    reference = ReferenceTimes(cells={"setup": 1.5, "ans-f": 0.001, "demo": 0.2, "ans-g": 0.6},
                               calls={"f": 0.01, "g": 0.3, "slow": 5.0})
    base = Budget(cell_timeout=30, display_cell_timeout=5, call_timeout=10, multiple=20, floor=2, cell_floor=10)
    budget = calibration.limits(reference, nb, list(range(5)), {2}, base)
    assert budget.for_cell(0) == 30  # setup keeps the ceiling: a cold runner imports torch there
    assert budget.for_cell(1) == 10  # 20 x 1 ms is below a cell's floor
    assert budget.for_cell(2, display=True) == 5  # the cell floor, capped by the display ceiling
    assert budget.for_cell(3) == 12  # unknown cell: the largest non-setup limit (20 x 0.6 s)
    assert budget.for_cell(4) == 12
    assert budget.for_call("f") == 2 and budget.for_call("g") == 6
    assert budget.for_call("slow") == 10  # 100 s would exceed the ceiling
    assert budget.for_call("never_timed") == 10
    # Feedback names the rule in configured numbers only, the same on every machine.
    assert budget.cell_rule(1) == "参考答案在本机用时的 20 倍，不少于 10 秒、不多于 30 秒"
    assert budget.call_rule("f") == "参考答案在本机用时的 20 倍，不少于 2 秒、不多于 10 秒"
    assert budget.cell_rule(0) == "30 秒"


def test_cells_match_by_grade_id_or_by_their_source():
    assert cell_key(_cell("anything", "ans-f", solution=True)) == "ans-f"
    assert cell_key(_cell("print(1)")) == cell_key(_cell("print(1)")) != cell_key(_cell("print(2)"))


def test_the_reference_solution_is_timed_cell_by_cell_and_call_by_call():
    source = nbformat.read(str(ROOT / "source" / "sdpa" / "sdpa.ipynb"), as_version=4)
    calibration.forget()
    try:
        reference = calibration.reference_times(
            source, lambda cells, shown, roles: StudentSession(cells, display_cells=shown, provided_cells=roles[0],
                                                               demo_cells=roles[1], budget=Budget()))
    finally:
        calibration.forget()
    assert reference is not None, "the reference solution should run cleanly and pass its hidden checks"
    answers = {c.metadata["nbgrader"]["grade_id"] for c in source.cells
               if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")}
    assert answers <= reference.cells.keys()
    assert {"attention_scores", "softmax", "scaled_dot_product_attention"} <= reference.calls.keys()
    # A fresh runner makes its first meta-device op before "ready": no call carries that second.
    assert max(reference.calls.values()) < 0.5, reference.calls
    # The provided cells before the first answer, with their outputs: the why-scale experiment's table and figure.
    assert [source for source, _ in reference.prefix] == [
        c.source for c in source.cells[:next(i for i, c in enumerate(source.cells)
                                               if c.metadata.get("nbgrader", {}).get("solution"))]
        if c.cell_type == "code"]
    [(_, why_scale)] = [(s, o) for s, o in reference.prefix if "n_queries" in s]
    assert [o["output_type"] for o in why_scale] == ["stream", "display_data"]
    figure = why_scale[1]["data"]  # the figure with its description (alt text), and the description as text
    assert figure["text/html"].startswith('<img src="data:image/png;base64,') and 'alt="' in figure["text/html"]
    assert figure["text/plain"].startswith("两幅折线图")


def test_the_reference_outputs_are_offered_only_to_a_submission_that_starts_with_the_same_code():
    nb = _notebook()
    reference = ReferenceTimes(cells={}, calls={}, prefix=(("import torch", ["shown"]),))
    sources = [c.source for c in nb.cells]
    assert calibration.known_outputs(reference, nb, list(range(5)), sources) == {0: ["shown"]}
    assert calibration.known_outputs(reference, nb, list(range(5)), ["import torch as t"] + sources[1:]) == {}
    nb.cells.insert(0, _cell("print('mine')"))  # a cell the student added before the first answer
    assert calibration.known_outputs(reference, nb, list(range(6)), ["print('mine')"] + sources) == {}


PLOT = "fig, ax = plt.subplots()\nax.plot([1, 2])\nprint('table', {value})\nplt.show()"


def test_a_known_cell_shows_the_reference_outputs_only_when_its_text_is_the_reference_text():
    cells = ["import torch\nimport matplotlib.pyplot as plt", PLOT.format(value=1), PLOT.format(value=2)]
    with StudentSession(cells) as session:
        drawn = session.run_notebook()[1]
    assert [o["output_type"] for o in drawn] == ["stream", "display_data"] and "image/png" in drawn[1]["data"]
    reference = [drawn[0], dict(drawn[1], data=dict(drawn[1]["data"], **{"image/png": "VEhFIFJFRkVSRU5DRSdT"}))]
    with StudentSession(cells, known_outputs={1: reference, 2: reference}) as session:
        outputs = session.run_notebook()
    assert session.reused == 1
    assert outputs[1] == reference  # the same text: the reference's figure
    # Other text (not the reference's computation): the cell's own outputs, its figure not drawn.
    assert outputs[2][0]["text"] == "table 2\n" and [o["output_type"] for o in outputs[2]] == ["stream", "display_data"]
    assert outputs[2][1]["data"] == {"text/plain": drawn[1]["data"]["text/plain"]}


def _slow_once(seconds, until):
    """A cell that sleeps `seconds` while the wall clock is before `until`: slow only on its first try."""
    return f"import time\nif time.time() < {until!r}:\n    time.sleep({seconds!r})\nok = True"


def test_a_transiently_slow_cell_is_retried_and_not_charged():
    limit = 4.0
    cells = ["x = 1", "ok = True"]
    with StudentSession(cells, budget=Budget(cell_limits={1: limit})) as session:
        session.get("x")  # starts the runner first, so that its start-up (seconds on a loaded machine) is not timed
        # The first try starts within milliseconds and overruns at +4 s; the retry starts after that and a
        # restart: a deadline 2 s from now falls between them with 2 s to spare on either side.
        session.cells[1] = _slow_once(30, time.time() + 2.0)
        outputs = session.run_notebook()
        assert session.retries == 1 and not session.events, session.events
        assert not any(o.get("output_type") == "error" for o in outputs[1])
        assert session.get("ok") is True


def test_a_cell_that_is_always_slow_is_charged_after_one_retry():
    cells = ["import time\ntime.sleep(30)", "after = 1"]
    with StudentSession(cells, budget=Budget(cell_limits={0: 1.0}, multiple=20, floor=1)) as session:
        started = time.monotonic()
        outputs = session.run_notebook()
        assert time.monotonic() - started >= 2.0  # two tries of one second each
        assert session.retries == 1
        [event] = session.events
        assert event["kind"] == "CellTimeoutError" and event["seconds"] == 1.0
        assert "参考答案在本机用时的 20 倍" in event["detail"] and "重试一次" in event["detail"]
        assert outputs[0][0]["ename"] == "CellTimeoutError"
        assert session.get("after") == 1  # the rest of the notebook still ran


@pytest.mark.alone  # "had its core" is true only when nothing else runs beside it
def test_a_busy_loop_that_had_its_core_costs_one_try_then_nothing():
    """No retry when this side saw the runner use its whole limit as CPU: load did not make it slow
    (a sleeping overrun, above, is retried)."""
    cells = ["def hang(x):\n    while True:\n        pass", "def fine(x):\n    return x"]
    with StudentSession(cells, budget=Budget(call_limits={"hang": 2.0, "fine": 1.0})) as session:
        session.run_notebook()
        started = time.monotonic()
        result = session.call("hang", 1)
        assert result.status == "timeout" and time.monotonic() - started < 3.5
        assert (session.retries, session.charged_without_retry) == (0, 1)
        assert "重试一次" in result.describe()
        started = time.monotonic()
        assert session.call("hang", 1).status == "timeout" and time.monotonic() - started < 0.5
        assert session.call("fine", 3).value == 3


def test_threads_that_add_up_to_a_core_while_each_waited_are_retried():
    """Red team F2: CPU time alone called a runner unhindered when many threads each got a slice of a
    busy machine and together used a whole CPU.  Their run-queue waits show the starvation."""
    threads = 4 * (os.cpu_count() or 1)
    cells = [f"import torch\ndef hang(x):\n    torch.set_num_threads({threads})\n"
             "    a = torch.randn(512, 512)\n    while True:\n        a @ a"]
    with StudentSession(cells, budget=Budget(call_limits={"hang": 2.0})) as session:
        session.run_notebook()
        assert session.call("hang", 1).status == "timeout"
        assert (session.retries, session.charged_without_retry) == (1, 0)


def test_short_lived_threads_that_each_waited_are_retried():
    """Red team: run time came from /proc/<pid>/stat, which keeps the CPU of threads that ended, while
    their run-queue waits went with them: threads that handed the work on to fresh ones, four at a
    time on one CPU, looked unhindered.  Now run time and waits come from the same live threads."""
    work = ("import hashlib, os, threading, time\nbuf = b'x' * (1 << 20)\n"
            "def work():\n    for _ in range(10):\n        hashlib.sha256(buf).digest()\n"
            "    threading.Thread(target=work).start()\n"
            "def relay(x):\n    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
            "    started = time.monotonic()\n"
            "    while time.monotonic() - started < 0.5:  # past this side's first reading\n"
            "        hashlib.sha256(buf).digest()\n"
            "    for _ in range(4):\n        threading.Thread(target=work).start()\n"
            "    threading.Event().wait()")
    with StudentSession([work], budget=Budget(call_limits={"relay": 2.0})) as session:
        session.run_notebook()
        assert session.call("relay", 1).status == "timeout"
        assert (session.retries, session.charged_without_retry) == (1, 0)


def test_retries_that_succeed_never_use_up_the_restarts():
    """Red team: each retry spent one of max_restarts, so a correct answer on a loaded machine got 'budget'
    for every check after the ninth slow moment."""
    slow = "import time\ndef f(x, until):\n    if time.time() < until:\n        time.sleep(3)\n    return x"
    budget = Budget(call_limits={"f": 1.0}, total_seconds=200, max_restarts=2)
    with StudentSession(["import torch", slow], budget=budget) as session:
        session.run_notebook()
        for i in range(4):  # twice the restarts allowed
            result = session.call("f", i, time.time() + 0.8)  # slow on the first try only
            assert result.status == "ok" and result.value == i, (i, result.status)
        assert session.retries == 4 and session.restarts == 0


def test_a_call_cut_short_by_the_submission_budget_is_not_charged_as_its_own_timeout():
    """Red team: a busy call stopped by the submission's total budget (not its own limit) was charged
    as a timeout of the function ("possible infinite loop"); it is the grader's budget that ran out."""
    import dataclasses

    busy = "def f(n):\n    import time\n    t = time.time()\n    while time.time() - t < n:\n        pass\n    return 1"
    with StudentSession([busy], budget=Budget(call_limits={"f": 3.0}, total_seconds=120)) as session:
        session.run_notebook()
        assert session.call("f", 0.05).ok
        session.budget = dataclasses.replace(session.budget, total_seconds=session.elapsed() + 0.8)
        result = session.call("f", 1.5)  # within its own 3 s limit
        assert result.status == "budget" and not session.events and "f" not in session.hung
