"""Unit tests of `autograder/nbgrader/inert_markdown.py`: math as MathML, markdown a student writes shown with
nothing a browser would run, the lesson's own markdown unchanged, and formgrader's exporter using the filter."""
import re
import time
from html.parser import HTMLParser

import nbformat
import pytest
from nbconvert.exporters import HTMLExporter
from nbconvert.filters.markdown_mistune import MarkdownWithMath
from nbformat.v4 import new_markdown_cell, new_notebook
from traitlets.config.loader import PyFileConfigLoader

from autograder.nbgrader.feedback_page import OfflineFeedbackExporter
from autograder.nbgrader.inert_markdown import (
    ID_PREFIX,
    MARKDOWN_CHARS,
    NOTEBOOK_IMAGE_CHARS,
    NOTEBOOK_MARKDOWN_CHARS,
    InertMarkdown,
    MathMLRenderer,
    clean_html,
    tex_to_html,
    unchanged,
)
from autograder.notebook import editions
from autograder.sandbox.outputs import HTML_TAGS, NOTEBOOK_HTML_TAGS
from catalogue import ROOT
from catalogue.attacks import PWNED, SCRIPT_MARKDOWN
from tests.support.feedback_page import executable


def _render(source, resources=None, cell=None):
    return InertMarkdown()({"cell": cell or {}, "resources": {} if resources is None else resources}, source)


def test_a_formula_becomes_mathml():
    inline = tex_to_html(r"\frac{QK^T}{\sqrt{d_k}}")
    assert inline.startswith('<math xmlns="http://www.w3.org/1998/Math/MathML" display="inline">')
    assert "<mfrac>" in inline and "<msqrt>" in inline
    assert 'display="block"' in tex_to_html("x_i", display=True)


def test_math_that_cannot_be_converted_stays_as_escaped_tex():
    assert tex_to_html(r"\frac{a}{") == r'<code class="tex">\frac{a}{</code>'
    assert tex_to_html(r"\left(<b>") == r'<code class="tex">\left(&lt;b&gt;</code>'


def test_markdown_math_is_rendered_without_mathjax():
    html = _render(r"Scores $$\frac{a}{b}$$, a row $x_i$, broken $\frac{a}{$.")
    assert html.count("<math ") == 2
    assert 'display="block"' in html and 'display="inline"' in html
    assert r'<code class="tex">\frac{a}{</code>' in html
    assert "$" not in html  # no TeX left for a script to typeset


@pytest.mark.parametrize("payload", [
    SCRIPT_MARKDOWN,
    f'<a href="java&#x09;script:{PWNED}">x</a>', f"<img src='https://example.org/{PWNED}.png'>",
    f'<object data="{PWNED}"></object><embed src="{PWNED}"><base href="https://{PWNED}.org/">',
    f'<meta http-equiv="refresh" content="0;url={PWNED}"><link rel="stylesheet" href="{PWNED}">',
    rf"$$\href{{data:text/html,{PWNED}}}{{x}}$$ $\class{{{PWNED}}}{{x}}$ $\unicode{{x{PWNED}}}$",
    f"<noscript><p title='</noscript><img src=x onerror={PWNED}>'></noscript>",  # mutation XSS
    f"<svg><style><img src=x onerror={PWNED}></style></svg>",
    # nbconvert strips a files/ prefix from URLs after rendering: "files/javascript:" must not become a link
    f"[figure](files/javascript:window.{PWNED}=1) <a href='/files/java\tscript:{PWNED}'>x</a>"
    f" <a href='files/data:text/html,{PWNED}'>y</a> <a href='files/\x01javascript:{PWNED}'>z</a>",
], ids=["catalogue", "tab-in-scheme", "remote-image", "object-embed-base", "meta-link", "math-commands",
        "noscript-mxss", "svg-style", "files-prefix"])
def test_nothing_a_student_writes_in_markdown_can_run(payload):
    html = _render(payload)
    found = [f for f in executable(html) if PWNED in f]
    assert not found, found


def test_student_ids_cannot_stand_in_for_the_pages_own():
    """formgrader's script binds a grade cell's controls to ``$("#" + grade_id)``, and its CSS fixes
    ``#statusmessage`` over the page: a student's element must not take either id."""
    html = _render('<h6 id="apply_mask-check"></h6>\n\n# statusmessage\n\n<h1 id="statusmessage">Saved</h1>')
    ids = re.findall(r'\bid="([^"]*)"', html)
    assert len(ids) == 3 and all(value.startswith(ID_PREFIX) for value in ids), ids
    assert f'href="#{ID_PREFIX}statusmessage"' in html  # the heading's anchor link still leads to it


def test_a_missing_attachment_leaves_its_alt_text_not_a_broken_page():
    assert "a plot" in _render("![a plot](attachment:gone.png)")
    assert "empty" in _render("![empty](attachment:x.png)", cell={"attachments": {"x.png": {}}})


