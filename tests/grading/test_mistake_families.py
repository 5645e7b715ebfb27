"""Every spelling of a mistake is charged once, in the part where it lives, with its code named.

The catalogue's one-bug samples spell each misconception one way.  Students spell it many ways: softmax over
any wrong axis, with or without the guard for all -inf rows; the square root of d_k built as a float32 or
float16 tensor; a mask filled with any large constant or with its polarity inverted; the scores transposed
by matmul, einsum or a transpose of the right product.  Each family below generates every form it lists (the
families are small, so every member is graded, not a sample of them), grades it in-process through the hidden
checks on two seeds with the default configuration, and holds both bounds:

- a mistake that lives in one helper costs points in that helper's part only (its home), so at most what that
  part is worth, and the home part names the code;
- no form scores more than the honest holder of its code (``autograder.grading.honest``).
"""
import itertools

import pytest

from autograder.grading import honest
from autograder.grading.misconceptions import CATALOGUE
from catalogue.charging import bool_mask_case
from tests.support.grading import grade_in_process

SEEDS = ("s1", "s2")


def _softmax(axis: str, guarded: bool, spelling: str) -> str:
    """softmax that normalises along `axis` (an expression in `dim` or a fixed axis), with or without the guard
    for slices that are all -inf, its maximum spelled one of three ways."""
    maximum = {"amax": f"x.amax(dim={axis}, keepdim=True)",
               "max-values": f"x.max(dim={axis}, keepdim=True).values",
               "torch-max": f"torch.max(x, {axis}, keepdim=True)[0]"}[spelling]
    if guarded:
        return f'''
def softmax(x, dim=-1):
    m = {maximum}
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim={axis}, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))
'''
    return f'''
def softmax(x, dim=-1):
    e = torch.exp(x - {maximum})
    return e / e.sum(dim={axis}, keepdim=True)
'''


def _scale(expression: str) -> str:
    return f"\ndef scale_scores(scores, d_k):\n    return {expression}\n"


def _mask(bool_case: str) -> str:
    return bool_mask_case(bool_case)["apply_mask"]


def _scores(expression: str) -> str:
    return f'''
def attention_scores(q, k):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("d_k mismatch")
    return {expression}
'''


