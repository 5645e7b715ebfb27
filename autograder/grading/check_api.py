"""What a hidden check declares, and how the engine finds the checks.

A check is a function named ``test_*`` in ``course/checks/test_<part>.py``
(one file per graded part, otter-grader's layout).  It declares its points
with ``@points(n)`` (PrairieLearn's decorator) and, when it grades another part
than its module's ``PART``, that part with ``@part(name)``.  It asks for what
it needs by naming parameters: ``student`` (the student's session), ``rng`` (a
generator seeded from the student and the check) and ``grading`` (facts about
this run).  It passes by returning, fails by raising ``CheckFailed``
(``assertions``), and ``skip(reason)`` leaves it out of the grade (a CUDA check
on a grader without CUDA).

The engine runs the checks itself, in file and definition order
(``hidden_checks.run_checks``): a check is a plain function, so nothing of a
test framework's collection, reports or hooks stands between it and its score.
"""
from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import course

CHECKS_PACKAGE = "course.checks"
CHECKS_DIR = Path(course.__file__).with_name("checks")
FIXTURES = ("student", "rng", "grading")


class Skipped(Exception):
    """Raised by `skip`: the check does not apply on this grader and counts neither way."""


def skip(reason: str) -> None:
    raise Skipped(reason)


def points(value: float) -> Callable:
    """``@points(n)``: the check is worth `n` of its part's points (a part's points are the sum)."""
    def mark(function: Callable) -> Callable:
        function.points = float(value)
        return function
    return mark


def part(name: str) -> Callable:
    """``@part(name)``: the check grades part `name` rather than its module's ``PART``."""
    def mark(function: Callable) -> Callable:
        function.part = name
        return function
    return mark


@dataclass(frozen=True)
class Check:
    name: str  # the function's name: the check's identity in records and seeds
    part: str
    points: float
    function: Callable
    fixtures: tuple[str, ...]  # the parameters it asks for, in order

    @property
    def title(self) -> str:
        """The first line of its docstring (a message id: the feedback translates it)."""
        return (self.function.__doc__ or self.name).strip().splitlines()[0]


@functools.cache
def collect() -> tuple[Check, ...]:
    """Every check of the course: the ``test_*`` functions of ``course/checks/test_*.py``, files by name,
    functions in the order they are defined."""
    found = []
    for path in sorted(CHECKS_DIR.glob("test_*.py"), key=lambda p: p.name):
        module = importlib.import_module(f"{CHECKS_PACKAGE}.{path.stem}")
        for name, function in vars(module).items():
            if name.startswith("test") and inspect.isfunction(function):
                found.append(_check(module, name, function))
    return tuple(found)


def _check(module, name: str, function: Callable) -> Check:
    fixtures = tuple(inspect.signature(function).parameters)
    unknown = [f for f in fixtures if f not in FIXTURES]
    if unknown:
        raise TypeError(f"{module.__name__}.{name} asks for {unknown}; a check may ask for {list(FIXTURES)}")
    where = getattr(function, "part", None) or getattr(module, "PART", None)
    if where is None:
        raise TypeError(f"{module.__name__}.{name} has no part: set PART in its module or use @part(name)")
    return Check(name, where, getattr(function, "points", 0.0), function, fixtures)


def part_points() -> dict[str, float]:
    """{part: points}: the one place a part's points are declared is its checks' ``@points``; the grade cell's
    points in every edition are this sum (``tools/build_notebooks.py`` writes them)."""
    totals = {}
    for check in collect():
        totals[check.part] = totals.get(check.part, 0.0) + check.points
    return totals
