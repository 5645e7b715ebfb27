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
    """[{code, home, also, lost}] for each misconception named in `results` ({part: PartResult}), in `order`.

    `home` is the helper part where the code lives (``composition.HOME``), or the first part that names it;
    `also` lists the other parts whose checks failed with it or passed only as a composition of it, and
    `lost` those of them that lost points to it (a part that kept its points is never called failed).
    """
    found = {}
    for part in order:
        result = results.get(part)
        if result is None:
            continue
        for check in result.checks:
            failed = check.codes if not check.passed else []
            for code in [*failed, *check.charged_elsewhere]:
                if code not in CATALOGUE:
                    continue
                entry = found.setdefault(code, {"code": code, "home": None, "parts": [], "lost": []})
                if part not in entry["parts"]:
                    entry["parts"].append(part)
                if code in failed and part not in entry["lost"]:
                    entry["lost"].append(part)
    out = []
    for code, entry in found.items():
        home = HOME.get(code) if HOME.get(code) in entry["parts"] else entry["parts"][0]
        out.append({"code": code, "home": home, "also": [p for p in entry["parts"] if p != home],
                    "lost": [p for p in entry["lost"] if p != home]})
    return out


def _also_lines(cause: dict, name, esc=str) -> list[str]:
    """What the summary says of the other parts: failed where they lost points, affected where they kept
    them (`name` renders a part; `esc` the message text, for HTML)."""
    lost = [p for p in cause["also"] if p in cause.get("lost", cause["also"])]
    kept = [p for p in cause["also"] if p not in lost]
    lines = []
    if lost:
        lines.append(esc(_("它也是 {parts} 未通过的原因。")).format(parts=esc(_("、")).join(name(p) for p in lost)))
    if kept:
        lines.append(esc(_("它也影响 {parts} 的结果，但那里没有扣分（只在它所在的部分扣一次）。")).format(
            parts=esc(_("、")).join(name(p) for p in kept)))
    return lines


def render_text(causes: list, labels: dict) -> str:
    lines = [_("先修这里（每个错误只列一次，从它所在的部分改起）：")]
    for cause in causes:
        entry = CATALOGUE[cause["code"]]
        line = "  " + _("{code} 在 {part}：{explanation}").format(
            code=f"[{cause['code']}]", part=labels.get(cause["home"], cause["home"]), explanation=_(entry.explanation))
        line += "".join(" " + text for text in _also_lines(cause, lambda p: labels.get(p, p)))
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
        also = "".join("<br>" + text for text in _also_lines(cause, part, esc))
        code = f'<span class="code">[{esc(cause["code"])}]</span>'
        where = esc(_("{code} 在 {part}：{explanation}")).format(
            code=code, part=f"<b>{part(cause['home'])}</b>", explanation=esc(_(entry.explanation)))
        items.append(f'<li id="code-{esc(cause["code"])}">{where}<br>{hint}{esc(_(entry.hint))}{also}</li>')
    return ('<section class="sdpa-fb sdpa-causes" aria-labelledby="sdpa-causes-title" '
            'style="border:2px solid #b42318;border-radius:6px;padding:6px 10px;margin:8px 0">'
            '<h2 id="sdpa-causes-title" class="sum" style="font-size:1.1em;margin:0.2em 0">'
            f"{title}</h2><ul>{''.join(items)}</ul></section>")
