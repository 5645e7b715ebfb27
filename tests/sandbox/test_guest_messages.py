"""What the runner itself says (tripwires, stream notes, why a tensor has no values) is in the notebook's language.

The guest cannot read the catalogs, so the grader sends the translations of its few messages with a
runner's first request (`connection.guest_translations`); these tests run a real sandboxed runner in
each language and read what the student would see.
"""
import queue

import pytest
import torch

from autograder import i18n
from autograder.sandbox.connection import RunnerConnection, RunnerGone, guest_translations
from autograder.sandbox.guest import messages, wire
from autograder.sandbox.session import Budget, StudentSession
from tests.support.language import CJK

CELLS = ["import torch\nimport torch.nn.functional as F\nx = torch.randn(2, 3)",
         "y = F.softmax(x, -1)",
         "exit()",
         "from IPython.display import HTML, display\ndisplay(HTML('x' * 3_000_000))",
         "def uses_builtin(t):\n    return torch.softmax(t, -1)"]


def _run(lang):
    with i18n.using(lang), StudentSession(CELLS, budget=Budget(cell_timeout=60, call_timeout=30)) as session:
        outputs = session.run_notebook()
        called = session.call("uses_builtin", torch.ones(2, 2))
        return outputs, called.describe()


def _text(outputs, pos):
    return "".join(o.get("text", "") + o.get("evalue", "") for o in outputs[pos])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_runners_own_messages_follow_the_notebook(lang):
    outputs, called = _run(lang)
    shown = [_text(outputs, pos) for pos in (1, 2, 3)] + [called]
    if lang == "en":
        assert "is not allowed while grading" in shown[0] and "exit() is ignored while grading." in shown[1]
        assert "[output too large: truncated]" in shown[2] and "is not allowed while grading" in shown[3]
        assert not any(CJK.search(text) for text in shown), shown
    else:  # the source language: the ids themselves
        assert "评分时禁止使用" in shown[0] and messages.EXIT_IGNORED in shown[1]
        assert messages.DISPLAY_TRUNCATED in shown[2] and "评分时禁止使用" in shown[3]


def test_only_the_guests_ids_are_sent_and_the_source_language_sends_none():
    with i18n.using("zh"):
        assert guest_translations() == {}
    with i18n.using("en"):
        sent = guest_translations()
    assert set(sent) == set(messages.IDS) and not any(CJK.search(text) for text in sent.values())
    messages.use({"not an id": "x", messages.EXIT_IGNORED: 7})  # what is not a translation of an id is ignored
    assert messages._(messages.EXIT_IGNORED) == messages.EXIT_IGNORED


def test_why_a_tensor_has_no_values_is_worded_where_it_is_shown():
    sparse = wire.TensorSpec("float32", (2, 2), "cpu", "torch.sparse_coo", None)
    assert sparse.missing_data() == "返回的是 sparse_coo 布局的张量，不是普通（稠密）张量"
    with i18n.using("en"):
        assert sparse.missing_data(i18n._) == \
            "it returned a tensor with the sparse_coo layout, not a plain (dense) tensor"


def test_a_malformed_reply_is_reported_in_the_language_of_the_request_that_waits_for_it():
    """The reply reader is a thread of its own, outside the notebook's language: `wait` words its error."""
    replies = queue.Queue()
    replies.put(wire.WireError("header too large"))
    connection = RunnerConnection(None, replies, None, None)
    with i18n.using("en"), pytest.raises(RunnerGone, match="^the runner's reply was malformed .*header too large"):
        connection.wait(float("inf"))
