"""The runner protocol: data only, bounded, and robust to a hostile student process."""
import io
import struct
import time

import pytest
import torch

from autograder.grading.hidden_checks import seed_for
from autograder.sandbox import launcher, procs
from autograder.sandbox.guest import wire
from autograder.sandbox.session import MAX_FORBIDDEN, MAX_FORBIDDEN_NAME, Budget, StudentSession, forbidden_names


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.bool,
                                   torch.int64])
def test_tensors_round_trip_bit_for_bit(dtype):
    value = (torch.randn(3, 4) * 10).to(dtype)
    blobs = []
    back = wire.decode(wire.encode((value, [1, 2.5, float("-inf")], None), blobs), blobs)
    assert torch.equal(back[0].tensor, value) and back[0].dtype == str(dtype).replace("torch.", "")
    assert back[1] == [1, 2.5, float("-inf")] and back[2] is None


def test_decoding_refuses_bad_payloads():
    with pytest.raises(wire.WireError):
        wire.decode({"__tensor__": 0, "dtype": "object", "shape": [1]}, [b"x"])
    with pytest.raises(wire.WireError):
        wire.decode({"__tensor__": 0, "dtype": "float32", "shape": [4]}, [b"1234"])
    with pytest.raises(wire.WireError):
        wire.decode({"__weird__": 1}, [])
    oversized = io.BytesIO(struct.pack(">I", wire.MAX_HEADER_BYTES + 1))
    with pytest.raises(wire.WireError):
        wire.receive(oversized)


@pytest.mark.parametrize("data", [10**400, -(2**53), {"__float__": 10**400}, {"__float__": "1" * 5000},
                                  {"__float__": "not a number"}, [1, {"__tuple__": [2**60]}],
                                  {"__tensor__": None, "dtype": "float32", "shape": [10**400]}],
                         ids=["int-1e400", "int-2**53", "float-tag-int", "float-tag-long", "float-tag-text",
                              "in-a-tuple", "tensor-shape"])
def test_numbers_the_encoder_never_sends_are_malformed(data):
    """Red team: a reply holding an integer no float holds (JSON has no limit) reached the checks, whose
    float() raised OverflowError. Every number the runner sends is one a float holds exactly."""
    with pytest.raises(wire.WireError):
        wire.decode(data, [])


@pytest.mark.parametrize("data", [[0] * (wire.MAX_ITEMS + 1), {"__tuple__": [0] * (wire.MAX_ITEMS + 1)},
                                  {"__dict__": [["k", 0]] * (wire.MAX_ITEMS + 1)}, {"__dict__": [1]},
                                  {"__dict__": [["k", 0, 1]]}, {"__tuple__": "abc"}, "x" * (wire.MAX_TEXT + 2)],
                         ids=["list", "tuple", "dict", "dict-item", "dict-triple", "tuple-text", "text"])
def test_containers_and_texts_the_encoder_never_sends_are_malformed(data):
    """The encoder sends at most MAX_ITEMS items a container and cuts every text; the trusted side holds a
    reply to the same bounds (a red-team runner sent replies of a million items, decoded in full)."""
    with pytest.raises(wire.WireError):
        wire.decode(data, [])


def test_the_largest_values_the_encoder_sends_decode():
    blobs = []
    value = ([1] * (wire.MAX_ITEMS + 5), {str(i): i for i in range(wire.MAX_ITEMS + 5)}, "y" * 10_000,
             (object(),) * 3)
    back = wire.decode(wire.encode(value, blobs), blobs)
    assert back[0] == [1] * wire.MAX_ITEMS and len(back[1]) == wire.MAX_ITEMS
    assert back[2] == "y" * wire.MAX_TEXT + "…" and back[3][0].type_name == "object"


def test_an_int_that_lies_about_itself_travels_as_its_own_value():
    class Big(int):
        def __abs__(self):
            return 0

        def __int__(self):
            return 1

    assert wire.decode(wire.encode(Big(10**400), []), []) == float("inf")
    assert wire.decode(wire.encode(Big(-(10**20)), []), []) == -1e20
    assert wire.decode(wire.encode(Big(7), []), []) == 7


