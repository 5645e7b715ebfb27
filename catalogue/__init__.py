"""The whole sample catalogue: the demo's submissions plus attacks on the grader.

Every entry goes through the real nbgrader pipeline in ``tests/test_pipeline.py``
and ``python -m catalogue``.  The demo's correct variants and bugs live in the
package (`autograder.demo.submissions`, which also defines `Sample` and what
`expect` means); the attacks (``attacks.py``, ``charging.py`` on charge-once) and the evidence and bounds
samples (``evidence.py``) live here, beside the tests and benchmarks that
use them, and their payloads are importable as ``catalogue.attacks.X`` and
``catalogue.evidence.X``.
"""
import nbformat

from autograder.demo.submissions import BUGS, CORRECT, EMPTY, MARKER, ROOT, SOLUTION_NOTEBOOK, Sample, build, verdict
from autograder.notebook.cells import is_test_cell, nbgrader_meta

from .attacks import ATTACKS
from .charging import CHARGING
from .evidence import EVIDENCE
from .handles import HANDLES, UNREADABLE
from .recording import RECORDING

__all__ = ["ATTACKS", "BUGS", "CATALOGUE", "CHARGING", "CORRECT", "EMPTY", "EVIDENCE", "HANDLES", "MARKER",
           "RECORDING", "ROOT", "UNREADABLE", "SOLUTION_NOTEBOOK", "Sample", "automatic_cells", "build", "verdict"]

CATALOGUE = CORRECT + BUGS + ATTACKS + CHARGING + EVIDENCE + RECORDING + HANDLES + UNREADABLE + EMPTY


def automatic_cells():
    """(count, points) of the source notebook's autograded test cells: what full automatic marks are."""
    nb = nbformat.read(str(ROOT / "source" / "sdpa" / "sdpa.ipynb"), as_version=4)
    points = [float(nbgrader_meta(cell).get("points", 0)) for cell in nb.cells if is_test_cell(cell)]
    return len(points), sum(points)
