"""Render a part's check results as the grade cell's output (HTML and text).

Only results are rendered: check titles, points, our own messages, the
misconception explanation and a small example.  Never the hidden check code
or the reference.  Every string is escaped, since messages may quote what a
student's code raised or returned.
"""
from __future__ import annotations

import html
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..i18n import _, ngettext
from ..notebook.cells import number as cell_number
from .assertions import TOLERANCE_KEY
from .misconceptions import CATALOGUE

if TYPE_CHECKING:
    from .hidden_checks import PartResult

STYLE = ("<style>.sdpa-fb{font-family:system-ui,sans-serif;font-size:14px;line-height:1.45}"
         ".sdpa-fb .sum{font-weight:600;margin:4px 0 6px}.sdpa-fb table{border-collapse:collapse}"
         ".sdpa-fb table{width:100%}.sdpa-fb td{padding:2px 8px;vertical-align:top;border-bottom:1px solid #ddd}"
         ".sdpa-fb td:last-child{white-space:nowrap;text-align:right}"
         ".sdpa-fb .ok{color:#18794e}.sdpa-fb .bad{color:#b42318}.sdpa-fb code{background:#f2f2f2;padding:0 3px}"
         ".sdpa-fb .code{font-family:monospace;font-weight:600;color:#8a3b00}.sdpa-fb .ex{color:#555;font-size:12px}"
         "</style>")


def _fmt(points):
    return f"{points:g}"


def summary_line(label: str, part_result: PartResult, cell_points: float, earned: float) -> str:
    failed = [c for c in part_result.checks if not c.passed]
    state = _("全部通过") if not failed else _("{failed} 项未通过").format(failed=len(failed))
    checks = ngettext("{n} 项隐藏检查", "{n} 项隐藏检查", len(part_result.checks)).format(n=len(part_result.checks))
    return _("{label}：{earned} / {points} 分（{checks}，{state}）").format(
        label=label, earned=_fmt(earned), points=_fmt(cell_points), checks=checks, state=state)


def _shown_example(example):
    """The example as a student sees it: no tolerance jargon (it stays in grading.json)."""
    return {k: v for k, v in example.items() if k != TOLERANCE_KEY}


def _codes_once(part_result):
    """{check name: [(code, first time in this cell?)]}: a code's explanation is shown once per cell."""
    seen, out = set(), {}
    for check in part_result.checks:
        if check.passed:
            continue
        out[check.name] = [(code, code not in seen) for code in check.codes if code in CATALOGUE]
        seen.update(check.codes)
    return out


def _explained_once(part_result):
    """{check name: whether its charged-elsewhere note is the part's first for its codes}: the note that a
    difference comes from another part's mistake is said once per part, then referred to."""
    seen, out = set(), {}
    for check in part_result.checks:
        key = (tuple(sorted(check.charged_elsewhere)), tuple(sorted(check.unexplained)))
        out[check.name] = key not in seen
        seen.add(key)
    return out


def _said_once(part_result):
    """{check name: whether its failure message is the first of its words in the part}: a message that several
    checks fail with (the same exception on every case) is written once, then referred to."""
    seen, out = set(), {}
    for check in part_result.checks:
        out[check.name] = check.passed or check.message not in seen
        if not check.passed:
            seen.add(check.message)
    return out


def _credit_note(check, first: bool) -> str:
    """Why a check that differs from PyTorch kept its points: in full the first time in a part, then briefly."""
    if first:
        return check.message
    if check.charged_elsewhere:
        return _("同上：差异来自 {codes}，在那个错误所在的部分扣分。").format(
            codes=" ".join(f"[{c}]" for c in check.charged_elsewhere))
    return _("同上：差异来自 {helpers} 的输出，只在那里扣分；已标记给助教审阅。").format(
        helpers=_("、").join(check.unexplained))


def _credited(check) -> bool:
    return check.passed and bool(check.charged_elsewhere or check.unexplained)


def render_html(label: str, part_result: PartResult, cell_points: float, earned: float,
                events: Iterable[dict] = ()) -> str:
    esc = html.escape
    rows = []
    codes = _codes_once(part_result)
    hint, same, failed_example = esc(_("提示：")), esc(_("（同上）")), esc(_("失败的例子 — "))
    explained, said = _explained_once(part_result), _said_once(part_result)
    for check in part_result.checks:
        mark = '<span class="ok">✓</span>' if check.passed else '<span class="bad">✗</span>'
        detail = ""
        if _credited(check):
            detail = f'<div class="ex">{esc(_credit_note(check, explained[check.name]))}</div>'
        if not check.passed:
            message = check.message if said[check.name] else _("（同上）")
            detail = f"<div>{esc(message)}</div>"
            for code, first in codes.get(check.name, []):
                entry = CATALOGUE[code]
                if first:
                    explanation, advice = esc(_(entry.explanation)), esc(_(entry.hint))
                    detail += (f'<div><span class="code">[{esc(code)}]</span> {explanation}'
                               f"<br>{hint}{advice}</div>")
                else:
                    detail += f'<div><span class="code">[{esc(code)}]</span>{same}</div>'
            example = _shown_example(check.example)
            if example:
                pairs = esc(_("；")).join(f"{esc(str(k))}: <code>{esc(str(v))}</code>" for k, v in example.items())
                detail += f'<div class="ex">{failed_example}{pairs}</div>'
        rows.append(f"<tr><td>{mark}</td><td>{esc(check.title)}{detail}</td>"
                    f"<td>{_fmt(check.points)} / {_fmt(check.max_points)}</td></tr>")
    notes = "".join(f'<div class="bad">{esc(_event_text(e))}</div>' for e in events)
    return (f'{STYLE}<div class="sdpa-fb"><div class="sum">{esc(summary_line(label, part_result, cell_points, earned))}'
            f"</div>{notes}<table>{''.join(rows)}</table></div>")


