"""Reading the feedback page: its summary in either edition (the exchange and hub tests), and what on it
a browser could run (the pipeline and inert-markdown tests)."""
from html.parser import HTMLParser

# the summary's kinds of entry, in the Chinese edition's words -> in the English edition's
KINDS = {"自动检查": "automatic checks", "书面回答": "written response", "编程自由作答": "coding free-response"}
# "<label> (<kind>) (Score: s / m)" or "<label> （<kind>） （得分：s / m）"
ENTRY = r"[(（]([^)）]*)[)）] [(（](?:Score: |得分：)([\d.]+) / ([\d.]+)[)）]"


def kind(word: str) -> str:
    return KINDS.get(word, word)


class _Executable(HTMLParser):
    """What a browser could run or fetch on a page: scripts, on* handlers, URLs of src/href, style."""

    def __init__(self):
        super().__init__()
        self.found, self._in_script = [], False

    def handle_starttag(self, tag, attrs):
        self._in_script = tag == "script"
        for name, value in attrs:
            if name.startswith("on") or name in ("src", "href", "srcdoc", "data", "style", "action", "formaction"):
                self.found.append(f"<{tag} {name}={value}>")

    def handle_data(self, data):
        if self._in_script:
            self.found.append(f"<script>{data}")

    def handle_endtag(self, tag):
        self._in_script = False


def executable(page: str) -> list[str]:
    """Each script body, event handler and URL-bearing attribute on `page`, as "<tag name=value>"."""
    parser = _Executable()
    parser.feed(page)
    return parser.found


# What never reaches a student: Python's reprs of values the grader could not show as data.
REPRS = ("&lt;ellipsis", "<ellipsis", "TensorSpec", "OpaqueObject", "&lt;object", "NoneType")


def story_problems(page: str) -> list[str]:
    """Where a feedback page contradicts itself (issue: one story on the feedback page): a Python repr shown,
    a part with full marks named among those a mistake made fail, one explanation repeated within a part,
    a visible check called failed beside full marks, or markdown tables left without their layout."""
    import html as html_module
    import re

    problems = [f"a Python repr: {r}" for r in REPRS if r in page]
    scores = {}  # anchor id -> (score, max) from the summary's entries: <a href="#id">label</a> ... (Score: s / m)
    for anchor, score, most in re.findall(r'<li><a href="#([^"]+)">[^<]*</a> <span class="sdpa-kind">[^<]*</span> '
                                          r"[(（](?:Score: |得分：)([\d.]+) / ([\d.]+)[)）]", page):
        scores[anchor] = (float(score), float(most))
    causes = re.search(r'<section class="sdpa-fb sdpa-causes".*?</section>', page, re.S)
    summary = causes.group(0) if causes else ""
    for sentence in re.findall(r"(?:它也是|It is also why)(.*?)(?:<br>|</li>)", summary, re.S):
        for anchor in re.findall(r'href="#([^"]+)"', sentence):
            score, most = scores.get(anchor, (0.0, 1.0))
            if score >= most:
                problems.append(f"{anchor} has full marks but is named among the parts that failed")
    for block in re.findall(r'<div class="sdpa-fb">(.*?)</table>', page, re.S):
        said = [html_module.unescape(text) for text in re.findall(r"<div(?: class=\"ex\")?>([^<]{40,})</div>", block)]
        repeated = {text for text in said if said.count(text) > 1 and not text.startswith(("Same as above", "同上"))}

        problems += [f"said twice in one part: {text[:80]}" for text in sorted(repeated)]
    for chunk in re.split(r"Score for this cell: |本单元格得分：", page)[1:]:
        cell = chunk.split('<div class="cell ', 1)[0]  # up to the next cell
        full = re.match(r"(\d[\d.]*) / (\d[\d.]*)", cell)
        if full and float(full.group(1)) >= float(full.group(2)) > 0 and (
                "Visible check failed" in cell or "可见检查未通过" in cell):
            problems.append("a visible check called failed beside full marks")
    if "<table>" in page and ".text_cell_render table{border-collapse:collapse" not in page:
        problems.append("markdown tables have no table layout")
    return problems
