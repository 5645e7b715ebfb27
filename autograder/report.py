"""The class report of an assignment: ``sdpa-course report sdpa [--out DIR]``.

Reads the gradebook (scores, as the formgrader shows them: a manual score
replaces the automatic one) and the ``<notebook>.grading.json`` files that
`TrustedScoring` writes next to each autograded notebook (checks,
misconception codes, seconds, sandbox events), and writes to ``--out``/ASSIGNMENT
(default ``reports/<assignment>/`` in the course):

- ``cells.csv``     one row per student and grade cell;
- ``students.csv``  one row per student: total, codes, grading seconds;
- ``report.html``   summary, tables and four charts, saved next to it as PNG:
  ``score_histogram.png``, ``pass_rate.png`` (share of students with full
  points, per grade cell), ``misconceptions.png`` (students whose feedback
  names each code), ``slowest.png`` (the slowest submissions to grade).
"""
from __future__ import annotations

import csv
import html
import logging
import os
import statistics
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional, Union

from . import i18n
from .batch.coursedir import ASSIGNMENT, CourseError, load_app, sqlite_path, step_dir
from .grading import record
from .i18n import _
from .notebook import editions
from .notebook.cells import number as cell_number
from .service import records

CHARTS = ("score_histogram.png", "pass_rate.png", "misconceptions.png", "slowest.png")
WHILE_WORKING_CHART = "while_working.png"  # only when the check service ran for the course
SLOWEST = 10


@dataclass
class StudentRow:
    student: str
    score: float
    max_score: float
    auto_score: float
    max_auto_score: float
    needs_manual_grade: bool
    late_penalty: float
    seconds: float = None  # from grading.json; None when there is none
    codes: list = field(default_factory=list)
    events: int = 0
    isolated: bool = None
    review: list = field(default_factory=list)  # code flagged for a person (grading.json "review")
    held: float = 0.0  # points the checks gave that wait for a person (grading.json cells' "held_points")


