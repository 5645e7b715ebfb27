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
    state = "全部通过" if not failed else f"{len(failed)} 项未通过"
    return f"{label}：{_fmt(earned)} / {_fmt(cell_points)} 分（{len(part_result.checks)} 项隐藏检查，{state}）"


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


def render_html(label: str, part_result: PartResult, cell_points: float, earned: float,
                events: Iterable[dict] = ()) -> str:
    esc = html.escape
    rows = []
    codes = _codes_once(part_result)
    for check in part_result.checks:
        mark = '<span class="ok">✓</span>' if check.passed else '<span class="bad">✗</span>'
        detail = ""
        if check.passed and check.charged_elsewhere:
            detail = f'<div class="ex">{esc(check.message)}</div>'
        if not check.passed:
            detail = f"<div>{esc(check.message)}</div>"
            for code, first in codes.get(check.name, []):
                entry = CATALOGUE[code]
                if first:
                    detail += (f'<div><span class="code">[{esc(code)}]</span> {esc(entry.explanation)}'
                               f"<br>提示：{esc(entry.hint)}</div>")
                else:
                    detail += f'<div><span class="code">[{esc(code)}]</span>（同上）</div>'
            example = _shown_example(check.example)
            if example:
                pairs = "；".join(f"{esc(str(k))}: <code>{esc(str(v))}</code>" for k, v in example.items())
                detail += f'<div class="ex">失败的例子 — {pairs}</div>'
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
    for check in part_result.checks:
        mark = "✓" if check.passed else "✗"
        lines.append(f"  {mark} {check.title}  ({_fmt(check.points)}/{_fmt(check.max_points)})")
        if check.passed and check.charged_elsewhere:
            lines.append(f"      {check.message}")
        if not check.passed:
            lines.append(f"      {check.message}")
            for code, first in codes.get(check.name, []):
                entry = CATALOGUE[code]
                text = f"{entry.explanation} 提示：{entry.hint}" if first else "（同上）"
                lines.append(f"      [{code}] {text}")
            example = _shown_example(check.example)
            if example:
                lines.append("      例子: " + "; ".join(f"{k}: {v}" for k, v in example.items()))
    return "\n".join(lines)


def _event_text(event):
    if event.get("kind") == "NeedsReview":
        return (f"需要助教人工复核（{event.get('category')}）：第 {event.get('cell', 0) + 1} 个单元格第 "
                f"{event.get('line')} 行 {event.get('detail')}。这本身不扣分。")
    if "function" in event:
        what = "超时" if event["kind"] == "timeout" else "崩溃或退出"
        why = f"（{event['detail']}）" if event.get("detail") else ""
        return f"运行 {event['function']} 时{what}{why}，之后对它的检查均记为未通过。"
    where = f"第 {event['cell'] + 1} 个单元格" if isinstance(event.get("cell"), int) else "评分进程"
    if event.get("grade_id"):
        where += f"（{event['grade_id']}）"
    return f"{where}：{event.get('detail', event.get('kind'))}"
