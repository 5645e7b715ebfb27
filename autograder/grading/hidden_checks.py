"""Run the hidden checks against one student session, and settle what each mistake costs.

The checks live in ``course/checks`` (``check_api`` says what a check
declares); each module grades one part of the notebook.  `run_checks` calls
each check of the parts asked for, with the `student` session and a
per-student seeded generator, and makes a `CheckResult` of what it returned or
raised.  This process never executes student code: the session does that in
the sandbox.
"""
from __future__ import annotations

import functools
import hashlib
import logging
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union

from ..i18n import _
from .assertions import EXPLAINED, CheckFailed
from .check_api import Check, Skipped, collect
from .composition import ExplainedElsewhere
from .honest import SOURCES as HONEST_SOURCES
from .misconceptions import HOMES

if TYPE_CHECKING:
    from ..sandbox.session import StudentSession
    from .local_student import LocalStudent

log = logging.getLogger(__name__)


@dataclass
class CheckResult:
    name: str
    title: str
    part: str
    max_points: float
    points: float
    passed: bool
    message: str = ""
    codes: list = field(default_factory=list)
    example: dict = field(default_factory=dict)
    grader_error: bool = False
    # Passed because its differences from PyTorch come from these codes, charged in their own
    # parts (see composition.py); `settle_charges` confirms or withdraws that credit.
    charged_elsewhere: list = field(default_factory=list)
    # Which of those codes are alternatives (``composition.ExplainedElsewhere.groups``); [] = each its own.
    charged_groups: list = field(default_factory=list)
    # What the check reported when it failed, restored if the credit is withdrawn.
    failure: dict = field(default_factory=dict)
    # Helpers (parts) whose difference from PyTorch no known misconception explains, while the composition of
    # the student's own helpers gives what this check got: kept whether the credit stands or not, for review.
    unexplained: list = field(default_factory=list)
    # Helpers this failed check needed that still raise NotImplementedError (named in its message).
    unfinished: list = field(default_factory=list)
    replay: Any = None  # a failed comparison to shrink (``shrink.Replay``)


@dataclass
class PartResult:
    part: str
    checks: list = field(default_factory=list)

    @property
    def points(self) -> float:
        return round(sum(c.points for c in self.checks), 4)

    @property
    def max_points(self) -> float:
        return round(sum(c.max_points for c in self.checks), 4)

    @property
    def codes(self) -> list[str]:
        return list(dict.fromkeys(code for c in self.checks for code in c.codes))