@dataclass
class Data:
    assignment: str
    cells: list  # dicts, one per student and grade cell (the cells.csv rows)
    students: list  # StudentRow
    grade_cells: list  # (notebook, grade_id, cell_type, max_score) in notebook order
    parts: dict  # grade_id -> part (function), from grading.json
    # what the check service saw while students worked (`records.while_working`), if it ran for this course
    while_working: Optional[dict] = None

    @property
    def pass_rates(self) -> dict[str, float]:
        """{grade_id: share of students with full points} for the automatically graded cells."""
        rates = {}
        for notebook, grade_id, cell_type, _max_score in self.grade_cells:
            if cell_type != "code":
                continue
            rows = [r for r in self.cells if r["grade_id"] == grade_id and r["notebook"] == notebook]
            if rows:
                rates[grade_id] = sum(1 for r in rows if r["score"] == r["max_score"]) / len(rows)
        return rates

    @property
    def code_counts(self) -> dict[str, int]:
        """{code: number of students whose feedback names it}, most frequent first."""
        counts = {}
        for row in self.students:
            for code in row.codes:
                counts[code] = counts.get(code, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    @property
    def slowest(self) -> list[StudentRow]:
        timed = [r for r in self.students if r.seconds is not None]
        return sorted(timed, key=lambda r: -r.seconds)[:SLOWEST]


def collect(course: Union[str, os.PathLike], assignment: str = ASSIGNMENT, nbgrader_args: Sequence[str] = ()) -> Data:
    """Everything the report shows, from the gradebook and the grading.json files."""
    from nbgrader.api import Gradebook, MissingEntry

    app = load_app(course, nbgrader_args)
    coursedir = app.coursedir
    db = sqlite_path(coursedir.db_url)
    if not os.path.exists(db):
        raise CourseError(f"no gradebook at {db} — run `nbgrader generate_assignment {assignment}` and "
                          f"`sdpa-course autograde {assignment}` first")
    cells, students, grade_cells, parts = [], [], [], {}
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        try:
            spec = gb.find_assignment(assignment)
        except MissingEntry:
            raise CourseError(f"assignment {assignment!r} is not in {db} — check the name, or run "
                              f"`nbgrader generate_assignment {assignment}` first") from None
        for notebook in spec.notebooks:
            for cell in notebook.grade_cells:
                grade_cells.append((notebook.name, cell.name, cell.cell_type, float(cell.max_score)))
        for student in sorted(gb.students, key=lambda s: s.id):
            try:
                submission = gb.find_submission(assignment, student.id)
            except MissingEntry:
                continue
            report = {}
            for notebook in submission.notebooks:
                report[notebook.name] = _grading_report(coursedir, student.id, assignment, notebook.name)
            row = StudentRow(student.id, float(submission.score), float(submission.max_score),
                             float(submission.code_score), float(submission.max_code_score),
                             bool(submission.needs_manual_grade), float(submission.late_submission_penalty or 0))
            seconds = [r["seconds"] for r in report.values() if r and isinstance(r.get("seconds"), (int, float))]
            row.seconds = round(sum(seconds), 3) if seconds else None
            row.events = sum(len(r.get("events", [])) for r in report.values() if r)
            row.review = [dict(note, notebook=name) for name, r in report.items() if r
                          for note in r.get("review", []) if isinstance(note, dict)]
            row.held = sum(sum(record.held_points(r).values()) for r in report.values() if r)
            isolated = [r.get("sandbox", {}).get("isolated") for r in report.values() if r]
            row.isolated = all(isolated) if isolated else None
            codes = []
            for notebook in submission.notebooks:
                by_id = {c.get("grade_id"): c for c in (report[notebook.name] or {}).get("cells", [])}
                for grade in sorted(notebook.grades, key=lambda g: _order(grade_cells, notebook.name, g.name)):
                    info = by_id.get(grade.name, {})
                    checks = info.get("checks", [])
                    cell_codes = record.codes_named({}, [info])
                    codes.extend(cell_codes)
                    if info.get("part"):
                        parts[grade.name] = info["part"]
                    cells.append({
                        "student": student.id, "notebook": notebook.name, "grade_id": grade.name,
                        "cell_type": grade.cell_type, "part": info.get("part", ""),
                        "score": float(grade.score), "max_score": float(grade.max_score),
                        "auto_score": _num(grade.auto_score), "manual_score": _num(grade.manual_score),
                        "needs_manual_grade": bool(grade.needs_manual_grade),
                        "checks_passed": sum(1 for c in checks if c.get("passed")) if checks else "",
                        "checks_total": len(checks) if checks else "",
                        "codes": " ".join(cell_codes)})
            row.codes = list(dict.fromkeys(codes))
            students.append(row)
    if not students:
        raise CourseError(f"no graded submissions of {assignment!r} in {db} — run "
                          f"`sdpa-course autograde {assignment}` first")
    return Data(assignment, cells, students, grade_cells, parts, _while_working(course, assignment, students))


def _while_working(course, assignment, students):
    """The check service's record for this assignment (``check_service/check_service.db`` beside the gradebook),
    or None."""
    path = records.default_path(course)
    if not os.path.exists(path):
        return None
    stored = records.Records(path, read_only=True)
    try:
        checks = stored.of(assignment)
    finally:
        stored.close()
    return records.while_working(checks, {row.student: row.codes for row in students}) if checks else None


def _order(grade_cells, notebook, grade_id):
    for index, (nb, gid, _kind, _max) in enumerate(grade_cells):
        if nb == notebook and gid == grade_id:
            return index
    return len(grade_cells)


def _num(value):
    return "" if value is None else float(value)


def _grading_report(coursedir, student, assignment, notebook):
    path = os.path.join(step_dir(coursedir, coursedir.autograded_directory, student, assignment),
                        record.filename(notebook))
    return record.load(path) or None


def build(course: Union[str, os.PathLike], assignment: str = ASSIGNMENT, out: Optional[Union[str, os.PathLike]] = None,
          nbgrader_args: Sequence[str] = (), language: Optional[str] = None) -> dict:
    """Write the CSV files, charts and HTML; returns {"dir", "html", "cells_csv", "students_csv", "data"}.

    The page and charts are in `language` ("zh", "en"), by default the assignment's edition's; the CSV
    files keep their column names in every language (they are read by programs)."""
    data = collect(course, assignment, nbgrader_args)
    with i18n.using(language or editions.language_of(assignment)):
        return _write(data, course, assignment, out)


def _write(data, course, assignment, out):
    # one folder per assignment, under --out as under the default: each edition's report keeps its own
    out = os.path.abspath(os.path.join(out or os.path.join(course, "reports"), assignment))
    os.makedirs(out, exist_ok=True)
    cells_csv = os.path.join(out, "cells.csv")
    with open(cells_csv, "w", newline="", encoding="utf-8") as f:
        fields = ["student", "notebook", "grade_id", "cell_type", "part", "score", "max_score", "auto_score",
                  "manual_score", "needs_manual_grade", "checks_passed", "checks_total", "codes"]
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(data.cells)
    students_csv = os.path.join(out, "students.csv")
    with open(students_csv, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "score", "max_score", "auto_score", "max_auto_score", "late_penalty",
                         "needs_manual_grade", "seconds", "sandbox_events", "needs_review", "codes"])
        for r in data.students:
            writer.writerow([r.student, r.score, r.max_score, r.auto_score, r.max_auto_score, r.late_penalty,
                             r.needs_manual_grade, "" if r.seconds is None else r.seconds, r.events,
                             len(r.review), " ".join(r.codes)])
    _charts(data, out)
    page = os.path.join(out, "report.html")
    with open(page, "w", encoding="utf-8") as f:
        f.write(_html(data))
    return {"dir": out, "html": page, "cells_csv": cells_csv, "students_csv": students_csv, "data": data,
            "charts": [os.path.join(out, name) for name in CHARTS]}


