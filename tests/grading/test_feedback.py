"""`render_text` / `render_html`: a part's results as the student sees them, escaped.

Messages, examples and event details can quote what the student's code
raised or returned, so the HTML must never carry them as markup.
"""
import html

import pytest

from autograder.grading.feedback import render_html, render_text
from autograder.grading.hidden_checks import CheckResult, PartResult
from autograder.grading.misconceptions import CATALOGUE

SCRIPT = "<script>alert('x')</script>"


def _check(name, passed, max_points, points=None, **kw):
    points = (max_points if passed else 0.0) if points is None else points
    return CheckResult(name=name, title=kw.pop("title", f"{name} title"), part="softmax", max_points=max_points,
                       points=points, passed=passed, **kw)


def _part(*checks):
    return PartResult("softmax", list(checks))


def _summary_numbers(earned, cell_points):
    return f"{earned:g} / {cell_points:g}"


def test_all_passed_shows_points_titles_and_no_failures():
    part = _part(_check("shape", True, 1.0), _check("values", True, 2.5))
    text = render_text("test-softmax", part, 3, 3)
    page = render_html("test-softmax", part, 3, 3)
    for out in (text, page):
        assert "test-softmax" in out
        assert _summary_numbers(3, 3) in out
        assert f"{len(part.checks)} 项隐藏检查" in out
        assert "全部通过" in out and "未通过" not in out
        assert "✗" not in out
        for check in part.checks:
            assert check.title in out
    for check in part.checks:
        assert f"({check.points:g}/{check.max_points:g})" in text
        assert f"<td>{check.points:g} / {check.max_points:g}</td>" in page


def test_failed_checks_show_message_and_points():
    failed = [_check("stable", False, 2.0, message="large scores overflow to inf"),
              _check("dim", False, 1.5, message="rows do not sum to 1")]
    part = _part(_check("shape", True, 1.0), *failed)
    earned = round(3 * part.points / part.max_points, 4)
    text = render_text("test-softmax", part, 3, earned)
    page = render_html("test-softmax", part, 3, earned)
    for out in (text, page):
        assert _summary_numbers(earned, 3) in out
        assert f"{len(failed)} 项未通过" in out
        assert "全部通过" not in out
        for check in failed:
            assert check.message in out
    assert text.count("✗") == len(failed) and text.count("✓") == 1
    assert page.count('class="bad">✗') == len(failed)


def test_passing_check_message_is_not_shown():
    """Only failures explain themselves; a passing check's stray message stays out of the feedback."""
    part = _part(_check("shape", True, 1.0, message="internal note"), _check("dim", False, 1.0, message="wrong dim"))
    for out in (render_text("p", part, 2, 1), render_html("p", part, 2, 1)):
        assert "internal note" not in out
        assert "wrong dim" in out


def test_misconception_code_explained_only_when_its_check_fails():
    failing, passing = "softmax-unstable", "dtype-changed"
    part = _part(_check("stable", False, 2.0, message="overflow", codes=[failing]),
                 _check("dtype", True, 1.0, codes=[passing]))
    text = render_text("p", part, 3, 1)
    page = render_html("p", part, 3, 1)
    assert f"[{failing}] {CATALOGUE[failing].explanation}" in text
    assert CATALOGUE[failing].hint in text
    assert html.escape(CATALOGUE[failing].explanation) in page
    assert html.escape(CATALOGUE[failing].hint) in page
    assert f"[{html.escape(failing)}]" in page
    for out in (text, page):
        assert passing not in out
        assert html.escape(CATALOGUE[passing].explanation) not in out


def test_every_catalogue_code_renders():
    """Each code of the catalogue has an explanation and a hint that reach the student."""
    checks = [_check(f"c{i}", False, 1.0, message=f"m{i}", codes=[code]) for i, code in enumerate(CATALOGUE)]
    text = render_text("p", _part(*checks), len(checks), 0)
    page = render_html("p", _part(*checks), len(checks), 0)
    for code, entry in CATALOGUE.items():
        assert entry.explanation and entry.hint, code
        assert f"[{code}] {entry.explanation}" in text
        assert html.escape(entry.explanation) in page


