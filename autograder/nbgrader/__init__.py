"""nbgrader preprocessors that make `nbgrader autograde` trusted and sandboxed.

Configured in ``nbgrader_config.py`` through `configure`, so the stock
command uses them:

- `RestoreNotebookStructure` (first sanitize step): rebuilds the submission
  from the released notebook, taking only the student's answer cells (by
  grade_id) and the cells they added.  Deleted, renamed, blanked or re-typed
  test cells come back; edited points and metadata are discarded.
- `SandboxedExecute` (replaces nbgrader's Execute): runs the code cells in a
  sandboxed runner process (no kernel in the course directory).
- `TrustedScoring`: runs the hidden checks in this process, which has run no
  student code, and writes each grade cell's feedback and partial score.
"""
import copy
import json
import logging
import re
from pathlib import Path

import nbformat
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Float, Integer

from . import code_review, sandbox
from .feedback import render_html, render_text
from .scoring import run_checks
from .session import Budget, StudentSession

log = logging.getLogger(__name__)

HIDDEN_RE = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", re.S)
PART_RE = re.compile(r"run_hidden_checks\(\s*['\"]([a-z_]+)['\"]\s*\)")
STATE = "sdpa_grading"  # key of our per-notebook state in nbconvert resources


def _nbgrader(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def is_answer_cell(cell):
    return bool(_nbgrader(cell).get("solution"))


def is_test_cell(cell):
    meta = _nbgrader(cell)
    return bool(meta.get("grade")) and not meta.get("solution") and cell.get("cell_type") == "code"


def student_code_cells(nb):
    """Indices of the code cells the student wrote: answer cells and cells they added."""
    return [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
            and (is_answer_cell(cell) or not _nbgrader(cell).get("grade_id"))]


def part_of(cell):
    match = PART_RE.search(cell.get("source", ""))
    return match.group(1) if match else None


class RestoreNotebookStructure(NbGraderPreprocessor):
    """Rebuild the submission on the source notebook's skeleton, keeping only the answers."""

    def preprocess(self, nb, resources):
        source = self._notebook(resources, "source_directory")
        stubs = {_nbgrader(c).get("grade_id"): c for c in self._notebook(resources, "release_directory").cells}
        student_cells = {}
        extras_after = {None: []}  # grade_id of the previous known cell -> added cells
        known = {_nbgrader(c).get("grade_id") for c in source.cells}
        previous = None
        for cell in nb.cells:
            grade_id = _nbgrader(cell).get("grade_id")
            if grade_id in known and grade_id not in student_cells:
                student_cells[grade_id] = cell
                previous = grade_id
            else:  # an added cell, or a copy of a known one: keep it as plain student code
                plain = copy.deepcopy(cell)
                plain.get("metadata", {}).pop("nbgrader", None)
                extras_after.setdefault(previous, []).append(plain)
        cells = list(extras_after[None])
        for cell in source.cells:
            grade_id = _nbgrader(cell).get("grade_id")
            if is_answer_cell(cell):  # the student's answer, or the released stub if they deleted it
                rebuilt = copy.deepcopy(stubs[grade_id])
                if grade_id in student_cells:
                    rebuilt.source = student_cells[grade_id].get("source", "")
            else:  # everything else exactly as the instructor wrote it
                rebuilt = copy.deepcopy(cell)
            cells.append(rebuilt)
            cells.extend(extras_after.get(grade_id, []))
        nb.cells = cells
        return nb, resources

    def _notebook(self, resources, step):
        coursedir = CourseDirectory(parent=self)
        info = resources["nbgrader"]
        path = Path(coursedir.format_path(getattr(coursedir, step), ".", info["assignment"])) / (
            info["notebook"] + ".ipynb")
        if not path.exists():
            raise FileNotFoundError(f"notebook {path} is missing: run `nbgrader generate_assignment "
                                    f"{info['assignment']}` (or `make release`) first")
        return nbformat.read(str(path), as_version=4)


class SandboxedExecute(NbGraderPreprocessor):
    """Execute the code cells in the sandboxed runner instead of a kernel."""

    cell_timeout = Float(30.0, help="Seconds one cell may run.").tag(config=True)
    display_cell_timeout = Float(5.0, help="Seconds a provided cell that only shows output (visible checks, "
                                           "plots, demos) may run; it never scores.").tag(config=True)
    call_timeout = Float(10.0, help="Seconds one call of a student function may run.").tag(config=True)
    total_seconds = Float(240.0, help="Time budget of one submission (cells and checks).").tag(config=True)
    memory_mb = Integer(6144, help="Address-space limit of the runner, MiB.").tag(config=True)
    require_isolation = Bool(False, help="Refuse to grade where no sandbox is available.").tag(config=True)

    def preprocess(self, nb, resources):
        positions = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
        sources = [HIDDEN_RE.sub("", nb.cells[i].source) for i in positions]
        limits = sandbox.Limits(memory_bytes=self.memory_mb * 2**20)
        budget = Budget(cell_timeout=self.cell_timeout, display_cell_timeout=self.display_cell_timeout,
                        call_timeout=self.call_timeout, total_seconds=self.total_seconds)
        session = StudentSession(sources, display_cells=_display_cells(nb, positions), budget=budget, limits=limits,
                                 require_isolation=self.require_isolation)
        resources[STATE] = {"session": session, "positions": positions}
        try:
            outputs = session.run_notebook()
        except BaseException:
            session.close()
            raise
        for pos, index in enumerate(positions):
            cell = nb.cells[index]
            cell.outputs = [nbformat.from_dict(o) for o in outputs.get(pos, [])]  # sanitised and capped by the session
            cell.execution_count = pos + 1
        return nb, resources


def _locate_events(nb, positions, events, info):
    """Turn the session's code-cell positions into notebook cells (once, after all runs) and log them.

    Events come from both steps: cell runs, and replays during the checks.
    """
    for event in events:
        if "cell" in event:
            event["cell"] = positions[event["cell"]]
            event["grade_id"] = _nbgrader(nb.cells[event["cell"]]).get("grade_id", "")
        log.warning("%s/%s: %s", info.get("student"), info.get("notebook"), event)


def _display_cells(nb, positions):
    """Positions of provided code cells after the first answer: they only show output.

    The setup cells before the first answer (imports) keep the long timeout.
    """
    first_answer = next((i for i in positions if is_answer_cell(nb.cells[i])), len(nb.cells))
    return [pos for pos, index in enumerate(positions)
            if index > first_answer and _nbgrader(nb.cells[index]).get("locked") and not is_answer_cell(nb.cells[index])]


class TrustedScoring(NbGraderPreprocessor):
    """Score grade cells from the session's results; no student code runs here."""

    def preprocess(self, nb, resources):
        state = resources.get(STATE) or {}
        session = state.get("session")
        if session is None:
            raise RuntimeError("TrustedScoring needs SandboxedExecute to run first (check nbgrader_config.py)")
        info = resources["nbgrader"]
        try:
            parts = [p for p in (part_of(c) for c in nb.cells if is_test_cell(c)) if p]
            results = run_checks(session, parts, seed_key=(info["assignment"], info["student"]),
                                 context={"cuda": _cuda_available()})
        finally:
            session.close()
        # The student's own code, read here: forbidden APIs cost points whatever the runner reported.
        cells = student_code_cells(nb)
        scan = code_review.review(nb.cells[i].source for i in cells)
        code_review.charge_forbidden(results, scan, cells)
        review = code_review.review_notes(scan, cells)
        _locate_events(nb, state["positions"], session.events, info)
        for note in review:
            log.warning("%s/%s needs review: %s", info.get("student"), info.get("notebook"), note)
        report = {"student": info["student"], "assignment": info["assignment"], "notebook": info["notebook"],
                  "sandbox": {"isolated": session.status.isolated, "mechanism": session.status.mechanism},
                  "events": session.events, "review": review, "seconds": session.elapsed(), "cells": []}
        # Limits hit and code to review: reported once, at the first grade cell.
        events = session.events + [dict(note, kind="NeedsReview") for note in review]
        for cell in nb.cells:
            if is_test_cell(cell):
                report["cells"].append(self._score_cell(cell, results, events))
                events = ()
        resources.setdefault("outputs", {})[f"{info['notebook']}.grading.json"] = json.dumps(
            report, ensure_ascii=False, indent=1).encode()
        return nb, resources

    def _score_cell(self, cell, results, events):
        meta = _nbgrader(cell)
        max_points = float(meta.get("points", 0))
        part = part_of(cell)
        result = results.get(part)
        if result is None or not result.checks or result.max_points <= 0:
            earned = 0.0
            head = [_display(f"这个检查单元格没有对应的隐藏检查（{part}），请联系助教。", None)]
        else:
            earned = round(max_points * result.points / result.max_points, 4)
            label = meta.get("grade_id", part)
            head = [_display(render_text(label, result, max_points, earned, events),
                             render_html(label, result, max_points, earned, events))]
        visible = [_as_plain(o) for o in cell.get("outputs", [])]
        cell.outputs = head + [nbformat.from_dict({"output_type": "execute_result", "execution_count": cell.get(
            "execution_count"), "metadata": {}, "data": {
                "text/plain": repr(earned),  # what nbgrader reads as this cell's partial credit
                "text/html": f"<b>本单元格得分：{earned:g} / {max_points:g}</b>"}})] + visible
        return {"grade_id": meta.get("grade_id"), "part": part, "points": earned, "max_points": max_points,
                "checks": [{"name": c.name, "passed": c.passed, "points": c.points, "max_points": c.max_points,
                            "codes": c.codes, "message": c.message} for c in (result.checks if result else [])]}


def _display(text, html):
    data = {"text/plain": text}
    if html:
        data["text/html"] = html
    return nbformat.from_dict({"output_type": "display_data", "metadata": {}, "data": data})


def _as_plain(output):
    """Visible-check output, shown to the student but never read as a grade."""
    kind = output.get("output_type")
    if kind == "error":
        text = f"可见检查未通过 — {output.get('ename')}: {output.get('evalue')}\n"
    elif kind == "stream":
        text = output.get("text", "")
    else:
        return nbformat.from_dict({"output_type": "display_data", "metadata": {},
                                   "data": dict(output.get("data", {}))})
    return nbformat.from_dict({"output_type": "stream", "name": "stdout", "text": text})


def _cuda_available():
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        return False


def configure(c):
    """Install our steps into nbgrader's Autograde pipeline (see module docstring)."""
    from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
    from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, ClearHiddenTests, ClearOutput,
                                        DeduplicateIds, GetGrades, IgnorePattern, LimitOutput, OverwriteCells,
                                        OverwriteKernelspec, SaveAutoGrades)

    c.Autograde.sanitize_preprocessors = [RestoreNotebookStructure, ClearOutput, DeduplicateIds,
                                          OverwriteKernelspec, OverwriteCells, CheckCellMetadata]
    c.Autograde.autograde_preprocessors = [SandboxedExecute, TrustedScoring, IgnorePattern,
                                           ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades,
                                           AssignLatePenalties, CheckCellMetadata]
    # Feedback shows the student's notebook, never the hidden-check regions.
    c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, CSSHTMLHeaderPreprocessor]