def test_names_a_runner_sends_are_capped_here_whatever_it_claims():
    """A forged tensor spec (no values) whose names are megabytes long, or whose shape has a thousand
    dimensions: every name reaches a check's message, so the trusted side cuts them to a name's size."""
    huge = "x" * 3_500_000
    spec = wire.decode({"__tensor__": None, "dtype": huge, "shape": [2, 3], "device": huge, "layout": huge,
                        "subclass": huge}, [])
    assert spec.tensor is None and spec.shape == (2, 3)
    for name in (spec.dtype, spec.device, spec.layout):
        assert len(name) <= wire.MAX_NAME + 1 and name.endswith("…")
    assert len(spec.subclass) <= 4 * wire.MAX_NAME + 1
    with pytest.raises(wire.WireError):
        wire.decode({"__tensor__": None, "dtype": "float32", "shape": [1] * (wire.MAX_DIMS + 1)}, [])


def test_forbidden_names_in_a_reply_are_distinct_and_capped():
    real = "torch.nn.functional.scaled_dot_product_attention"
    # an honest runner names each API once; a loop of a thousand calls is still one name
    assert forbidden_names(["torch.softmax"] * 1000 + [real]) == ["torch.softmax", real]
    forged = forbidden_names([f"{i}{'y' * 10_000}" for i in range(10_000)])
    assert len(forged) == MAX_FORBIDDEN and all(len(n) <= MAX_FORBIDDEN_NAME + 1 for n in forged)
    assert forbidden_names("torch.softmax") == [] and forbidden_names(None) == []


def test_opaque_student_objects_arrive_as_text():
    class Sneaky:
        def __repr__(self):
            return "<sneaky>"

    blobs = []
    back = wire.decode(wire.encode(Sneaky(), blobs), blobs)
    assert isinstance(back, wire.OpaqueObject) and back.text == "<sneaky>"


def test_seeds_are_per_student_and_stable():
    assert seed_for("sdpa", "alice", "t") == seed_for("sdpa", "alice", "t")
    assert seed_for("sdpa", "alice", "t") != seed_for("sdpa", "bob", "t")


CELLS = [
    "import os, torch\ndef double(x):\n    return x * 2",
    "os.write(1, b'garbage on the protocol channel')\nprint('hello')",
    "def softmax_cheat(x):\n    return torch.nn.Softmax(dim=-1)(x)",
    "def special_cheat(x):\n    return torch.special.softmax(x, -1)",
    "def forge(x):\n    for fd in range(3, 12):\n        try:\n            os.write(fd, b'\\x00\\x00\\x00\\x02{}')\n"
    "        except OSError:\n            pass\n    return x",
    "def hang(x):\n    while True:\n        pass",
]


@pytest.fixture(scope="module")
def session():
    s = StudentSession(CELLS, budget=Budget(call_timeout=3, total_seconds=120))
    s.outputs = s.run_notebook()
    yield s
    s.close()


def test_prints_never_reach_the_protocol(session):
    assert session.outputs[1] == [{"output_type": "stream", "name": "stdout", "text": "hello\n"}]
    assert session.call("double", torch.ones(2)).value.tensor.tolist() == [2.0, 2.0]


@pytest.mark.parametrize("fn", ["softmax_cheat", "special_cheat"])
def test_builtin_softmax_is_caught_however_it_is_reached(session, fn):
    result = session.call(fn, torch.randn(2, 3))
    assert result.status == "raised" and result.forbidden


def test_forged_frames_and_hangs_cost_one_call_each(session):
    session.call("forge", torch.ones(1))  # garbage or a hang-up: either way, the next call works
    assert session.call("double", torch.ones(1)).ok
    assert session.call("hang", torch.ones(1)).status == "timeout"
    assert session.call("hang", torch.ones(1)).status == "timeout"  # no second wait
    assert session.call("double", torch.ones(1)).ok


def test_text_no_notebook_can_store_arrives_as_replacement_characters():
    """A lone surrogate (JSON "\\ud800") in an output or an exception would make the notebook unwritable."""
    cells = ["print('a\\ud800b')", "def bad(x):\n    raise ValueError('\\udfff' * 3)"]
    with StudentSession(cells) as s:
        outputs = s.run_notebook()
        result = s.call("bad", 1)
    text = outputs[0][0]["text"]
    assert text.startswith("a") and text.rstrip().endswith("b") and "\ud800" not in text
    text.encode("utf-8")  # raises if a surrogate got through
    assert result.status == "raised" and result.evalue and "\udfff" not in result.evalue
    result.describe().encode("utf-8")


