"""Markdown cells rendered for the pages an instructor opens, with math as MathML and nothing that runs.

Why: nbconvert renders markdown with ``escape=False``, so raw HTML in a cell reaches the page as
it is, and so does markup inside math (``\\text{<script>…}``, ``\\href{javascript:…}``,
``\\style{…}`` in latex2mathml's output).  Students write the answer cells and may add cells of
their own; the feedback page and formgrader's grading view are opened by the instructor.  So the
rendered HTML of every markdown cell goes through nh3 (ammonia's allow-list) with the same URL rule
as cell outputs (`outputs.inert_attribute`: images only as data: URIs), MathML allowed but no
``style`` or ``href`` on it.  The lesson's own markdown (tables, headings with anchors,
highlighted code, formulas) renders as before.

`InertMarkdown` is a Jinja filter that nbconvert builds with the exporter as its parent: the
feedback page uses it directly, and ``c.HTMLExporter.filters`` (set by `autograder.nbgrader.configure`)
puts it under formgrader's plain HTMLExporter too, each with `unchanged` as ``strip_files_prefix``
(`FILTERS`).
"""
import html
import re

import nh3
from jinja2 import pass_context
from latex2mathml.converter import convert as latex_to_mathml
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from pygments.token import STANDARD_TYPES
from traitlets.config import LoggingConfigurable

from ..sandbox.outputs import HTML_TAGS, NOTEBOOK_HTML_TAGS, URL_SCHEMES, inert_attribute

# Presentation MathML (what latex2mathml writes); semantics/annotation keep the TeX readable.
MATHML_TAGS = {
    "math", "semantics", "annotation", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "msub", "msup",
    "msubsup", "mfrac", "msqrt", "mroot", "mover", "munder", "munderover", "mtable", "mtr", "mtd",
    "mstyle", "mpadded", "mphantom", "menclose", "merror", "mmultiscripts", "mprescripts", "none",
}
MATHML_ATTRIBUTES = {
    "display", "xmlns", "mathvariant", "displaystyle", "scriptlevel", "stretchy", "fence", "separator",
    "form", "largeop", "movablelimits", "accent", "accentunder", "lspace", "rspace", "minsize", "maxsize",
    "symmetric", "width", "height", "depth", "linethickness", "columnalign", "rowalign", "columnspacing",
    "rowspacing", "columnlines", "rowlines", "frame", "notation", "encoding", "columnspan", "rowspan",
}
TAGS = set(nh3.ALLOWED_TAGS) | MATHML_TAGS
ATTRIBUTES = {
    **{tag: set(names) for tag, names in nh3.ALLOWED_ATTRIBUTES.items()},
    **{tag: set(MATHML_ATTRIBUTES) for tag in MATHML_TAGS},
    **{f"h{level}": {"id"} for level in range(1, 7)},  # nbconvert's heading anchors
    "th": nh3.ALLOWED_ATTRIBUTES["th"] | {"style"}, "td": nh3.ALLOWED_ATTRIBUTES["td"] | {"style"},
}
# Only the classes the renderer itself writes: page classes could restyle or overlay the page.
CLASSES = {"a": {"anchor-link"}, "div": {"highlight"}, "code": {"tex"}, "pre": set(),
           "span": {name for name in STANDARD_TYPES.values() if name}}


# A markdown cell above this many characters is shown as text (about 0.3 s of mistune at worst, where
# nested emphasis is quadratic); the lesson's longest is under 3,000 and all of them together under 40,000.
MARKDOWN_CHARS, NOTEBOOK_MARKDOWN_CHARS = 10_000, 100_000
NOTEBOOK_IMAGE_CHARS = 8 * 2**20  # attachments embedded in the page, as for outputs (`outputs.NOTEBOOK_CHARS`)
ID_PREFIX = "sdpa-md-"  # no id the feedback page, formgrader or its script uses starts with it
_FILES_URL = re.compile(r"""(src|href)=(["']?)/?files/""")
_NS0_PREFIX = re.compile(r"(</?)ns0:")
_NS0_DECLARATION = re.compile(r' xmlns:ns0="[^"]*"')


def tex_to_html(tex, display=False):
    """MathML for one formula; escaped TeX in <code class="tex"> when it cannot be converted."""
    try:
        return latex_to_mathml(tex.strip(), display="block" if display else "inline")
    except Exception:  # noqa: BLE001 - any parser error: show the TeX rather than lose it
        return f'<code class="tex">{html.escape(tex)}</code>'