# code -> [(form's name, answer cell grade_id, its source)]
FAMILIES = {
    "softmax-dim-ignored": [
        (f"axis {axis}{'' if guarded else ' unguarded'} {spelling}", "softmax", _softmax(axis, guarded, spelling))
        for axis, guarded, spelling in itertools.product(("0", "1", "-2"), (True, False),
                                                         ("amax", "max-values", "torch-max"))
    ] + [("fixed last axis", "softmax", _softmax("-1", True, "amax")),
         ("default dim 0", "softmax", _softmax("dim", True, "amax").replace("dim=-1):", "dim=0):"))],
    "scale-low-precision": [
        (name, "scale_scores", _scale(expression)) for name, expression in (
            ("float32 tensor", "scores / torch.sqrt(torch.tensor(d_k, dtype=torch.float32))"),
            ("integer tensor's sqrt", "scores / torch.tensor(d_k).sqrt()"),
            ("default dtype", "scores / torch.sqrt(torch.tensor(float(d_k)))"),
            ("float32 root", "scores / torch.tensor(math.sqrt(d_k), dtype=torch.float32)"),
            ("float32 reciprocal", "scores * torch.tensor(1 / math.sqrt(d_k), dtype=torch.float32)"),
            ("float16 root", "scores / torch.tensor(d_k ** 0.5, dtype=torch.float16)"),
            ("bfloat16 root", "scores / torch.sqrt(torch.tensor(d_k, dtype=torch.bfloat16))"),
        )],
    "scale-missing": [("no scale", "scale_scores", _scale("scores")),
                      ("divided by one", "scale_scores", _scale("scores / d_k ** 0"))],
    "scale-by-dk": [("divided by d_k", "scale_scores", _scale("scores / d_k")),
                    ("times 1/d_k", "scale_scores", _scale("scores * (1.0 / d_k)")),
                    ("sqrt squared", "scale_scores", _scale("scores / math.sqrt(d_k) ** 2"))],
    "scale-multiplied": [("times sqrt", "scale_scores", _scale("scores * math.sqrt(d_k)")),
                         ("divided by d_k ** -0.5", "scale_scores", _scale("scores / d_k ** -0.5"))],
    "mask-inverted": [(name, "apply_mask", _mask(case)) for name, case in (
        ("masked_fill", 'scores.masked_fill(mask, float("-inf"))'),
        ("where", 'torch.where(mask, torch.full_like(scores, float("-inf")), scores)'),
        ("compared to True", 'scores.masked_fill(mask == True, float("-inf"))'),
        ("math.inf", "scores.masked_fill(mask, -math.inf)"),
    )],
    "mask-zero-fill": [(name, "apply_mask", _mask(case)) for name, case in (
        ("masked_fill 0", "scores.masked_fill(~mask, 0.0)"),
        ("multiplied", "scores * mask"),
        ("where 0", "torch.where(mask, scores, torch.zeros_like(scores))"),
    )],
    "half-overflow": [(name, "apply_mask", _mask(case)) for name, case in (
        ("-1e4", "scores.masked_fill(~mask, -1e4)"),
        ("-1e9", "scores.masked_fill(~mask, -1e9)"),
        ("-1e30", "scores.masked_fill(~mask, -1e30)"),
        ("float32 lowest", "scores.masked_fill(~mask, torch.finfo(torch.float32).min)"),
        ("added -1e9", "scores + (~mask).to(scores.dtype) * -1e9"),
    )],
    "mask-ignored": [("returned as is", "apply_mask", "\ndef apply_mask(scores, mask=None):\n    return scores\n"),
                     ("a copy", "apply_mask", "\ndef apply_mask(scores, mask=None):\n    return scores.clone()\n")],
    "scores-transposed": [(name, "attention_scores", _scores(expression)) for name, expression in (
        ("k @ qT", "k @ q.transpose(-2, -1)"),
        ("matmul", "torch.matmul(k, q.transpose(-1, -2))"),
        ("einsum", 'torch.einsum("...sd,...ld->...sl", k, q)'),
        ("mT", "k @ q.mT"),
    )],
}
FORMS = [(code, *form) for code, forms in FAMILIES.items() for form in forms]


def _lost(results) -> dict:
    return {part: round(r.max_points - r.points, 6) for part, r in results.items() if r.points < r.max_points}


def _codes(results, part) -> set:
    return {code for check in results[part].checks if not check.passed for code in check.codes} if part in results \
        else set()


_HONEST = {}


def _honest_total(code, seed):
    if (code, seed) not in _HONEST:
        _HONEST[code, seed] = sum(r.points for r in grade_in_process(honest.replacement(code), seed).values())
    return _HONEST[code, seed]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("code,name,cell,source", FORMS, ids=[f"{f[0]}: {f[1]}" for f in FORMS])
def test_every_form_of_a_mistake_is_charged_once_in_its_home_part_with_its_code(code, name, cell, source, seed):
    results = grade_in_process({cell: source}, seed)
    home = CATALOGUE[code].home
    lost = _lost(results)
    assert set(lost) == {home}, f"{name} loses points outside {home}: {lost}"
    assert code in _codes(results, home), f"{name}: {home} does not name [{code}]: {_codes(results, home)}"
    total = sum(r.points for r in results.values())
    assert total <= _honest_total(code, seed) + 1e-9, f"{name} scores more than the honest holder of [{code}]"


def test_the_families_cover_every_code_they_name_and_each_has_an_honest_holder():
    for code in FAMILIES:
        assert code in honest.SOURCES and code in CATALOGUE, code
    assert all(len(forms) >= 2 for forms in FAMILIES.values())
