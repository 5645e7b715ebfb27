"""Run the hidden checks (pytest modules) against one student session.

The checks live in ``autograder/grading/checks``; each module grades one part of the
notebook and marks each test with its points.  `run_checks` runs pytest
in-process with a small plugin that hands the tests a `student` session and a
per-student seeded generator, and collects a `CheckResult` per test.  This
process never executes student code: the session does that in the sandbox.
"""
from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

import pytest

from .assertions import CheckFailed
from .composition import HOME, ExplainedElsewhere

if TYPE_CHECKING:
    import torch

    from ..sandbox.session import StudentSession
    from .local_student import LocalStudent

CHECKS_DIR = Path(__file__).with_name("checks")
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
    # Passed as a composition: the differences from PyTorch come from these codes,
    # charged in the helpers' own parts (see composition.py).
    charged_elsewhere: list = field(default_factory=list)


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
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Generator[None, Any, None]:
        outcome = yield
        report = outcome.get_result()
        if report.skipped:
            return  # e.g. CUDA checks on a CPU-only grader: neither pass nor fail
        if report.when == "call" or (report.when == "setup" and report.failed):
            self.results[item.nodeid] = self._result(item, call)

    @staticmethod
    def _result(item, call):
        marker = item.get_closest_marker("points")
        max_points = float(marker.args[0]) if marker else 0.0
        doc = (getattr(item.function, "__doc__", None) or item.name).strip().splitlines()[0]
        base = dict(name=item.name, title=doc, part=_part_of(item), max_points=max_points)
        if call.excinfo is None:
            return CheckResult(points=max_points, passed=True, **base)
        exc = call.excinfo.value
        if isinstance(exc, ExplainedElsewhere):
            return CheckResult(points=max_points, passed=True, message=exc.message,
                               charged_elsewhere=exc.codes, **base)
        if isinstance(exc, CheckFailed):
            return CheckResult(points=0.0, passed=False, message=exc.message, codes=exc.codes,
                               example=exc.example, **base)
        log.error("check %s crashed inside the grader: %r", item.nodeid, exc)
        return CheckResult(points=0.0, passed=False, grader_error=True,
                           message=f"评分器内部错误（{type(exc).__name__}），请联系助教。", **base)


def _part_of(item):
    """A test's part: its `part` marker, else its module's PART."""
    marker = item.get_closest_marker("part")
    return marker.args[0] if marker else getattr(item.module, "PART", None)


def run_checks(student: Union[StudentSession, LocalStudent], parts: Sequence[str], *, seed_key: Sequence[object],
               context: Optional[dict] = None) -> dict[str, PartResult]:
    """Grade `parts` against a live session; returns {part: PartResult}."""
    plugin = _Plugin(student, parts, seed_key, context or {})
    args = [str(CHECKS_DIR), "-c", os.devnull, "-p", "no:cacheprovider", "-p", "no:terminal", "-p", "no:warnings",
            # these two force a full gc.collect() around every test, a large share of the checks' time
            "-p", "no:unraisableexception", "-p", "no:threadexception",
            "--rootdir", str(CHECKS_DIR), "-o", "addopts=", "-o", "python_files=test_*.py",
            "-W", "ignore", "--noconftest",
            # per student, not per process: the checks raise CheckFailed (no bare assert to rewrite), log
            # nothing, and need no installed plugin; the logging plugin walks every logger around each test
            "--assert=plain", "--disable-plugin-autoload", "-p", "no:logging", "-p", "no:doctest",
            "-p", "no:junitxml", "-p", "no:pastebin", "-p", "no:stepwise", "-p", "no:faulthandler"]
    code = pytest.main(args, plugins=[plugin])
    if code not in (0, 1):
        log.error("hidden checks did not run cleanly (pytest exit code %s)", code)
    results = {part: PartResult(part) for part in parts}
    for res in plugin.results.values():
        results.setdefault(res.part, PartResult(res.part)).checks.append(res)
    _require_charged(results)
    return results


def _require_charged(results):
    """A check that passed as a composition keeps its points only if the helper where the mistake
    lives (``composition.HOME``) really charged it: a failing check of that part names the code.

    The composite sees the helper's misconception on its own inputs; a helper whose own
    checks never show it (it misbehaves only on the composite's inputs) has charged nothing.
    """
    charged = {}  # code -> parts whose failing checks name it
    for result in results.values():
        for check in result.checks:
            for code in check.codes if not check.passed else ():
                charged.setdefault(code, set()).add(result.part)
    for result in results.values():
        for check in result.checks:
            missing = [code for code in check.charged_elsewhere
                       if HOME.get(code) not in charged.get(code, set()) - {result.part}]
            if check.passed and missing:
                check.passed, check.points, check.charged_elsewhere = False, 0.0, []
                check.codes = list(missing)
                check.message = (f"与 PyTorch 的结果不同；差异来自辅助函数中的 {''.join(f'[{c}]' for c in missing)}，"
                                 "但那个函数自己的检查没有发现它，所以在这里扣分。")
