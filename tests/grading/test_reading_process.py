"""The trusted reading of a student's code runs in a child process (`autograder/grading/reading_process.py`): it
concludes what reading in the grading process concluded, and whatever the code, the grader waits for it no
longer than its wall-clock budget and lets it take no more than its memory cap; past either, one note holds the
notebook for a person."""
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autograder.grading import code_review, reading_process
from autograder.grading.reading_process import CodeToRead
from autograder.sandbox.compiled_texts import CompiledTexts

SOFTMAX_BUILTIN = "import torch\ndef softmax(x, dim=-1):\n    return torch.softmax(x, dim)\n"
INTROSPECTION = "import gc\n_n = len(gc.get_objects())\n"
HAND_SOFTMAX = ("def softmax(x, dim=-1):\n    e = (x - x.amax(dim, keepdim=True)).exp()\n"
                "    return e / e.sum(dim, keepdim=True)\n")


def _compiled(*texts):
    compiled = CompiledTexts()
    for position, text in enumerate(texts):
        compiled.request = ("cell", position)
        compiled.add("source", [text.encode()], filename="<string>")
    return compiled


def _code(sources, compiled=None, language="zh"):
    cells = [2 * k + 1 for k in range(len(sources))]
    return CodeToRead(list(sources), cells, list(sources), cells, compiled, language)


def _ready():
    """The server imported what it reads with: the budget then measures the reading alone."""
    assert reading_process.read(_code(["x = 1\n"])).complete


@pytest.mark.parametrize("sources, texts", [
    ([SOFTMAX_BUILTIN], ()),
    ([HAND_SOFTMAX, INTROSPECTION], ()),
    ([HAND_SOFTMAX], ('getattr(torch, "tolf"[::-1])(1)\n', "import ctypes\n")),
    (["def softmax(x):\n    return x\n", "%time y = 1\n", "z = !ls\n"], ("exec(input())\n",)),
])
@pytest.mark.parametrize("language", ["zh", "en"])
def test_the_child_concludes_what_reading_here_concludes(sources, texts, language):
    code = _code(sources, _compiled(*texts) if texts else None, language)
    here, there = reading_process.read_here(code), reading_process.read(code)
    assert there.complete
    assert there.forbidden == here.forbidden and there.notes == here.notes
    found = [f for found in there.forbidden.values() for f in found]
    assert bool(found) == (sources[0] == SOFTMAX_BUILTIN)  # the cases differ: the equality is not of nothing


def test_the_forbidden_findings_are_the_scans():
    reading = reading_process.read(_code(["x = 0\n", SOFTMAX_BUILTIN]))
    scan = code_review.review(["x = 0\n", SOFTMAX_BUILTIN])
    assert reading.forbidden == scan.forbidden and reading.forbidden["softmax"]


# Shapes of code whose reading grew faster than its length in earlier versions (IPython tokenises a whole cell
# again after each line it rewrites; `^\s*` over runs of blank lines; deep nesting; one very long line).
HEAVY = {
    "ipython-rewrites": lambda n: "x = !ls\n" * (40 * n) + "y = 1\n" * (4000 * n),
    "magics": lambda n: "%time y = 1\n" * (40 * n) + "# " + "z" * (40000 * n) + "\n",
    "blank-runs": lambda n: "def softmax(x):\n" + "\n" * (50000 * n) + "    return x\n",
    "nesting": lambda n: "x = " + "[" * 90 + "]" * 90 + "\n" + "y = (1 +\n" * (2000 * n) + "1" + ")" * (2000 * n),
    "long-line": lambda n: "s = " + " + ".join(["'a'"] * (20000 * n)) + "\n",
}


@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(shape=st.sampled_from(sorted(HEAVY)), size=st.integers(1, 4), runtime=st.booleans())
def test_no_code_holds_the_grader_past_the_budget(shape, size, runtime):
    """Whatever the code, in a cell or compiled at run time, the grader has its answer within the budget; an
    unfinished reading is one holding note, never an empty one."""
    _ready()
    text = HEAVY[shape](size)
    code = _code(["x = 1\n"], _compiled(text)) if runtime else _code([text])
    budget = 1.5
    started = time.monotonic()
    reading = reading_process.read(code, seconds=budget)
    assert time.monotonic() - started < budget + 1.0
    if not reading.complete:
        assert reading.forbidden == {} and len(reading.notes) == 1
        assert reading.notes[0]["holds"] and reading.notes[0]["category"] == "dynamic-code"


