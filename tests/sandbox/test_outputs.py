"""Cell outputs as they may be stored (`autograder.sandbox.outputs`): well-formed nbformat data, capped."""
from autograder.sandbox import outputs
from autograder.sandbox.outputs import OutputBudget, text_form, truncated_note


def stream(text, name="stdout"):
    return {"output_type": "stream", "name": name, "text": text}


def png(data, plain="<Figure>"):
    return {"output_type": "display_data", "data": {"image/png": data, "text/plain": plain}, "metadata": {}}


def test_only_nbformat_outputs_made_of_strings_are_kept():
    raw = [
        stream("hi\n"),
        {"output_type": "stream", "name": "stdin", "text": "not a channel"},
        {"output_type": "stream", "name": "stdout", "text": b"bytes"},
        {"output_type": "execute_result", "data": {"text/plain": "42", 7: "key", "image/png": b"raw"},
         "metadata": {"evil": True}, "execution_count": 999, "extra": "dropped"},
        {"output_type": "update_display_data", "data": {"text/plain": "x"}},
        "not a dict", None,
        {"output_type": "error", "ename": object(), "evalue": 3,
         "traceback": ["line"] * (outputs.TRACEBACK_LINES + 10)},
    ]
    kept = OutputBudget().take(raw, count=5)
    assert kept[0] == stream("hi\n")
    assert kept[1] == {"output_type": "execute_result", "data": {"text/plain": "42"}, "metadata": {},
                       "execution_count": 5}  # the grader's count, not the runner's
    assert kept[2]["output_type"] == "error" and isinstance(kept[2]["ename"], str) and kept[2]["evalue"] == "3"
    assert len(kept[2]["traceback"]) == outputs.TRACEBACK_LINES
    assert len(kept) == 3
    assert OutputBudget().take("not a list", count=1) == []


def html(markup, plain="<IPython.core.display.HTML object>"):
    return {"output_type": "display_data", "data": {"text/html": markup, "text/plain": plain}, "metadata": {}}


def test_rich_output_is_kept_only_in_inert_forms():
    """Student output becomes the feedback page and formgrader's view, opened by the instructor: what
    could run there (script, handlers, javascript: URLs, SVG, JavaScript output) or call out (remote
    images) is dropped; text, base64 images and cleaned HTML stay."""
    figure = '<img src="data:image/png;base64,iVBORw0KGgo=" alt="two line plots">'
    table = "<table><thead><tr><th>d_k</th></tr></thead><tbody><tr><td>64</td></tr></tbody></table>"
    attacks = ['<script>alert(document.domain)</script>', '<p onclick="steal()">x</p>',
               '<a href="javascript:steal()">x</a>', '<img src="https://tracker.example/p.png">',
               '<a href="data:text/html,<script>alert(1)</script>">x</a>',
               '<img src="data:text/html;base64,PHNjcmlwdD4=">', "<style>.sdpa-causes{display:none}</style>",
               '<iframe src="https://example.org"></iframe>']
    raw = [html(figure + table), *[html(a) for a in attacks],
           {"output_type": "display_data", "data": {"application/javascript": "steal()", "image/svg+xml":
                                                    "<svg onload='steal()'/>", "text/markdown": "<script>",
                                                    "text/plain": "x"}, "metadata": {}},
           png('AAAA" onerror="steal()'), png("iVBORw0KGgo=\n")]
    kept = OutputBudget().take(raw, count=1)
    assert kept[0]["data"]["text/html"] == figure + table
    for output in kept[1:1 + len(attacks)]:
        shown = output["data"].get("text/html", "")
        for word in ("script", "onclick", "javascript", "tracker", "data:text", "style", "iframe", "display:none"):
            assert word not in shown, shown
    assert kept[1 + len(attacks)]["data"] == {"text/plain": "x"}
    assert "image/png" not in kept[2 + len(attacks)]["data"]
    assert kept[3 + len(attacks)]["data"]["image/png"] == "iVBORw0KGgo=\n"


def test_a_data_url_hidden_behind_what_browsers_ignore_is_still_dropped():
    for url in ("&#1;data:text/html,<script>alert(1)</script>", "da&#9;ta:text/html;base64,PHNjcmlwdD4=",
                " \n DATA:text/html,x", "d&#10;ata:text/html,x"):
        kept = OutputBudget().take([html(f'<a href="{url}">x</a>')], count=1)
        assert "href" not in kept[0]["data"]["text/html"], kept[0]["data"]["text/html"]


def test_html_over_the_tag_budgets_is_dropped_not_cleaned():
    """Some markup makes cleaning quadratic (2000 unclosed formatting tags, 16 KB, take 0.8 s and 9 MB to
    clean), so HTML above the per-output and per-notebook tag budgets is dropped; its text/plain stays."""
    full = "<b>" * outputs.HTML_TAGS
    budget = OutputBudget()
    assert budget.take([html(full + "<i>", "x")], count=1)[0]["data"] == {"text/plain": "x"}
    fit = outputs.NOTEBOOK_HTML_TAGS // outputs.HTML_TAGS
    shown = [budget.take([html(full, "x")], count=1)[0]["data"] for _ in range(fit + 2)]
    assert all("text/html" in data for data in shown[:fit]), "within the budgets HTML is cleaned and kept"
    assert all(data == {"text/plain": "x"} for data in shown[fit:]), "past the notebook's budget it is dropped"


def test_printed_text_is_capped_per_cell_with_a_visible_note():
    budget = OutputBudget(stream_chars=10)
    kept = budget.take([stream("0123456"), stream("789abcdef", "stderr"), stream("gone")], count=1, position=4)
    assert [o["text"] for o in kept] == ["0123456", "789", truncated_note()]
    assert kept[-1]["name"] == "stderr" and budget.truncated == [4]
    assert budget.take([stream("0123456789")], count=2, position=5) == [stream("0123456789")]  # per cell
    assert budget.truncated == [4]


def test_a_cell_and_the_notebook_have_a_total_cap():
    budget = OutputBudget(notebook_chars=250, cell_chars=120)
    first = budget.take([png("a" * 100, ""), png("b" * 100, "")], count=1, position=0)
    assert [o["data"]["image/png"] for o in first[:-1]] == ["a" * 100] and first[-1]["text"] == truncated_note()
    assert budget.left == 250 - len("image/png") - 100 - len("text/plain")
    second = budget.take([png("c" * 100, "")], count=2, position=1)
    assert second[0]["data"]["image/png"] == "c" * 100 and len(second) == 1
    third = budget.take([png("d" * 100, "")], count=3, position=2)
    assert third == [stream(truncated_note(), "stderr")] and budget.truncated == [0, 2]


def test_text_form_ignores_rendered_figures_but_not_what_was_computed():
    rendered = [stream("x = 1\n"), png("iVBORw0...", "<Figure size 640x480 with 1 Axes>")]
    unrendered = [stream("x = 1\n"), {"output_type": "display_data", "metadata": {},
                                      "data": {"text/plain": "<Figure size 640x480 with 1 Axes>"}}]
    assert text_form(rendered) == text_form(unrendered)
    assert text_form(rendered) != text_form([stream("x = 2\n"), rendered[1]])
    error = {"output_type": "error", "ename": "ValueError", "evalue": "bad", "traceback": ["tb"]}
    assert text_form([error]) == [("error", "ValueError", "bad")]
    assert text_form([{"output_type": "bogus"}, 3]) == [] and text_form(None) == []
