"""Runners started ahead of time, so a submission does not wait for `import torch`.

Used by grading workers only where `forkserver.ForkServer` cannot be (no
bubblewrap pid namespace): it hides a fresh runner's start-up behind the
previous submission but does not remove its CPU cost, as the zygote does.

Before a runner can execute a notebook's first cell it costs seconds of
CPU (``python -m benchmarks profile`` measures them): bubblewrap, the
interpreter, IPython, and the first (instructor) cell's ``import torch`` /
``import matplotlib.pyplot``.  A `RunnerPool` keeps one
runner started ahead of need, so that work overlaps the previous submission
instead of adding to each one's latency:

* a pooled runner is spawned exactly as `StudentSession` spawns one (the
  argv of `runners.runner_command`, `launcher.sandboxed_popen`, the session's
  limits and isolation requirement), so the sandbox wraps it like any other;
* once started it is sent one exec request that imports `PRELOAD_MODULES`
  without binding any name: only ``sys.modules`` changes, as the release's
  first cell -- which every graded notebook runs -- would do a moment later.
  Its output is discarded and it never reaches a student's notebook;
* it is a `runners.RunnerSource`: a worker passes it to each session; `take` hands
  one ready runner to exactly one session, which owns it from then on (and
  kills it when it closes, as always).  A runner is never given to a second
  session, so no student's process is ever reused for another student;
* if the spare is not usable (limits differ from what the session asks for,
  it failed to start, died, or is not ready in ``start_timeout`` seconds) the
  session starts its own runner as it would without a pool.

A pool belongs to one process and is not thread-safe: one grading worker,
one pool.
"""
from __future__ import annotations

import logging
import queue
import secrets
import shutil
import subprocess
import threading
import time
from typing import TYPE_CHECKING, Optional

from . import launcher, runners
from .guest import wire

if TYPE_CHECKING:
    from collections.abc import Sequence

log = logging.getLogger(__name__)

# What the release's first code cell imports (math and warnings are always loaded).
PRELOAD_MODULES = ("torch", "torch.nn.functional", "matplotlib.pyplot")


def preload_source(modules: Sequence[str] = PRELOAD_MODULES) -> str:
    """A cell that imports `modules` and binds no name (and displays nothing)."""
    return "if " + " and ".join(f"__import__({name!r})" for name in modules) + ":\n    pass\n"


class _Warm:
    """One runner being started (or started) ahead of need."""

    def __init__(self, limits: launcher.Limits, require_isolation: bool, preload: str) -> None:
        self.limits, self.require_isolation = limits, require_isolation
        self.directory, work, self.log = runners.runner_dirs()
        self.proc = None
        try:
            argv, readonly = runners.runner_command(limits)
            self.proc = launcher.sandboxed_popen(
                argv, scratch=work, readonly=readonly, limits=limits,
                require_isolation=require_isolation, zygote=True,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
            self.replies = runners.reply_queue()
            threading.Thread(target=runners.read_replies, args=(self.proc.stdout, self.replies),
                             daemon=True).start()
            # Queued behind the runner's "ready": it runs as soon as IPython is up.
            self.request_id = "preload-" + secrets.token_hex(8)
            wire.send(self.proc.stdin, {"op": "exec", "source": preload, "id": self.request_id}, [])
        except BaseException:
            self.discard()
            raise
        self.ready = False

    def wait_ready(self, timeout: float) -> bool:
        """Consume "ready" and the preload's reply; False if the runner is not usable in time."""
        deadline = time.monotonic() + timeout
        while not self.ready:
            try:
                reply = self.replies.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                return False
            if isinstance(reply, Exception) or self.proc.poll() is not None:
                return False
            header = reply[0] if isinstance(reply, tuple) else None
            self.ready = isinstance(header, dict) and header.get("id") == self.request_id
        return True

    def discard(self) -> None:
        if self.proc is not None:
            runners.stop_runner(self.proc)
            self.proc = None
        self.log.close()
        shutil.rmtree(self.directory, ignore_errors=True)


class RunnerPool:
    """Keeps one sandboxed runner started ahead; see the module docstring."""

    def __init__(self, limits: Optional[launcher.Limits] = None, require_isolation: bool = True,
                 preload: Sequence[str] = PRELOAD_MODULES, start_timeout: float = 60.0) -> None:
        self.limits = limits or launcher.Limits()
        self.require_isolation = require_isolation
        self.preload = preload_source(preload)
        self.start_timeout = start_timeout
        self._spare = None
        self.keep_warm = True  # start the next spare when one is taken (False: no more work is coming)
        self.handed = 0  # runners handed to sessions
        self.missed = 0  # sessions that had to start their own

    def warm(self) -> None:
        """Start a spare runner if there is none."""
        if self._spare is not None:
            return
        try:
            self._spare = _Warm(self.limits, self.require_isolation, self.preload)
        except Exception as exc:  # noqa: BLE001 - the session will start (and report) its own
            log.warning("could not start a spare runner: %s", exc)
            self._spare = None

    def take(self, limits: launcher.Limits, require_isolation: bool) -> Optional[runners.HandedRunner]:
        """`runners.RunnerSource.take`: a ready runner for a session with these limits, or None."""
        wanted = (limits, require_isolation)
        spare, self._spare = self._spare, None
        if wanted != (self.limits, self.require_isolation):
            # Configured differently from what we guessed: learn it for the next one.
            self.limits, self.require_isolation = wanted
            if spare is not None:
                spare.discard()
            spare = None
        ready = spare is not None and spare.wait_ready(self.start_timeout)
        if self.keep_warm:
            self.warm()  # the next one starts now, while this submission runs
        if not ready:
            if spare is not None:
                spare.discard()
            self.missed += 1
            return None
        self.handed += 1
        return runners.HandedRunner(spare.proc, spare.replies, spare.directory, spare.log)

    def close(self) -> None:
        spare, self._spare = self._spare, None
        if spare is not None:
            spare.discard()
