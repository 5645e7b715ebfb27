"""The check service's grader: the course's own `Grader` (stock nbgrader steps, sandbox, trusted scoring), kept
warm per assignment, grading one notebook at a time from the `policy.FairQueue`.

The graders live in a grading process of their own (``batch/transport.ProcessGrader``), never in the service's:
what grading does on the trusted side with a student's notebook (nbconvert's steps, the reading of the code, the
checks) then never holds the service's HTTP loop, and a check that takes longer than `CHECK_SECONDS` by the wall
clock, whatever took the time, is stopped by killing that process; a fresh one is started and warmed for the next.

Seeds: a check grades as student ``<name>+check``, so its random inputs are the same at every check of that
student (the same code gets the same answer) but never those of the final grading: a check cannot show the
inputs the grade will use, and correct code passes on every seed (``tests/grading/test_correct_for_every_seed``).
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Optional, Union

from .. import i18n
from ..batch.bundle import make_bundle
from ..batch.coursedir import check_course, load_app
from ..batch.transport import ProcessGrader
from ..batch.worker import collector_paused, sandbox_or_refuse
from ..grading import record
from ..i18n import _
from ..notebook.editions import METADATA_KEY, language_of
from ..notebook.submission import MAX_CELL_TAGS, MAX_SUBMISSION_BYTES, cell_with_bad_tags
from .answer import answer
from .policy import IPYTHON_LINE, MAX_CELL_SOURCE_CHARS, MAX_CODE_CHARS, MAX_IPYTHON_LINES, FairQueue

CHECK_SUFFIX = "+check"
# A check's wall clock: the sandbox's budget for one submission (`SandboxedExecute.total_seconds`, 240 s) and the
# reading of its code (`TrustedScoring.reading_seconds`, 30 s), with room for the rest of grading.
CHECK_SECONDS = 300.0
WARM_UP_SECONDS = 600.0  # a grader's first grading: imports, its zygote, the reference solution's timings
CELL_METADATA = ("nbgrader", "tags")  # what grading reads of a cell's metadata
NOTEBOOK_METADATA = ("kernelspec", "language_info", METADATA_KEY)  # ... and of the notebook's (its edition)


class CheckRefused(Exception):
    """A notebook the service will not grade (too large, not JSON, not one of the course's): the message
    says what to do."""


class Checker:
    """Warm graders for `assignments` of the course at `course`; `start()` serves `queue` on a thread."""

    def __init__(self, course: Union[str, os.PathLike], assignments: Iterable[str], extra: Sequence[str] = (),
                 say: Callable[[str], None] = print, check_seconds: float = CHECK_SECONDS) -> None:
        with collector_paused():
            app = load_app(course, extra)
            self.assignments = list(assignments)
            for assignment in self.assignments:
                check_course(app, assignment)
        sandbox_or_refuse(app, say)  # refuse to start without the sandbox, unless the course allows it
        self.say, self.check_seconds = say, check_seconds
        self.course_app = app  # the course itself (its gradebook: due dates), not a grader's private copy
        self.bundles, self.releases, self.release_cells = {}, {}, {}
        with collector_paused():
            for assignment in self.assignments:
                bundle = make_bundle(app, assignment, extra)
                self.bundles[assignment] = bundle
                self.releases[assignment] = _release(bundle, assignment)
                self.release_cells[assignment] = len(json.loads(self.releases[assignment] or b"{}").get("cells", []))
        # The graders load now (a course that cannot be graded stops the service here); they warm up on the
        # worker's thread (`start`).
        self.process: Optional[ProcessGrader] = self._start_process()
        self.queue = FairQueue(int(os.environ.get("SDPA_CHECK_QUEUE", "64")))
        self.results: dict[tuple[str, str], dict[str, Any]] = {}  # (student, assignment) -> latest reply
        self._done = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()

    def grade(self, student: str, assignment: str, notebook: bytes, show_points: bool = False) -> dict[str, Any]:
        """Grade one notebook now (the queue's worker calls this); the answer, or CheckRefused."""
        if assignment not in self.bundles:
            raise CheckRefused(_("这里能检查的作业是：{assignments}").format(assignments=", ".join(self.bundles)))
        with i18n.using(language_of(assignment)):
            notebook = self._readable(notebook, self.release_cells[assignment])
            process = self._grading_process()
            started = time.perf_counter()
            result = process.grade({"student": student + CHECK_SUFFIX, "assignment": assignment, "more": True,
                                    "files": {f"{assignment}.ipynb": (notebook, 0o644)}}, self.check_seconds)
            seconds = time.perf_counter() - started
            if not process.alive():  # stopped past the wall clock, or it died: the next check gets a fresh one
                self.process = None
                logging.getLogger(__name__).error("the check of %s stopped its grading process after %.1f s: %s",
                                                  student, seconds, ((result or {}).get("failure") or {}).get("reason"))
                raise CheckRefused(_("这次检查用了 {seconds:.0f} 秒还没评完，评分停了下来：检查你的代码里有没有"
                                     "死循环或很慢的部分，再检查一次。").format(seconds=seconds)
                                   if seconds >= self.check_seconds else
                                   _("评分程序出错了（{error}）；请告诉老师。").format(error="grading process"))
            if not result or not result.get("ok"):
                failure = (result or {}).get("failure") or {}
                raise CheckRefused(_("这份笔记本没法评分：{reason}").format(reason=failure.get("reason", "?")))
        graded = json.loads(result["files"][record.filename(assignment)][0])
        reply = answer(graded, show_points)
        reply["seconds"] = round(seconds, 2)
        return reply

    def _start_process(self) -> ProcessGrader:
        return ProcessGrader([self.bundles[assignment] for assignment in self.assignments])

    def _grading_process(self) -> ProcessGrader:
        """The process holding the graders; a fresh one, warmed, when the last one was stopped."""
        if self.process is None or not self.process.alive():
            if self.process is not None:
                self.process.kill()
            self.process = self._start_process()
            self._warm(self.process)
        return self.process

    def _warm(self, process: ProcessGrader) -> None:
        """The first grading of each assignment warms its grader (imports, the zygote, the reference timings):
        done on the released notebook, it is not a student's first check that waits for it."""
        started = time.perf_counter()
        for assignment, notebook in self.releases.items():
            if notebook and not self._stop.is_set():
                result = process.grade({"student": "warm-up", "assignment": assignment, "more": True,
                                        "files": {f"{assignment}.ipynb": (notebook, 0o644)}}, WARM_UP_SECONDS)
                if not (result or {}).get("ok"):  # a check would meet the same failure and say it
                    logging.getLogger(__name__).error("warming the grader of %s failed: %s", assignment,
                                                      ((result or {}).get("failure") or {}).get("reason"))
        self.say(f"graders warm after {time.perf_counter() - started:.1f} s")

    def grading_for(self, student: str) -> bool:
        """Whether the worker holds `student`'s check now (its grader time not yet charged)."""
        return self.queue.in_progress(student)

    @staticmethod
    def _readable(notebook: bytes, release_cells: int) -> bytes:
        """The notebook as the grader takes it, or CheckRefused: too large, not JSON, far more cells than the
        released notebook has, a cell's source, or all the code, longer than any answer needs.  Only what grading
        reads is kept (each cell's type, id, source and nbgrader metadata and tags; the notebook's kernel and
        edition): outputs, attachments and any other metadata only cost time and memory (a red-team pass held the
        service at 11 GiB with 5 million empty objects in the metadata, copied by every nbconvert step)."""
        if len(notebook) > MAX_SUBMISSION_BYTES:
            raise CheckRefused(_("这份笔记本有 {size:.0f} MiB，超过了提交允许的 {limit} MiB："
                                 "清除输出（编辑 > 清除所有单元格的输出），保存，再检查一次。").format(
                size=len(notebook) / 2**20, limit=MAX_SUBMISSION_BYTES // 2**20))
        try:
            parsed = json.loads(notebook)
        except (ValueError, RecursionError) as exc:
            raise CheckRefused(_("这份笔记本不是有效的 JSON（{error}）；请在 JupyterLab 里重新保存。").format(
                error=type(exc).__name__)) from None
        cells = parsed.get("cells") if isinstance(parsed, dict) else None
        if not isinstance(cells, list) or parsed.get("nbformat") != 4:
            # JupyterLab saves nbformat 4; an older one (cells under "worksheets") would reach the grader
            # unread by the caps below, and nbformat would upgrade it there (red team)
            raise CheckRefused(_("这份笔记本不是 JupyterLab 保存的格式（nbformat 4）：请在 JupyterLab 里打开它，"
                                 "保存，再检查一次。"))
        bad_tags = cell_with_bad_tags(parsed)
        if bad_tags is not None:  # nbformat compares mixed tags pairwise: 40,000 held the grader 10 min (red team)
            raise CheckRefused(_("第 {number} 个单元格的标签不是最多 {limit} 个字符串：删掉这些标签（属性检查器 > "
                                 "单元格标签），再检查。").format(number=bad_tags, limit=MAX_CELL_TAGS))
        if len(cells) > 2 * release_cells + 100:
            raise CheckRefused(_("这份笔记本有 {cells} 个单元格，发布的版本只有 {released} 个："
                                 "删掉多余的单元格再检查。").format(cells=len(cells), released=release_cells))
        kept, code_chars, ipython_lines = [], 0, 0
        for number, cell in enumerate(cells, 1):
            if not isinstance(cell, dict):
                kept.append(cell)  # the grader says what is wrong with it
                continue
            source = cell.get("source", "")
            text = "".join(s for s in source if isinstance(s, str)) if isinstance(source, list) else \
                source if isinstance(source, str) else ""
            chars = len(text)
            if chars > MAX_CELL_SOURCE_CHARS:
                raise CheckRefused(_("第 {number} 个单元格有 {chars} 个字符，超过了检查允许的 {limit} 个："
                                     "缩短它再检查。").format(number=number, chars=chars, limit=MAX_CELL_SOURCE_CHARS))
            if cell.get("cell_type") == "code":
                code_chars += chars
                ipython_lines += len(IPYTHON_LINE.findall(text))
                if ipython_lines > MAX_IPYTHON_LINES:
                    raise CheckRefused(_("这份笔记本有超过 {limit} 行 IPython 的特殊命令（以 %、! 开头，或以 ? 结尾）："
                                         "删掉多余的再检查。").format(limit=MAX_IPYTHON_LINES))
            if code_chars > MAX_CODE_CHARS:
                raise CheckRefused(_("这份笔记本的代码单元格一共超过 {limit} 个字符，比任何答案需要的都多："
                                     "删掉多余的代码再检查。").format(limit=MAX_CODE_CHARS))
            metadata = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
            slim = {key: cell[key] for key in ("id", "cell_type", "source") if key in cell}
            slim["metadata"] = {key: metadata[key] for key in CELL_METADATA if key in metadata}
            if cell.get("cell_type") == "code":
                slim["outputs"], slim["execution_count"] = [], None
            kept.append(slim)
        metadata = parsed.get("metadata") if isinstance(parsed.get("metadata"), dict) else {}
        slim_notebook = {key: parsed[key] for key in ("nbformat", "nbformat_minor") if key in parsed}
        slim_notebook["metadata"] = {key: metadata[key] for key in NOTEBOOK_METADATA if key in metadata}
        slim_notebook["cells"] = kept
        return json.dumps(slim_notebook, ensure_ascii=False).encode("utf-8")

    # -- the queue's worker -------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name="sdpa-check-grader", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        if self.process is not None and self.process.alive():
            self._warm(self.process)
        while not self._stop.is_set():
            job = self.queue.get(timeout=0.5)
            if job is None:
                continue
            self._check(*job)

    def _check(self, student: str, job: tuple) -> None:
        """Grade one taken job; its cost is counted and the queue told it is finished before the answer shows:
        a student who reads the answer and presses again is never told the last check is still being graded."""
        assignment, notebook, show_points, on_done = job
        with self._done:
            self.results[(student, assignment)] = {"state": "grading"}
        taken = time.perf_counter()
        try:
            reply = {"state": "answered", **self.grade(student, assignment, notebook, show_points)}
        except CheckRefused as exc:
            reply = {"state": "refused", "message": str(exc)}
        except Exception as exc:  # noqa: BLE001 - one notebook's failure must not stop the service
            with i18n.using(language_of(assignment)):
                reply = {"state": "failed", "message": _("评分程序出错了（{error}）；请告诉老师。").format(
                    error=type(exc).__name__)}
        reply.setdefault("seconds", round(time.perf_counter() - taken, 2))  # the grader time, whatever came of it
        if on_done is not None:
            try:
                on_done(student, assignment, reply)
            except Exception:  # noqa: BLE001 - a record that cannot be written must not stop the checks
                logging.getLogger(__name__).exception("the check of %s was not recorded", student)
        self.queue.finished(student)
        with self._done:
            self.results[(student, assignment)] = reply
            self._done.notify_all()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self.process is not None:
            self.process.kill()  # its graders' sandboxes die with it (bwrap --die-with-parent)


def _release(bundle: dict, assignment: str) -> bytes:
    """The notebook of `assignment` in the grader's bundle (its source or release: the same cells), b"" if none."""
    return next((data for path, (data, _mode) in sorted(bundle["files"].items())
                 if path.endswith(f"/{assignment}.ipynb")), b"")