class MathMLRenderer(IPythonRenderer):
    """nbconvert's markdown renderer, with math written as MathML instead of TeX for MathJax."""

    def block_math(self, body):
        return tex_to_html(body, display=True)

    def inline_math(self, body):
        return tex_to_html(body)

    def latex_environment(self, name, body):
        return tex_to_html(f"\\begin{{{name}}}{body}\\end{{{name}}}", display=True)

    def heading(self, text, level, **attrs):
        # nbconvert adds the anchor through ElementTree, which writes MathML in a heading as <ns0:math>,
        # an element no browser draws as math: give it back its plain name.  `clean` prefixes the id.
        rendered = _NS0_DECLARATION.sub("", _NS0_PREFIX.sub(r"\1", super().heading(text, level, **attrs)))
        return rendered.replace('<a class="anchor-link" href="#', f'<a class="anchor-link" href="#{ID_PREFIX}', 1)

    budget = None  # the notebook's `_Budget`, set by `InertMarkdown`

    def image(self, text, url, title=None):
        try:
            rendered = super().image(text, url, title)
        except Exception:  # noqa: BLE001 - a missing or empty attachment: show the alt text, keep the page
            return html.escape(text)
        # an attachment is embedded again at each reference: its bytes count against the notebook
        if self.budget is not None and not self.budget.take("image_chars", len(rendered)):
            return html.escape(text)
        return rendered


def clean(rendered: str) -> str:
    """Rendered markdown with only inert markup left: student ids get `ID_PREFIX`, so they cannot take
    the place of an element the page or formgrader's script looks up by id."""
    return nh3.clean(rendered, tags=TAGS, attributes=ATTRIBUTES, allowed_classes=CLASSES,
                     filter_style_properties={"text-align"}, url_schemes=URL_SCHEMES,
                     attribute_filter=inert_attribute, id_prefix=ID_PREFIX)


def strip_files_prefix(rendered: str) -> str:
    """nbconvert's ``files/`` URL fix-up, done before `clean` so that nh3 judges the URL that is kept.

    (The stock filter runs after this one in the templates: ``files/javascript:…`` passes nh3 as a
    relative URL and became ``javascript:…``.  Its markdown-link part is quadratic in ``[`` and has no
    use on HTML, so only the attribute part is done.)"""
    return _FILES_URL.sub(r"\1=\2", rendered)


def unchanged(rendered: str) -> str:
    """The ``strip_files_prefix`` filter wherever `InertMarkdown` renders: its output is final."""
    return rendered


class _Budget:
    """What a notebook may still spend on rendering markdown (kept in the page's resources)."""

    def __init__(self):
        self.tags, self.chars, self.image_chars = NOTEBOOK_HTML_TAGS, NOTEBOOK_MARKDOWN_CHARS, NOTEBOOK_IMAGE_CHARS

    def take(self, name: str, amount: int, most: float = float("inf")) -> bool:
        """Spend `amount` of `name` if it is at most `most` (the cap of one cell) and what is left; else
        spend nothing and return False."""
        left = getattr(self, name)
        if amount > min(most, left):
            return False
        setattr(self, name, left - amount)
        return True


def _budget(context) -> _Budget:
    resources = context.get("resources")
    return resources.setdefault("sdpa_markdown_budget", _Budget()) if isinstance(resources, dict) else _Budget()


@pass_context
def clean_html(context, element) -> str:
    """The ``clean_html`` filter (a raw cell's HTML; nbconvert's bleach keeps any class and id): `clean`,
    or escaped text past the tag budget."""
    element = element.decode() if isinstance(element, bytes) else str(element)
    if not _budget(context).take("tags", element.count("<"), HTML_TAGS):
        return html.escape(element)
    return clean(element)


class InertMarkdown(LoggingConfigurable):
    """The ``markdown2html`` filter: MathML math, then `clean`.

    Rendering costs time that grows faster than the input for some sources (nested emphasis in
    mistune; cleaning unclosed formatting tags in nh3), so a cell over `MARKDOWN_CHARS`, or past
    `NOTEBOOK_MARKDOWN_CHARS` in its notebook, is shown as preformatted text, and one with more than
    `HTML_TAGS` raw tags (or past `NOTEBOOK_HTML_TAGS`) with its HTML escaped: nothing is lost."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        pass_context(self)  # Jinja hands the template context (the cell's attachments) to __call__

    def __call__(self, context, source):
        exporter, cell = self.parent, context.get("cell") or {}
        resources = context.get("resources")
        resources = resources if isinstance(resources, dict) else {}
        budget = _budget(context)
        if not budget.take("chars", len(source), MARKDOWN_CHARS):
            return f"<pre>{html.escape(source)}</pre>"
        escape = not budget.take("tags", source.count("<"), HTML_TAGS)
        options = {} if exporter is None else {
            "embed_images": exporter.embed_images, "anchor_link_text": exporter.anchor_link_text,
            "exclude_anchor_links": exporter.exclude_anchor_links, **exporter.lexer_options}
        renderer = MathMLRenderer(escape=escape, attachments=cell.get("attachments") or {},
                                  path=resources.get("metadata", {}).get("path", ""), **options)
        renderer.budget = budget
        return clean(strip_files_prefix(MarkdownWithMath(renderer=renderer).render(source)))


# The filters of every exporter that renders markdown for the instructor (``HTMLExporter.filters``).
FILTERS = {"markdown2html": InertMarkdown, "strip_files_prefix": unchanged, "clean_html": clean_html}
