"""`TrustedScoring`: each grade cell's score and feedback, decided in the grading process.

It runs the hidden checks (``autograder/grading``) against the session that
`SandboxedExecute` left open -- the student's functions run in the sandbox,
never here -- reads the student's own code for forbidden APIs, and writes
each grade cell's feedback and partial score, plus ``<notebook>.grading.json``
for reports.  It closes the runner when it is done.
"""
from __future__ import annotations

import html
import logging
import sys

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Float, Integer

from ..i18n import _, using
from ..notebook.cells import (
    VISIBLE_CHECK_ERRORS,
    grade_id,
    is_test_cell,
    nbgrader_meta,
    number,
    part_of,
    student_code_cells,
)
from ..notebook.editions import language_of, seed_assignment
from .state import EXECUTION, Shared

log = logging.getLogger(__name__)
# Notebook metadata key of the root-cause summary ({"text", "html"}) that the feedback page opens with.
SUMMARY_KEY = "sdpa_root_causes"
UNISOLATED_KEY = "sdpa_unisolated"  # the feedback page's banner: graded without the sandbox
HELD_BANNER_KEY = "sdpa_held"  # the feedback page's banner: points held until a person has read the code
# resources key: the grade_ids whose points wait for a person (`held_for_review.SaveAutoGradesWithHolds`).
HELD_KEY = "sdpa_held_for_review"


def _locate_events(nb, positions, events, info):
    """Turn the session's code-cell positions into notebook cells (once, after all runs) and log them.

    Events come from both steps: cell runs, and replays during the checks.
    """
    for event in events:
        if "cell" in event:
            event["cell"] = positions[event["cell"]]
            event["grade_id"] = grade_id(nb.cells[event["cell"]]) or ""
        log.warning("%s/%s: %s", info.get("student"), info.get("notebook"), event)


