"""The formative record: what the report's "while working" section counts."""
import os
import stat

from autograder.service.records import Records, default_path, while_working


def _answer(passed, failed, codes):
    return {"parts": [{"part": p, "passes": True} for p in passed] + [{"part": p, "passes": False} for p in failed],
            "codes": codes}


def test_checks_are_kept_per_student_and_only_the_service_and_the_instructor_read_them(tmp_path):
    path = default_path(tmp_path)
    records = Records(path)
    records.add("a", "sdpa", "answered", _answer(["softmax"], ["apply_mask"], ["mask-inverted"]), 1.2, at=10)
    records.add("a", "sdpa", "answered", _answer(["softmax", "apply_mask"], [], []), 1.1, at=20)
    records.add("b", "sdpa", "refused", at=15)
    records.add("c", "sdpa_en", "answered", _answer([], ["softmax"], ["softmax-wrong-dim"]), at=5)
    assert [r["at"] for r in records.of("sdpa")] == [10, 15, 20]
    assert [r["codes"] for r in records.of("sdpa", "a")] == [["mask-inverted"], []]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    records.close()


def test_a_reader_opens_the_record_read_only(tmp_path):
    """The class report reads the record: it cannot write, and it leaves the file's mode alone."""
    import sqlite3

    import pytest

    path = default_path(tmp_path)
    Records(path).close()
    os.chmod(path, 0o600)
    reader = Records(path, read_only=True)
    assert reader.of("sdpa") == []
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        reader.add("a", "sdpa", "answered")
    reader.close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_student_who_met_a_mistake_and_submitted_without_it_fixed_it():
    checks = [
        {"student": "a", "codes": ["mask-inverted"], "failed_parts": ["apply_mask"]},
        {"student": "a", "codes": [], "failed_parts": []},
        {"student": "b", "codes": ["mask-inverted", "scale-missing"], "failed_parts": ["apply_mask", "scale_scores"]},
        {"student": "c", "codes": ["mask-inverted"], "failed_parts": ["apply_mask"]},
    ]
    figures = while_working(checks, {"a": [], "b": ["mask-inverted"]})  # c has not submitted
    assert figures["codes"] == {"mask-inverted": {"met": 3, "fixed": 1}, "scale-missing": {"met": 1, "fixed": 1}}
    assert figures["checks_per_student"] == {"a": 2, "b": 1, "c": 1}
    assert figures["failed_checks_per_part"] == {"apply_mask": 3, "scale_scores": 1}


def test_a_checks_row_is_written_when_it_is_admitted_and_completed_when_it_is_answered(tmp_path):
    records = Records(default_path(tmp_path))
    records.admitted("a", "sdpa")
    assert [(r["outcome"], r["codes"]) for r in records.of("sdpa", "a")] == [("waiting", [])]
    records.answered("a", "sdpa_en", "answered", _answer([], ["apply_mask"], ["mask-inverted"]), 1.5)  # replaced
    assert records.of("sdpa", "a") == []
    (row,) = records.of("sdpa_en", "a")
    assert (row["outcome"], row["codes"], row["failed_parts"], row["seconds"]) == \
        ("answered", ["mask-inverted"], ["apply_mask"], 1.5)
    records.answered("b", "sdpa", "failed", seconds=0.5)  # nothing of b's was waiting: a row of its own
    assert [r["outcome"] for r in records.of("sdpa", "b")] == ["failed"]
    records.close()
