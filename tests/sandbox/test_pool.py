"""Runners started ahead of need (`autograder.sandbox.pool`): one spare, handed to one session, never reused."""
import io
import os
import queue
import sys

import pytest

from autograder.sandbox import launcher, pool
from autograder.sandbox.guest import procfs
from autograder.sandbox.session import StudentSession


class FakeSpare:
    """Stands in for `pool._Warm`: no process, it records what the pool does with it."""

    made = []
    fail = False  # the next one cannot start
    ready = True  # whether `wait_ready` succeeds

    def __init__(self, limits, require_isolation, preload):
        if FakeSpare.fail:
            raise OSError("no sandbox today")
        self.limits, self.require_isolation, self.preload = limits, require_isolation, preload
        self.proc, self.replies, self.directory, self.log = object(), queue.Queue(), "/nonexistent", io.BytesIO()
        self.waited, self.discarded = None, False
        FakeSpare.made.append(self)

    def wait_ready(self, timeout):
        self.waited = timeout
        return FakeSpare.ready

    def discard(self):
        self.discarded = True


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(pool, "_Warm", FakeSpare)
    monkeypatch.setattr(FakeSpare, "made", [])
    monkeypatch.setattr(FakeSpare, "fail", False)
    monkeypatch.setattr(FakeSpare, "ready", True)
    return FakeSpare


def test_the_preload_cell_imports_and_binds_nothing(monkeypatch):
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    namespace = {}
    exec(pool.preload_source(("colorsys", "json")), namespace)
    assert set(namespace) == {"__builtins__"} and "colorsys" in sys.modules


def test_a_spare_goes_to_one_session_and_the_next_one_starts(fake):
    limits = launcher.Limits(max_processes=64)
    runners = pool.RunnerPool(limits, start_timeout=7.0)
    runners.warm()
    runners.warm()  # one spare at a time
    assert len(fake.made) == 1
    spare = fake.made[0]
    assert (spare.limits, spare.require_isolation) == (limits, True)
    handed = runners.take(limits, True)
    assert (handed.proc, handed.replies, handed.directory, handed.log) == (
        spare.proc, spare.replies, spare.directory, spare.log)
    assert spare.waited == 7.0 and not spare.discarded
    assert len(fake.made) == 2 and fake.made[1] is not spare  # a new process for the next session
    assert (runners.handed, runners.missed) == (1, 0)
    runners.close()
    assert fake.made[1].discarded
    assert runners.take(limits, True) is None and runners.missed == 1 and len(fake.made) == 3  # warms one again


def test_a_session_with_other_limits_starts_its_own_and_the_pool_learns_them(fake):
    runners = pool.RunnerPool(launcher.Limits())
    runners.warm()
    wanted = launcher.Limits(memory_bytes=2**30)
    assert runners.take(wanted, True) is None
    assert fake.made[0].discarded and fake.made[0].waited is None  # never handed with the wrong limits
    assert (runners.limits, runners.require_isolation) == (wanted, True)
    assert (fake.made[1].limits, fake.made[1].require_isolation) == (wanted, True)
    assert (runners.handed, runners.missed) == (0, 1)
    assert runners.take(wanted, True) is not None and runners.handed == 1


def test_a_spare_that_is_not_ready_in_time_is_thrown_away(fake):
    runners = pool.RunnerPool()
    runners.warm()
    fake.ready = False
    assert runners.take(runners.limits, False) is None
    assert fake.made[0].discarded and runners.missed == 1


def test_no_spare_is_started_when_no_more_work_is_coming(fake):
    runners = pool.RunnerPool()
    runners.warm()
    runners.keep_warm = False
    assert runners.take(runners.limits, runners.require_isolation) is not None
    assert len(fake.made) == 1 and runners._spare is None


def test_a_spare_that_cannot_start_leaves_the_session_to_start_its_own(fake, caplog):
    fake.fail = True
    runners = pool.RunnerPool()
    runners.warm()
    assert "could not start a spare runner: no sandbox today" in caplog.text
    assert runners.take(runners.limits, False) is None and runners.missed == 1


def test_a_real_spare_is_ready_handed_over_and_owned_by_its_session():
    runners = pool.RunnerPool(start_timeout=120.0)
    runners.warm()
    spare = runners._spare
    try:
        with StudentSession(["x = 6 * 7", "names = sorted(k for k in globals() if not k.startswith('_'))"],
                            runner_source=runners) as session:
            session.run_notebook()
            assert session.proc is spare.proc and runners.handed == 1
            names = session.get("names")
            assert session.get("x") == 42 and "x" in names
            assert not {"torch", "matplotlib"} & set(names)  # the preload bound nothing
            pid = spare.proc.pid
        assert not os.path.exists(spare.directory)  # the session removed what it was handed
        assert procfs.state(pid) in ("", "Z")
        following = runners._spare
        assert following is not None and following is not spare
    finally:
        runners.close()
    assert runners._spare is None and not os.path.exists(following.directory)
