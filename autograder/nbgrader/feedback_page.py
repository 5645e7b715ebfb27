"""Feedback pages that stand alone offline and name each graded part.

Why: nbgrader's feedback template loads MathJax from a CDN, so in an offline classroom or exam
room the lesson's formulas show as raw ``$$\\mathrm{Attention}…$$``; and its summary lists every
grade cell as "Test cell", so a student cannot tell which part lost points.  Feedback is
released to students through the exchange as one HTML file, so it must carry everything itself.

This exporter (``c.GenerateFeedback.exporter_class`` in nbgrader_config.py, so formgrader's
"Generate Feedback" button uses it too) renders markdown through `inert_markdown.FILTERS`
(LaTeX as MathML, which Chromium, Firefox and Safari draw natively, with no script and no network;
student markup made inert), drops the MathJax ``<script>`` and labels each summary entry with its
part (the grade id without ``-check``) and the lesson section it belongs to.
"""
import re
from pathlib import Path

from nbconvert.exporters import HTMLExporter
from nbgrader.preprocessors import ClearHiddenTests
from traitlets import List, default

from .. import i18n
from ..i18n import N_, _
from ..notebook import editions
from . import inert_markdown

TEMPLATES = Path(__file__).resolve().parent / "templates"
# The words nbgrader's feedback template writes, in the template's names for them (`resources.sdpa_labels`).
LABELS = {
    "points": N_("（得分：{score} / {max}）"), "late_penalty": N_("迟交扣分（得分：-{penalty}）"),
    "top": N_("（回到顶部）"), "automatic": N_("（自动检查）"), "free_response": N_("（编程自由作答）"),
    "written": N_("（书面回答）"), "task": N_("（任务）"), "comment": N_("评语"), "comments": N_("评语："),
    "answer": N_("学生的答案"), "student_task": N_("学生的任务"), "grade_cell": N_("评分单元格："),
    "awaiting": N_("（等待助教评分，满分 {max}）"), "awaiting_total": N_("（还有 {points} 分等待助教评分）"),
}
HEADING_START = re.compile(r"#{1,6}[ \t]+")


def headings(source: str) -> list[str]:
    """The ATX headings (`## Title ##`) of a markdown source, line by line without backtracking: the pattern
    this replaces (`^#{1,6}\\s+(.+?)\\s*#*\\s*$`) took 20 s on a student's answer cell of "# " and 4,000 spaces
    (cubic), in the trusted process that writes the feedback."""
    found = []
    for line in source.split("\n"):
        start = HEADING_START.match(line)
        if not start:
            continue
        text = line[start.end():].rstrip(" \t\r")
        closed = text.rstrip("#")
        if closed != text and (not closed or closed[-1] in " \t"):  # a closing run of #s after a space
            text = closed.rstrip(" \t")
        if text:
            found.append(text)
    return found


class ClearHiddenChecks(ClearHiddenTests):
    """nbgrader's ClearHiddenTests, quiet: nbconvert's HTML exporter configures `display_data_priority` for every
    step, and nbgrader's step declares that option without accepting it from configuration, so each
    `generate_feedback` warned "Config option `display_data_priority` not recognized" to no purpose."""

    display_data_priority = List(ClearHiddenTests.display_data_priority.default_value).tag(config=True)


def part_labels(nb):
    """grade_id -> "part — section" for every grade cell (the summary's entries)."""
    labels, section = {}, ""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            found = headings(cell.source)
            if found:
                section = found[-1].replace("`", "")
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") or meta.get("task"):
            grade_id = meta.get("grade_id", "")
            part = grade_id[:-len("-check")] if grade_id.endswith("-check") else grade_id
            labels[grade_id] = f"{part} — {section}" if section else part
    return labels


class OfflineFeedbackExporter(HTMLExporter):
    """nbgrader's feedback page, with math rendered at generation time and named parts."""

    @default("template_file")
    def _template_file_default(self):
        return "sdpa_feedback.html.j2"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Our "feedback" directory comes first: its mathjax.html.j2 (no CDN script) shadows
        # nbconvert's, and sdpa_feedback.html.j2 extends nbgrader's feedback index.html.j2.
        if str(TEMPLATES) not in self.extra_template_basedirs:
            self.extra_template_basedirs = [str(TEMPLATES), *self.extra_template_basedirs]
            self.template_paths = self._template_paths()  # computed once in __init__, from the old dirs

    def default_filters(self):
        # markdown as MathML, made inert (student cells are shown to the instructor), even without our config
        yield from super().default_filters()
        yield from inert_markdown.FILTERS.items()  # a repeated name: the last one wins

    def from_notebook_node(self, nb, resources=None, **kw):
        resources = self._init_resources(resources)
        resources["sdpa_parts"] = part_labels(nb)
        lang = editions.language_of(resources.get("nbgrader", {}).get("assignment"))
        with i18n.using(lang):
            resources["sdpa_labels"] = {key: _(message) for key, message in LABELS.items()}
            _describe_images(nb, _("你的代码输出的图像"))
        resources["sdpa_lang"] = i18n.html_lang(lang)
        quiet = _NoAltTextWarning()
        self.log.addFilter(quiet)  # an image in a student's HTML output has no description to give
        try:
            return super().from_notebook_node(nb, resources, **kw)
        finally:
            self.log.removeFilter(quiet)


IMAGES = ("image/png", "image/jpeg")


class _NoAltTextWarning:
    """Drops nbconvert's "Alternative text is missing" warning: images a student's code displayed are described
    (`_describe_images`); the rest (an <img> in a student's HTML output) get nbconvert's own description, and
    the instructor has nothing to do about them."""

    def filter(self, record) -> bool:
        return not str(record.msg).startswith("Alternative text is missing")


def _describe_images(nb, text: str) -> None:
    """Give each image a student's code displayed a description in the page's language (nbconvert would write
    its own English one and warn, on every generate_feedback, about images no one can describe better)."""
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            for mime in IMAGES:
                if mime in output.get("data", {}):
                    output.setdefault("metadata", {}).setdefault(mime, {}).setdefault("alt", text)
