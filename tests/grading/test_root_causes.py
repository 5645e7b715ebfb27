"""The "先修这里" summary: each mistake once, at its home part, with the parts it explains."""
from autograder.grading import root_causes
from autograder.grading.hidden_checks import CheckResult, PartResult


def _check(part, passed, codes=(), elsewhere=()):
    return CheckResult(name=f"t-{part}-{len(codes)}", title="t", part=part, max_points=1, points=1 if passed else 0,
                       passed=passed, codes=list(codes), charged_elsewhere=list(elsewhere))


def _results(**checks):
    return {part: PartResult(part, list(items)) for part, items in checks.items()}


def test_a_helper_code_lives_in_its_helper_even_when_a_later_part_names_it_first():
    results = _results(
        scaled_dot_product_attention=[_check("scaled_dot_product_attention", False, ["mask-inverted"])],
        apply_mask=[_check("apply_mask", False, ["mask-inverted"]), _check("apply_mask", False, ["mask-inverted"])],
        device_dtype=[_check("device_dtype", True, elsewhere=["mask-inverted"])])
    causes = root_causes.root_causes(results, ["scaled_dot_product_attention", "apply_mask", "device_dtype"])
    assert causes == [{"code": "mask-inverted", "home": "apply_mask",
                       "also": ["scaled_dot_product_attention", "device_dtype"],
                       "lost": ["scaled_dot_product_attention"]}]


def test_a_part_that_kept_its_points_is_never_called_failed():
    """device_dtype passed as a composition of the inverted mask (charged once, in apply_mask): the summary says
    the mistake affects it, not that it failed; scaled_dot_product_attention, which lost points, failed."""
    results = _results(
        apply_mask=[_check("apply_mask", False, ["mask-inverted"])],
        scaled_dot_product_attention=[_check("scaled_dot_product_attention", False, ["mask-inverted"])],
        device_dtype=[_check("device_dtype", True, elsewhere=["mask-inverted"])])
    causes = root_causes.root_causes(results, ["apply_mask", "scaled_dot_product_attention", "device_dtype"])
    text = root_causes.render_text(causes, {})
    failed, affected = text.split("未通过的原因")
    assert "scaled_dot_product_attention" in failed and "device_dtype" not in failed
    assert "device_dtype" in affected and "没有扣分" in affected
    page = root_causes.render_html(causes, {}, {"device_dtype": "cell-7"})
    assert '<a href="#cell-7">device_dtype</a>' in page.split("未通过的原因")[1]


def test_codes_of_passing_checks_and_unknown_codes_are_not_causes():
    results = _results(softmax=[_check("softmax", True, ["softmax-unstable"]), _check("softmax", False, ["no-such"])])
    assert root_causes.root_causes(results, ["softmax"]) == []


def test_a_composite_code_lives_where_it_was_first_named():
    results = _results(scaled_dot_product_attention=[_check("scaled_dot_product_attention", False,
                                                             ["softmax-wrong-dim"])])
    causes = root_causes.root_causes(results, ["scaled_dot_product_attention"])
    assert causes == [{"code": "softmax-wrong-dim", "home": "scaled_dot_product_attention", "also": [], "lost": []}]


def test_rendering_names_each_code_once_and_escapes():
    causes = [{"code": "mask-inverted", "home": "apply_mask", "also": ["scaled_dot_product_attention"]}]
    labels = {"apply_mask": "apply_mask<b>", "scaled_dot_product_attention": "sdpa"}
    text = root_causes.render_text(causes, labels)
    page = root_causes.render_html(causes, labels)
    assert text.count("[mask-inverted]") == 1 and "sdpa" in text and "先修这里" in text
    assert "apply_mask&lt;b&gt;" in page and "<b>apply_mask<b>" not in page
