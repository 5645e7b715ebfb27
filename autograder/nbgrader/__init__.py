"""The nbgrader side: the steps that make `nbgrader autograde` trusted and sandboxed.

`configure` (called from ``nbgrader_config.py``) declares the pipelines as
data, so the stock commands -- and formgrader's Autograde button -- use:

- `RestoreNotebookStructure` (``restore.py``, first sanitize step): the
  submission rebuilt on the source notebook, the student's answers only;
- `SandboxedExecute` (``execute.py``, replaces nbgrader's Execute): code
  cells run in a sandboxed runner process, no kernel in the course directory;
- `TrustedScoring` (``trusted_scoring.py``): the hidden checks run in this
  process, which runs no student code, and score each grade cell;
- `SaveAutoGradesWithHolds` (``held_for_review.py``, replaces SaveAutoGrades):
  a part held for review gets no automatic score and needs a person;
- `CompiledCheckCellMetadata` (``metadata.py``, replaces CheckCellMetadata):
  the same verdicts, with the metadata schema compiled once, not per cell.

``cells.py`` is the one home of nbgrader cell metadata; ``state.py`` is what
the two grading steps share for one notebook.
"""
from __future__ import annotations

import functools
import importlib
import logging
import os
import re
from typing import Any

__all__ = ["RestoreNotebookStructure", "SandboxedExecute", "TrustedScoring", "configure", "pipelines"]
_STEPS = {"RestoreNotebookStructure": "restore", "SandboxedExecute": "execute", "TrustedScoring": "trusted_scoring"}


def __getattr__(name: str) -> type:
    """The steps load on first use, so `cells` can be imported without nbgrader and torch."""
    if name in _STEPS:
        return getattr(importlib.import_module(f".{_STEPS[name]}", __name__), name)
    raise AttributeError(name)


def pipelines() -> dict[str, list[type]]:
    """{config trait: [preprocessor classes]}: our steps in nbgrader's default order."""
    from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
    from nbgrader.preprocessors import (
        AssignLatePenalties,
        ClearOutput,
        DeduplicateIds,
        IgnorePattern,
        LimitOutput,
        OverwriteKernelspec,
    )

    from .awaiting_grades import GetGradesShowingAwaiting
    from .execute import SandboxedExecute
    from .feedback_page import ClearHiddenChecks
    from .held_for_review import SaveAutoGradesWithHolds
    from .metadata import CompiledCheckCellMetadata
    from .overwrite_cells import OverwriteGradedCells
    from .restore import RestoreNotebookStructure
    from .trusted_scoring import TrustedScoring

    return {
        "Autograde.sanitize_preprocessors": [RestoreNotebookStructure, ClearOutput, DeduplicateIds,
                                             OverwriteKernelspec, OverwriteGradedCells, CompiledCheckCellMetadata],
        # SandboxedExecute leaves the runner open for TrustedScoring, which must follow it.
        "Autograde.autograde_preprocessors": [SandboxedExecute, TrustedScoring, IgnorePattern,
                                              ClearMetadataPreprocessor, LimitOutput, SaveAutoGradesWithHolds,
                                              AssignLatePenalties, CompiledCheckCellMetadata],
        # Feedback shows the student's notebook, never the hidden-check regions; a grade a person has yet to
        # give reads "awaiting your instructor's grade", not 0.
        "GenerateFeedback.preprocessors": [GetGradesShowingAwaiting, ClearHiddenChecks, CSSHTMLHeaderPreprocessor],
    }


def configure(c: Any) -> None:
    """Install `pipelines` and the inert markdown filters into an nbgrader config object `c`."""
    grading = autograde_command()
    if grading:
        _refuse_without_sandbox(c)
        _regrade_unfinished(c)
        # `nbgrader autograde` will grade: its zygote starts now, before `pipelines` imports torch and the
        # checks, and warms up (seconds of CPU, in its own sandbox) while nbgrader goes on importing and
        # reading the course.  Default runner settings; a course configured otherwise gets a new zygote at
        # its first runner.  Formgrader's Jupyter server starts its zygote at the first Autograde instead
        # (``sandbox/shared_zygote.py``).
        from ..sandbox import shared_zygote

        shared_zygote.start_early()
    for trait, steps in pipelines().items():
        section, name = trait.split(".")
        setattr(c[section], name, list(steps))
    # the notebook rules (size, a folder's name, JSON structure) before nbconvert reads a submission
    c.Autograde.exporter_class = "autograder.nbgrader.submission_exporter.SubmissionCheckingExporter"
    # collect takes from the shared inbox only real folders of the student they name, without following links
    c.ExchangeFactory.collect = "autograder.nbgrader.safe_collect.SafeCollect"
    _quiet_gradebook_warnings()
    _refusals_in_one_line()
    # nbconvert validates the whole notebook after each of the ~14 steps of a pipeline (about a tenth of a
    # second per submission); once, after the last, still refuses a notebook that any step left invalid
    # before it is written.  nbconvert's own option.
    c.Exporter.optimistic_validation = True
    # Markdown made inert wherever nbconvert renders it for the instructor: formgrader's grading view uses
    # a plain HTMLExporter, and a student's answer or added cell may hold a <script> (the feedback
    # page's exporter has these filters of its own).
    from .inert_markdown import FILTERS

    c.HTMLExporter.filters = {name: f"{f.__module__}.{f.__qualname__}" for name, f in FILTERS.items()}
    if grading:
        from .warm import before_first_grading

        before_first_grading()  # while the zygote warms up, what the first submission would import on its way
        from ..grading import reading_process

        reading_process.start()  # the process that reads each submission's code, warming up beside it


