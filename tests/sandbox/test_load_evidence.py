"""The evidence for charging an overrun at once (``load_evidence.py``): what counts, and what is no evidence."""
import subprocess
import sys
import time

import pytest

from autograder.sandbox.load_evidence import LoadWatch

pytestmark = pytest.mark.alone  # a busy loop must get a core to itself: nothing else may run


@pytest.fixture
def spawn():
    procs = []

    def start(code):
        procs.append(subprocess.Popen([sys.executable, "-c", code]))
        time.sleep(0.3)  # past the interpreter's start
        return procs[-1].pid

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def _watch(pid, late=0.0, seconds=0.8):
    watch = LoadWatch(pid)
    watch.created -= late
    watch.tick()
    time.sleep(seconds)
    return watch.had_a_core()


def test_a_busy_process_watched_from_the_start_had_a_core(spawn):
    assert _watch(spawn("while True: pass"))


def test_a_first_reading_taken_late_is_no_evidence(spawn):
    """This side woke late (starved itself): the window would miss the start of the request."""
    assert not _watch(spawn("while True: pass"), late=1.0)


def test_a_sleeping_process_did_not_show_it_had_a_core(spawn):
    assert not _watch(spawn("import time; time.sleep(60)"))


def test_a_short_window_or_a_process_gone_is_no_evidence(spawn):
    pid = spawn("while True: pass")
    assert not _watch(pid, seconds=0.1)
    assert not _watch(2**22 + 12345)  # no such pid
