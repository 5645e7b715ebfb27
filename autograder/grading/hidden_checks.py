"""Run the hidden checks (pytest modules) against one student session.

The checks live in ``autograder/grading/checks``; each module grades one part of the
notebook and marks each test with its points.  `run_checks` runs pytest
in-process with a small plugin that hands the tests a `student` session and a
per-student seeded generator, and collects a `CheckResult` per test.  This
process never executes student code: the session does that in the sandbox.
"""
from __future__ import annotations

import builtins
import functools
import hashlib
import logging
import os
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

import pytest

from ..i18n import _
from .assertions import EXPLAINED, CheckFailed
from .composition import ExplainedElsewhere
from .honest import SOURCES as HONEST_SOURCES
from .misconceptions import HOMES

if TYPE_CHECKING:
    import torch

    from ..sandbox.session import StudentSession
    from .local_student import LocalStudent

CHECKS_DIR = Path(__file__).with_name("checks")
_EXCEPTION_GROUPS = tuple(getattr(builtins, name) for name in ("BaseExceptionGroup",) if hasattr(builtins, name))
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


class _Plugin:
    def __init__(self, student: Union[StudentSession, LocalStudent], parts: Sequence[str], seed_key: Sequence[object],
                 context: dict) -> None:
        self._student, self._parts, self._seed_key, self._context = student, set(parts), seed_key, context
        self.results = {}
        self._explained = {}  # nodeid -> the CheckFailed a check recorded and went on from

    @pytest.fixture
    def student(self) -> Union[StudentSession, LocalStudent]:
        return self._student

    @pytest.fixture
    def grading(self) -> dict:
        """Facts about this grading run (devices present, seed key)."""
        return self._context

    @pytest.fixture
    def rng(self, request: pytest.FixtureRequest) -> torch.Generator:
        import torch

        return torch.Generator().manual_seed(seed_for(*self._seed_key, request.node.nodeid.split("::")[-1]))

    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        keep = [item for item in items if _part_of(item) in self._parts]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, None]:
        """With each mistake charged once, a failure another part accounts for does not end the check."""
        collected = [] if self._context.get("charge_once", True) else None
        token = EXPLAINED.set(collected)
        try:
            yield
        finally:
            EXPLAINED.reset(token)
            self._explained[item.nodeid] = collected or []

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Generator[None, Any, None]:
        outcome = yield
        report = outcome.get_result()
        if report.skipped:
            return  # e.g. CUDA checks on a CPU-only grader: neither pass nor fail
        if report.when == "call" or (report.when == "setup" and report.failed):
            result = self._result(item, call, self._context.get("charge_once", True))
            self.results[item.nodeid] = _with_recorded(result, self._explained.pop(item.nodeid, []))

    @staticmethod
    def _result(item, call, charge_once):
        marker = item.get_closest_marker("points")
        max_points = float(marker.args[0]) if marker else 0.0
        doc = _((getattr(item.function, "__doc__", None) or item.name).strip().splitlines()[0])  # a check's title
        base = dict(name=item.name, title=doc, part=_part_of(item), max_points=max_points)
        if call.excinfo is None:
            return CheckResult(points=max_points, passed=True, **base)
        exc = call.excinfo.value
        if isinstance(exc, ExplainedElsewhere):
            return CheckResult(points=max_points, passed=True, message=exc.message, charged_elsewhere=exc.codes,
                               charged_groups=exc.groups, failure=exc.failure, unexplained=exc.unexplained, **base)
        if isinstance(exc, CheckFailed):
            failure = dict(message=exc.message, codes=exc.codes, example=exc.example)
            if exc.explained_by and charge_once:
                return CheckResult(points=max_points, passed=True, message=exc.message,
                                   charged_elsewhere=exc.explained_by, failure=failure, **base)
            return CheckResult(points=0.0, passed=False, replay=exc.replay, unexplained=exc.unexplained, **failure,
                               **base)
        log.error("check %s crashed inside the grader: %r", item.nodeid, exc)
        return CheckResult(points=0.0, passed=False, grader_error=True,
                           message=_("评分器内部错误（{error}），请联系助教。").format(error=type(exc).__name__),
                           **base)


