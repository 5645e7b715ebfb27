"""Reading the feedback page's summary in either edition (the exchange and hub tests)."""

# the summary's kinds of entry, in the Chinese edition's words -> in the English edition's
KINDS = {"自动检查": "automatic checks", "书面回答": "written response", "编程自由作答": "coding free-response"}
# "<label> (<kind>) (Score: s / m)" or "<label> （<kind>） （得分：s / m）"
ENTRY = r"[(（]([^)）]*)[)）] [(（](?:Score: |得分：)([\d.]+) / ([\d.]+)[)）]"


def kind(word: str) -> str:
    return KINDS.get(word, word)
