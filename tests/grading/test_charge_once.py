"""Charge-once is honest (one mistake, one part) and never a gain (no attack beats its honest counterpart)."""
import pytest

from autograder.demo.submissions import BUGS
from autograder.grading import honest, root_causes
from autograder.grading.hidden_checks import CheckResult, PartResult, honest_failures, run_checks, settle_charges
from autograder.grading.local_student import LocalStudent, reference_namespace
from autograder.grading.misconceptions import CATALOGUE, COMPOSITE_HOME
from catalogue import mistake
from catalogue.charge_once import parts
from catalogue.charging import CHARGING, DTYPE_BUGS, HONEST, LARGE_FILLS, NARROWER, SHOWS_ONCE, TWO_MISTAKES
from tests.support.grading import grade_in_process

ORDER = parts()
# One answer cell changed, one code: the single-misconception samples (built-ins are charged by reading the code)
# other than the course's honest answers, which `test_every_declared_mistake_stands_on_its_own` grades.
SINGLE = [s for s in BUGS if len(s.replace) == 1 and not s.append and s.edit is None and len(s.codes) == 1
          and not {"softmax-builtin", "sdpa-builtin"} & set(s.codes) and s.name not in
          {f"bug-{code}" for code in honest.SOURCES}]


_grade = grade_in_process


def _lost(results):
    return {part: r.max_points - r.points for part, r in results.items() if r.points < r.max_points}


@pytest.mark.parametrize("sample", SINGLE, ids=lambda s: s.name)
def test_one_misconception_is_charged_in_its_home_part_only(sample):
    (code,) = sample.codes
    lost = _lost(_grade(sample.replace, sample.name))
    # The hand calculation asks about a code without implementing it: that question's part is its home here.
    assert len(lost) == 1 and set(lost) <= {CATALOGUE[code].home, "hand_calculation"}, lost


@pytest.mark.parametrize("code", list(honest.SOURCES))
def test_every_declared_mistake_stands_on_its_own(code):
    """Its honest answer is named, charged in its home part only, and diagnosed as no other mistake
    (``python -m catalogue mistake``, on one seed here)."""
    assert mistake.problems(code, seeds=("suite",)) == []


def test_a_mistake_the_checks_cannot_tell_apart_is_reported(monkeypatch):
    """The check above can fail: a declared mistake whose honest answer is another code's model is reported as
    diagnosed as that code too."""
    monkeypatch.setitem(honest.SOURCES, "scale-multiplied", honest.SOURCES["scale-by-dk"])
    found = mistake.problems("scale-multiplied", seeds=("suite",))
    assert any("also diagnosed as 'scale-by-dk'" in line for line in found), found
    assert any("without naming it" in line for line in found), found


def test_the_issue_figures_hold_with_the_default_configuration():
    """One inverted mask costs at most apply_mask's 10 points; one missing scale at most scale_scores' 5."""
    for code, part, most in (("mask-inverted", "apply_mask", 10), ("scale-missing", "scale_scores", 5)):
        namespace = reference_namespace()
        exec(honest.SOURCES[code][1], namespace)  # noqa: S102
        lost = _lost(run_checks(LocalStudent(namespace), ORDER, seed_key=("sdpa", "figures"), context={}))
        assert set(lost) == {part} and lost[part] <= most, lost


@pytest.mark.parametrize("key", ["s1", "s2"])
@pytest.mark.parametrize("sample", [s for s in CHARGING if s.name in HONEST], ids=lambda s: s.name)
def test_no_attack_scores_more_than_its_honest_counterpart(sample, key):
    attack = _total(sample.replace, key)
    counterpart = _total(_one_bug(HONEST[sample.name]), key)
    assert attack <= counterpart, (attack, counterpart)


def _total(replace, key, charge_once=True):
    return sum(r.points for r in _grade(replace, key, charge_once).values())


def _one_bug(code):
    return next(s.replace for s in BUGS if s.name == f"bug-{code}")


@pytest.mark.parametrize("key", ["s1", "s2"])
@pytest.mark.parametrize("name", TWO_MISTAKES)
def test_a_second_mistake_never_raises_the_score(name, key):
    """Found by a red-team pass: a helper mistake that made the composition raise hid the composite's own code."""
    sample = next(s for s in CHARGING if s.name == name)
    both = _total(sample.replace, key)
    for cell, source in sample.replace.items():
        assert both <= _total({cell: source}, key), (cell, both)


@pytest.mark.parametrize("name", SHOWS_ONCE)
def test_a_mistake_that_shows_on_one_input_is_charged_there_and_never_above_strict(name):
    """Found by a third red-team pass: the float64 output the accuracy check measures against was credited as
    a known mistake's although no part charged that mistake."""
    sample = next(s for s in CHARGING if s.name == name)
    strict = _total(sample.replace, name, charge_once=False)
    results = _grade(sample.replace, name)
    assert _lost(results) and sum(r.points for r in results.values()) <= strict, _lost(results)


@pytest.mark.parametrize("name", NARROWER)
def test_a_narrower_form_of_an_honest_mistake_scores_what_strict_grading_gives(name):
    """Found by a fifth red-team pass: withdrawn refunds, and device checks that graded a mistaken CPU output
    as a credit to withdraw, took 3 to 7 points more than strict grading."""
    sample = next(s for s in CHARGING if s.name == name)
    # no refund without the honest holder's every failing check, so no more than strict grading either
    assert _total(sample.replace, name) == _total(sample.replace, name, charge_once=False)