class TrustedScoring(NbGraderPreprocessor):
    """Score grade cells from the session's results; no student code runs here."""

    charge_each_mistake_once = Bool(True, help=(
        "Charge each mistake once, in the part where it lives: a part that fails only because of a helper's "
        "known misconception (scaled_dot_product_attention composed from the student's own helpers, the device "
        "and dtype checks) keeps its points, provided the helper's own part charged that misconception at least "
        "as much as it charges an honest holder of it (see autograder/grading/composition.py). False: strict "
        "end-to-end grading, every part compared with PyTorch alone.")).tag(config=True)
    reading_seconds = Float(30.0, help=(
        "Wall-clock seconds the grader may spend reading a submission's code (the static scan, IPython's "
        "rewriting, what the runners compiled at run time), in a child process: past them the reading stops and "
        "the notebook's points wait for a person (autograder/grading/reading_process.py).  An honest notebook "
        "takes well under a second.")).tag(config=True)
    reading_memory_mib = Integer(2048, help=(
        "Memory (MiB) that reading a submission's code may take, in its child process: past it, as past "
        "reading_seconds.")).tag(config=True)

    def preprocess(self, nb: nbformat.NotebookNode, resources: dict) -> tuple[nbformat.NotebookNode, dict]:
        # Every message of this notebook's feedback in its edition's language.
        with using(language_of(resources.get("nbgrader", {}).get("assignment"))):
            return self._preprocess(nb, resources)

    def _preprocess(self, nb: nbformat.NotebookNode, resources: dict) -> tuple[nbformat.NotebookNode, dict]:
        # The grading engine (torch, the checks) loads with the first notebook graded, not with every
        # nbgrader command that reads nbgrader_config.py (a student's fetch or submit, feedback, export).
        from ..grading import code_review, feedback, reading_process, record
        from ..grading.hidden_checks import run_checks

        state = Shared.get(resources, EXECUTION)
        if state is None:
            raise RuntimeError("TrustedScoring needs SandboxedExecute to run first (check nbgrader_config.py)")
        session = state.session
        info = resources["nbgrader"]
        try:
            parts = [p for p in (part_of(c) for c in nb.cells if is_test_cell(c)) if p]
            results = run_checks(session, parts, seed_key=(seed_assignment(info["assignment"]), info["student"]),
                                 context={"cuda": cuda_available(),
                                          "charge_once": self.charge_each_mistake_once})
        finally:
            state.close()
        # The student's own code, read by the trusted side in a child process within a budget: forbidden APIs
        # cost points whatever the runner reported, and what the runners compiled at run time and the notebook
        # does not show is read with the same scan.
        cells = student_code_cells(nb)
        sources = [nb.cells[i].source for i in cells]
        reading = reading_process.read(
            reading_process.CodeToRead(sources, cells, list(session.cells), list(state.positions), session.compiled),
            self.reading_seconds, self.reading_memory_mib)
        code_review.charge_forbidden(results, reading.forbidden, cells)
        # A helper's difference no known misconception explains is left to a person too.
        review = reading.notes + feedback.unexplained_notes(
            results, lambda request: reading_process.cell_of(request, state.positions, cells, sources))
        held = code_review.held_parts(results, review)
        _locate_events(nb, state.positions, session.events, info)
        for note in review:
            where = number(note["cell"]) if isinstance(note.get("cell"), int) else note.get("cell")
            log.warning("%s/%s needs review (cell %s, %s%s): %s", info.get("student"), info.get("notebook"),
                        where, note.get("category"), "; its points are held" if note.get("holds") else "",
                        note.get("detail"))
        report = {"student": info["student"], "assignment": info["assignment"], "notebook": info["notebook"],
                  "sandbox": {"isolated": session.status.isolated, "mechanism": session.status.mechanism},
                  "events": session.events, "review": review, "seconds": session.elapsed(),
                  "limits": {"derived": bool(session.budget.cell_limits or session.budget.call_limits),
                             "retried": session.retries,
                             "charged_without_retry": session.charged_without_retry}, "cells": []}
        # Limits hit and code to review: reported once, at the first grade cell.
        events = session.events + [dict(note, kind="NeedsReview") for note in review]
        holding = [note for note in review if note["holds"]]
        for cell in nb.cells:
            if is_test_cell(cell):
                report["cells"].append(self._score_cell(cell, results, events, holding if part_of(cell) in held
                                                        else ()))
                events = ()
        report["held"] = [c["grade_id"] for c in report["cells"] if c.get("held")]
        resources[HELD_KEY] = list(report["held"])
        report["root_causes"] = self._summarise(nb, results, parts)
        nb.metadata.pop(HELD_BANNER_KEY, None)
        if report["held"]:
            nb.metadata[HELD_BANNER_KEY] = _(
                "评分程序读不懂你代码里的 {lines}：各部分的分数由助教读过这些代码后给出"
                "（隐藏检查共给出 {points} 分），不是自动计入。").format(
                    lines=feedback.flagged_lines(holding), points=f"{sum(record.held_points(report).values()):g}")
        nb.metadata.pop(UNISOLATED_KEY, None)
        if not session.status.isolated:  # the instructor allowed it (`allow_unisolated`): the page says so
            banner = _("评分时学生代码没有在沙箱中运行（没有文件系统和网络隔离）：{reason}")
            nb.metadata[UNISOLATED_KEY] = banner.format(reason=session.status.reason)
        resources.setdefault("outputs", {})[record.filename(info["notebook"])] = record.dumps(report)
        from . import autograde_command

        if autograde_command():  # stock `nbgrader autograde`: one line per student as each is done
            print(f"nbgrader autograde: {record.summary_line(report)}", file=sys.stderr, flush=True)
        return nb, resources

    def _summarise(self, nb, results, parts):
        """The "先修这里" summary, kept in the notebook's metadata: the feedback page shows it first."""
        from ..grading import feedback, root_causes

        causes = root_causes.root_causes(results, parts)
        nb.metadata.pop(SUMMARY_KEY, None)
        if causes:
            cells = {part_of(c): grade_id(c) or part_of(c) for c in nb.cells if is_test_cell(c)}
            labels = {p: _("{part}（{grade_id}）").format(part=p, grade_id=g) if g != p else p
                      for p, g in cells.items()}
            nb.metadata[SUMMARY_KEY] = {"text": root_causes.render_text(causes, labels),
                                        "html": feedback.STYLE + root_causes.render_html(causes, labels, cells)}
        return causes

    def _score_cell(self, cell, results, events, holding=()):
        """The cell's feedback and score; with `holding` (the notes that hold the notebook), the score its
        checks gave is shown and nothing is counted: nbgrader reads 0, and the gradebook leaves the grade to
        a person (`SaveAutoGradesWithHolds`)."""
        from ..grading import record
        from ..grading.feedback import render_html, render_text

        meta = nbgrader_meta(cell)
        max_points = float(meta.get("points", 0))
        part = part_of(cell)
        result = results.get(part)
        held = None
        if result is None or not result.checks or result.max_points <= 0:
            earned = 0.0
            head = [_display(_("这个检查单元格没有对应的隐藏检查（{part}），请联系助教。").format(part=part), None)]
        else:
            earned = round(max_points * result.points / result.max_points, 4)
            if holding and earned > 0:
                held, earned = earned, 0.0
                events = [{"kind": "Held", "points": held, "notes": list(holding)}, *events]
            label = grade_id(cell) or part
            head = [_display(render_text(label, result, max_points, earned, events),
                             render_html(label, result, max_points, earned, events))]
        full = max_points > 0 and (held if held is not None else earned) >= max_points
        visible = [_as_plain(o, full) for o in cell.get("outputs", [])]
        shown = _("本单元格得分：{earned} / {points}").format(earned=f"{earned:g}", points=f"{max_points:g}")
        if held is not None:
            shown = _("本单元格得分：待助教复核（隐藏检查给出 {held} / {points}，复核前计 0 分）").format(
                held=f"{held:g}", points=f"{max_points:g}")
        cell.outputs = head + [nbformat.from_dict({"output_type": "execute_result", "execution_count": cell.get(
            "execution_count"), "metadata": {}, "data": {
                "text/plain": repr(earned),  # what nbgrader reads as this cell's partial credit
                "text/html": "<b>" + html.escape(shown) + "</b>"}})] + visible
        return record.cell_entry(grade_id(cell), part, earned, max_points, held, result.checks if result else [])


def _display(text, html):
    data = {"text/plain": text}
    if html:
        data["text/html"] = html
    return nbformat.from_dict({"output_type": "display_data", "metadata": {}, "data": data})


def _as_plain(output, full=False):
    """Visible-check output, shown to the student but never read as a grade.  Beside a part with full marks,
    a visible check that stopped is said to have stopped at something the hidden checks charge elsewhere."""
    kind = output.get("output_type")
    if kind == "error":
        said = _("可见检查停在了别处的问题上（这一部分的隐藏检查满分）— {error}") if full \
            else _("可见检查未通过 — {error}")
        ename, evalue = output.get("ename"), output.get("evalue")
        # the lesson's own check errors speak to the student in their message; their class names are code
        error = evalue if ename in VISIBLE_CHECK_ERRORS else f"{ename}: {evalue}"
        text = said.format(error=error) + "\n"
    elif kind == "stream":
        text = output.get("text", "")
    else:
        return nbformat.from_dict({"output_type": "display_data", "metadata": {},
                                   "data": dict(output.get("data", {}))})
    return nbformat.from_dict({"output_type": "stream", "name": "stdout", "text": text})


def cuda_available():
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        return False