# -- charts ------------------------------------------------------------------

# Faces tried glyph by glyph (matplotlib falls back along a list of families): DejaVu (matplotlib's
# own) first, then the CJK faces a Chinese report needs (fonts-noto-cjk on Debian; macOS, Windows).
CHART_FONTS = ["DejaVu Sans", "Noto Sans CJK SC", "Source Han Sans SC", "PingFang SC", "Microsoft YaHei",
               "WenQuanYi Zen Hei"]


def chart_fonts():
    """The charts' fonts (`CHART_FONTS`), for a `with` block."""
    import matplotlib

    return matplotlib.rc_context({"font.family": CHART_FONTS})


def _figure(height):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot(111)


def _save(fig, path):
    fig.tight_layout()
    fig.savefig(path, format="png")


def _hbar(path, labels, values, xlabel, title, fmt, xmax=None, empty=None, integer=False):
    fig, ax = _figure(max(2.2, 0.32 * len(labels) + 1.2))
    if labels:
        positions = range(len(labels))
        bars = ax.barh(list(positions), values, color="#3b6ea5")
        ax.set_yticks(list(positions))
        ax.set_yticklabels(labels, fontsize=8)
        ax.invert_yaxis()
        for bar, value in zip(bars, values):
            ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, " " + fmt(value), va="center", fontsize=8)
        ax.set_xlim(0, (xmax or max(values) or 1) * 1.15)
        if integer:
            ax.xaxis.get_major_locator().set_params(integer=True)
    else:
        ax.text(0.5, 0.5, empty or _("没有可显示的内容"), ha="center", va="center", transform=ax.transAxes)
        ax.set_yticks([])
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    _save(fig, path)


def _charts(data, out):
    logging.getLogger("matplotlib").setLevel(logging.ERROR)
    with warnings.catch_warnings(), chart_fonts():
        warnings.simplefilter("ignore")
        fig, ax = _figure(3.6)
        scores = [r.score for r in data.students]
        top = max([r.max_score for r in data.students] + [1.0])
        ax.hist(scores, bins=20, range=(0, top), color="#3b6ea5", edgecolor="white")
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.set_xlabel(_("总分（满分 {top}；人工评分完成后计入）").format(top=f"{top:g}"))
        ax.set_ylabel(_("学生人数"))
        ax.set_title(_("{assignment}：成绩分布（{count} 名学生）").format(assignment=data.assignment,
                                                                     count=len(scores)))
        _save(fig, os.path.join(out, "score_histogram.png"))

        rates = data.pass_rates
        labels = [_cell_label(data, gid) for gid in rates]
        _hbar(os.path.join(out, "pass_rate.png"), labels, [100 * v for v in rates.values()],
              _("得满分的学生（%）"), _("各评分单元格的满分率"), lambda v: f"{v:.0f}%", xmax=100)

        counts = data.code_counts
        _hbar(os.path.join(out, "misconceptions.png"), list(counts), list(counts.values()), _("学生人数"),
              _("反馈中指出的误解代码"), lambda v: f"{v:g}", empty=_("没有误解代码"), integer=True)

        if data.while_working:
            met = data.while_working["codes"]
            _hbar(os.path.join(out, WHILE_WORKING_CHART), list(met), [v["met"] for v in met.values()], _("学生人数"),
                  _("做题时检查遇到的误解代码"), lambda v: f"{v:g}", empty=_("没有误解代码"), integer=True)

        slow = data.slowest
        _hbar(os.path.join(out, "slowest.png"), [r.student for r in slow], [r.seconds for r in slow],
              _("秒（沙箱运行 + 隐藏检查）"), _("评分最慢的 {count} 份提交").format(count=len(slow)),
              lambda v: f"{v:.1f}s", empty=_("没有 grading.json 文件"))


def _cell_label(data, grade_id):
    part = data.parts.get(grade_id)
    return f"{grade_id} ({part})" if part and part not in grade_id else grade_id


