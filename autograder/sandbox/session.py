"""The trusted side of a student run: drives one sandboxed runner process.

A `StudentSession` executes a submission's code cells in the runner, then
lets the checks call the student's functions on inputs the grader chose.
Everything that comes back is plain data (see ``wire.py``).  Hangs, crashes
and kernel exits cost one bounded timeout each: the runner is restarted,
earlier cells are replayed, and the offending cell or function is skipped
from then on, so one infinite loop never zeroes the rest of the notebook.

The runner is an adversary, so every bound is kept on this side: each
request has a wall-clock deadline, its own limit and never past the
submission's budget, which the connection to the runner keeps
(``connection.py``), and cell outputs are capped again before they are
stored (``outputs.py``).  What the run leaves for the record is its
`report` (``report.py``).
"""
from __future__ import annotations

import math
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from ..i18n import _
from . import launcher
from .compiled_texts import CompiledTexts
from .connection import RunnerConnection, RunnerGone
from .demo_builtins import DemoBuiltins
from .guest import wire
from .load_evidence import LoadWatch
from .outputs import OutputBudget, text_form
from .report import Reported, SessionReport
from .runners import RunnerSource

# the forbidden APIs a reply may name: each distinct name once, at most this many, each this long
MAX_FORBIDDEN, MAX_FORBIDDEN_NAME = 256, 200


def forbidden_names(names) -> list:
    """The forbidden APIs a runner says a call used: distinct names, capped in number and length on this
    side (the reply's header cap bounds the list); not a list: none."""
    if not isinstance(names, list):
        return []
    distinct = dict.fromkeys(wire.short(x, MAX_FORBIDDEN_NAME) for x in names)
    return list(distinct)[:MAX_FORBIDDEN]


@dataclass(frozen=True)
class Budget:
    """Time limits of one submission; the total bounds the worst case.

    `cell_limits` and `call_limits` hold each cell's and each checked
    function's own limit (derived from the reference solution's times, see
    ``autograder/nbgrader/calibration.py``); the fixed timeouts apply where
    they name nothing.  A limit overrun is retried once on a fresh runner
    before it is charged, unless the runner had a core to itself meanwhile,
    so a loaded machine never costs a correct answer.
    """

    start_timeout: float = 60.0
    cell_timeout: float = 30.0
    display_cell_timeout: float = 5.0  # provided cells that only show output (checks, plots, demos)
    call_timeout: float = 10.0
    total_seconds: float = 240.0
    max_restarts: int = 8
    cell_limits: Mapping[int, float] = field(default_factory=dict)  # cell position -> seconds
    call_limits: Mapping[str, float] = field(default_factory=dict)  # function name -> seconds
    multiple: float = 20.0  # how `cell_limits`/`call_limits` were derived, for the feedback text
    floor: float = 2.0  # of a call's derived limit
    cell_floor: float = 10.0  # of a cell's: a correct answer cell may also try its function out (%timeit)

    def for_cell(self, pos: int, display: bool = False) -> float:
        return self.cell_limits.get(pos, self.display_cell_timeout if display else self.cell_timeout)

    def for_call(self, fn: str) -> float:
        return self.call_limits.get(fn, self.call_timeout)

    def cell_rule(self, pos: int, display: bool = False) -> str:
        """The limit of cell `pos` in words.  Only configured numbers, never measured ones, so the
        feedback is the same on every machine and from every command."""
        ceiling = self.display_cell_timeout if display else self.cell_timeout
        return self._rule(min(self.cell_floor, ceiling), ceiling) if pos in self.cell_limits \
            else _("{seconds} 秒").format(seconds=f"{ceiling:g}")

    def call_rule(self, fn: str) -> str:
        return self._rule(self.floor, self.call_timeout) if fn in self.call_limits \
            else _("{seconds} 秒").format(seconds=f"{self.call_timeout:g}")

    def _rule(self, floor, ceiling):
        return _("参考答案在本机用时的 {multiple} 倍，不少于 {floor} 秒、不多于 {ceiling} 秒").format(
            multiple=f"{self.multiple:g}", floor=f"{floor:g}", ceiling=f"{ceiling:g}")


