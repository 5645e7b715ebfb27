"""The grader's connection to one runner process: its pipes, its replies, and a deadline on every wait.

The runner is an adversary, so every bound is kept on this side: each write
to it and each wait for it has a wall-clock deadline (a stopped runner uses
no CPU, so CPU limits never fire), each reply is capped as it is read
(``runners.read_replies``), the queue of unread replies is bounded, and
frames that answer no request are dropped and counted.  What the deadlines
are is the session's choice (``session.py``); a `RunnerConnection` only
keeps them.
"""
from __future__ import annotations

import os
import queue
import select
import shutil
import subprocess
import threading
import time
from typing import IO, TYPE_CHECKING, Optional, Union

from ..i18n import _
from . import launcher, procs
from .compiled_texts import CompiledTexts
from .demo_builtins import DemoBuiltins, refusal
from .guest import messages as guest_messages
from .guest import wire
from .runners import HandedRunner, Runner, read_replies, reply_queue, runner_command, runner_dirs, stop_runner

if TYPE_CHECKING:
    from .load_evidence import LoadWatch

# Frames the runner sends that answer no request (student code writing to the
# protocol pipe): dropped, but a runner that keeps sending them is killed.
MAX_UNSOLICITED_FRAMES = 32
WATCH_SECONDS = 0.2  # how often a wait looks at whether the runner has stopped itself


def guest_translations() -> dict[str, str]:
    """The guest's own messages (`guest.messages`) in the current language, for the runner to use."""
    return {message: text for message in guest_messages.IDS if (text := _(message)) != message}


class RunnerGone(Exception):
    """The runner ended, stopped itself or broke the protocol: it will not answer."""