def test_a_reading_past_its_budget_is_stopped_and_the_next_one_is_served():
    _ready()
    slow = _code(["x = !ls\n" * 400 + "y = 1\n" * 40000], language="en")
    started = time.monotonic()
    reading = reading_process.read(slow, seconds=1.0)
    assert time.monotonic() - started < 2.0
    assert not reading.complete
    assert reading.notes == [{"cell": 1, "line": 0, "category": "dynamic-code", "holds": True,
                              "detail": "The grader could not finish reading your code: still reading after 1 s"}]
    assert reading_process.read(_code([SOFTMAX_BUILTIN])).forbidden["softmax"]  # a fresh server answers


def test_a_reading_past_its_memory_cap_holds():
    _ready()
    reading = reading_process.read(_code(["x = [" + "1, " * 300000 + "]\n"], language="en"), memory_mib=1)
    # where the cap strikes decides the words: in the parse (the cell cannot be parsed), or anywhere else (the
    # reading did not finish); either way the notebook is held and says why
    held = [note for note in reading.notes if note["holds"]]
    assert held and any(why in held[0]["detail"] for why in ("1 MiB", "MemoryError", "reading process failed")), held
    assert reading_process.read(_code([SOFTMAX_BUILTIN])).complete


@pytest.mark.parametrize("how", ["stopped", "killed"])
def test_a_reading_server_that_is_gone_is_replaced(how):
    _ready()
    if how == "stopped":
        reading_process.stop()
    else:
        os.kill(reading_process._SERVER.proc.pid, signal.SIGKILL)
        reading_process._SERVER.proc.wait()
    assert reading_process.read(_code([SOFTMAX_BUILTIN])).forbidden["softmax"]


def test_a_child_that_dies_holds_at_once():
    """A reading child that dies (here killed from outside) holds the notebook without waiting out the budget."""
    _ready()
    server = reading_process._SERVER.proc.pid
    done = []
    reader = threading.Thread(target=lambda: done.append(reading_process.read(
        _code(["x = !ls\n" * 400 + "y = 1\n" * 40000], language="en"), seconds=20)))
    started = time.monotonic()
    reader.start()
    children = []
    while not children and time.monotonic() - started < 5:
        time.sleep(0.05)
        children = Path(f"/proc/{server}/task/{server}/children").read_text().split()
    assert children, "the server forked no child for the reading"
    os.kill(int(children[0]), signal.SIGKILL)
    reader.join(10)
    assert done and time.monotonic() - started < 10
    assert not done[0].complete and "SIGKILL" in done[0].notes[0]["detail"] and done[0].notes[0]["holds"]


def test_the_cell_a_report_points_to():
    sources = ["x = 1\n", "\n" * 1000 + "def softmax(x):\n    return x\n"]
    assert reading_process.cell_of(("cell", 1), [4, 6, 8], [3, 7], sources) == 6
    assert reading_process.cell_of(("call", "softmax"), [4, 6, 8], [3, 7], sources) == 7
    assert reading_process.cell_of(("call", "causal_mask"), [4, 6, 8], [3, 7], sources) == 3
    assert reading_process.cell_of((), [], [], []) == 0


def test_a_submission_keeps_a_bounded_number_of_notes_and_counts_the_rest():
    """Found by a red-team pass: 37,000 holding notes took 17 s of grading (each is logged, stored, rendered)."""
    many = "import gc\n" + "gc.get_objects()\n" * (reading_process.MAX_NOTES + 50)
    reading = reading_process.read_here(_code([many], language="en"))
    assert len(reading.notes) == reading_process.MAX_NOTES + 1
    assert reading.notes[-1]["holds"] and "51 more" in reading.notes[-1]["detail"], reading.notes[-1]
    few = reading_process.read_here(_code(["import gc\n" + "gc.get_objects()\n" * 3]))
    assert len(few.notes) == 4  # the import (free) and the three uses
