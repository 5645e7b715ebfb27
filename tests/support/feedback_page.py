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
