"""One warm zygote for a whole grading process: stock `nbgrader autograde`, formgrader, `sdpa-course check`.

``sdpa-course autograde`` hands each worker's sessions a fork server of its
own (``batch/worker.py``).  Every other path -- stock ``nbgrader autograde``,
formgrader's Autograde button (inside the Jupyter server), ``sdpa-course
check`` -- runs `SandboxedExecute` with no runner source in its resources,
and gets this process's `ProcessRunners` instead: one `forkserver.ForkServer`
made on first use and kept until the process exits (or, in a long-lived
server, until it has been idle for a while).  So every path grades in the
same kind of runner, forked from a zygote after the same warm-up, with the
same clean-start checks between students (what the zygote cannot verify
throws its sandbox away).

A fresh runner per session (``guest/zygote.py``'s `serve_fresh`) remains
only as the fallback: where bubblewrap has no pid namespace, where a zygote
cannot start, or while another thread's session holds the zygote's runner.
Each time, the log says so and why.

The fork server is not inherited: a process forked from this one (a
worker) starts its own, and leaves the parent's zygote alone.
"""
from __future__ import annotations

import atexit
import logging
import os
import threading
from typing import Optional

from . import launcher, runners
from .forkserver import ForkServer

log = logging.getLogger(__name__)


class ProcessRunners:
    """A `runners.RunnerSource` over this process's one fork server; see the module docstring."""

    keep_warm = True

    def __init__(self, server: ForkServer, logger: logging.Logger, idle_seconds: float) -> None:
        self.server = server
        self.log = logger
        self.idle_seconds = idle_seconds
        self._timer = None  # closes an idle zygote (a long-lived Jupyter server should not keep one forever)
        self.announced = False

    def announce(self) -> None:
        """Say once, in the grading log, where this process's runners come from."""
        if not self.announced:
            self.announced = True
            self.log.info("runners are forked from one warm zygote, kept for this whole process")

    @property
    def handed(self) -> int:
        return self.server.handed

    @property
    def missed(self) -> int:
        return self.server.missed

    def take(self, limits: launcher.Limits, require_isolation: bool) -> Optional[runners.HandedRunner]:
        self._cancel_timer()
        handed = self.server.take(limits, require_isolation)
        if handed is None:
            self.log.warning("fresh sandboxed runner for this session (no zygote runner: %s)",
                             self.server.last_miss or "unknown")
        else:
            self._arm_timer()
        return handed

    def warm(self) -> None:
        self.server.warm()

    def close(self) -> None:
        self._cancel_timer()
        self.server.close()

    def _arm_timer(self):
        if self.idle_seconds > 0:
            self._timer = threading.Timer(self.idle_seconds, self._close_if_idle)
            self._timer.daemon = True
            self._timer.start()

    def _cancel_timer(self):
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _close_if_idle(self):
        """The timer restarts at every runner handed out: idle since then, unless a runner is still out."""
        with self.server._lock:
            zygote = self.server._zygote
            if zygote is not None and zygote.out is not None:
                self._arm_timer()  # still grading: look again later
                return
            if zygote is not None:
                self.log.info("warm zygote closed after %g s idle; the next session starts a new one",
                              self.idle_seconds)
            self.server.close()


_lock = threading.Lock()
_shared: Optional[ProcessRunners] = None
_announced_fallback = False


def process_runners(limits: launcher.Limits, require_isolation: bool, logger: Optional[logging.Logger] = None,
                    idle_seconds: float = 0.0) -> Optional[ProcessRunners]:
    """This process's runner source (made and warmed on first use), or None where no zygote can run
    (bubblewrap without a pid namespace): then every session starts a fresh runner, as the log says once."""
    global _shared, _announced_fallback
    with _lock:
        if _shared is not None:
            if logger is not None:
                _shared.log, _shared.idle_seconds = logger, idle_seconds
                _shared.announce()
            return _shared
        logger = logger or log
        if not ForkServer.usable():
            if not _announced_fallback:
                _announced_fallback = True
                logger.warning("no warm zygote (bubblewrap has no pid namespace here): every submission gets a "
                               "fresh runner, started on its own")
            return None
        server = ForkServer(limits, require_isolation)
        _shared = ProcessRunners(server, logger, idle_seconds)
        atexit.register(_close_shared)
        server.warm()
        if logger is not log:
            _shared.announce()
        return _shared


def start_early() -> None:
    """Start this process's zygote now, with the default runner settings, so that it warms up while the
    process goes on importing (``nbgrader autograde`` calls this as it reads ``nbgrader_config.py``).
    Sessions configured otherwise get a new zygote at their first runner (`forkserver.ForkServer.take`).
    Where no zygote can run, nothing: the first session says so in the grading log."""
    if ForkServer.usable():
        process_runners(launcher.Limits(), True)


def _close_shared():
    global _shared
    with _lock:
        shared, _shared = _shared, None
    if shared is not None:
        shared.close()


def _forget_in_child():
    """A forked child does not own the parent's zygote: let go of it without stopping it."""
    global _shared, _lock
    _lock = threading.Lock()
    shared, _shared = _shared, None
    if shared is not None:
        shared._timer = None
        shared.server.release()


os.register_at_fork(after_in_child=_forget_in_child)


def close() -> None:
    """Stop this process's zygote now (tests; the next session starts a new one)."""
    _close_shared()