def test_a_reply_nested_too_deep_is_refused_at_once():
    """Red team: a header nested ~600 deep passed json.loads but killed the reply reader (RecursionError),
    so the call waited out its limit twice.  Now it is a wire error: the call fails at once."""
    patch = ("import sys\n_w = sys.modules['wire']\n_orig = _w.send\n"
             "def _send(stream, header, blobs=()):\n"
             "    if header.get('status') == 'ok' and 'seconds' in header:\n"
             "        deep = 0\n        for _ in range(600):\n            deep = [deep]\n"
             "        header = dict(header, junk=deep)\n"
             "    return _orig(stream, header, blobs)\n_w.send = _send\ndef f(x):\n    return x")
    with StudentSession(["import torch", patch], budget=Budget(call_limits={"f": 5.0})) as s:
        s.run_notebook()
        started = time.monotonic()
        result = s.call("f", 1)
    assert result.status == "crashed" and time.monotonic() - started < 4


def test_a_restart_replays_display_cells_without_their_output():
    """Red team F3: an answer may use what a provided display cell defined (n_empty_rows from mask_demo).
    After any restart the replay must define it again, quietly: no figure is rendered, nothing is shown."""
    cells = ["import torch\nimport matplotlib.pyplot as plt",
             "demo_rows = 3\nfig, ax = plt.subplots()\nax.plot([1, 2])\nplt.show()\nprint('shown once')",
             "answer = demo_rows * 2\ndef rows():\n    return answer\ndef hang():\n    while True:\n        pass"]
    with StudentSession(cells, display_cells=[1], budget=Budget(call_limits={"hang": 1.0})) as s:
        outputs = s.run_notebook()
        assert [o["output_type"] for o in outputs[1]] == ["display_data", "stream"]
        assert s.call("hang").status == "timeout"  # the runner is killed: the next call restarts it
        assert s.call("rows").value == 6
        assert s.restarts == 1 and not s.skipped
        assert s.get("demo_rows") == 3
        replay, _ = s._exchange({"op": "exec", "source": cells[1], "quiet": True}, [], 5.0)
    assert replay["status"] == "ok" and replay["outputs"] == []


def test_a_runner_that_names_itself_in_bytes_that_are_not_utf8_is_graded_and_stopped():
    """Red team: /proc/<pid>/stat was read as UTF-8 text, so a runner that renamed itself
    (``/proc/self/comm``) to bytes that are not UTF-8 crashed its grader, was never killed, and
    crashed every other session that scanned /proc for its own runner's children meanwhile."""
    from autograder.sandbox.guest import procfs

    cells = ["open('/proc/self/comm', 'wb').write(b'\\xff\\xfe(')",
             "def f(x):\n    return x", "def hang(x):\n    while True:\n        pass"]
    with StudentSession(cells, budget=Budget(call_limits={"f": 2.0, "hang": 2.0})) as session:
        session.run_notebook()
        pid = session._pid
        assert session.call("f", 3).value == 3
        procs.children(1)  # what any other session does while this runner lives
        assert session.call("hang", 1).status == "timeout"
        assert session.call("f", 4).value == 4
        pid = session._pid
    deadline = time.monotonic() + 5
    while procfs.state(pid) not in ("", "Z") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert procfs.state(pid) in ("", "Z")


@pytest.mark.skipif(not launcher.probe().isolated, reason="pid namespaces need bubblewrap")
def test_the_grader_watches_a_fresh_runner_not_the_process_that_forked_it():
    """A fresh runner's sandbox holds the process that warmed up and forked it (pid 2, ``zygote.serve_fresh``)
    and the runner; the load evidence and the SIGSTOP check must read the runner's own host pid."""
    with StudentSession(["import os\nmine = os.getpid()"]) as s:
        s.run_notebook()
        assert procs.namespace_pid(s._pid) == s.get("mine") != 2


@pytest.mark.parametrize("forged", ["header = dict(header, seconds=10**400)",
                                    "header = dict(header, value=10**400)",
                                    "header = dict(header, value={'__float__': 10**400})"])
def test_a_reply_with_numbers_no_float_holds_is_a_crashed_call(forged):
    """Red team: `seconds` or a value of 10**400 in a reply raised OverflowError out of `call` (and, during
    shrinking, out of the whole grading). Now the call is refused as malformed (or the claim ignored), and
    the next call works."""
    patch = ("import sys\n_w = sys.modules['wire']\n_orig = _w.send\n"
             "def _send(stream, header, blobs=()):\n"
             "    if header.get('status') == 'ok' and 'seconds' in header:\n"
             f"        {forged}\n"
             "    return _orig(stream, header, blobs)\n_w.send = _send\ndef f(x):\n    return x")
    with StudentSession(["import torch", patch], budget=Budget(call_limits={"f": 5.0})) as s:
        s.run_notebook()
        result = s.call("f", 1)
        assert s.get("undefined_name") is None
    if "seconds" in forged:
        assert result.status == "ok" and result.value == 1 and result.seconds == 0.0
    else:
        assert result.status == "crashed"
