"""What an honest holder of each misconception writes: the mistake, and no other.

Charge-once refunds a part whose failure a misconception of another part
explains (``composition``, or a known mistake's output in the device part).
The refund is sound only if the home part charged that misconception at least
as much as it charges a student who really holds it: these answer cells,
graded by the same checks on the same seed, are what a refund is measured against
(``hidden_checks.honest_failures``).  The demo class's one-bug samples are these
cells too, so what the catalogue shows is what a refund is measured against.
"""
from course import MISTAKES

# code -> (answer cell grade_id, its source with that one mistake), as the course declares them
SOURCES = {code: (m.honest.cell, m.honest.source) for code, (_home, m) in MISTAKES.items() if m.honest}
# code -> other codes the honest cell's evidence fairly supports (scaled twice: divided by d_k as well)
ALSO = {code: m.honest.also for code, (_home, m) in MISTAKES.items() if m.honest}


def replacement(code: str) -> dict:
    """{grade_id: source} of the honest answer cell for `code` (a demo sample's `replace`)."""
    grade_id, source = SOURCES[code]
    return {grade_id: source}
