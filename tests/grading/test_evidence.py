"""No points without evidence: every hidden check against a runner that tampers with what it sends.

The hostile runner (``hostile_runner.py``) computes every answer with the
reference solution and then spoils how it is sent: no values, another
layout, a subclass, None, a wrong shape or dtype, NaN, a reply over the
cap, stale request ids, a header that lies.  Each mode must earn nothing;
the same runner sending honestly must earn every point, so the harness
itself can tell the difference.
"""
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from autograder.grading.hidden_checks import run_checks
from autograder.sandbox import runners
from autograder.sandbox.session import Budget, StudentSession
from tests.support.checks import PARTS
from tests.support.points import AUTOMATIC

HOSTILE = Path(__file__).with_name("hostile_runner.py")
MODES = ["no-data", "sparse", "subclass", "meta-claim", "none", "wrong-shape", "wrong-dtype", "nan", "huge",
         "lying-header", "stale-ids"]


class HostileSource:
    """A `RunnerSource` that hands out the hostile runner in `mode`."""

    def __init__(self, mode):
        self.mode = mode

    def warm(self):
        pass

    def close(self):
        pass

    def take(self, _limits, _require_isolation):
        mode = self.mode
        proc = subprocess.Popen([sys.executable, str(HOSTILE), mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        replies = runners.reply_queue()
        threading.Thread(target=runners.read_replies, args=(proc.stdout, replies), daemon=True).start()
        ready = replies.get(timeout=60)  # the contract: a handed runner has sent "ready"
        assert isinstance(ready, tuple) and ready[0].get("status") == "ready", ready
        return runners.HandedRunner(proc, replies, None, open(subprocess.os.devnull, "wb"))


def _grade(mode, total_seconds=10):
    # 2 s a call, the product's floor (1 s failed the honest runner now and then in CI).  "stale-ids" makes
    # every request wait out its limit (twice, the retry) until the budget ends, and what the budget cuts off
    # earns nothing either; the honest runner, which needs a few seconds, gets 25 s.
    with StudentSession(["pass"], budget=Budget(call_timeout=2.0, total_seconds=total_seconds),
                        runner_source=HostileSource(mode)) as student:
        student.run_notebook()
        return run_checks(student, PARTS, seed_key=("sdpa", "hostile"))


def test_an_honest_runner_earns_every_point():
    results = _grade("honest", total_seconds=25)
    lost = {p: [(c.name, c.message) for c in r.checks if not c.passed] for p, r in results.items()
            if r.points != r.max_points}
    assert not lost
    assert sum(r.points for r in results.values()) == AUTOMATIC


@pytest.mark.parametrize("mode", MODES)
def test_tampered_evidence_earns_nothing(mode):
    results = _grade(mode)
    earned = {p: [c.name for c in r.checks if c.points] for p, r in results.items() if r.points}
    assert earned == {}, f"{mode}: points without evidence in {earned}"
    assert not any(c.grader_error for r in results.values() for c in r.checks), "a check crashed in the grader"
