"""Executable models of each misconception, used as evidence for diagnosis.

For every graded function the course keeps small, deliberately wrong
variants (``course/<part>.py``, `GradedFunction.variants`): what a student
who holds misconception X would compute.  When a check fails, the grader runs
the variants on the same inputs (in the trusted process, in float64) and
names a code only if that variant reproduces the student's output while the
correct answer does not.  No match, no code: we never guess.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from course import FUNCTIONS


def _arguments(args: Sequence, kwargs: dict) -> list:
    """The positional arguments, with a mask passed by keyword put where it belongs."""
    return list(args) + [kwargs[name] for name in ("mask",) if name in kwargs]


def variants(function: str, args: Sequence, kwargs: dict) -> dict[str, list[Callable]]:
    """{code: [callable producing the buggy output]} for one student function."""
    spec = FUNCTIONS.get(function)
    return spec.variants(_arguments(args, kwargs), kwargs) if spec is not None and spec.variants else {}


def fitted(function: str, args: Sequence, kwargs: dict, actual) -> dict[str, list[Callable]]:
    """Variants whose constant is read from the student's own output (half-overflow is a class of
    constants, not the one value -1e9)."""
    spec = FUNCTIONS.get(function)
    return spec.fitted(_arguments(args, kwargs), kwargs, actual) if spec is not None and spec.fitted else {}
