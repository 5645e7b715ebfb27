"""Reference timings measured once and kept in the course directory (`autograder.nbgrader.calibration_file`):
reused while machine, course and torch are the same, measured again when one changes or on request, and
one measurement shared by processes that ask at the same time."""
import json
import logging
import multiprocessing
import os
import socket
import time

import pytest
from nbformat.v4 import new_code_cell, new_notebook

from autograder.nbgrader import calibration, calibration_file
from autograder.nbgrader.calibration import ReferenceTimes

LOG = logging.getLogger("test-calibration-file")


def _source(code="x = 1"):
    return new_notebook(cells=[new_code_cell("import torch"), new_code_cell(code)])


def _reference(seconds=0.25):
    return ReferenceTimes(cells={"ans-f": seconds}, calls={"f": 0.01}, seconds=1.5,
                          prefix=(("import torch", [{"output_type": "stream", "name": "stdout", "text": "hi\n"}]),))


@pytest.fixture
def measured(monkeypatch):
    """Replaces the real measurement (a sandboxed run) by one that counts its calls."""
    calls = []

    def fake_measure(source, open_session):
        calls.append(source)
        return _reference(0.25 + len(calls))

    monkeypatch.setattr(calibration, "measure", fake_measure)
    calibration.forget()
    yield calls
    calibration.forget()


def _times(store, source, again=False):
    """One grading process's reference times (its in-process memo cleared first)."""
    calibration.forget()
    return calibration.reference_times(source, None, store=store, again=again)


def test_a_measurement_is_kept_with_what_it_was_measured_on_and_reused(tmp_path, measured):
    store = calibration_file.Store(str(tmp_path), "sdpa", "sdpa", LOG)
    first = _times(store, _source())
    second = _times(store, _source())
    assert len(measured) == 1 and first == second == _reference(1.25)
    record = json.loads((tmp_path / "sdpa" / "sdpa.json").read_text())
    import torch

    assert record["measured_on"]["host"] == socket.gethostname()
    assert record["measured_on"]["torch"] == torch.__version__ and record["measured_on"]["cores"] == os.cpu_count()
    assert record["key"]["course"] == calibration_file.course_version(_source())


def test_each_assignment_and_notebook_has_its_own(tmp_path, measured):
    for assignment, notebook in (("sdpa", "sdpa"), ("sdpa_en", "sdpa"), ("sdpa", "extra")):
        _times(calibration_file.Store(str(tmp_path), assignment, notebook, LOG), _source())
    assert len(measured) == 3
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.json")) == [
        "sdpa/extra.json", "sdpa/sdpa.json", "sdpa_en/sdpa.json"]


@pytest.mark.parametrize("change", ["torch", "course", "checks", "machine"])
def test_a_change_of_torch_course_or_machine_measures_again(tmp_path, measured, monkeypatch, change):
    store = calibration_file.Store(str(tmp_path), "sdpa", "sdpa", LOG)
    _times(store, _source())
    source = _source()
    if change == "torch":
        import torch

        monkeypatch.setattr(torch, "__version__", "9.9.9+other")
    elif change == "course":
        source = _source("x = 2")  # the solution changed
    elif change == "checks":  # a hidden check changed: the engine's files are part of the course version
        real = calibration_file.course_version
        monkeypatch.setattr(calibration_file, "course_version", lambda nb: real(nb) + "-edited")
    else:
        monkeypatch.setattr(socket, "gethostname", lambda: "another-grading-machine")
    assert _times(store, source) == _reference(2.25)
    assert len(measured) == 2
    assert _times(store, source) == _reference(2.25) and len(measured) == 2  # the new one is kept in turn


def test_recalibrate_measures_again_and_replaces_the_file(tmp_path, measured):
    store = calibration_file.Store(str(tmp_path), "sdpa", "sdpa", LOG)
    _times(store, _source())
    assert _times(store, _source(), again=True) == _reference(2.25)
    assert _times(store, _source()) == _reference(2.25) and len(measured) == 2


@pytest.mark.parametrize("damage", ["{not json", '{"key": 1}', "huge", "negative", "nan"])
def test_a_damaged_file_costs_a_new_measurement_and_nothing_else(tmp_path, measured, damage, monkeypatch):
    store = calibration_file.Store(str(tmp_path), "sdpa", "sdpa", LOG)
    _times(store, _source())
    path = tmp_path / "sdpa" / "sdpa.json"
    record = json.loads(path.read_text())
    if damage == "huge":
        monkeypatch.setattr(calibration_file, "MAX_FILE_BYTES", 100)
        text = path.read_text()
    elif damage in ("negative", "nan"):
        record["reference"]["calls"]["f"] = -1.0 if damage == "negative" else float("nan")
        text = json.dumps(record)
    else:
        text = damage
    path.write_text(text)
    assert _times(store, _source()) == _reference(2.25) and len(measured) == 2


def test_a_course_where_nothing_can_be_written_measures_in_the_process_and_says_so(tmp_path, measured, caplog):
    (tmp_path / "not-a-directory").write_text("")  # no directory can be made under it, not even by root
    store = calibration_file.Store(str(tmp_path / "not-a-directory" / "cal"), "sdpa", "sdpa", LOG)
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        assert _times(store, _source()) == _reference(1.25)
        assert _times(store, _source()) == _reference(2.25)  # nothing kept: the next process measures again
    assert "measuring the reference in this process only" in caplog.text


def _grading_process(directory, out, again):
    """A grading process: its reference times, through a slow measurement that leaves a mark."""
    def slow_measure(source, open_session):
        with open(os.path.join(directory, f"measured-{os.getpid()}"), "w"):
            pass
        time.sleep(1.0)
        return _reference(float(os.getpid() % 1000))

    calibration.measure = slow_measure
    calibration.forget()
    store = calibration_file.Store(os.path.join(directory, "cal"), "sdpa", "sdpa", LOG)
    reference = calibration.reference_times(_source(), None, store=store, again=again)
    with open(out, "w") as f:
        json.dump(reference.cells, f)


@pytest.mark.parametrize("again", [False, True], ids=["first-time", "recalibrate"])
def test_processes_that_ask_at_once_share_one_measurement(tmp_path, again):
    if again:  # an older measurement exists; all three are asked to measure again
        calibration_file.Store(str(tmp_path / "cal"), "sdpa", "sdpa", LOG).save(
            calibration_file.key(_source()), _reference(99.0))
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_grading_process, args=(str(tmp_path), str(tmp_path / f"out-{i}"), again))
             for i in range(3)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    assert len(list(tmp_path.glob("measured-*"))) == 1  # one measured; the others waited and read it
    seen = [json.loads((tmp_path / f"out-{i}").read_text()) for i in range(3)]
    assert seen[0] == seen[1] == seen[2] != {"ans-f": 99.0}


def test_waiting_for_another_process_is_bounded(tmp_path, caplog):
    import fcntl

    store = calibration_file.Store(str(tmp_path), "sdpa", "sdpa", LOG)
    store.lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(store.lock_path, "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a process that hangs while measuring
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:  # another process: flock locks belong to the open file, so test from a child
            with store.locked(wait=0.5) as got:
                os._exit(0 if got is False else 1)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and time.monotonic() - started < 5
