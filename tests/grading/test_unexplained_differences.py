"""A helper difference no misconception models: charged in the helper's part, never silently elsewhere.

The composite composed right from such a helper keeps its points as far as the helper's own part paid for
the difference (with failures that name no code), and every check touched by it is flagged for a person
(``feedback.unexplained_notes``).  A helper that erases its input (a constant output), raises or returns
nothing shows nothing of the composite's own code: no credit, a flag.
"""
import pytest

from autograder.demo.submissions import BUGS
from autograder.grading import feedback
from autograder.grading.hidden_checks import unexplained_differences
from catalogue.charging import CHARGING, MASK_NONE_RETURNS_NONE, UNKNOWN, ZERO_SOFTMAX_STUB_COMPOSITE
from tests.support.grading import grade_in_process

COMPOSITE = "scaled_dot_product_attention"
DEVICE = "device_dtype"


def _sample(name):
    return next(s for s in CHARGING if s.name == name)


def _lost(results):
    return {part: r.max_points - r.points for part, r in results.items() if r.points < r.max_points}


@pytest.mark.parametrize("key", ["s1", "s2"])
@pytest.mark.parametrize("name", UNKNOWN)
def test_the_composite_keeps_as_much_as_the_helpers_part_paid_and_a_person_is_told(name, key):
    sample = _sample(name)
    (home,) = sample.replace
    results = grade_in_process(sample.replace, key)
    strict = grade_in_process(sample.replace, key, charge_once=False)
    lost = _lost(results)
    assert results[home].points == 0 and set(lost) <= {home, COMPOSITE, DEVICE}, lost
    assert not [c for r in results.values() for c in r.codes], "no misconception models this mistake"
    flagged = unexplained_differences(results)
    assert {helper for helper, _check in flagged} == {home}
    credited = sum(check.max_points for _helper, check in flagged if check.passed)
    assert 0 < credited <= results[home].max_points
    assert 0 < sum(r.points for r in results.values()) - sum(r.points for r in strict.values()) <= credited
    # Every check that failed outside the home part is flagged, and the note points at the helper's cell.
    failed_elsewhere = {(r.part, c.name) for r in results.values() if r.part != home for c in r.checks
                        if not c.passed}
    assert failed_elsewhere <= {(check.part, check.name) for _helper, check in flagged}
    (note,) = feedback.unexplained_notes(results, lambda request: request)  # one per helper
    assert note["cell"] == ("call", home) and not note["holds"] and note["category"] == "unexplained-difference"
    kept = sum(1 for _helper, check in flagged if check.passed)
    assert f"有 {kept} 项" in note["detail"] and f"，{len(flagged) - kept} 项" in note["detail"]
    text = feedback.render_text(COMPOSITE, results[COMPOSITE], results[COMPOSITE].max_points,
                                results[COMPOSITE].points)
    assert home in text


@pytest.mark.parametrize("key", ["s1", "s2"])
def test_the_credit_is_no_more_than_the_helpers_part_lost(key):
    """A helper right on its own checks but one, and wrong inside the composite: what the composite keeps for
    the difference is at most what the helper's part lost, and the rest is charged where it shows."""
    sample = _sample("attack-charge-unknown-inside-composite")
    (home,) = sample.replace
    results = grade_in_process(sample.replace, key)
    strict = grade_in_process(sample.replace, key, charge_once=False)
    credited = sum(check.max_points for helper, check in unexplained_differences(results) if check.passed)
    unnamed = sum(c.max_points - c.points for c in results[home].checks if not c.passed and not c.codes)
    assert 0 < credited <= unnamed < results[home].max_points
    assert sum(r.points for r in results.values()) - sum(r.points for r in strict.values()) <= credited
    assert any(not check.passed for _helper, check in unexplained_differences(results))


SAMPLES = [s for s in [*BUGS, *CHARGING] if s.kind != "attack" and s.replace and not s.append and s.edit is None]


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.name)
def test_no_sample_loses_a_point_unnamed_outside_the_parts_it_changed(sample):
    """Outside the answer cells a sample changes, a failed check names a misconception or is flagged for a
    person: never a silent charge."""
    results = grade_in_process(sample.replace, sample.name)
    silent = [(r.part, c.name) for r in results.values() if r.part not in sample.replace for c in r.checks
              if not c.passed and not c.codes and not c.unexplained]
    assert not silent


@pytest.mark.parametrize("helper", [
    {"softmax": "def softmax(x, dim=-1):\n    return torch.zeros_like(x)\n"},
    {"attention_output": "def attention_output(weights, v):\n    return torch.zeros(*weights.shape[:-1], "
                         "v.shape[-1], dtype=v.dtype)\n"},
    {"scale_scores": "def scale_scores(scores, d_k):\n    return torch.zeros_like(scores)\n"},
], ids=lambda replace: next(iter(replace)))
def test_a_helper_that_erases_its_input_earns_a_stub_composite_nothing(helper):
    """Found by a red-team pass: with a helper that returns zeros, a composite that returns zeros is its
    helpers' composition; it was credited as far as the helper's part had lost (11 of 15 points)."""
    replace = {**helper, COMPOSITE: ZERO_SOFTMAX_STUB_COMPOSITE[COMPOSITE]}
    for key in ("s1", "s2"):
        results = grade_in_process(replace, key)
        assert results[COMPOSITE].points == 0
        assert sum(r.points for r in results.values()) <= sum(
            r.points for r in grade_in_process(replace, key, charge_once=False).values())
        assert {helper for helper, _check in unexplained_differences(results)} >= set(helper)


def test_a_helper_that_returns_nothing_is_named_where_the_composite_lost():
    """A slip a student makes (no `return` in one branch): the composite, right itself, loses points, and
    the loss names the helper for a person instead of being silent."""
    replace = MASK_NONE_RETURNS_NONE
    results = grade_in_process(replace, "s1")
    failed = [c for c in results[COMPOSITE].checks if not c.passed]
    assert failed and all(c.unexplained == ["apply_mask"] for c in failed)


STUB = "def {name}(*args, **kwargs):\n    raise NotImplementedError()\n"


@pytest.mark.parametrize("unwritten", [["softmax"], ["attention_scores", "scale_scores", "apply_mask", "softmax",
                                                      "attention_output", COMPOSITE]], ids=["one-helper", "blank"])
def test_an_unwritten_helper_is_named_where_the_composite_lost_and_flags_nothing(unwritten):
    """The release's stubs raise NotImplementedError: a composite that needs one fails saying which helper is not
    written yet, and no note asks a person to read code that is not there (an untouched notebook used to get an
    'unexplained difference' note)."""
    results = grade_in_process({name: STUB.format(name=name) for name in unwritten}, "stub")
    assert unexplained_differences(results) == []
    assert feedback.unexplained_notes(results, lambda _request: 0) == []
    if COMPOSITE not in unwritten:
        failed = [c for c in results[COMPOSITE].checks if not c.passed]
        assert failed and all(c.unfinished == ["softmax"] and "softmax 还没有实现" in c.message for c in failed)