class _PlainFailureReports:
    """A failure's report without pytest's traceback.

    pytest renders one with source excerpts for every failing test, parsing the check's module each
    time: about a third of the checks' CPU for a student who fails a few.  Nothing reads
    it: each check's result comes from its exception (`_Plugin._result`).
    """

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Optional[pytest.TestReport]:
        excinfo = call.excinfo
        if excinfo is None or isinstance(excinfo.value, (pytest.skip.Exception, *_EXCEPTION_GROUPS)):
            return None  # pytest's own report, which costs nothing here
        return pytest.TestReport(item.nodeid, item.location, dict.fromkeys(item.keywords, 1), "failed",
                                 excinfo.typename, call.when, [], call.duration, call.start, call.stop,
                                 user_properties=item.user_properties)


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


def _part_of(item):
    """A test's part: its `part` marker, else its module's PART."""
    marker = item.get_closest_marker("part")
    return marker.args[0] if marker else getattr(item.module, "PART", None)


def _checks_args() -> list[str]:
    """pytest on the checks directory alone: no ini file, cache, conftest or addopts from elsewhere."""
    return [str(CHECKS_DIR), "-c", os.devnull, "-p", "no:cacheprovider", "--rootdir", str(CHECKS_DIR),
            "-o", "addopts=", "-o", "python_files=test_*.py", "--noconftest"]


class _Weights:
    """Collects the checks (nothing runs): each part's points are the sum of its checks' `points` markers."""

    def __init__(self) -> None:
        self.points = {}

    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        for item in items:
            marker = item.get_closest_marker("points")
            part = _part_of(item)
            self.points[part] = self.points.get(part, 0.0) + (float(marker.args[0]) if marker else 0.0)


def part_points() -> dict[str, float]:
    """{part: points}: the one place a part's points are declared is its checks' `@pytest.mark.points`; the grade
    cell's points in every edition are this sum (``tools/build_notebooks.py`` writes them)."""
    weights = _Weights()
    code = pytest.main([*_checks_args(), "--collect-only", "-p", "no:terminal"], plugins=[weights])
    if code != 0:
        raise RuntimeError(f"the hidden checks could not be collected (pytest exit code {code})")
    return weights.points


def run_checks(student: Union[StudentSession, LocalStudent], parts: Sequence[str], *, seed_key: Sequence[object],
               context: Optional[dict] = None, settle: bool = True) -> dict[str, PartResult]:
    """Grade `parts` against a live session; returns {part: PartResult}.

    `settle` decides the credit of checks explained by codes charged elsewhere (`settle_charges`).
    """
    plugin = _Plugin(student, parts, seed_key, context or {})
    args = [*_checks_args(), "-p", "no:terminal", "-p", "no:warnings",
            # these two force a full gc.collect() around every test, a large share of the checks' time
            "-p", "no:unraisableexception", "-p", "no:threadexception", "-W", "ignore",
            # per student, not per process: the checks raise CheckFailed (no bare assert to rewrite), log
            # nothing, and need no installed plugin; the logging plugin walks every logger around each test
            "--assert=plain", "--disable-plugin-autoload", "-p", "no:logging", "-p", "no:doctest",
            "-p", "no:junitxml", "-p", "no:pastebin", "-p", "no:stepwise", "-p", "no:faulthandler",
            "-p", "no:debugging"]  # only --pdb needs it, and it imports pdb at every student's first test
    code = pytest.main(args, plugins=[plugin, _PlainFailureReports()])
    if code not in (0, 1):
        log.error("hidden checks did not run cleanly (pytest exit code %s)", code)
    results = {part: PartResult(part) for part in parts}
    for res in plugin.results.values():
        results.setdefault(res.part, PartResult(res.part)).checks.append(res)
    if settle:
        settle_charges(results, seed_key, context or {})
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
            example = shrink(student, check.replay)
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
             "所以在这里扣分；已标记给助教审阅。").format(helpers="、".join(helpers))
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
