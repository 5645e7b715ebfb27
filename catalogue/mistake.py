"""``python -m catalogue mistake [CODE ...]``: does each declared mistake stand on its own?

For a code the course declares with an honest answer (``course/<part>.py``,
`Mistake.honest`), that answer cell is swapped into the reference solution and
graded in this process by the hidden checks (trusted: the course's own code, no
sandbox), on two seeds.  The mistake stands on its own when

- the feedback names its code;
- it loses points in its home part, and in no other (the part whose module declares it);
- no other code is named, except those its honest answer declares in `also`.

A new mistake whose model gives the same output as an older one's on the
checks' inputs fails the last point, and the message names the older code and
the checks where the two cannot be told apart (dividing by 2·sqrt(d_k) is
dividing by d_k when d_k = 4, the hand case's d_k).  Without arguments, every
declared mistake with an honest answer is checked.  Exits 1 on any problem.

    python -m catalogue mistake                 # every declared mistake
    python -m catalogue mistake scale-by-dk     # one
"""
from __future__ import annotations

from autograder.grading import honest
from autograder.grading.hidden_checks import run_checks
from autograder.grading.local_student import LocalStudent, reference_namespace
from autograder.grading.misconceptions import CATALOGUE

from .charge_once import parts

SEEDS = ("one", "two")


def add_arguments(parser) -> None:
    parser.add_argument("codes", nargs="*", metavar="CODE", help="codes to check (default: every declared mistake "
                                                                 "with an honest answer)")


def grade(code: str, seed: str) -> dict:
    """{part: PartResult} of the reference solution with `code`'s honest answer cell swapped in."""
    namespace = reference_namespace()
    exec(honest.SOURCES[code][1], namespace)  # noqa: S102 - the course's own model of the mistake
    return run_checks(LocalStudent(namespace), parts(), seed_key=("sdpa", f"mistake-{code}-{seed}"),
                      context={"charge_once": True})


def problems(code: str, seeds=SEEDS) -> list[str]:
    """What keeps `code` from standing on its own, in sentences that say what to do ([] when it does)."""
    if code not in honest.SOURCES:
        return [f"{code}: the course declares no honest answer for it (Mistake.honest in course/<part>.py)"]
    home, also = CATALOGUE[code].home, set(honest.ALSO[code])
    found = []
    for seed in seeds:
        results = grade(code, seed)
        named = {c for r in results.values() for check in r.checks for c in check.codes}
        if code not in named:
            found.append(f"{code}: its honest answer was graded without naming it (seed {seed!r}): no check's "
                         f"failure matched its model; give its graded function a variant for it (course/{home}.py)")
        lost = sorted(p for p, r in results.items() if r.points < r.max_points and p != home)
        if home in results and results[home].points >= results[home].max_points:
            found.append(f"{code}: its honest answer lost nothing in its home part {home!r} (seed {seed!r}): the "
                         f"part's checks do not catch it")
        if lost:
            found.append(f"{code}: its honest answer lost points outside its home part {home!r}, in {lost} "
                         f"(seed {seed!r}): each mistake is charged once, where it lives")
        for other in sorted(named - {code} - also):
            where = sorted({check.name for r in results.values() for check in r.checks if other in check.codes})
            found.append(f"{code}: its honest answer is also diagnosed as {other!r} by {where} (seed {seed!r}): on "
                         f"those checks' inputs the two mistakes' models give the same output, so the grader cannot "
                         f"tell them apart. Give the part a check whose inputs tell them apart, or, if this mistake "
                         f"really is also {other!r}, list it in Honest(also=...)")
    return list(dict.fromkeys(found))


def main(args) -> int:
    codes = args.codes or list(honest.SOURCES)
    unknown = [c for c in codes if c not in CATALOGUE]
    if unknown:
        print(f"unknown codes: {unknown} (the course declares {sorted(CATALOGUE)})")
        return 2
    failed = 0
    for code in codes:
        found = problems(code)
        print(f"{code}: {'stands on its own' if not found else 'PROBLEM'}")
        for line in found:
            print(f"  - {line}")
        failed += bool(found)
    print(f"{len(codes) - failed} of {len(codes)} mistakes stand on their own")
    return 1 if failed else 0
