"""Unit tests of the offline feedback page (`autograder/nbgrader/feedback_page.py`): markdown through the inert
filter (tests/nbgrader/test_inert_markdown.py), no MathJax script, and each summary entry named after its part
and lesson section."""
import pytest
from nbconvert.exporters import HTMLExporter
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder.nbgrader import feedback_page
from autograder.nbgrader.feedback_page import TEMPLATES, OfflineFeedbackExporter, part_labels


def _graded(grade_id, **meta):
    return new_code_cell("run_hidden_checks('x')", metadata={"nbgrader": {"grade": True, "grade_id": grade_id,
                                                                          "points": 1, **meta}})


def test_markdown_is_rendered_by_the_inert_filter_even_without_the_course_config():
    html = OfflineFeedbackExporter().environment.filters["markdown2html"]({"cell": {}, "resources": {}},
                                                                          "$x_i$ <script>alert(1)</script>")
    assert '<math xmlns="http://www.w3.org/1998/Math/MathML" display="inline">' in html and "<script" not in html


def test_the_mathjax_macro_loads_no_script():
    shadow = (TEMPLATES / "feedback" / "mathjax.html.j2").read_text(encoding="utf-8")
    assert "{%- macro mathjax" in shadow
    assert "<script" not in shadow and "http" not in shadow.replace("http://www.w3.org", "")


def test_our_templates_come_first_once():
    assert OfflineFeedbackExporter().extra_template_basedirs[0] == str(TEMPLATES)
    again = OfflineFeedbackExporter(extra_template_basedirs=[str(TEMPLATES), "/elsewhere"])
    assert again.extra_template_basedirs == [str(TEMPLATES), "/elsewhere"]
    assert OfflineFeedbackExporter().template_file == "sdpa_feedback.html.j2"


def test_each_graded_cell_is_labelled_with_its_part_and_section():
    nb = new_notebook(cells=[
        _graded("intro-check"),  # before any heading: the part alone
        new_markdown_cell("# SDPA\n\n## 3. `softmax` 的数值稳定\n\nsome text"),
        new_code_cell("x = 1"),  # not graded: no entry
        _graded("softmax-check"),
        new_markdown_cell("## 写作题"),
        new_markdown_cell("你的回答", metadata={"nbgrader": {"task": True, "grade_id": "written-a1", "points": 2}}),
        new_markdown_cell("no heading here"),
        _graded("dropout"),  # a grade id without -check is kept whole
    ])
    assert part_labels(nb) == {"intro-check": "intro", "softmax-check": "softmax — 3. softmax 的数值稳定",
                               "written-a1": "written-a1 — 写作题", "dropout": "dropout — 写作题"}


def test_the_page_gets_the_part_labels(monkeypatch):
    seen = {}

    def capture(self, nb, resources=None, **kw):
        seen.update(resources)
        return "", resources

    monkeypatch.setattr(HTMLExporter, "from_notebook_node", capture)
    nb = new_notebook(cells=[new_markdown_cell("## Masks"), _graded("apply_mask-check")])
    OfflineFeedbackExporter().from_notebook_node(nb, {"nbgrader": {"notebook": "sdpa"}})
    assert seen["sdpa_parts"] == {"apply_mask-check": "apply_mask — Masks"}
    assert seen["nbgrader"] == {"notebook": "sdpa"}
    assert feedback_page.headings("### Title ###") == ["Title"]


@pytest.mark.parametrize("source", [
    "# " + " " * 4000 + "x" + " " * 4000 + "y",  # 20 s with the regular expression it replaces (red team)
    "# a" + "\t" * 4000 + "#" * 4000 + "\t" * 4000 + "b", "# a" + " #" * 20_000 + " b", "#\n" * 20_000])
def test_headings_are_read_in_linear_time(source):
    import time

    started = time.perf_counter()
    feedback_page.headings(source * 5)
    assert time.perf_counter() - started < 1


def test_headings_read_as_the_pattern_they_replace_on_the_course_notebooks():
    import re
    from pathlib import Path

    import nbformat

    root = Path(__file__).resolve().parents[2]
    old = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
    sources = [cell.source for path in ("source/sdpa/sdpa.ipynb", "source/sdpa_en/sdpa_en.ipynb")
               for cell in nbformat.read(str(root / path), as_version=4).cells if cell.cell_type == "markdown"]
    sources += ["## Masks", "### Title ###", "# C# basics", "#Not a heading", "## Trailing   ", "### Closed #  "]
    for source in sources:
        assert feedback_page.headings(source) == old.findall(source), source


def _as_generate_feedback():
    """The exporter's settings that `nbgrader generate_feedback` adds (nbgrader/converters/generate_feedback.py)."""
    from pathlib import Path

    import nbgrader

    root = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader"
    return {"template_name": "feedback", "extra_template_basedirs": [str(root / "templates")],
            "extra_template_paths": [str(root / "static" / "node_modules" / "bootstrap" / "dist" / "css")]}


_AS_GENERATE_FEEDBACK = _as_generate_feedback()


def test_an_image_the_code_displayed_is_described_in_the_page_language_without_a_warning(caplog):
    """nbconvert described such images in English and warned on every generate_feedback (seen in make test)."""
    from nbformat.v4 import new_output

    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    for assignment, alt in (("sdpa", "你的代码输出的图像"), ("sdpa_en", "An image your code displayed")):
        cell = new_code_cell("plt.imshow(weights)", outputs=[
            new_output("display_data", data={"image/png": png}),
            new_output("display_data", data={"text/html": f'<img src="data:image/png;base64,{png}">'})])
        nb = new_notebook(cells=[new_markdown_cell("## Attention"), cell])
        with caplog.at_level("WARNING"):
            html, _ = OfflineFeedbackExporter(**_AS_GENERATE_FEEDBACK).from_notebook_node(nb, {"nbgrader": {
                "assignment": assignment, "notebook": assignment, "score": 0, "max_score": 1, "late_penalty": 0,
                "student": "a"}})
        assert html.count(f'alt="{alt}"') == 1  # the displayed image; an <img> of the code's own HTML keeps nbconvert's
        assert "Alternative text is missing" not in caplog.text
