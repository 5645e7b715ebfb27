"""nbgrader configuration of the attention course (this directory is the course root).

Grading differs from stock nbgrader in three configured steps (see
autograder/nbgrader/): the submitted notebook is rebuilt cell by cell
from the release, it is executed in a sandbox instead of a local kernel, and
grade cells are scored by hidden checks in this trusted process.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from autograder.nbgrader import configure  # noqa: E402

c = get_config()  # noqa: F821 - provided by traitlets when nbgrader loads this file

c.CourseDirectory.course_id = "sdpa-course"
c.CourseDirectory.release_directory = "assignments"

# A grading record (<notebook>.grading.json: check results, notes for review, sandbox events) is the
# instructor's: nbgrader copies a folder's other files on to the next step, so without this a student's own
# file of that name would travel into autograded/, and the grader's into the feedback students receive.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.grading.json"]
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
# Only `nbgrader validate` (the Validate button) runs a local kernel with this
# per-cell timeout. Grading limits are SandboxedExecute's traits (help texts in
# autograder/nbgrader/execute.py): by default 20x the reference solution's time on
# the grading machine, at least 2 s, at most e.g. c.SandboxedExecute.cell_timeout = 30,
# retried once before they count (docs/design/time-limits.md).
c.Execute.timeout = 60
# The exchange lives inside the course when one person runs everything; on a shared JupyterHub it
# is one directory for all users, given by SDPA_EXCHANGE_ROOT (hub/control.py sets it).  nbgrader
# loads this file after the user's own config, so a value set there alone would be overridden.
c.Exchange.root = os.environ.get("SDPA_EXCHANGE_ROOT") or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                       "exchange")
os.makedirs(c.Exchange.root, exist_ok=True)  # nbgrader (and formgrader) expect it to exist

# Student code runs only in the sandbox (bubblewrap): where it cannot start, grading refuses with one line
# that says why.  True grades there anyway, with no filesystem or network isolation, and every output, report
# and feedback page says so (docs/instructor/containers.md).  Set it here, before configure(c).
c.SandboxedExecute.allow_unisolated = False

configure(c)

# Feedback pages that work offline (LaTeX rendered to MathML, no MathJax CDN) and name each part
# in their summary; formgrader's "Generate Feedback" button uses this exporter too.
c.GenerateFeedback.exporter_class = "autograder.nbgrader.feedback_page.OfflineFeedbackExporter"

# `nbgrader export` writes one row per student, in the edition they submitted, with a column per part
# (nbgrader's own export lists every student under both editions, with a false 0 in the one not taken).
# `sdpa-course export --format canvas|moodle` writes the gradebook imports of those systems.
c.ExportApp.plugin_class = "autograder.export.CourseExportPlugin"
