"""``c.Autograde.exporter_class``: stock ``nbgrader autograde`` (and formgrader's Autograde button) applies the
notebook rules of ``notebook/submission.py`` before nbconvert reads a submitted notebook.

nbconvert parses and validates a notebook, and each step copies it, before the first preprocessor runs: a rule
checked there (``restore.py``) comes after the memory is spent.  nbgrader's ``pre_convert_hook`` cannot refuse (it
logs a hook's exception and goes on), so the check sits where the file is opened.  A refusal fails that student
only, with one line (``_RefusalInOneLine``), as in ``sdpa-course``.
"""
from __future__ import annotations

import os

from nbconvert.exporters import NotebookExporter

from ..notebook.submission import check_notebook


class SubmissionCheckingExporter(NotebookExporter):
    def from_filename(self, filename, resources=None, **kw):
        root = getattr(getattr(self.parent, "coursedir", None), "root", None) or os.getcwd()
        check_notebook(filename, os.path.relpath(filename, root))
        return super().from_filename(filename, resources=resources, **kw)
