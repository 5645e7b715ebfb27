"""Each mistake is charged once: composite parts against the student's own helpers, composed correctly."""
import pytest

from autograder.demo.submissions import BUGS
from autograder.grading.composition import HOME
from autograder.grading.hidden_checks import run_checks
from autograder.grading.local_student import LocalStudent, reference_namespace
from catalogue.charging import CHARGING

COMPOSITE = "scaled_dot_product_attention"
HELPERS = ("attention_scores", "scale_scores", "apply_mask", "softmax", "attention_output")
# One sample per helper misconception whose home is that helper (a buggy helper, nothing else changed).  The
# honest softmax-dim-ignored hard-codes dim=-1, all the composite asks of softmax, so the composite never shows
# it: the axis-0 form, which the composite does show, stands in for it.
HELPER_BUGS = [s for s in BUGS + [s for s in CHARGING if s.name == "bug-softmax-axis-0"]
               if set(s.replace) <= set(HELPERS) and s.replace and s.name != "bug-softmax-dim-ignored"
               and any(HOME.get(c) in s.replace for c in s.codes)]


def _namespace(sample):
    namespace = reference_namespace()
    for source in sample.replace.values():
        exec(source, namespace)  # noqa: S102 - our own buggy samples, trusted
    return namespace


def _grade(sample, charge_once):
    student = LocalStudent(_namespace(sample))
    parts = list(sample.replace) + [COMPOSITE]
    return run_checks(student, parts, seed_key=("sdpa", sample.name), context={"charge_once": charge_once})


def test_there_are_helper_bugs_to_test():
    assert {c for s in HELPER_BUGS for c in s.codes} >= {"mask-inverted", "scale-missing", "softmax-unstable"}


@pytest.mark.parametrize("sample", HELPER_BUGS, ids=lambda s: s.name)
def test_a_helper_bug_is_charged_in_its_own_part_only(sample):
    results = _grade(sample, charge_once=True)
    helper = next(iter(sample.replace))
    assert results[helper].points < results[helper].max_points  # charged where it lives...
    composite = results[COMPOSITE]
    assert composite.points == composite.max_points, [(c.name, c.message) for c in composite.checks if not c.passed]
    named = {code for c in composite.checks for code in c.charged_elsewhere}
    assert set(sample.codes) & named  # ...and the composite says where


@pytest.mark.parametrize("sample", HELPER_BUGS, ids=lambda s: s.name)
def test_strict_mode_charges_the_composite_too(sample):
    composite = _grade(sample, charge_once=False)[COMPOSITE]
    assert composite.points < composite.max_points
    assert not any(c.charged_elsewhere for c in composite.checks)


def test_a_composite_that_does_not_use_its_helpers_gets_no_credit():
    """A wrong composite is charged even when a helper is wrong too: credit needs the student's own composition."""
    sample = next(s for s in HELPER_BUGS if "mask-inverted" in s.codes)
    namespace = _namespace(sample)
    exec('''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = scale_scores(attention_scores(q, k), q.shape[-1])
    weights = softmax(apply_mask(scores, mask), dim=-2)  # its own bug, on top of the helper's
    return attention_output(weights, v), weights
''', namespace)  # noqa: S102
    results = run_checks(LocalStudent(namespace), [COMPOSITE], seed_key=("sdpa", "x"), context={"charge_once": True})
    assert results[COMPOSITE].points < results[COMPOSITE].max_points


def test_no_credit_for_a_helper_mistake_its_own_part_never_charged():
    """A helper that is wrong only on the composite's inputs charged nothing: the composite pays."""
    namespace = reference_namespace()
    exec('''
_right_apply_mask = apply_mask
def apply_mask(scores, mask=None):
    if mask is not None and mask.dtype == torch.bool and mask.dim() == 3:  # the composite's masks only
        return scores.masked_fill(mask, float("-inf"))
    return _right_apply_mask(scores, mask)
''', namespace)  # noqa: S102
    results = run_checks(LocalStudent(namespace), ["apply_mask", COMPOSITE], seed_key=("sdpa", "y"),
                         context={"charge_once": True})
    assert results["apply_mask"].points == results["apply_mask"].max_points  # its own checks never see it
    composite = results[COMPOSITE]
    assert composite.points < composite.max_points
    assert not any(c.charged_elsewhere for c in composite.checks)


def test_charge_once_is_the_default():
    sample = next(s for s in HELPER_BUGS if "mask-inverted" in s.codes)
    results = run_checks(LocalStudent(_namespace(sample)), ["apply_mask", COMPOSITE], seed_key=("sdpa", "d"),
                         context={})
    assert results[COMPOSITE].points == results[COMPOSITE].max_points


# Found by a red-team pass: a helper wrong only inside the composition (it remembers its
# neighbour's last output), "charged" by one cheap failure in another part.
CHARGED_IN_ANOTHER_PART = '''
_LAST = [None]
_ref_scale, _ref_mask, _ref_causal = scale_scores, apply_mask, causal_mask
def scale_scores(scores, d_k):
    out = _ref_scale(scores, d_k)
    _LAST[0] = out.detach().clone()
    return out
def apply_mask(scores, mask=None):
    last = _LAST[0]
    if mask is not None and mask.dtype == torch.bool and last is not None and last.shape == scores.shape \\
            and last.dtype == scores.dtype and torch.equal(last, scores):
        return scores.masked_fill(mask, float("-inf"))
    return _ref_mask(scores, mask)
def causal_mask(L, S, device=None):
    m = _ref_causal(L, S, device=device)
    return ~m if (L, S) == (3, 3) else m
'''
# ...and a composite that only raises, explained by a dtype change inside the chain.
RAISING_COMPOSITE = '''
_LAST = {}
_r_mask, _r_softmax = apply_mask, softmax
def apply_mask(scores, mask=None):
    out = _r_mask(scores, mask)
    _LAST["m"] = out.detach().clone()
    return out
def softmax(x, dim=-1):
    last = _LAST.get("m")
    if last is not None and last.shape == x.shape and last.dtype == x.dtype and torch.equal(last, x) \\
            and x.dtype == torch.float64:
        return _r_softmax(x.float(), dim)
    if x.dtype == torch.float32:
        return _r_softmax(x, dim).half()
    return _r_softmax(x, dim)
def scaled_dot_product_attention(q, k, v, mask=None):
    raise RuntimeError("expected both operands to have the same dtype")
'''


@pytest.mark.parametrize("source", [CHARGED_IN_ANOTHER_PART, RAISING_COMPOSITE], ids=["other-part", "raising"])
def test_red_team_submissions_earn_no_composite_credit(source):
    namespace = reference_namespace()
    exec(source, namespace)  # noqa: S102 - the red team's submissions, run as trusted test code
    parts = ["scale_scores", "apply_mask", "softmax", "causal_mask", COMPOSITE, "device_dtype"]
    results = run_checks(LocalStudent(namespace), parts, seed_key=("sdpa", "x"), context={"charge_once": True})
    composite = results[COMPOSITE]
    assert composite.max_points - composite.points >= 11, [(c.name, c.passed) for c in composite.checks]
    assert not any(c.charged_elsewhere for c in composite.checks)