# -- HTML --------------------------------------------------------------------

STYLE = """body{font-family:system-ui,"Noto Sans CJK SC",sans-serif;max-width:980px;margin:24px auto;padding:0 12px;
color:#222}
table{border-collapse:collapse;margin:8px 0 24px}
td,th{border-bottom:1px solid #ddd;padding:3px 10px;text-align:left}th{white-space:nowrap}
td code{overflow-wrap:anywhere}
td.n{text-align:right;font-variant-numeric:tabular-nums}img{max-width:100%;border:1px solid #eee}
a{color:#1a4f8b}.grid{display:grid;grid-template-columns:1fr 1fr;gap:12px}"""


def _code_link(code: str) -> str:
    """A code in the students table, linked to its row in the codes table."""
    return f'<a href="#code-{html.escape(code)}">{html.escape(code)}</a>'


def _table(caption: str, headers: Sequence[str], rows: str, columns: int) -> str:
    """A table with its caption and column headers (`scope` tells screen readers what each cell belongs to)."""
    head = "".join(f'<th scope="col">{html.escape(h)}</th>' for h in headers)
    none = html.escape(_("无"))  # not inside the f-string: the message extractor reads no f-string
    body = rows or f"<tr><td colspan={columns}>{none}</td></tr>"
    return f"<table><caption class=visually-hidden>{html.escape(caption)}</caption><tr>{head}</tr>{body}</table>"


def _while_working_section(figures: dict) -> tuple[str, str, str]:
    """(heading, note, table) of "while working": each code the check service named, how many students met it
    and how many submitted without it, then checks per student."""
    esc = html.escape
    title = _("做题时的检查")
    per_student = figures["checks_per_student"]
    note = _("{students} 名学生在做题时用“检查我的作业”检查了 {checks} 次。下表每一行是检查中指出过的一个误解代码："
             "遇到它的学生人数，以及其中提交时已经改好的人数。").format(students=len(per_student),
                                                      checks=sum(per_student.values()))
    rows = "".join(f"<tr><td><code>{esc(code)}</code></td><td class=n>{v['met']}</td><td class=n>{v['fixed']}</td></tr>"
                   for code, v in figures["codes"].items())
    alt = _("做题时检查遇到的误解代码及学生人数的条形图（数值见下方的表格）")
    chart = f'<img src="{WHILE_WORKING_CHART}" alt="{esc(alt)}">'
    table = _table(title, [_("代码"), _("遇到的学生"), _("提交前已改好")], rows, 3)
    return title, note, chart + table


