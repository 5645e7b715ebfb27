"""Cell outputs from the runner, made safe to store: well-formed and capped.

The runner caps its own outputs, but it is the student's process: student
code can lift any cap it holds.  What goes into the autograded notebook is
therefore decided here, in the trusted process: only nbformat output types
made of strings, at most `CELL_CHARS` characters per cell and `NOTEBOOK_CHARS`
per notebook, with a visible note where something was cut.
"""
from __future__ import annotations

from typing import Optional

from ..i18n import N_, _

CELL_STREAM_CHARS = 20_000  # printed text per cell, as a student sees it in JupyterLab's scroll area
CELL_CHARS = 2 * 2**20  # everything of one cell (plots are base64 PNG, ~50 KB each)
NOTEBOOK_CHARS = 8 * 2**20  # the whole notebook
TRACEBACK_LINES = 60
_TRUNCATED = N_("[输出过大，评分时已截断]")


def truncated_note() -> str:
    """The note left where output was cut, in the notebook's language."""
    return f"\n{_(_TRUNCATED)}\n"


def _size(output):
    kind = output["output_type"]
    if kind == "stream":
        return len(output["text"])
    if kind == "error":
        return len(output["ename"]) + len(output["evalue"]) + sum(len(x) for x in output["traceback"])
    return sum(len(k) + len(v) for k, v in output["data"].items())


def _well_formed(output, count):
    """The output as plain nbformat data, or None if it is not one we keep."""
    if not isinstance(output, dict):
        return None
    kind = output.get("output_type")
    if kind == "stream" and output.get("name") in ("stdout", "stderr") and isinstance(output.get("text"), str):
        return {"output_type": "stream", "name": output["name"], "text": output["text"]}
    if kind in ("display_data", "execute_result") and isinstance(output.get("data"), dict):
        data = {k: v for k, v in output["data"].items() if isinstance(k, str) and isinstance(v, str)}
        entry = {"output_type": kind, "data": data, "metadata": {}}
        if kind == "execute_result":
            entry["execution_count"] = count
        return entry
    if kind == "error":
        traceback = output.get("traceback")
        lines = [str(x)[:2000] for x in traceback[:TRACEBACK_LINES]] if isinstance(traceback, list) else []
        return {"output_type": "error", "ename": str(output.get("ename", "Error"))[:200],
                "evalue": str(output.get("evalue", ""))[:2000], "traceback": lines}
    return None


def text_form(outputs: object) -> list[tuple]:
    """What a cell printed and showed, figures reduced to their text/plain: equal for a run that
    rendered figures and one that did not (``"figures": false``) when both computed the same."""
    form = []
    for raw in outputs if isinstance(outputs, list) else []:
        output = _well_formed(raw, None)
        if output is None:
            continue
        kind = output["output_type"]
        if kind == "stream":
            form.append((kind, output["name"], output["text"]))
        elif kind == "error":
            form.append((kind, output["ename"], output["evalue"]))
        else:
            form.append((kind, output["data"].get("text/plain")))
    return form


class OutputBudget:
    """Sanitises and caps each cell's outputs against the notebook's running total."""

    def __init__(self, notebook_chars: int = NOTEBOOK_CHARS, cell_chars: int = CELL_CHARS,
                 stream_chars: int = CELL_STREAM_CHARS) -> None:
        self.left = notebook_chars
        self.cell_chars, self.stream_chars = cell_chars, stream_chars
        self.truncated = []  # cell positions whose outputs were cut

    def take(self, outputs: object, count: Optional[int], position: Optional[int] = None) -> list[dict]:
        """The outputs of one cell (execution count `count`) as they may be stored."""
        kept, used, streamed, cut = [], 0, 0, False
        for raw in outputs if isinstance(outputs, list) else []:
            output = _well_formed(raw, count)
            if output is None:
                continue
            if output["output_type"] == "stream":
                room = self.stream_chars - streamed
                if len(output["text"]) > room:
                    output["text"], cut = output["text"][:max(room, 0)], True
                streamed += len(output["text"])
                if not output["text"]:
                    continue
            size = _size(output)
            if used + size > min(self.cell_chars, self.left):
                cut = True
                continue
            used += size
            kept.append(output)
        self.left -= used
        if cut:
            kept.append({"output_type": "stream", "name": "stderr", "text": truncated_note()})
            self.truncated.append(position)
        return kept
