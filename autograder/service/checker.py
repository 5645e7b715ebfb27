"""The check service's grader: the course's own `Grader` (stock nbgrader steps, sandbox, trusted scoring), kept
warm per assignment, grading one notebook at a time from the `policy.FairQueue`.

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
from ..batch.worker import Grader, collector_paused, sandbox_or_refuse
from ..grading import record
from ..i18n import _
from ..notebook.editions import language_of
from ..notebook.submission import MAX_SUBMISSION_BYTES
from .answer import answer
from .policy import FairQueue

CHECK_SUFFIX = "+check"


class CheckRefused(Exception):
    """A notebook the service will not grade (too large, not JSON, not one of the course's): the message
    says what to do."""


class Checker:
    """Warm graders for `assignments` of the course at `course`; `start()` serves `queue` on a thread."""

    def __init__(self, course: Union[str, os.PathLike], assignments: Iterable[str], extra: Sequence[str] = (),
                 say: Callable[[str], None] = print) -> None:
        with collector_paused():
            app = load_app(course, extra)
            self.assignments = list(assignments)
            for assignment in self.assignments:
                check_course(app, assignment)
        sandbox_or_refuse(app, say)  # refuse to start without the sandbox, unless the course allows it
        self.say = say
        self.course_app = app  # the course itself (its gradebook: due dates), not a grader's private copy
        self.graders, self.releases, self.release_cells = {}, {}, {}
        with collector_paused():
            for assignment in self.assignments:
                bundle = make_bundle(app, assignment, extra)
                self.releases[assignment] = _release(bundle, assignment)
                self.release_cells[assignment] = len(json.loads(self.releases[assignment] or b"{}").get("cells", []))
                self.graders[assignment] = Grader(bundle)
        self.queue = FairQueue(int(os.environ.get("SDPA_CHECK_QUEUE", "64")))
        self.results: dict[tuple[str, str], dict[str, Any]] = {}  # (student, assignment) -> latest reply
        self._done = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()

    def grade(self, student: str, assignment: str, notebook: bytes, show_points: bool = False) -> dict[str, Any]:
        """Grade one notebook now (the queue's worker calls this); the answer, or CheckRefused."""
        if assignment not in self.graders:
            raise CheckRefused(_("这里能检查的作业是：{assignments}").format(assignments=", ".join(self.graders)))
        with i18n.using(language_of(assignment)):
            notebook = self._readable(notebook, self.release_cells[assignment])
            started = time.perf_counter()
            result = self.graders[assignment].grade({"student": student + CHECK_SUFFIX, "more": True,
                                                     "files": {f"{assignment}.ipynb": (notebook, 0o644)}})
            if not result.get("ok"):
                failure = result.get("failure") or {}
                raise CheckRefused(_("这份笔记本没法评分：{reason}").format(reason=failure.get("reason", "?")))
        graded = json.loads(result["files"][record.filename(assignment)][0])
        reply = answer(graded, show_points)
        reply["seconds"] = round(time.perf_counter() - started, 2)
        return reply

    @staticmethod
    def _readable(notebook: bytes, release_cells: int) -> bytes:
        """The notebook as the grader takes it, without outputs (a check regrades them; they only cost
        time), or CheckRefused: too large, not JSON, far more cells than the released notebook has."""
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
        if not isinstance(cells, list):
            return notebook  # the grader says what is wrong with it, as the final grading would
        if len(cells) > 2 * release_cells + 100:
            raise CheckRefused(_("这份笔记本有 {cells} 个单元格，发布的版本只有 {released} 个："
                                 "删掉多余的单元格再检查。").format(cells=len(cells), released=release_cells))
        for cell in cells:
            if isinstance(cell, dict) and cell.get("cell_type") == "code":
                cell["outputs"], cell["execution_count"] = [], None
        return json.dumps(parsed, ensure_ascii=False).encode("utf-8")

    # -- the queue's worker -------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name="sdpa-check-grader", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        # The first grading of each assignment warms its grader (imports, the zygote, the reference timings):
        # done here on the released notebook, it is not a student's first check that waits for it.
        started = time.perf_counter()
        for assignment, notebook in self.releases.items():
            if notebook and not self._stop.is_set():
                try:
                    self.grade("warm-up", assignment, notebook)
                except Exception:  # noqa: BLE001 - a check would meet the same failure and say it
                    logging.getLogger(__name__).exception("warming the grader of %s failed", assignment)
        self.say(f"graders warm after {time.perf_counter() - started:.1f} s")
        while not self._stop.is_set():
            job = self.queue.get(timeout=0.5)
            if job is None:
                continue
            student, (assignment, notebook, show_points, on_done) = job
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
            with self._done:
                self.results[(student, assignment)] = reply
                self._done.notify_all()
            if on_done is not None:
                try:
                    on_done(student, assignment, reply)
                except Exception:  # noqa: BLE001 - a record that cannot be written must not stop the checks
                    logging.getLogger(__name__).exception("the check of %s was not recorded", student)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        for grader in self.graders.values():
            grader.close()


def _release(bundle: dict, assignment: str) -> bytes:
    """The notebook of `assignment` in the grader's bundle (its source or release: the same cells), b"" if none."""
    return next((data for path, (data, _mode) in sorted(bundle["files"].items())
                 if path.endswith(f"/{assignment}.ipynb")), b"")
