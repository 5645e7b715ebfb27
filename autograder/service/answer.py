"""What a student reads after "Check my work": per part "passes" or "needs work", each misconception named
with its explanation and hint, and each failed check's message with its shrunk example, in the notebook's
language and in the feedback page's words, read from the grading record (`record`).

Only what the feedback page already shows leaves the grader: the checks' messages and the smallest failing
example, never a check's code or its full inputs."""
from __future__ import annotations

from typing import Any

from .. import i18n
from ..grading import record
from ..grading.misconceptions import CATALOGUE
from ..i18n import _
from ..notebook.editions import language_of

# A failing check's message may carry the student's own exception text, which their code can fill with the
# check's inputs: a check shows its first characters only (the shrunk example is the input a student needs).
MESSAGE_CHARS = 240
EXAMPLE_CHARS = 600


def answer(graded: dict, show_points: bool = False) -> dict[str, Any]:
    """The answer to one check, as JSON-ready data: {"language", "parts": [...], "codes": [...]}; points only
    when the instructor shows them (`show_points`)."""
    language = language_of(graded.get("assignment"))
    with i18n.using(language):
        parts = [_part(cell, show_points) for cell in graded.get("cells", []) if isinstance(cell, dict)]
    return {"language": language, "parts": parts, "codes": record.codes_named(graded),
            "passes": all(part["passes"] for part in parts)}


def labels(assignment: str) -> dict[str, str]:
    """The words of JupyterLab's button and panel (``labextension/``), in the assignment's language: the
    student's environment holds none of the course's words, so it asks the service for them."""
    with i18n.using(language_of(assignment)):
        return {"language": language_of(assignment), "button": _("检查我的作业"),
                "tooltip": _("用评分时的隐藏检查检查这份笔记本（包括还没保存的修改）；不计分"),
                "title": _("检查结果"), "passes": _("通过"), "needs_work": _("需要修改"),
                "held": _("等待老师复核"), "all_pass": _("每一部分都通过了。"),
                "some_fail": _("有 {count} 个部分需要修改。"), "waiting": _("排队中：前面还有 {place} 份"),
                "grading": _("正在检查……"), "example": _("最小的失败例子"), "hint": _("提示"),
                "no_answer": _("检查服务没有回答，请稍后再试。"), "seconds": _("用时 {seconds} 秒"),
                "points": _("{points} / {max_points} 分"), "too_large": too_large()}


def too_large() -> str:
    """A check over the size the service takes, with {limit} (MiB) to fill in: the panel's words for the
    forwarder's refusal, and the service's own."""
    return _("这份笔记本超过了检查允许的 {limit} MiB：清除输出（编辑 > 清除所有单元格的输出），再检查一次。")


def _part(cell: dict, show_points: bool) -> dict[str, Any]:
    failed = [check for check in cell.get("checks", []) if isinstance(check, dict) and not check.get("passed")]
    held = bool(cell.get("held"))
    full = float(cell.get("points") or 0) >= float(cell.get("max_points") or 0)
    part = {"part": str(cell.get("part") or cell.get("grade_id")), "passes": full and not failed and not held,
            "held": held,
            "checks": [{"message": _cut(str(check.get("message", "")), MESSAGE_CHARS),
                        "example": _example(check.get("example"))} for check in failed],
            "mistakes": [_mistake(code) for code in record.codes_named({}, [cell])]}
    if show_points:
        part.update(points=float(cell.get("points") or 0), max_points=float(cell.get("max_points") or 0))
    return part


def _example(example: Any) -> dict[str, str]:
    """The shrunk failing example as the feedback page shows it (labels already in the notebook's language)."""
    if not isinstance(example, dict):
        return {}
    return {_cut(str(label), MESSAGE_CHARS): _cut(str(text), EXAMPLE_CHARS) for label, text in example.items()}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _mistake(code: str) -> dict[str, str]:
    entry = CATALOGUE.get(code)
    if entry is None:
        return {"code": code, "explanation": "", "hint": ""}
    return {"code": code, "explanation": _(entry.explanation), "hint": _(entry.hint)}