def _html(data):
    esc = html.escape
    scores = [r.score for r in data.students]
    top = max(r.max_score for r in data.students)
    try:
        from .grading.misconceptions import CATALOGUE
    except Exception:  # noqa: BLE001
        CATALOGUE = {}
    summary = [(_("学生人数"), len(scores)), (_("平均分"), f"{statistics.mean(scores):.1f} / {top:g}"),
               (_("中位数"), f"{statistics.median(scores):g}"),
               # the written answers count once a person has graded them: full marks of the checks, here
               (_("自动检查全部满分的人数"), sum(1 for r in data.students
                                         if r.max_auto_score > 0 and r.auto_score >= r.max_auto_score)),
               (_("零分人数"), sum(1 for s in scores if s == 0)),
               (_("需要人工评分"), sum(1 for r in data.students if r.needs_manual_grade)),
               (_("需要人工审阅（代码触及评分过程）"), sum(1 for r in data.students if r.review)),
               (_("分数待复核后才计入"), sum(1 for r in data.students if r.held))]
    rows = "".join(
        f"<tr><td>{esc(r.student)}</td><td class=n>{r.score:g}</td><td class=n>{r.max_score:g}</td>"
        f"<td class=n>{'' if r.seconds is None else f'{r.seconds:.1f}'}</td><td class=n>{r.events}</td>"
        f"<td class=n>{len(r.review) or ''}</td><td>{' '.join(_code_link(c) for c in r.codes)}</td></tr>"
        for r in data.students)
    holds = {False: _("否"), True: _("是")}
    review = "".join(
        f"<tr><td>{esc(r.student)}</td>"
        f"<td class=n>{esc(str(cell_number(note.get('cell', 0))))}:{esc(str(note.get('line')))}</td>"
        f"<td>{esc(str(note.get('category')))}</td><td><code>{esc(str(note.get('detail')))}</code></td>"
        f"<td>{esc(holds[bool(note.get('holds'))])}</td></tr>"
        for r in data.students for note in r.review)
    rates = "".join(f"<tr><td>{esc(_cell_label(data, gid))}</td><td class=n>{100 * v:.0f}%</td></tr>"
                    for gid, v in data.pass_rates.items())

    entries = {code: CATALOGUE.get(code) for code in data.code_counts}
    codes = "".join(
        f'<tr id="code-{esc(code)}"><td><code>{esc(code)}</code></td><td class=n>{n}</td>'
        f"<td>{esc(getattr(entries[code], 'home', ''))}</td>"
        f"<td>{esc(_(entries[code].explanation) if entries[code] is not None else '')}</td></tr>"
        for code, n in data.code_counts.items())
    slow = "".join(f"<tr><td>{esc(r.student)}</td><td class=n>{r.seconds:.1f}</td></tr>" for r in data.slowest)
    facts = "".join(f"<li>{esc(k)}: <b>{esc(str(v))}</b></li>" for k, v in summary)
    title = _("{assignment}：全班报告").format(assignment=data.assignment)
    links = _("数据：{cells}（每名学生每个评分单元格一行），{students}（每名学生一行）。").format(
        cells='<a href="cells.csv">cells.csv</a>', students='<a href="students.csv">students.csv</a>')
    charts = "".join(
        f'<img src="{name}" alt="{esc(alt)}">' for name, alt in (
            ("score_histogram.png", _("成绩分布直方图：每个分数段的学生人数（平均分和中位数见上方）")),
            ("pass_rate.png", _("各评分单元格的满分率条形图（数值见下方的表格）")),
            ("misconceptions.png", _("反馈中指出的误解代码及学生人数的条形图（数值见下方的表格）")),
            ("slowest.png", _("评分最慢的提交及其秒数的条形图（数值见下方的表格）"))))
    student, seconds, code = _("学生"), _("秒"), _("代码")
    review_title, rates_title, codes_title = _("需要人工审阅"), _("各评分单元格的满分率"), _("误解代码")
    slow_title, students_title = _("评分最慢的提交"), _("每名学生")
    review_note = _("这些提交中的代码触及评分进程或运行环境（gc、sys.modules、ctypes、prlimit、其他进程、动态代码）。"
                    "“暂扣分数”为“是”的一行，评分程序读不懂：这名学生各部分的分数在 formgrader 里标为需要人工评分，"
                    "由助教读过代码后给出；其余各行本身不扣分，但应当有人读一读。") + _(
        "类别为 unexplained-difference 的一行：某个函数的输出与 PyTorch 不同，但不是误解目录里的任何一种；"
        "请读这段代码，必要时给误解目录补一条。")
    codes_note = _("每个误解代码只在它所在的部分扣一次分；反馈页面的顶部用同一个代码指出它。")
    sections = [
        (review_title, review_note, _table(review_title, [student, _("单元格:行"), _("类别"), code, _("暂扣分数")],
                                           review, 5)),
        (rates_title, "", _table(rates_title, [_("评分单元格"), _("满分比例")], rates, 2)),
        (codes_title, codes_note, _table(codes_title, [code, _("学生人数"), _("扣分部分"), _("含义")], codes, 4)),
        (slow_title, "", _table(slow_title, [student, seconds], slow, 2)),
        (students_title, "", _table(students_title, [student, _("得分"), _("满分"), seconds, _("沙箱事件"),
                                                     _("需审阅"), codes_title], rows, 7))]
    if data.while_working:
        sections.append(_while_working_section(data.while_working))
    unisolated = [r.student for r in data.students if r.isolated is False]
    warning = _("这些学生的代码评分时没有在沙箱中运行（没有文件系统和网络隔离，教师设置了 allow_unisolated）："
                "{students}")
    banner = (f'<p role="alert" class="unisolated">{esc(warning.format(students=", ".join(unisolated)))}</p>'
              if unisolated else "")
    body = "\n".join(f"<h2>{esc(heading)}</h2>\n" + (f"<p>{esc(note)}</p>\n" if note else "") + table
                     for heading, note, table in sections)
    return f"""<!DOCTYPE html>
<html lang="{i18n.html_lang()}"><head><meta charset="utf-8"><title>{esc(title)}</title>
<style>{STYLE}
.unisolated{{background:#fff3cd;color:#5c3c00;border:2px solid #8a5a00;padding:0.5em;font-weight:bold}}
.visually-hidden{{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}}</style></head><body>
<main>
<h1>{esc(title)}</h1>
{banner}
<ul>{facts}</ul>
<p>{links}</p>
<div class="grid">{charts}</div>
{body}
</main>
</body></html>
"""
