"""The whole sample catalogue: the demo's submissions plus attacks on the grader.

Every entry goes through the real nbgrader pipeline in ``tests/test_pipeline.py``
and ``python -m catalogue``.  The demo's correct variants and bugs live in the
package (`autograder.demo.submissions`, which also defines `Sample` and what
`expect` means); the attacks (``attacks.py``, ``charging.py`` on charge-once) and the evidence and bounds
samples (``evidence.py``) live here, beside the tests and benchmarks that
use them, and their payloads are importable as ``catalogue.attacks.X`` and
``catalogue.evidence.X``.
"""
from autograder.demo.submissions import BUGS, CORRECT, EMPTY, MARKER, ROOT, SOLUTION_NOTEBOOK, Sample, build, verdict

from .attacks import ATTACKS
from .charging import CHARGING
from .evidence import EVIDENCE
from .handles import HANDLES, UNREADABLE
from .recording import RECORDING

__all__ = ["ATTACKS", "BUGS", "CATALOGUE", "CHARGING", "CORRECT", "EMPTY", "EVIDENCE", "HANDLES", "MARKER",
           "RECORDING", "ROOT", "UNREADABLE", "SOLUTION_NOTEBOOK", "Sample", "build", "verdict"]

CATALOGUE = CORRECT + BUGS + ATTACKS + CHARGING + EVIDENCE + RECORDING + HANDLES + UNREADABLE + EMPTY