def render_text(label: str, part_result: PartResult, cell_points: float, earned: float,
                events: Iterable[dict] = ()) -> str:
    lines = [summary_line(label, part_result, cell_points, earned)]
    lines += [f"  ! {_event_text(e)}" for e in events]
    codes = _codes_once(part_result)
    explained, said = _explained_once(part_result), _said_once(part_result)
    for check in part_result.checks:
        mark = "✓" if check.passed else "✗"
        lines.append(f"  {mark} {check.title}  ({_fmt(check.points)}/{_fmt(check.max_points)})")
        if _credited(check):
            lines.append("      " + _credit_note(check, explained[check.name]))
        if not check.passed:
            same = _("（同上）").strip()  # the English " (as above)" follows a tag on the page; here, a space
            lines.append("      " + (check.message if said[check.name] else same))
            for code, first in codes.get(check.name, []):
                entry = CATALOGUE[code]
                text = _(entry.explanation) + " " + _("提示：") + _(entry.hint) if first else same
                lines.append(f"      [{code}] {text}")
            example = _shown_example(check.example)
            if example:
                lines.append("      " + _("例子: ") + "; ".join(f"{k}: {v}" for k, v in example.items()))
    return "\n".join(lines)


def _where(note):
    return _("第 {cell} 个单元格第 {line} 行 {detail}").format(cell=cell_number(note.get("cell", 0)),
                                                        line=note.get("line"), detail=note.get("detail"))


def flagged_lines(notes, most=3) -> str:
    """The first `most` flagged lines of `notes` (review notes), and how many there are in all."""
    shown = _("；").join(_where(n) for n in notes[:most])
    return shown + (_("等 {n} 处").format(n=len(notes)) if len(notes) > most else "")


def _event_text(event):
    if event.get("kind") == "Held":
        where = flagged_lines(event.get("notes", []))
        return _("隐藏检查给出 {points} 分，但评分程序读不懂你代码里的 {where}：助教读过这些代码之前，"
                 "这一部分的分数不计入（不是扣分）。").format(points=f"{event.get('points', 0):g}", where=where)
    if event.get("kind") == "NeedsReview":
        if event.get("holds"):
            return _("需要助教人工复核（{category}）：{where}。评分程序读不懂这段代码，复核之前各部分的分数都不计入。"
                     ).format(category=event.get("category"), where=_where(event))
        return _("需要助教人工复核（{category}）：第 {cell} 个单元格第 {line} 行 {detail}。这本身不扣分。").format(
            category=event.get("category"), cell=cell_number(event.get("cell", 0)), line=event.get("line"),
            detail=event.get("detail"))
    if "function" in event:
        why = _("（{detail}）").format(detail=event["detail"]) if event.get("detail") else ""
        text = _("运行 {function} 时超时{why}，之后对它的检查均记为未通过。") if event["kind"] == "timeout" \
            else _("运行 {function} 时崩溃或退出{why}，之后对它的检查均记为未通过。")
        return text.format(function=event["function"], why=why)
    where = _("第 {cell} 个单元格").format(cell=cell_number(event["cell"])) if isinstance(event.get("cell"), int) \
        else _("评分进程")
    if event.get("grade_id"):
        where += _("（{grade_id}）").format(grade_id=event["grade_id"])
    return _("{where}：{detail}").format(where=where, detail=event.get("detail", event.get("kind")))


def unexplained_notes(results: dict, cell_of) -> list[dict]:
    """Review notes (never holding points) for the differences no known misconception explains
    (``hidden_checks.unexplained_differences``): one per helper, pointing at its cell (`cell_of(("call",
    helper))`), saying how many checks elsewhere kept their points and where the others were charged."""
    from .hidden_checks import unexplained_differences

    found = {}
    for helper, check in unexplained_differences(results):
        found.setdefault(helper, []).append(check)
    notes = []
    for helper, checks in found.items():
        kept = sum(1 for check in checks if check.passed)
        charged = list(dict.fromkeys(check.part for check in checks if not check.passed))
        detail = _("{helper} 的输出与 PyTorch 不同，但不是任何已知的误解：别处有 {kept} 项检查按学生自己的函数组合"
                   "保留了分数，{charged} 项检查扣了分（{parts}）。请读这段代码，必要时给误解目录补一条。").format(
            helper=helper, kept=kept, charged=len(checks) - kept, parts=_("、").join(charged) or _("无"))
        notes.append({"cell": cell_of(("call", helper)), "line": 0, "category": "unexplained-difference",
                      "holds": False, "detail": detail})
    return notes
