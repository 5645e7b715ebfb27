"""What a course author declares about a graded part: its functions and the mistakes that live in it.

The grading engine (``autograder.grading``) holds no per-function tables: it
reads these declarations.  One module of this package per graded part says

- ``PART``: the part (a test cell's ``part`` in the source notebook);
- ``FUNCTIONS``: the student functions the part grades (`GradedFunction`):
  their float64 reference, their parameter names, the axes shrinking may cut,
  and the executable models of the mistakes a student might make in them;
- ``ALSO_CALLS`` (optional): functions of other parts that its checks call
  too (the device part calls nearly all of them);
- ``MISTAKES``: the misconceptions whose home is this part (`Mistake`): the
  part that charges them, with the explanation, the hint and the honest
  one-bug answer cell that refunds elsewhere are measured against.

The hidden checks of the part are ``course/checks/test_<part>.py`` (their
``@points`` add up to the part's points).  The docs' guide
(``docs/contributing/extending.md``) walks through adding a mistake.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Optional

# {code: [callable producing the buggy output]}: what a student with each misconception computes.
Variants = dict[str, list[Callable]]


@dataclass(frozen=True)
class GradedFunction:
    """A function the student writes and the checks call, as the engine needs to know it."""

    name: str
    parameters: tuple[str, ...]  # how a failing example names the arguments
    # Per positional argument, the names of its trailing axes that shrinking may cut (None: not a tensor
    # to shrink); two arguments' axes of the same name are cut together.
    axes: tuple[Optional[tuple[str, ...]], ...] = ()
    reference: Optional[Callable] = None  # the float64 reference tolerances are derived from
    equivalents: tuple[Callable, ...] = ()  # other correct formulations, whose rounding a result may have
    # The codes `variants` may produce (each one is a mistake of some part; a test holds them to what
    # the variants really reproduce on representative inputs).
    models: tuple[str, ...] = ()
    # (args, kwargs) -> Variants: the mistakes' outputs on the same inputs, computed in the trusted process.
    variants: Optional[Callable[[list, dict], Variants]] = None
    # (args, kwargs, the student's output) -> Variants: models whose constant is read from that output.
    fitted: Optional[Callable[[list, dict, object], Variants]] = None
    # It computes attention: a built-in it reaches through an API the static scan cannot tell apart is charged
    # as built-in attention (sdpa-builtin), not as a built-in softmax.
    computes_attention: bool = False
    # (args, the shape of the student's wrong-shaped output) -> codes that shape alone shows.
    shape_codes: Optional[Callable[[list, Sequence], list[str]]] = None
    # A composite: the helpers it is made of, in order, each with its arguments built from the composite's
    # inputs and the earlier helpers' outputs (a dict keyed by parameter and helper name).  Charging each
    # mistake once composes the student's own helpers this way (``autograder.grading.composition``).
    helpers: tuple[tuple[str, Callable[[dict], tuple]], ...] = ()


@dataclass(frozen=True)
class Honest:
    """What an honest holder of a misconception writes in one answer cell: the mistake, and no other."""

    cell: str  # the answer cell's grade_id
    source: str
    also: tuple[str, ...] = ()  # other codes its evidence fairly supports (the one-bug sample may show them)


@dataclass(frozen=True)
class Mistake:
    """A misconception whose home is the module's part.

    `composite_credit`: a composite part (attention, the device checks) that
    fails only because of this mistake in a helper keeps its points; the home
    part charges it once.  `honest` is required for that: the refund is
    measured against what the honest holder loses in the home part.  A mistake
    a check observes directly (a built-in call, an edited input) may have no
    model; its one-bug sample is then written by hand in the demo class
    (`sample` names it).
    """

    code: str
    explanation: str  # Chinese, wrapped in N_() so the catalogs carry it
    hint: str
    composite_credit: bool = False
    honest: Optional[Honest] = None
    sample: str = ""  # the demo class's one-bug sample; "" means "bug-<code>"
