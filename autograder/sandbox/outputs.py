"""Cell outputs from the runner, made safe to store and to show: well-formed, inert and capped.

The runner caps its own outputs, but it is the student's process: student
code can lift any cap it holds.  What goes into the autograded notebook is
therefore decided here, in the trusted process: only nbformat output types
made of strings, at most `CELL_CHARS` characters per cell and `NOTEBOOK_CHARS`
per notebook, with a visible note where something was cut.

The autograded notebook becomes the feedback page and formgrader's view, which
render rich output as it is: a student's ``display(HTML("<script>..."))`` would
run in the instructor's browser.  So only inert kinds of output are kept: text,
base64 raster images, and HTML cleaned by nh3 (ammonia's allow-list: no script,
style, event handler or javascript: URL; images only as data: URIs). Outputs are
shown, never graded, so what is dropped costs no point.
"""
from __future__ import annotations

import re
from typing import Optional

import nh3

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


IMAGES = ("image/png", "image/jpeg", "image/gif")  # kept as base64, the form nbformat stores them in
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")
_DATA_IMAGE = re.compile(f"data:({'|'.join(map(re.escape, IMAGES))});base64,{_BASE64.pattern}")


def _image(data: str) -> Optional[str]:
    # the page puts it in src="data:...;base64,{data}": anything but base64 could close the attribute
    return data if _BASE64.fullmatch(data) else None


# what a browser ignores in a URL: leading C0 controls and spaces, and tab/CR/LF anywhere ("\x01da\tta:")
_URL_IGNORED = re.compile(r"^[\x00-\x20]+|[\t\n\r]")


URL_SCHEMES = {"http", "https", "mailto", "data"}  # data: only as inert_attribute lets it through


def inert_attribute(element: str, attribute: str, value: str) -> Optional[str]:
    """nh3's attribute filter for student HTML: no data: URL but an image's, no remote image."""
    if attribute in ("src", "href") and _URL_IGNORED.sub("", value).lower().startswith("data:"):
        return value if element == "img" and attribute == "src" and _DATA_IMAGE.fullmatch(value) else None
    if element == "img" and attribute == "src":
        return None  # no remote images: the page must not call out when it is opened
    if attribute == "cite":
        return None  # a URL no browser opens, and one nh3 does not check
    return value


def _html(data: str) -> str:
    return nh3.clean(data, url_schemes=URL_SCHEMES, attribute_filter=inert_attribute)


# Cleaning costs the trusted process time and memory that grow with the square of the tags of some
# markup (2000 unclosed formatting tags: 16 KB in, 9 MB out, 0.8 s): HTML above these many tags, in one
# output or in the notebook's outputs together, is not cleaned but dropped (its text/plain stays).
HTML_TAGS, NOTEBOOK_HTML_TAGS = 2000, 10_000


def _no_html(data: str) -> None:
    return None


# mime type -> how its data is made inert; any other kind (javascript, SVG, markdown, widgets) is dropped
SAFE_DATA = {"text/plain": lambda d: d, "text/html": _html, **dict.fromkeys(IMAGES, _image)}


def _safe_data(data: dict, clean_html) -> dict:
    kept = {}
    for kind, value in data.items():
        if isinstance(kind, str) and isinstance(value, str) and kind in SAFE_DATA:
            value = clean_html(value) if kind == "text/html" else SAFE_DATA[kind](value)
            if value is not None:
                kept[kind] = value
    return kept


def _well_formed(output, count, clean_html=_html):
    """The output as plain nbformat data, or None if it is not one we keep (`clean_html`: how text/html
    is made inert, or dropped when it returns None)."""
    if not isinstance(output, dict):
        return None
    kind = output.get("output_type")
    if kind == "stream" and output.get("name") in ("stdout", "stderr") and isinstance(output.get("text"), str):
        return {"output_type": "stream", "name": output["name"], "text": output["text"]}
    if kind in ("display_data", "execute_result") and isinstance(output.get("data"), dict):
        data = _safe_data(output["data"], clean_html)
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
        output = _well_formed(raw, None, _no_html)  # only text/plain is compared: no HTML to clean
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
        self.html_tags_left = NOTEBOOK_HTML_TAGS

    def _html(self, data: str) -> Optional[str]:
        """text/html cleaned while the tag budget lasts (per output and per notebook); else dropped."""
        tags = data.count("<")
        if tags > min(HTML_TAGS, self.html_tags_left):
            return None
        self.html_tags_left -= tags
        return _html(data)

    def take(self, outputs: object, count: Optional[int], position: Optional[int] = None) -> list[dict]:
        """The outputs of one cell (execution count `count`) as they may be stored."""
        kept, used, streamed, cut = [], 0, 0, False
        for raw in outputs if isinstance(outputs, list) else []:
            output = _well_formed(raw, count, self._html)
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
