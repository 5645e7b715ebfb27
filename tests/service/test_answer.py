"""What a student reads after "Check my work": the feedback page's words, in the notebook's language."""
from autograder.grading import record
from autograder.service.answer import answer
from catalogue.charge_once import parts
from tests.support.grading import grade_in_process

INVERTED = {"apply_mask": "def apply_mask(scores, mask=None):\n    if mask is None:\n        return scores\n"
                          "    if mask.dtype == torch.bool:\n        return scores.masked_fill(mask, float('-inf'))\n"
                          "    return scores + mask\n"}


def _record(replace, assignment):
    """The record final grading would write for these answers, its cells at the parts' own points."""
    results = grade_in_process(replace, "check")
    cells = [record.cell_entry(f"{part}-check", part, results[part].points, results[part].max_points, None,
                               results[part].checks) for part in parts()]
    return {"student": "a", "assignment": assignment, "notebook": assignment, "cells": cells}


def test_an_inverted_mask_is_named_with_its_hint_in_each_edition():
    graded = _record(INVERTED, "sdpa_en")
    reply = answer(graded)
    assert reply["language"] == "en" and not reply["passes"] and "mask-inverted" in reply["codes"]
    parts_ = {p["part"]: p for p in reply["parts"]}
    assert not parts_["apply_mask"]["passes"] and parts_["softmax"]["passes"]
    (mistake,) = [m for m in parts_["apply_mask"]["mistakes"] if m["code"] == "mask-inverted"]
    assert mistake["explanation"] and mistake["hint"] and not any("\u4e00" <= ch <= "\u9fff" for ch in
                                                                  mistake["explanation"] + mistake["hint"])
    assert all("points" not in p for p in reply["parts"])  # hidden unless the instructor shows them
    chinese = answer(dict(graded, assignment="sdpa"), show_points=True)
    (zh,) = [m for m in {p["part"]: p for p in chinese["parts"]}["apply_mask"]["mistakes"]
             if m["code"] == "mask-inverted"]
    assert any("\u4e00" <= ch <= "\u9fff" for ch in zh["explanation"])
    assert all("points" in p and "max_points" in p for p in chinese["parts"])


def test_the_failed_check_shows_its_shrunk_example_and_nothing_of_the_check():
    reply = answer(_record(INVERTED, "sdpa"))
    (apply_mask,) = [p for p in reply["parts"] if p["part"] == "apply_mask"]
    assert apply_mask["checks"] and all(set(c) == {"message", "example"} for c in apply_mask["checks"])
    assert any(c["example"] for c in apply_mask["checks"])
    text = repr(reply)
    assert "def test_" not in text and "rng" not in text


def test_correct_code_passes_every_part():
    reply = answer(_record({}, "sdpa"))
    assert reply["passes"] and reply["codes"] == [] and all(p["passes"] and not p["checks"] for p in reply["parts"])


def test_a_message_the_students_code_fills_with_the_checks_inputs_shows_only_its_start():
    """Found by a red-team pass: an answer that raises ValueError(repr(inputs)) read every hidden check's
    inputs in the check's messages; a check shows each message's first characters, whatever raised."""
    from autograder.service.answer import EXAMPLE_CHARS, MESSAGE_CHARS

    leaking = {"attention_scores": "def attention_scores(q, k):\n"
                                   "    raise ValueError(repr((q.tolist(), k.tolist())) * 20)\n"}
    reply = answer(_record(leaking, "sdpa_en"))
    messages = [c["message"] for p in reply["parts"] for c in p["checks"]]
    examples = [t for p in reply["parts"] for c in p["checks"] for t in c["example"].values()]
    assert messages and max(map(len, messages)) <= MESSAGE_CHARS
    assert all(len(t) <= EXAMPLE_CHARS for t in examples)
    assert any(m.endswith("…") for m in messages), "no message was long enough to be cut: the test tests nothing"
