"""The checks are plain functions the engine collects and calls itself: order, fixtures, points, skips, errors."""
import re
import types

import pytest

from autograder.grading import check_api, hidden_checks
from autograder.grading.assertions import CheckFailed
from autograder.grading.check_api import CHECKS_DIR, Check, collect, part, points, skip


def test_checks_are_collected_file_by_file_in_the_order_they_are_defined():
    expected = []
    for path in sorted(CHECKS_DIR.glob("test_*.py"), key=lambda p: p.name):
        expected += re.findall(r"^def (test\w*)\(", path.read_text(encoding="utf-8"), flags=re.M)
    assert [c.name for c in collect()] == expected
    assert len(expected) > 40


def test_a_part_marker_overrides_the_module_part():
    debugging = {c.name: c.part for c in collect() if c.function.__module__.endswith("test_debugging")}
    assert debugging["test_verdict_candidate_1"] == "debugging_choice"
    assert set(debugging.values()) == {"debugging_choice", "debugging_fix"}


def _module(**functions):
    module = types.ModuleType("course.checks.test_example")
    module.PART = "example"
    vars(module).update(functions)
    return module


def test_a_check_that_asks_for_an_unknown_fixture_is_refused():
    def test_wants_tmp_path(student, tmp_path):
        """title"""

    with pytest.raises(TypeError, match="tmp_path"):
        check_api._check(_module(), "test_wants_tmp_path", test_wants_tmp_path)


def test_a_check_without_a_part_is_refused():
    def test_nowhere(student):
        """title"""

    module = _module()
    del module.PART
    with pytest.raises(TypeError, match="no part"):
        check_api._check(module, "test_nowhere", test_nowhere)


def _run(function, **context):
    check = check_api._check(_module(), function.__name__, function)
    return hidden_checks._run(check, student=object(), seed_key=("sdpa", "api"), context=context)


def test_points_part_and_fixtures_reach_the_result():
    seen = {}

    @points(3)
    @part("elsewhere")
    def test_passes(grading, rng, student):
        """通过"""
        seen.update(grading=grading, rng=rng.initial_seed(), student=student)

    result = _run(test_passes, cuda=False)
    assert (result.part, result.points, result.max_points, result.passed) == ("elsewhere", 3.0, 3.0, True)
    assert seen["grading"] == {"cuda": False}
    assert seen["rng"] == hidden_checks.seed_for("sdpa", "api", "test_passes")


def test_a_skipped_check_counts_neither_way():
    @points(2)
    def test_needs_cuda(grading):
        skip("no CUDA here")

    assert _run(test_needs_cuda) is None


def test_a_failure_names_its_codes_and_a_crash_is_the_graders_error():
    @points(2)
    def test_fails(student):
        raise CheckFailed("wrong", ["scale-missing"])

    @points(2)
    def test_crashes(student):
        raise ZeroDivisionError

    failed = _run(test_fails)
    assert (failed.passed, failed.points, failed.codes, failed.grader_error) == (False, 0.0, ["scale-missing"], False)
    crashed = _run(test_crashes)
    assert (crashed.passed, crashed.points, crashed.grader_error) == (False, 0.0, True)
    assert "ZeroDivisionError" in crashed.message


def test_part_points_add_up_each_parts_checks():
    totals = {}
    for check in collect():
        totals[check.part] = totals.get(check.part, 0.0) + check.points
    assert check_api.part_points() == totals
    assert all(isinstance(c, Check) and c.points >= 0 for c in collect())
