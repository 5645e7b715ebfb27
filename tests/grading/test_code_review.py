"""Unit tests of what the trusted process concludes from the student's code (`autograder/grading/code_review.py`):
forbidden built-ins cost their parts' points, tampering is flagged for a person and costs nothing."""
from autograder.grading import code_review
from autograder.grading.hidden_checks import CheckResult, PartResult

HAND_SOFTMAX = ("def softmax(x, dim=-1):\n    e = (x - x.amax(dim, keepdim=True)).exp()\n"
                "    return e / e.sum(dim, keepdim=True)")
BUILTIN_SOFTMAX = "import torch\n\ndef softmax(x, dim=-1):\n    return torch.softmax(x, dim)"
GC_WALK = "import gc\nfor obj in gc.get_objects():\n    pass"


def _check(name, part, passed, points=2.0, codes=(), message=""):
    return CheckResult(name=name, title=name, part=part, max_points=2.0, points=points if passed else 0.0,
                       passed=passed, message=message, codes=list(codes))


def _results():
    return {part: PartResult(part, [_check(f"{part}-a", part, True), _check(f"{part}-b", part, False,
                                                                            codes=["softmax-wrong-dim"],
                                                                            message="维度不对")])
            for part in ("softmax", "device_dtype", "scale_scores", "hand_calculation")}


def test_every_function_a_part_calls_is_scanned():
    assert code_review.GRADED_FUNCTIONS == sorted(set(code_review.GRADED_FUNCTIONS))
    for functions in code_review.PART_FUNCTIONS.values():
        assert set(functions) <= set(code_review.GRADED_FUNCTIONS)
    assert code_review.PART_FUNCTIONS["debugging_fix"] == ("fixed_attention",)


def test_hand_written_code_is_not_charged():
    scan = code_review.review([HAND_SOFTMAX])
    assert all(not findings for findings in scan.forbidden.values())
    results = _results()
    code_review.charge_forbidden(results, scan.forbidden, [4])
    assert [c.points for c in results["softmax"].checks] == [2.0, 0.0]
    assert code_review.review_notes(scan, [4]) == []


def test_a_builtin_softmax_costs_every_part_that_calls_it():
    scan = code_review.review(["x = 1", BUILTIN_SOFTMAX])
    assert [f.code for f in scan.forbidden["softmax"]] == ["softmax-builtin"]
    results = _results()
    code_review.charge_forbidden(results, scan.forbidden, [3, 7])  # scan cell 1 is notebook cell 7
    for part in ("softmax", "device_dtype"):  # device_dtype calls softmax too
        passed, failed = results[part].checks
        assert (passed.passed, passed.points, passed.codes) == (False, 0.0, ["softmax-builtin"])
        assert "第 8 个单元格第 4 行" in passed.message and "torch.softmax" in passed.message
        assert (passed.name, passed.part, passed.max_points) == (f"{part}-a", part, 2.0)
        # a check that had failed already keeps its own message and gains the code, once
        assert failed.message == "维度不对" and failed.codes == ["softmax-wrong-dim", "softmax-builtin"]
        assert results[part].points == 0.0
    for part in ("scale_scores", "hand_calculation"):  # parts that never call softmax keep their points
        assert [c.points for c in results[part].checks] == [2.0, 0.0]
        assert results[part].checks[1].codes == ["softmax-wrong-dim"]


def test_charging_twice_adds_no_code_twice():
    scan = code_review.review([BUILTIN_SOFTMAX])
    results = _results()
    code_review.charge_forbidden(results, scan.forbidden, [0])
    code_review.charge_forbidden(results, scan.forbidden, [0])
    assert [c.codes for c in results["softmax"].checks] == [["softmax-builtin"],
                                                            ["softmax-wrong-dim", "softmax-builtin"]]


def test_tampering_is_flagged_charges_nothing_and_holds_every_part_that_earned():
    scan = code_review.review([HAND_SOFTMAX, GC_WALK])
    results = _results()
    code_review.charge_forbidden(results, scan.forbidden, [2, 9])
    assert [c.points for c in results["softmax"].checks] == [2.0, 0.0]
    notes = code_review.review_notes(scan, [2, 9])
    assert notes and all(n["cell"] == 9 and n["category"] == "introspection" for n in notes)
    assert {n["detail"] for n in notes} >= {"gc.get_objects"}
    assert sorted(notes[0]) == ["category", "cell", "detail", "holds", "line"]
    assert {n["detail"] for n in notes if n["holds"]} >= {"gc.get_objects"}
    assert code_review.held_parts(results, notes) == {p for p, r in results.items() if r.points > 0}


def test_nothing_is_held_without_a_holding_note():
    results = _results()
    notes = code_review.review_notes(code_review.review([HAND_SOFTMAX, "import gc"]), [2, 9])
    assert [n["holds"] for n in notes] == [False]
    assert code_review.held_parts(results, notes) == set()


def test_a_cell_outside_the_map_keeps_its_scan_index():
    scan = code_review.review([GC_WALK])
    assert {n["cell"] for n in code_review.review_notes(scan, [])} == {0}
