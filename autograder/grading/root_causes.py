""""先修这里": each mistake named once, where it lives, and the parts that fail because of it.

A bug in one helper shows up in several parts (the composite, the debugging
fix, the device checks).  The student should fix it once, where it lives:
this summary, at the top of the feedback page (above the per-part scores and
the notebook), says which code, in which part (a link to that part's cell),
and which other parts it explains.
"""
from __future__ import annotations

import html

from ..i18n import _
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
    lines = [_("先修这里（每个错误只列一次，从它所在的部分改起）：")]
    for cause in causes:
        entry = CATALOGUE[cause["code"]]
        line = "  " + _("{code} 在 {part}：{explanation}").format(
            code=f"[{cause['code']}]", part=labels.get(cause["home"], cause["home"]), explanation=_(entry.explanation))
        if cause["also"]:
            line += " " + _("它也是 {parts} 未通过的原因。").format(
                parts=_("、").join(labels.get(p, p) for p in cause["also"]))
        lines.append(line)
    return "\n".join(lines)


def render_html(causes: list, labels: dict, anchors: dict = None) -> str:
    """The summary for the top of the feedback page; `anchors` maps a part to its grade cell's id (a link)."""
    esc = html.escape
    anchors = anchors or {}
    items = []

    def part(name):
        label = esc(labels.get(name, name))
        return f'<a href="#{esc(anchors[name])}">{label}</a>' if name in anchors else label

    hint, title = esc(_("提示：")), esc(_("先修这里（每个错误只列一次，从它所在的部分改起）"))
    for cause in causes:
        entry = CATALOGUE[cause["code"]]
        also = ""
        if cause["also"]:
            also = "<br>" + esc(_("它也是 {parts} 未通过的原因。")).format(
                parts=esc(_("、")).join(part(p) for p in cause["also"]))
        code = f'<span class="code">[{esc(cause["code"])}]</span>'
        where = esc(_("{code} 在 {part}：{explanation}")).format(
            code=code, part=f"<b>{part(cause['home'])}</b>", explanation=esc(_(entry.explanation)))
        items.append(f'<li id="code-{esc(cause["code"])}">{where}<br>{hint}{esc(_(entry.hint))}{also}</li>')
    return ('<section class="sdpa-fb sdpa-causes" aria-labelledby="sdpa-causes-title" '
            'style="border:2px solid #b42318;border-radius:6px;padding:6px 10px;margin:8px 0">'
            '<h2 id="sdpa-causes-title" class="sum" style="font-size:1.1em;margin:0.2em 0">'
            f"{title}</h2><ul>{''.join(items)}</ul></section>")