def _regrade_unfinished(c: Any) -> None:
    """`nbgrader autograde` skips a student whose autograded folder exists; a run killed while grading one
    leaves a folder without its notebook or grading record, and that student would keep 0.  Such a folder
    (``record.unfinished``) is removed first, with one line, so this run grades the student again."""
    import glob
    import shutil
    import sys

    from ..grading import record

    directories = c.CourseDirectory
    root = directories.get("root") or os.getcwd()
    autograded = os.path.join(root, directories.get("autograded_directory", "autograded"))
    submitted = os.path.join(root, directories.get("submitted_directory", "submitted"))
    for dest in sorted(glob.glob(os.path.join(glob.escape(autograded), "*", "*"))):
        student, assignment = dest.split(os.sep)[-2:]
        if record.unfinished(dest, os.path.join(submitted, student, assignment)):
            shutil.rmtree(dest, ignore_errors=True)
            print(f"nbgrader autograde: {os.path.relpath(dest, root)} was left unfinished by an interrupted run; "
                  "grading it again", file=sys.stderr)


class _RefusalInOneLine(logging.Filter):
    """nbgrader logs the whole traceback of any error while grading a student; for a submission the course
    refuses (``SubmissionRefused``: too large, the other edition's notebook, ...) the last line, the rule and
    what to do, is all an instructor needs."""

    PATTERN = re.compile(r"Traceback \(most recent call last\):.*\n[\w.]*(?:SubmissionRefused|MisplacedEdition): "
                         r"(?P<said>[^\n]*)\s*$", re.DOTALL)

    def filter(self, record: logging.LogRecord) -> bool:
        found = self.PATTERN.match(record.getMessage()) if record.levelno >= logging.ERROR else None
        if found:
            record.msg, record.args = f"Refused: {found['said']}", ()
        return True


def _refusals_in_one_line() -> None:
    for app in ("AutogradeApp", "NbGraderAPI"):
        logger = logging.getLogger(app)
        if not any(isinstance(f, _RefusalInOneLine) for f in logger.filters):
            logger.addFilter(_RefusalInOneLine())


def _quiet_gradebook_warnings() -> None:
    """nbgrader's gradebook, on SQLAlchemy 2, warns three times per student that an object "not in session"
    will not be added through a relationship (nbgrader adds it itself, explicitly): noise an instructor
    cannot act on, printed above every student's grading.  Only those warnings are silenced."""
    import warnings

    try:
        from sqlalchemy.exc import SAWarning
    except ImportError:
        return
    warnings.filterwarnings("ignore", message=r"Object of type <\w+> not in session, add operation along",
                            category=SAWarning)


def _refuse_without_sandbox(c: Any) -> None:
    """`nbgrader autograde` where the sandbox cannot start: one line and exit status 2 before any student is
    touched, unless `c.SandboxedExecute.allow_unisolated` is set (in this file, before `configure(c)`, or on
    the command line).  SandboxedExecute refuses again for every other path (formgrader's button)."""
    import sys

    from ..sandbox import isolation

    allowed = bool(c.SandboxedExecute.get("allow_unisolated", False)) or any(
        arg.lower() in ("--sandboxedexecute.allow_unisolated=true", "--sandboxedexecute.allow_unisolated")
        for arg in sys.argv)
    try:
        isolation.require(allowed, _say_once)
    except isolation.IsolationRefused as exc:
        print(f"nbgrader autograde: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


@functools.cache
def _say_once(line: str) -> None:
    """nbgrader reads nbgrader_config.py (and so calls `configure`) more than once per command."""
    import sys

    print(f"nbgrader autograde: {line}", file=sys.stderr)


def autograde_command() -> bool:
    """Whether this process is the `nbgrader autograde` command (``nbgrader autograde ...`` or
    ``python -m nbgrader autograde ...``)."""
    import sys

    if len(sys.argv) < 2 or sys.argv[1] != "autograde":
        return False
    program = os.path.normpath(sys.argv[0])
    return os.path.basename(program) == "nbgrader" or program.endswith(os.path.join("nbgrader", "__main__.py"))