def test_an_attachment_referenced_again_and_again_costs_its_bytes_each_time():
    """One 1 MB image shown 500 times was 773 MB of page and 33 s: embedded bytes count per notebook."""
    image = "iVBORw0KGgo" + "A" * (2**20)
    start = time.perf_counter()
    html = _render("![pic](attachment:a)" * 500, cell={"attachments": {"a": {"image/png": image}}})
    assert time.perf_counter() - start < 5
    assert NOTEBOOK_IMAGE_CHARS // 2 < len(html) < NOTEBOOK_IMAGE_CHARS + 100_000
    assert html.count("<img") == NOTEBOOK_IMAGE_CHARS // len(image) and "pic" in html


def test_a_raw_cell_is_cleaned_like_markdown():
    """nbconvert prints a raw cell through bleach, which keeps any class and id: a fixed overlay."""
    page = clean_html({"resources": {}}, '<div class="modal-backdrop in" id="statusmessage">x</div>'
                                         '<q cite="javascript:alert(1)">q</q>')
    assert "modal" not in page and "cite" not in page and "statusmessage" not in page, page
    assert clean_html({"resources": {}}, "<b>" * (HTML_TAGS + 1)).startswith("&lt;b&gt;")


def test_what_a_student_writes_stays_readable():
    html = _render(SCRIPT_MARKDOWN)
    for text in ("<strong>My answer.</strong>", "link", "styled", "<summary>s</summary>", "<math"):
        assert text in html


class _Shape(HTMLParser):
    """Start tags with their attributes, and the text: what the page shows, whatever the serialisation."""

    def __init__(self):
        super().__init__()
        self.items = []

    def handle_starttag(self, tag, attrs):
        # nh3 adds rel="noopener noreferrer" to links: a link opened from the page cannot reach back into it
        # and the renderer's heading ids (and their anchor links) carry ID_PREFIX
        kept = [(k, (v or "").replace(ID_PREFIX, "")) for k, v in attrs if (k, v) != ("rel", "noopener noreferrer")]
        self.items.append((tag, tuple(sorted(kept))))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)

    def handle_data(self, data):
        if data.strip():
            self.items.append(data.strip())


def _shape(html):
    parser = _Shape()
    parser.feed(html)
    return parser.items


@pytest.mark.parametrize("edition", sorted(editions.EDITIONS))
def test_the_lessons_own_markdown_renders_as_before(edition):
    nb = nbformat.read(str(ROOT / "source" / edition / f"{edition}.ipynb"), as_version=4)
    cells = [cell for cell in nb.cells if cell.cell_type == "markdown"]
    assert len(cells) > 20
    for cell in cells:
        plain = MarkdownWithMath(renderer=MathMLRenderer(escape=False)).render(cell.source)
        assert _shape(_render(cell.source, cell=cell)) == _shape(plain), cell.source[:80]


def test_a_cell_over_the_tag_budget_is_escaped_not_cleaned():
    heavy = "".join(f"<p><b title={i}>" for i in range(HTML_TAGS + 1))
    start = time.perf_counter()
    html = _render(heavy)
    assert time.perf_counter() - start < 0.5
    assert "&lt;b title=7&gt;" in html and "<b" not in html


def test_the_notebook_tag_budget_is_shared_by_its_cells():
    resources = {}
    cell = "<b>x</b>" * (HTML_TAGS // 2)
    for _ in range(NOTEBOOK_HTML_TAGS // HTML_TAGS):
        assert "<b>x</b>" in _render(cell, resources)
    assert resources["sdpa_markdown_budget"].tags == 0
    assert "&lt;b&gt;x" in _render(cell, resources)


def test_a_long_cell_is_shown_as_text_not_parsed():
    """Nested emphasis is quadratic in mistune (48 KB of it took 14 s): a cell over the cap is not parsed."""
    k = MARKDOWN_CHARS // 6 + 1
    nested = "*a " * k + "b" + " a*" * k
    start = time.perf_counter()
    html = _render(nested)
    assert time.perf_counter() - start < 0.5
    assert html.startswith("<pre>") and "<em>" not in html and "*a *a" in html


def test_the_notebook_character_budget_is_shared_by_its_cells():
    resources, cell = {}, "*word* " * (MARKDOWN_CHARS // 8)
    for _ in range(NOTEBOOK_MARKDOWN_CHARS // len(cell)):
        assert "<em>word</em>" in _render(cell, resources)
    assert _render(cell, resources).startswith("<pre>")


def test_formgrader_renders_markdown_through_the_filter():
    """Formgrader builds ``HTMLExporter(config=...)`` from the course's nbgrader_config.py."""
    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    exporter = HTMLExporter(config=config, template_name="classic")
    for used in (exporter, OfflineFeedbackExporter()):
        assert isinstance(used.environment.filters["markdown2html"], InertMarkdown)
        assert used.environment.filters["strip_files_prefix"] is unchanged
        assert used.environment.filters["clean_html"] is clean_html
    page, _ = exporter.from_notebook_node(new_notebook(cells=[new_markdown_cell(SCRIPT_MARKDOWN)]))
    found = [f for f in executable(page) if PWNED in f]
    assert not found and "My answer." in page, found