def seed_for(*key: object) -> int:
    """Stable 63-bit seed: same student and assignment, same tensors."""
    digest = hashlib.sha256(":".join(str(k) for k in key).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def _fixtures(check: Check, student, seed_key: Sequence[object], context: dict) -> dict:
    """What the check asks for: the session, a generator seeded from the student and the check, the run's facts."""
    def rng():
        import torch

        return torch.Generator().manual_seed(seed_for(*seed_key, check.name))

    made = {"student": lambda: student, "rng": rng, "grading": lambda: context}
    return {name: made[name]() for name in check.fixtures}


def _run(check: Check, student, seed_key: Sequence[object], context: dict) -> Optional[CheckResult]:
    """One check's result, or None when it skipped itself.  With each mistake charged once, a failure another
    part accounts for does not end the check (``assertions.EXPLAINED`` collects it)."""
    charge_once = context.get("charge_once", True)
    recorded = [] if charge_once else None
    token = EXPLAINED.set(recorded)
    error = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check.function(**_fixtures(check, student, seed_key, context))
    except Skipped:
        return None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - whatever a check raises is its result
        error = exc
    finally:
        EXPLAINED.reset(token)
    return _with_recorded(_result(check, error, charge_once), recorded or [])


def _result(check: Check, exc: Optional[BaseException], charge_once: bool) -> CheckResult:
    base = dict(name=check.name, title=_(check.title), part=check.part, max_points=check.points)
    if exc is None:
        return CheckResult(points=check.points, passed=True, **base)
    if isinstance(exc, ExplainedElsewhere):
        return CheckResult(points=check.points, passed=True, message=exc.message, charged_elsewhere=exc.codes,
                           charged_groups=exc.groups, failure=exc.failure, unexplained=exc.unexplained, **base)
    if isinstance(exc, CheckFailed):
        failure = dict(message=exc.message, codes=exc.codes, example=exc.example)
        if exc.explained_by and charge_once:
            return CheckResult(points=check.points, passed=True, message=exc.message,
                               charged_elsewhere=exc.explained_by, failure=failure, **base)
        return CheckResult(points=0.0, passed=False, replay=exc.replay, unexplained=exc.unexplained,
                           unfinished=exc.unfinished, **failure, **base)
    log.error("check %s.%s crashed inside the grader: %r", check.part, check.name, exc)
    return CheckResult(points=0.0, passed=False, grader_error=True,
                       message=_("评分器内部错误（{error}），请联系助教。").format(error=type(exc).__name__), **base)


def _with_recorded(result: CheckResult, recorded: list) -> CheckResult:
    """A check's result with the failures it recorded and went on from: a check that otherwise passed
    passes as charged elsewhere; one that failed for a reason of its own stays failed."""
    if not recorded or not result.passed:
        return result
    codes = list(dict.fromkeys([*result.charged_elsewhere, *(c for f in recorded for c in f.explained_by)]))
    if result.charged_groups:
        result.charged_groups = [*result.charged_groups, *([c] for c in codes if c not in result.charged_elsewhere)]
    first = recorded[0]
    failure = result.failure or {"message": first.message, "codes": first.codes, "example": first.example}
    message = result.message if result.charged_elsewhere else \
        _("{message}（这一点在它所在的部分扣分：{codes}）").format(message=first.message,
                                                          codes="".join(f"[{c}]" for c in codes))
    result.charged_elsewhere, result.failure, result.message = codes, failure, message
    return result


def run_checks(student: Union[StudentSession, LocalStudent], parts: Sequence[str], *, seed_key: Sequence[object],
               context: Optional[dict] = None, settle: bool = True) -> dict[str, PartResult]:
    """Grade `parts` against a live session; returns {part: PartResult}.

    `settle` decides the credit of checks explained by codes charged elsewhere (`settle_charges`).
    """
    context = context or {}
    wanted = set(parts)
    results = {part: PartResult(part) for part in parts}
    for check in collect():
        if check.part in wanted:
            result = _run(check, student, seed_key, context)
            if result is not None:
                results[check.part].checks.append(result)
    if settle:
        settle_charges(results, seed_key, context)
        _shrink_examples(student, results)
    return results


def _shrink_examples(student, results) -> None:
    """Replace each failed comparison's example by the smallest one found (after every score is decided)."""
    from .assertions import TOLERANCE_KEY
    from .shrink import shrink

    for result in results.values():
        for check in result.checks:
            if check.passed or check.replay is None:
                continue
            try:
                example = shrink(student, check.replay)
            except Exception:  # noqa: BLE001 - the score is decided; a failed search keeps the example it had
                log.warning("shrinking %s's example failed; the unshrunk example is kept", check.name, exc_info=True)
                continue
            if example is not None:
                tolerance = check.example.get(TOLERANCE_KEY)
                check.example = {**example, **({TOLERANCE_KEY: tolerance} if tolerance else {})}


def settle_charges(results: dict, seed_key: Sequence[object], context: dict, against_honest: bool = True) -> None:
    """Decide the credit of every check that passed because its differences are charged elsewhere.

    A code pays for such a check only if the part where it lives (``misconceptions.HOMES``) charged it: a
    failing check of that part names the code, and, for every code an answer cell can hold alone
    (``honest.SOURCES``), every check of that part that an honest holder of the code fails on the same
    seed (`honest_failures`) took at least as much here: a narrower form of the mistake that passes one
    of them, topped up by another mistake elsewhere in the part or not, is no proof of the code.  A
    difference that several codes explain alike (``charged_groups``) is paid for by any one of them.
    Otherwise the check fails here, naming the codes.  A helper that misbehaves only where the composite
    calls it, or is wrong on one cheap check alone, or a composite with a bug of its own, therefore never
    scores more than the honest student.

    A difference no known misconception explains (``unexplained``: the helper's output differs, the
    composite composed it correctly) has no honest holder to measure against, so its helper's part pays
    from what it lost: the credit given for it across all checks never exceeds the points that part's own
    checks took with failures that name no misconception, and otherwise the check fails here.  Either way
    `unexplained_differences` reports it for a person to read: it is a mistake the catalogue lacks, or a
    helper that behaves differently where the composite calls it.
    """
    candidates = [(result.part, check) for result in results.values() for check in result.checks
                  if check.passed and (check.charged_elsewhere or check.unexplained)]
    # A code whose home is the check's own part: another check of that part must charge it for real.
    own = [(part, check) for part, check in candidates if any(HOMES.get(c) == part for c in check.charged_elsewhere)]
    spent = {}  # helper part -> credit already given for its unexplained differences
    _settle(results, own, seed_key, context, against_honest, spent)
    # Then the others, against the home parts as they now stand (with every credit still standing,
    # their losses are the lowest they can be, so no later decision can undo a gate that passed).
    _settle(results, [c for c in candidates if c not in own and c[1].passed], seed_key, context, against_honest,
            spent)


def unexplained_differences(results: dict) -> list[tuple[str, CheckResult]]:
    """(helper, check) for each check whose failure came from a helper's difference no known misconception
    explains, credited or not: what a person should read."""
    return [(helper, check) for result in results.values() for check in result.checks
            for helper in check.unexplained]


def _settle(results, candidates, seed_key, context, against_honest, spent):
    charged = {(result.part, code) for result in results.values() for check in result.checks if not check.passed
               for code in check.codes}
    losses = {(result.part, check.name): check.max_points - check.points
              for result in results.values() for check in result.checks}
    decisions = []
    for _part, check in candidates:
        short, paid = [], []
        for group in check.charged_groups or [[code] for code in check.charged_elsewhere]:
            unpaid = [_unpaid(code, charged, losses, seed_key, context, against_honest) for code in group]
            if all(unpaid):  # a difference that any one of its codes, charged where it lives, would pay for
                short.extend((code, home) for code, (home,) in zip(group, unpaid))
            paid.extend(code for code, why in zip(group, unpaid) if not why)
        decisions.append((check, short, paid))
    for check, short, paid in decisions:
        unpaid = _over_budget(check, results, spent)
        if short:
            _charge_here(check, short)
        elif unpaid:
            _charge_unexplained(check, unpaid)
        else:  # the feedback names the codes that paid, not the alternatives no part charged
            check.charged_elsewhere = list(dict.fromkeys(paid))
            check.charged_groups = [[code] for code in check.charged_elsewhere]
            for helper in check.unexplained:
                spent[helper] = spent.get(helper, 0.0) + check.max_points


def _over_budget(check, results, spent) -> list[str]:
    """The helpers of `check.unexplained` whose parts lost fewer points to failures that name no misconception
    than crediting this check, on top of the credit already given for them, would need (a loss that names a
    code has paid for that code: it pays for nothing else)."""
    def unnamed_loss(part):
        return sum(c.max_points - c.points for c in results[part].checks if not c.passed and not c.codes) \
            if part in results else 0.0

    return [helper for helper in check.unexplained
            if unnamed_loss(helper) + 1e-9 < spent.get(helper, 0.0) + check.max_points]


def _charge_unexplained(check: CheckResult, helpers: list) -> None:
    """Withdraw a check's credit for a difference no known misconception explains, whose helper's part did
    not lose enough to pay for it."""
    note = _("差异来自 {helpers} 的输出（评分程序认不出是哪种误解），但 {helpers} 自己的检查扣的分抵不了这一项，"
             "所以在这里扣分；已标记给助教审阅。").format(helpers=_("、").join(helpers))
    _withdraw(check, [], note)


def _unpaid(code, charged, losses, seed_key, context, against_honest) -> tuple:
    """() when the code's home part charged it in full; else (home,) when a check there that an honest holder
    fails took less here, (None,) when no failing check of that part names the code."""
    home = HOMES.get(code)
    if home is None or (home, code) not in charged:
        return (None,)
    if against_honest and code in HONEST_SOURCES and any(
            losses.get((home, name), 0.0) + 1e-9 < lost
            for name, lost in honest_failures(code, home, tuple(seed_key), _frozen(context))):
        return (home,)
    return ()


def _charge_here(check: CheckResult, short: list) -> None:
    """Withdraw a check's credit: it fails, with what it found (or, for a composite, why it is charged here)."""
    codes = [code for code, _home in short]
    homes = _("、").join(dict.fromkeys(home for _code, home in short if home))
    named = "".join(f"[{c}]" for c in codes)
    note = _("差异来自 {codes}，但{homes} 自己的检查因它扣的分，少于真正有这个错误时应扣的分，所以在这里扣分。").format(
        codes=named, homes=homes) if homes else \
        _("差异来自 {codes}，但它所在的那一部分没有因它扣分，所以在这里扣分。").format(codes=named)
    own = all(home is None and HOMES.get(code) == check.part for code, home in short)
    _withdraw(check, codes, None if own else note)


def _withdraw(check: CheckResult, codes: list, note: Optional[str]) -> None:
    """The check fails with the failure it recorded (or a plain one), naming `codes` too, and `note` saying why
    it is charged here."""
    failure = check.failure or {"message": _("与 PyTorch 的结果不同。"), "codes": codes, "example": {}}
    check.passed, check.points, check.charged_elsewhere, check.charged_groups = False, 0.0, [], []
    check.codes = list(dict.fromkeys(list(failure["codes"]) + codes))
    check.example = failure["example"]
    check.message = failure["message"] if note is None else f"{failure['message']}\n{note}"


def _frozen(context: dict) -> tuple:
    return tuple(sorted((k, v) for k, v in context.items() if isinstance(v, (bool, int, float, str))))


@functools.lru_cache(maxsize=256)
def honest_failures(code: str, part: str, seed_key: tuple, context: tuple) -> tuple:
    """((check name, points lost), ...) for each check of `part` that a student whose only mistake is `code`
    (``honest``) fails on this seed."""
    from .local_student import LocalStudent, reference_namespace

    namespace = reference_namespace()
    _cell, source = HONEST_SOURCES[code]
    exec(compile(source, f"honest:{code}", "exec"), namespace)  # noqa: S102 - our own model of the mistake
    results = run_checks(LocalStudent(namespace), [part], seed_key=seed_key, context=dict(context), settle=False)
    settle_charges(results, seed_key, dict(context), against_honest=False)  # the honest holder: nothing to compare
    return tuple((check.name, check.max_points - check.points) for check in results[part].checks
                 if check.max_points - check.points > 0)