@pytest.mark.parametrize("name", DTYPE_BUGS)
def test_a_dtype_mistake_in_any_helper_is_charged_once_in_the_device_part(name):
    sample = next(s for s in CHARGING if s.name == name)
    lost = _lost(_grade(sample.replace, name))
    honest_lost = _lost(_grade(_one_bug("dtype-changed"), name))
    assert set(lost) == {"device_dtype"} and lost["device_dtype"] <= honest_lost["device_dtype"], lost


@pytest.mark.parametrize("sample", [s for s in CHARGING if s.kind == "fairness"], ids=lambda s: s.name)
def test_helpers_captured_in_a_correct_composite_keep_every_point(sample):
    assert _lost(_grade(sample.replace, sample.name)) == {}


def test_every_code_another_part_may_pass_on_has_an_honest_holder():
    assert set(COMPOSITE_HOME) <= set(honest.SOURCES)
    for code, home in COMPOSITE_HOME.items():
        grade_id, _ = honest.SOURCES[code]
        assert grade_id in reference_namespace(), (code, grade_id)  # the cell replaces a graded function
        assert honest_failures(code, home, ("sdpa", "honest-holder"), ()), code  # its home really charges it


def _result(part, *checks):
    return PartResult(part, list(checks))


def _check(part, points, max_points, codes=(), elsewhere=(), name=None):
    return CheckResult(name=name or f"t{points}", title="", part=part, max_points=max_points, points=points,
                       passed=points == max_points, codes=list(codes), charged_elsewhere=list(elsewhere),
                       failure={"message": "原来的失败", "codes": ["x"], "example": {}} if elsewhere else {})


KEY = ("sdpa", "settle")
HONEST_FAILS = honest_failures("mask-inverted", "apply_mask", KEY, ())  # ((check name, points lost), ...)


def _apply_mask_part(passing=(), extra=()):
    """apply_mask failing what the honest mask-inverted fails, except the checks named in `passing`."""
    checks = [_check("apply_mask", lost if name in passing else 0.0, lost, name=name,
                     codes=() if name in passing else ["mask-inverted"]) for name, lost in HONEST_FAILS]
    return _result("apply_mask", *checks, *extra)


def _settled(home):
    credited = _check("scaled_dot_product_attention", 3.0, 3.0, elsewhere=["mask-inverted"])
    settle_charges({"apply_mask": home,
                    "scaled_dot_product_attention": _result("scaled_dot_product_attention", credited)}, KEY, {})
    return credited


def test_a_credit_stands_when_the_home_part_fails_every_check_an_honest_holder_fails():
    assert len(HONEST_FAILS) > 1
    credited = _settled(_apply_mask_part())
    assert (credited.passed, credited.points) == (True, 3.0)


def test_a_credit_is_withdrawn_when_the_home_part_passes_a_check_an_honest_holder_fails():
    credited = _settled(_apply_mask_part(passing={HONEST_FAILS[0][0]}))
    assert (credited.passed, credited.points) == (False, 0.0)
    assert "原来的失败" in credited.message and "mask-inverted" in credited.codes


def test_another_mistake_of_the_home_part_does_not_make_up_for_a_check_it_passes():
    """Found by the seventh and eighth red-team passes: a narrow inverted mask, topped up by wrong answers on
    checks the composite never calls apply_mask on, reached the honest holder's loss (in the part, or on the
    checks that name the code); the honest holder also fails checks that name no code."""
    first, lost = HONEST_FAILS[0]
    other = _check("apply_mask", 0.0, lost + 5.0, codes=["mask-inverted"], name="another")
    credited = _settled(_apply_mask_part(passing={first}, extra=[other]))
    assert (credited.passed, credited.points) == (False, 0.0)


def test_a_credit_for_a_code_no_check_of_its_home_names_is_withdrawn():
    credited = _check("device_dtype", 2.0, 2.0, elsewhere=["returns-not-tuple"])
    results = {"scaled_dot_product_attention": _result("scaled_dot_product_attention",
                                                       _check("scaled_dot_product_attention", 0.0, 15.0)),
               "device_dtype": _result("device_dtype", credited)}
    settle_charges(results, ("sdpa", "settle"), {})
    assert not credited.passed


@pytest.mark.parametrize("name", LARGE_FILLS)
def test_any_large_negative_fill_is_half_overflow_charged_in_apply_mask(name):
    """Found by a red-team pass: -1e10, finfo.min or an added -1e9 were charged in three parts."""
    sample = next(s for s in CHARGING if s.name == name)
    lost = _lost(_grade(sample.replace, name))
    honest_lost = _lost(_grade(_one_bug("half-overflow"), name))
    assert "apply_mask" in lost and lost["apply_mask"] <= honest_lost["apply_mask"], lost
    assert set(lost) <= {"apply_mask", "device_dtype"} and lost.get("device_dtype", 0) <= 2, lost


def test_a_difference_several_mistakes_explain_names_only_the_one_that_paid():
    """Found by a fourth red-team pass: a NaN row is fully-masked-nan's output, and softmax-unstable's and
    softmax-global-max's too; the device part's credit stands on the one softmax charged, and says so."""
    results = _grade(_one_bug("fully-masked-nan"), "alternatives")
    assert _lost(results) == {"softmax": 2.0}
    credited = {c for r in results.values() for check in r.checks for c in check.charged_elsewhere}
    assert credited == {"fully-masked-nan"}
    assert [cause["code"] for cause in root_causes.root_causes(results, ORDER)] == ["fully-masked-nan"]