class RunnerConnection:
    """One runner, from its start (or hand-over by a `runners.RunnerSource`) to `stop`.

    `unsolicited` carries the count of unasked-for frames over from the
    session's earlier runners: the limit holds for the whole session.
    """

    def __init__(self, proc: Union[subprocess.Popen, Runner], replies: queue.Queue, directory: Optional[str],
                 log: IO[bytes], pid: Optional[int] = None, unsolicited: int = 0,
                 compiled: Optional[CompiledTexts] = None) -> None:
        self.proc = proc
        self.replies = replies  # a `runners.reply_queue()` filled by a `runners.read_replies` thread
        self.directory = directory  # the runner's own `runner_dirs` top, removed with it (None: not ours)
        self.log = log
        self.pid = pid  # the runner's host pid, to see whether it stopped itself (None: not watched)
        self.answered = False  # whether this runner has answered a request (its set-up is over)
        self.unsolicited = unsolicited  # frames that answered no request
        self.told_language = False  # whether the runner has its messages' translations (`guest_translations`)
        # What the runner compiled at run time (``guest/source_report.py``), over all the session's runners.
        self.compiled = compiled if compiled is not None else CompiledTexts()

    @classmethod
    def handed(cls, handed: HandedRunner, unsolicited: int = 0,
               compiled: Optional[CompiledTexts] = None) -> RunnerConnection:
        """A runner a source started ahead (it has sent "ready")."""
        return cls(handed.proc, handed.replies, handed.directory, handed.log,
                   getattr(handed.proc, "host_pid", None), unsolicited, compiled)

    @classmethod
    def launch(cls, limits: launcher.Limits, require_isolation: bool, unsolicited: int = 0,
               compiled: Optional[CompiledTexts] = None) -> RunnerConnection:
        """A fresh runner in a sandbox of its own; `wait` for its "ready", then `find_pid`."""
        directory, work, log = runner_dirs()
        try:
            argv, readonly = runner_command(limits)
            proc = launcher.sandboxed_popen(
                argv, scratch=work, readonly=readonly,
                limits=limits, require_isolation=require_isolation, zygote=True,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        except BaseException:
            log.close()
            shutil.rmtree(directory, ignore_errors=True)
            raise
        replies = reply_queue()
        threading.Thread(target=read_replies, args=(proc.stdout, replies), daemon=True).start()
        return cls(proc, replies, directory, log, None, unsolicited, compiled)

    def find_pid(self) -> None:
        """Look up a fresh runner's host pid (before any student code runs)."""
        self.pid = procs.runner_pid(self.proc)

    def wait(self, deadline: float, request_id: Optional[str] = None, watch: Optional[LoadWatch] = None,
             builtins: Optional[DemoBuiltins] = None):
        """The reply to `request_id` by `deadline`; frames forged by student code are dropped.

        A built-in call the runner asks for meanwhile is computed by `builtins` (a demo cell's request) or
        refused; a refusal counts as a frame nobody asked for."""
        while True:
            left = deadline - time.monotonic()
            try:
                # Past the deadline, one last look: a reply that came in time while this side was slow.
                reply = self.replies.get(timeout=min(left, WATCH_SECONDS)) if left > 0 else self.replies.get_nowait()
            except queue.Empty:
                if left <= 0:
                    raise TimeoutError from None
                self.check_not_stopped()
                if watch is not None:
                    watch.tick()
                continue
            if isinstance(reply, wire.WireError):
                raise RunnerGone(_("回复不合格或超过评分进程的大小上限：{detail}").format(detail=reply))
            if isinstance(reply, Exception):
                raise RunnerGone(str(reply))
            header = reply[0] if isinstance(reply, tuple) else None
            if isinstance(header, dict) and header.get("op") == "compiled":
                self.compiled.add(header.get("kind"), reply[1], header.get("filename"), header.get("sha256"))
                continue
            if request_id is None or (isinstance(header, dict) and header.get("id") == request_id):
                return reply
            if isinstance(header, dict) and header.get("op") == "builtin":
                answer, blobs = builtins.answer(header, reply[1]) if builtins is not None else (refusal(), [])
                self.write(wire.frame(answer, blobs), deadline)
                if answer["status"] != "refused":
                    continue
            self.unsolicited += 1
            if self.unsolicited > MAX_UNSOLICITED_FRAMES:
                raise RunnerGone(_("运行环境发来了超过 {count} 个评分进程没有请求的消息").format(
                    count=MAX_UNSOLICITED_FRAMES))

    def check_not_stopped(self) -> None:
        """A runner that stopped itself (SIGSTOP) uses no CPU and never answers: end it now.  One that
        has ended is gone even if something else in its sandbox still holds its pipes open."""
        if self.pid is None:
            return
        state = procs.process_state(self.pid)
        if state in ("T", "t"):
            raise RunnerGone(_("运行环境把自己暂停了（SIGSTOP），评分进程已将其终止"))
        if state in ("", "Z"):
            raise RunnerGone(_("运行环境的进程已经结束"))

    def write(self, data: bytes, deadline: float) -> None:
        """Write `data` to the runner by `deadline`, never blocking past it (its pipe may be full)."""
        fd = self.proc.stdin.fileno()
        os.set_blocking(fd, False)
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if not poller.poll(min(left, WATCH_SECONDS) * 1000):
                self.check_not_stopped()
                continue
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                continue
            except OSError as exc:
                raise RunnerGone(str(exc)) from None

    def request(self, msg: dict, blobs: list, request_id: str, deadline: float,
                watch: Optional[LoadWatch] = None, builtins: Optional[DemoBuiltins] = None):
        """Send `msg` (with `blobs`) as request `request_id` and return its reply, both by `deadline`
        (`builtins`: see `wait`)."""
        msg = dict(msg, id=request_id)
        if not self.told_language:
            translations = guest_translations()
            if translations:
                msg["messages"] = translations
            self.told_language = True
        self.write(wire.frame(msg, blobs), deadline)
        reply = self.wait(deadline, request_id, watch, builtins)
        self.answered = True
        return reply

    def say_bye(self) -> None:
        """Ask the runner to end, waiting half a second at most."""
        try:
            self.write(wire.frame({"op": "bye"}), time.monotonic() + 0.5)
        except (OSError, TimeoutError, RunnerGone):
            pass

    def stop(self) -> None:
        """Kill the runner (its sandbox, or its zygote resets it) and remove what it left here."""
        stop_runner(self.proc)
        self.log.close()
        _drain(self.replies)  # lets a reader thread blocked on a full queue see EOF and end
        if self.directory:
            shutil.rmtree(self.directory, ignore_errors=True)


def _drain(replies):
    try:
        while True:
            replies.get_nowait()
    except queue.Empty:
        pass
