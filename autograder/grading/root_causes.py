""""先修这里": each mistake named once, where it lives, and the parts that fail because of it.

A bug in one helper shows up in several parts (the composite, the debugging
fix, the device checks).  The student should fix it once, where it lives:
this summary, placed at the top of the feedback, says which code, in which
part, and which other parts it explains.
"""
from __future__ import annotations

import html

from .composition import HOME
from .misconceptions import CATALOGUE


def root_causes(results: dict, order: list) -> list:
    """[{code, home, also}] for each misconception named in `results` ({part: PartResult}), in `order` of parts.

    `home` is the helper part where the code lives (``composition.HOME``), or the first part that names it;
    `also` lists the other parts whose checks failed with it or passed only as a composition of it.
    """
    found = {}
    for part in order:
        result = results.get(part)
        if result is None:
            continue
        for check in result.checks:
            named = (check.codes if not check.passed else []) + list(check.charged_elsewhere)
            for code in named:
                if code not in CATALOGUE:
                    continue
                entry = found.setdefault(code, {"code": code, "home": None, "parts": []})
                if part not in entry["parts"]:
                    entry["parts"].append(part)
    out = []
    for code, entry in found.items():
        home = HOME.get(code) if HOME.get(code) in entry["parts"] else entry["parts"][0]
        out.append({"code": code, "home": home, "also": [p for p in entry["parts"] if p != home]})
    return out


def render_text(causes: list, labels: dict) -> str:
    lines = ["先修这里（每个错误只列一次，从它所在的部分改起）："]
    for cause in causes:
        entry = CATALOGUE[cause["code"]]
        line = f"  [{cause['code']}] 在 {labels.get(cause['home'], cause['home'])}：{entry.explanation}"
        if cause["also"]:
            line += f" 它也是 {'、'.join(labels.get(p, p) for p in cause['also'])} 未通过的原因。"
        lines.append(line)
    return "\n".join(lines)


def render_html(causes: list, labels: dict) -> str:
    esc = html.escape
    items = []
    for cause in causes:
        entry = CATALOGUE[cause["code"]]
        also = ""
        if cause["also"]:
            also = f"<br>它也是 {esc('、'.join(labels.get(p, p) for p in cause['also']))} 未通过的原因。"
        items.append(f'<li><span class="code">[{esc(cause["code"])}]</span> 在 '
                     f"<b>{esc(labels.get(cause['home'], cause['home']))}</b>：{esc(entry.explanation)}"
                     f"<br>提示：{esc(entry.hint)}{also}</li>")
    return ('<div class="sdpa-fb" style="border:2px solid #b42318;border-radius:6px;padding:6px 10px">'
            '<div class="sum">先修这里（每个错误只列一次，从它所在的部分改起）</div>'
            f"<ul>{''.join(items)}</ul></div>")