def test_unknown_code_does_not_break_rendering():
    part = _part(_check("x", False, 1.0, message="boom", codes=["no-such-code"]))
    for out in (render_text("p", part, 1, 0), render_html("p", part, 1, 0)):
        assert "boom" in out


def test_example_is_shown_for_a_failing_check():
    example = {"x": "tensor([1., 1000.])", "dim": -1}
    part = _part(_check("stable", False, 1.0, message="overflow", example=example))
    text = render_text("p", part, 1, 0)
    page = render_html("p", part, 1, 0)
    for key, value in example.items():
        assert f"{key}: {value}" in text
        assert f"{html.escape(key)}: <code>{html.escape(str(value))}</code>" in page


def test_html_escapes_everything_from_the_student():
    """Title, message, example, label and event detail may all quote student output."""
    part = _part(_check("evil", False, 1.0, title=f"title {SCRIPT}", message=f"raised {SCRIPT}",
                        example={f"<b>{SCRIPT}": f"<img src=x onerror=alert(1)>{SCRIPT}"}))
    events = [{"kind": "CellTimeoutError", "cell": 0, "detail": SCRIPT, "grade_id": "<i>gid</i>"},
              {"kind": "NeedsReview", "category": SCRIPT, "cell": 1, "line": 2, "detail": SCRIPT}]
    page = render_html(f"label{SCRIPT}", part, 1, 0, events)
    assert "<script" not in page.lower()
    assert "<img" not in page and "<b><" not in page and "<i>gid" not in page
    # label, title, message, example key and value, one event detail, the other's category and detail
    assert page.count(html.escape(SCRIPT)) >= 8
    assert html.escape("<img src=x onerror=alert(1)>") in page


@pytest.mark.parametrize("event, expected", [
    ({"kind": "CellTimeoutError", "cell": 3, "detail": "cell ran past 30 s"}, ["第 4 个单元格", "cell ran past 30 s"]),
    ({"kind": "CellTimeoutError", "cell": 0, "grade_id": "ans-softmax", "detail": "slow"},
     ["第 1 个单元格", "（ans-softmax）", "slow"]),
    ({"kind": "MemoryLimit", "detail": "runner used 4 GiB"}, ["评分进程", "runner used 4 GiB"]),
    ({"kind": "RunnerCrashed"}, ["评分进程", "RunnerCrashed"]),
    ({"kind": "timeout", "function": "softmax"}, ["运行 softmax 时超时"]),
    ({"kind": "crash", "function": "scale_scores"}, ["运行 scale_scores 时崩溃或退出"]),
    ({"kind": "NeedsReview", "category": "gc", "cell": 5, "line": 7, "detail": "gc.get_objects()"},
     ["（gc）", "第 6 个单元格第 7 行", "gc.get_objects()", "不扣分"]),
])
def test_events_are_rendered(event, expected):
    part = _part(_check("shape", True, 1.0))
    text = render_text("p", part, 1, 1, [event])
    page = render_html("p", part, 1, 1, [event])
    event_lines = [line for line in text.splitlines() if line.startswith("  ! ")]
    assert len(event_lines) == 1
    for fragment in expected:
        assert fragment in event_lines[0]
        assert html.escape(fragment) in page


def test_no_events_no_event_lines():
    part = _part(_check("shape", True, 1.0))
    assert "  ! " not in render_text("p", part, 1, 1)
    assert '<div class="bad">' not in render_html("p", part, 1, 1)


def test_earned_points_are_the_cells_not_the_checks():
    """The summary shows the grade cell's scaled points; each row shows the check's own."""
    part = _part(_check("a", True, 4.0), _check("b", False, 4.0, message="no"))
    cell_points, earned = 2, 1
    text = render_text("p", part, cell_points, earned)
    assert text.splitlines()[0].startswith(f"p：{earned:g} / {cell_points:g} 分")
    assert "(4/4)" in text and "(0/4)" in text
