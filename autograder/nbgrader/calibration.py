"""Time limits from what the reference solution takes on the machine that grades.

Once per machine, course version and torch version (``calibration_file.py``
keeps the result in the course directory for every later process), the
instructor's source notebook -- the solution -- runs exactly as a submission
would: same sandbox, same runner source, then its hidden checks.  Each code
cell's wall time and each checked function's longest call are kept
(`ReferenceTimes`).  Student code then gets `limits` of them: a generous
multiple, never below a floor and never above the fixed ceilings (the old
timeouts).  Setup cells (imports, before the first answer) keep the ceiling:
their time depends on whether the runner was forked warm or started cold,
not on the student's code.

Measured times never appear in a notebook: feedback states the rule
(``Budget.cell_rule``), so stock and parallel grading write the same notebook.

The same run also keeps the outputs of the provided cells before the first
answer (`known_outputs`): a submission whose code starts with exactly those
cells runs them without drawing their figures, and shows the reference's
outputs when what it printed is the reference's text.
"""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Optional

from nbformat import NotebookNode

from ..notebook.cells import code_cells, display_cells, grade_id, is_answer_cell, is_test_cell, part_of
from ..sandbox.session import Budget, StudentSession
from .calibration_file import ReferenceTimes

if TYPE_CHECKING:
    from .calibration_file import Store

log = logging.getLogger(__name__)


class CalibrationError(Exception):
    """The reference solution did not run cleanly, so its times would mislead."""


def cell_key(cell: NotebookNode) -> str:
    """How a submission's cell finds the reference's: by grade_id, an unnamed cell by its source."""
    return grade_id(cell) or "source:" + hashlib.sha256(cell.get("source", "").encode()).hexdigest()[:16]


def measure(source: NotebookNode,
            open_session: Callable[[list[str], list[int], tuple[set[int], set[int]]], StudentSession]
            ) -> ReferenceTimes:
    """Run the source notebook and its hidden checks in a session from
    `open_session(sources, display, roles)` (`roles`: ``code_review.cell_roles``)."""
    from ..grading.code_review import cell_roles
    from ..grading.hidden_checks import run_checks
    from .trusted_scoring import cuda_available

    started = time.monotonic()
    positions, sources = code_cells(source)
    roles = cell_roles(source, positions, sources)
    with open_session(sources, display_cells(source, positions), roles) as session:
        outputs = session.run_notebook()
        if session.events or session.retries:
            raise CalibrationError(f"the reference solution hit a limit or crashed: {session.events[:3]}")
        parts = [p for p in (part_of(c) for c in source.cells if is_test_cell(c)) if p]
        results = run_checks(session, parts, seed_key=("calibration", "reference"),
                             context={"cuda": cuda_available(), "charge_once": False})
        failed = [c.name for r in results.values() for c in r.checks if not c.passed]
        if failed or session.events:
            raise CalibrationError(f"the reference solution fails hidden checks: {failed[:5]} {session.events[:3]}")
        cells = {cell_key(source.cells[positions[pos]]): seconds for pos, seconds in session.cell_seconds.items()}
        prefix = tuple((sources[pos], outputs[pos]) for pos in range(_first_answer(source, positions)))
        return ReferenceTimes(cells, dict(session.call_seconds), round(time.monotonic() - started, 3), prefix)


def _first_answer(nb: NotebookNode, positions: list[int]) -> int:
    """How many code cells come before the first answer cell (all of them if there is none)."""
    return next((pos for pos, index in enumerate(positions) if is_answer_cell(nb.cells[index])), len(positions))


def known_outputs(reference: ReferenceTimes, nb: NotebookNode, positions: list[int],
                  sources: list[str]) -> dict[int, list]:
    """{position: the reference's outputs} for a submission whose code cells before its first answer are
    exactly the reference's (same sources, same order, none added); {} otherwise."""
    count = _first_answer(nb, positions)
    if not reference.prefix or count != len(reference.prefix):
        return {}
    if any(sources[pos] != known for pos, (known, _) in enumerate(reference.prefix)):
        return {}
    return {pos: outputs for pos, (_, outputs) in enumerate(reference.prefix)}


def limits(reference: ReferenceTimes, nb: NotebookNode, positions: list[int], display: set[int],
           base: Budget) -> Budget:
    """`base` with a limit per cell and per checked function: `base.multiple` x the reference, within
    [`base.cell_floor` or `base.floor`, the fixed timeout].

    A cell the reference does not have (one the student added) gets the largest non-setup limit.
    """
    def clamp(seconds, ceiling, floor=base.floor):
        return min(max(base.multiple * seconds, floor), ceiling)

    first_answer = next((i for i in positions if is_answer_cell(nb.cells[i])), None)
    if first_answer is None:
        return base
    graded = [(pos, index) for pos, index in enumerate(positions) if index >= first_answer]
    known = {cell_key(nb.cells[index]) for _, index in graded} & reference.cells.keys()
    largest = max((reference.cells[k] for k in known), default=base.cell_timeout)
    cells = {}
    for pos, index in graded:
        ceiling = base.display_cell_timeout if pos in display else base.cell_timeout
        cells[pos] = clamp(reference.cells.get(cell_key(nb.cells[index]), largest), ceiling, base.cell_floor)
    calls = {fn: clamp(seconds, base.call_timeout) for fn, seconds in reference.calls.items()}
    return dataclasses.replace(base, cell_limits=cells, call_limits=calls)


_MEASURED: dict[str, object] = {}  # source digest -> ReferenceTimes, or why there are none (text)


def reference_times(source: NotebookNode,
                    open_session: Callable[[list[str], list[int], tuple[set[int], set[int]]], StudentSession],
                    store: Optional[Store] = None, again: bool = False) -> ReferenceTimes | None:
    """The measurement of `source` for this process; None if the reference did not run cleanly.

    Made once per process.  With a `store` (``calibration_file.py``), the kept measurement is reused when
    it matches this machine, course and torch (`again`: only one made after this call began, so that
    processes asked to measure again at once still share one measurement); otherwise this process
    measures under the store's lock and keeps the result for the next ones.
    """
    digest = hashlib.sha256("\x00".join(c.source for c in source.cells if c.cell_type == "code").encode()).hexdigest()
    if digest not in _MEASURED:
        _MEASURED[digest] = _kept_or_measured(source, open_session, store, again)
    found = _MEASURED[digest]
    return found if isinstance(found, ReferenceTimes) else None


def _kept_or_measured(source, open_session, store, again):
    if store is None:
        return _measured(source, open_session)
    from .calibration_file import key

    asked, wanted = time.time(), key(source)
    found = None if again else store.load(wanted)
    if found is not None:
        return found
    with store.locked() as held:
        found = store.load(wanted, newer_than=asked if again else None)  # another process's, made meanwhile
        if found is None:
            found = _measured(source, open_session)
            if held and isinstance(found, ReferenceTimes):
                store.save(wanted, found)
    return found


def _measured(source, open_session):
    try:
        found = measure(source, open_session)
        log.info("reference solution timed in %.1f s", found.seconds)
        return found
    except CalibrationError as exc:  # kept as text: a traceback would pin the frames it passed
        log.warning("time limits stay fixed (SandboxedExecute.cell_timeout/call_timeout): %s", str(exc))
        return str(exc)


def forget() -> None:
    """Measure again at the next notebook (tests; a worker that moved to another machine)."""
    _MEASURED.clear()