@dataclass
class CallResult:
    """What one call of a student function produced, as reported by the runner."""

    status: str  # ok | raised | missing | timeout | crashed | budget
    value: object = None
    args_after: list = field(default_factory=list)
    forbidden: list = field(default_factory=list)
    ename: str = ""
    exception_names: list = field(default_factory=list)  # the raised class and its bases
    evalue: str = ""
    traceback: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def describe(self) -> str:
        """One line for feedback: why there is no usable value."""
        if self.status == "raised":
            return _("函数抛出 {ename}: {evalue}").format(ename=self.ename, evalue=self.evalue)
        if self.status == "timeout" and self.evalue:
            return _("{reason}（可能有死循环）").format(reason=self.evalue)
        return {
            "missing": _("找不到这个函数（名字写错了，或者定义它的单元格出错了）"),
            "timeout": _("函数运行超时（可能有死循环）"),
            "crashed": _("运行函数时进程崩溃或退出"),
            "budget": _("这份提交的评分时间已用完，剩余检查未运行"),
        }.get(self.status, self.status)


class CellRunError(Exception):
    """Running the code cell at `position` failed in a way no limit explains (a grader-side error)."""

    def __init__(self, position: int, message: str) -> None:
        super().__init__(message)
        self.position = position


class StudentSession:
    """One submission's sandboxed runner plus the bookkeeping around it."""

    # What the run leaves for the record (`report`), read and written as the session's own.
    status = Reported()
    events = Reported()
    restarts = Reported()
    retries = Reported()
    charged_without_retry = Reported()
    reused = Reported()
    cell_seconds = Reported()
    call_seconds = Reported()

    def __init__(self, cells: Iterable[str], *, display_cells: Iterable[int] = (), budget: Budget = Budget(),
                 limits: Optional[launcher.Limits] = None, require_isolation: bool = True,
                 runner_source: Optional[RunnerSource] = None,
                 known_outputs: Optional[Mapping[int, list]] = None,
                 provided_cells: Iterable[int] = (), demo_cells: Iterable[int] = ()):
        self.cells = list(cells)  # code cell sources, in notebook order
        # Which code is the course's: every other cell is the student's.  The runner's tripwires never come
        # off; while a provided cell that demonstrates a built-in softmax or attention runs (`demo_cells`),
        # this side computes the built-ins its own code calls (``demo_builtins.py``).
        self.provided_cells = set(provided_cells)
        self.demo_cells = set(demo_cells) & self.provided_cells
        # Provided cells that run before any student code, with the outputs the reference run showed
        # (``calibration``): run without rendering figures; if their text is the reference's, the
        # reference's outputs are kept, figures included.
        self.known_outputs = dict(known_outputs or {})
        # Provided cells that only show output (visible checks, plots, demos): short
        # timeout, replayed without output, and all skipped once one hangs or crashes.
        self.display_cells = set(display_cells)
        self.display_disabled = False
        self.budget = budget
        self.limits = limits or launcher.Limits()
        self.runner_source = runner_source
        self.require_isolation = require_isolation
        self.skipped = {}  # cell position -> reason it is no longer replayed
        self.hung = set()  # functions that timed out or crashed once
        self._free_restart = False  # the next restart is a retry's: not counted in max_restarts
        self._watch = None  # LoadWatch of the request in flight, when it may be charged without a retry
        started = time.monotonic()
        self.executed = 0  # cells run so far (prefix of self.cells)
        self.outputs = OutputBudget()
        self.unsolicited = 0  # frames that answered no request, over all of this session's runners
        self.compiled = CompiledTexts()  # texts the student's runners compiled at run time, for the grade
        self._runner = None  # the RunnerConnection, None between runners
        self.report = SessionReport(status=launcher.probe(), started=started)

    def _roles(self, pos):
        return {"provided": pos in self.provided_cells, "demo": pos in self.demo_cells}

    @property
    def proc(self):
        """The current runner's process (its sandbox's Popen, or a `runners.Runner`), None between runners."""
        return self._runner.proc if self._runner is not None else None

    @property
    def _pid(self):
        """The current runner's host pid, when it is watched."""
        return self._runner.pid if self._runner is not None else None

    # -- process management ------------------------------------------------
    def _time_left(self):
        return self.budget.total_seconds - (time.monotonic() - self.report.started)

    def _deadline(self, timeout):
        """Monotonic deadline of one request: its own timeout, never past the submission's budget."""
        left = self._time_left()
        if left <= 0:
            raise _BudgetSpent()
        return time.monotonic() + min(timeout, left)

    def _spawn(self):
        handed = (self.runner_source.take(self.limits, self.require_isolation)
                  if self.runner_source is not None else None)
        if handed is not None:
            self._runner = RunnerConnection.handed(handed, self.unsolicited, self.compiled)
            return
        self._runner = RunnerConnection.launch(self.limits, self.require_isolation, self.unsolicited,
                                                 self.compiled)
        self._runner.wait(self._deadline(self.budget.start_timeout))
        self._runner.find_pid()

    def _kill(self):
        if self._runner is not None:
            self._runner.stop()
            self.unsolicited = self._runner.unsolicited
            self._runner = None

    def elapsed(self) -> float:
        return self.report.elapsed()

    def close(self) -> None:
        if self._runner is not None:
            self._runner.say_bye()
        self._kill()

    def __enter__(self) -> StudentSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _exchange(self, msg, blobs, timeout, cell=None):
        """One request and its reply; `cell` is the position of the cell an "exec" runs (what the texts it
        compiles are charged to)."""
        request_id = secrets.token_hex(8)
        # Only while a demo cell runs does this side compute the built-ins the cell's own code calls.
        builtins = DemoBuiltins() if msg.get("op") == "exec" and msg.get("demo") else None
        self.compiled.request = ("call", msg.get("fn")) if msg.get("op") == "call" else \
            ("cell", cell) if cell is not None else ()
        return self._runner.request(msg, blobs, request_id, self._deadline(timeout), self._watch, builtins)

    def _request(self, msg, blobs, timeout, cell=None):
        if self._runner is None:
            self._restart()
        return self._exchange(msg, blobs, timeout, cell)

    def _restart(self):
        """Start a fresh runner and replay the student cells that ran before.

        A replayed cell that now hangs or dies is skipped from then on, so a
        restart always makes progress; restarts and time are both bounded.
        """
        while True:
            self._kill()
            if self.report.restarts > self.budget.max_restarts or self._time_left() <= 0:
                raise _BudgetSpent()
            self.report.restarts += 1 if self.executed and not self._free_restart else 0
            current = None
            try:
                self._spawn()
                for pos in range(self.executed):
                    if pos in self.skipped:
                        continue
                    current = pos
                    # It finished within its limit before: only load or chance makes it slow now, so the
                    # replay gets the fixed ceiling (the total budget still bounds it).  A provided display
                    # cell is replayed too, its output discarded: an answer may use what it defined.
                    display = pos in self.display_cells
                    quiet = display or pos in self.known_outputs
                    self._exchange({"op": "exec", "source": self.cells[pos], "quiet": quiet, **self._roles(pos)}, [],
                                   self.budget.display_cell_timeout if display else self.budget.cell_timeout, pos)
                return
            except (TimeoutError, RunnerGone) as exc:
                if current is None:
                    self.report.events.append({"kind": "RunnerStartFailed", "detail": str(exc) or type(exc).__name__})
                else:
                    self.skipped[current] = "replay-failed"
                    self.report.events.append({"cell": current, "kind": "ReplayFailed",
                                               "detail": _("重放这个单元格时超时或进程退出，之后跳过它")})

    # -- public API ----------------------------------------------------------
    def run_notebook(self) -> dict[int, list[dict]]:
        """Execute every code cell; returns {position: nbformat outputs}."""
        outputs = {}
        for pos, source in enumerate(self.cells):
            is_display = pos in self.display_cells
            timeout = self.budget.for_cell(pos, is_display)
            try:
                if is_display and self.display_disabled:
                    self.skipped[pos] = "skipped"
                    outputs[pos] = [{"output_type": "stream", "name": "stdout",
                                     "text": _("（前面的一个单元格超时或崩溃，这个单元格没有运行；"
                                               "隐藏检查照常评分。）") + "\n"}]
                    continue
                started = time.monotonic()
                known = self.known_outputs.get(pos)
                msg = {"op": "exec", "source": source, **self._roles(pos)}
                if known is not None:
                    msg["figures"] = False
                reply, _blobs = self._with_retry(msg, [], timeout, pos)
                self.report.cell_seconds[pos] = time.monotonic() - started
                ok = isinstance(reply, dict) and reply.get("status") == "ok"
                shown = reply.get("outputs", []) if isinstance(reply, dict) else []
                if known is not None and ok and text_form(shown) == text_form(known):
                    shown, self.report.reused = known, self.report.reused + 1
                outputs[pos] = self.outputs.take(shown, pos + 1, pos)
            except TimeoutError:
                outputs[pos] = [self._limit_output(pos, "CellTimeoutError", _cell_timeout_text(
                    self.budget.cell_rule(pos, is_display)), seconds=timeout)]
                self._abandon(pos, "timeout")
            except RunnerGone as exc:
                outputs[pos] = [self._limit_output(pos, "KernelDied",
                                                   _("运行这个单元格时进程退出或超出资源限制（{reason}）").format(
                                                       reason=exc))]
                self._abandon(pos, "crashed")
            except _BudgetSpent:
                outputs[pos] = [self._limit_output(pos, "GradingBudgetExceeded", _("这份提交的评分时间已用完"))]
                self.skipped[pos] = "budget"
            except launcher.SandboxUnavailableError:
                raise  # about the machine, not this cell
            except Exception as exc:
                raise CellRunError(pos, f"{type(exc).__name__}: {exc}") from exc
            finally:
                self.executed = pos + 1
        return outputs

    def _abandon(self, pos, reason):
        self.skipped[pos] = reason
        self.display_disabled |= pos in self.display_cells
        self._kill()

    def _limit_output(self, pos, ename, evalue, seconds=None):
        event = {"cell": pos, "kind": ename, "detail": evalue}
        if seconds is not None:
            event["seconds"] = round(seconds, 3)  # the limit that applied: for the instructor's report
        self.report.events.append(event)
        return {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": [f"{ename}: {evalue}"]}

    def call(self, fn: str, *args: Any, on_device: str = "cpu", return_args: bool = False,
             **kwargs: Any) -> CallResult:
        """Call a student function on tensors chosen by the grader."""
        if fn in self.hung:
            return CallResult("timeout")
        blobs = []
        msg = {"op": "call", "fn": fn, "return_args": return_args,
               "args": [_encode_arg(a, blobs, on_device) for a in args],
               "kwargs": {k: _encode_arg(v, blobs, on_device) for k, v in kwargs.items()}}
        limit = self.budget.for_call(fn)
        started = time.monotonic()
        try:
            reply, out = self._with_retry(msg, blobs, limit)
        except TimeoutError:
            return self._give_up(fn, "timeout", _call_timeout_text(self.budget.call_rule(fn)), limit)
        except RunnerGone:
            return self._give_up(fn, "crashed")
        except _BudgetSpent:
            return CallResult("budget")
        self.report.call_seconds[fn] = max(self.report.call_seconds.get(fn, 0.0), time.monotonic() - started)
        try:
            return CallResult(
                status=wire.short(reply.get("status"), wire.MAX_NAME),
                value=wire.decode(reply.get("value"), out),
                args_after=[wire.decode(a, out) for a in reply.get("args_after", [])],
                forbidden=forbidden_names(reply.get("forbidden", [])),
                ename=wire.short(reply.get("ename", "")), evalue=wire.short(reply.get("evalue", "")),
                exception_names=[wire.short(x) for x in reply.get("exception_names", [])[:16]],
                traceback=wire.short(reply.get("traceback", "")), seconds=_seconds(reply.get("seconds")))
        except Exception:  # noqa: BLE001 - whatever the runner sent that does not decode is malformed: a failure
            return CallResult("crashed", evalue=_("评分进程收到了无法解析的结果"))

    def _give_up(self, fn, status, detail="", seconds=None):
        self.hung.add(fn)
        event = {"function": fn, "kind": status}
        if detail:
            event.update(detail=detail, seconds=seconds)
        self.report.events.append(event)
        self._kill()
        return CallResult(status, evalue=detail)

    def _with_retry(self, msg, blobs, timeout, cell=None):
        """One request; past its limit, once more on a fresh runner (earlier cells replayed) before
        the overrun counts: a loaded machine, not the student's code, may have made it slow.  Not
        when this side's own reading of the kernel's accounting (``load_evidence.py``, which the
        runner cannot forge) shows it had a core to itself: then a retry would only double a busy
        loop's cost.

        The retry's restart is not one of `max_restarts` (those count charged failures; a correct
        answer on a loaded machine may need many retries, and `total_seconds` still bounds them)."""
        if self._runner is None:
            self._restart()
        # A runner's first request shares its CPU with the runner's own set-up: no evidence then.
        runner = self._runner
        self._watch = LoadWatch(runner.pid) if runner.answered and runner.pid is not None else None
        try:
            return self._request(msg, blobs, timeout, cell)
        except TimeoutError:
            had_a_core = self._watch is not None and self._watch.had_a_core()  # before the kill
            self._kill()
            if self._time_left() <= 0:
                raise _BudgetSpent() from None  # the submission's budget cut it short, not its own limit
            if had_a_core:
                self.report.charged_without_retry += 1
                raise
            self.report.retries += 1
        finally:
            self._watch = None
        self._free_restart = True
        try:
            return self._request(msg, blobs, timeout, cell)
        finally:
            self._free_restart = False

    def get(self, name: str) -> Any:
        """Value of a global variable (hand-calculation answers); None if absent."""
        try:
            reply, out = self._with_retry({"op": "get", "name": name}, [], self.budget.call_timeout)
        except (TimeoutError, RunnerGone, _BudgetSpent):
            self._kill()
            return None
        if reply.get("status") != "ok":
            return None
        try:
            return wire.decode(reply.get("value"), out)
        except Exception:  # noqa: BLE001 - as in `call`: malformed, so no answer
            return None


def _seconds(claimed: Any) -> float:
    """The runner's own timing of a call (a claim, shown in the report only): a finite number or 0."""
    if isinstance(claimed, bool) or not isinstance(claimed, (int, float)) or abs(claimed) > 1e9:
        return 0.0
    seconds = float(claimed)
    return seconds if math.isfinite(seconds) and seconds >= 0 else 0.0


class _BudgetSpent(Exception):
    pass


# The same words whether or not a retry ran (that depends on the machine's load), so every command
# writes the same notebook.
def _cell_timeout_text(rule):
    return _("单元格运行时间超过上限（{rule}），已被终止（若评分机器繁忙，会先在新的运行环境中重试一次）").format(
        rule=rule)


def _call_timeout_text(rule):
    return _("函数运行时间超过上限（{rule}），已被终止（若评分机器繁忙，会先在新的运行环境中重试一次）").format(
        rule=rule)


def _encode_arg(value, blobs, device):
    import torch

    if isinstance(value, torch.Tensor):
        return wire.encode_arg(value, blobs, device)
    return wire.encode(value, blobs)
