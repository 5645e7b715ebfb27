"""Runners forked from a warmed zygote, so no student waits for `import torch`.

A fresh runner costs seconds of CPU before its student's first line runs
(``guest/zygote.py`` lists what; ``benchmarks profile --zygote`` measures it).  A `ForkServer` starts one zygote
sandbox -- through `launcher.sandboxed_popen`, with the limits and isolation
the sessions ask for -- and, as a `runners.RunnerSource`, hands each
session a runner forked from it: a new process that never ran anyone's
code, on new pipes.  Between two runners the zygote resets its sandbox
(kills every other process, removes IPC objects, restores scratch and
/tmp, checks that its own process is as it was after warm-up) and must
answer "clean" with our nonce; if it does not, in time, or refuses a fork,
the whole sandbox is killed and the next runner comes from a new zygote.
As root, each runner runs under a uid of its own, so it cannot change the
zygote that later runners inherit from (``guest/zygote.py``).

Only one runner is out at a time: a session that asks while another one
still holds a runner gets None and starts its own fresh runner, so two
students never share a sandbox.  The fork server needs bubblewrap's pid
namespace; without isolation every session starts its own runner.

A fork server belongs to one process (a grading worker, or a whole stock
`nbgrader autograde` or Jupyter server process, ``shared_zygote.py``).  Its
methods hold one lock, so sessions in several threads may share it: one
runner is out at a time, and a session that finds it out starts a fresh one.
"""
from __future__ import annotations

import json
import logging
import os
import queue
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
from typing import IO, Optional

from . import launcher, procs, runners

log = logging.getLogger(__name__)


class ZygoteError(RuntimeError):
    """The zygote did not answer as it must; its sandbox is discarded."""


class _Zygote:
    """One zygote sandbox and the control socket to it."""

    def __init__(self, server: ForkServer, limits: launcher.Limits, require_isolation: bool) -> None:
        self.server = server
        self.adopted = False  # started by this process's parent, which alone can reap it (`ForkServer.adopt`)
        self.top = tempfile.mkdtemp(prefix=runners.SANDBOX_PREFIX, dir=server.directory)
        scratch = os.path.join(self.top, "scratch")
        os.mkdir(scratch)
        self.log = open(os.path.join(self.top, "zygote.log"), "wb")
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = None
        self.out = None  # the ForkedRunner currently out, if any
        self.cpu = 0.0
        self.init_pid = self.zygote_pid = None  # host pids, known once the zygote is ready
        try:
            argv, readonly = runners.runner_command(limits)
            self.proc = launcher.sandboxed_popen(
                argv, scratch=scratch, readonly=readonly, limits=limits, require_isolation=require_isolation,
                zygote=True, stdin=theirs.fileno(), stdout=subprocess.DEVNULL, stderr=self.log)
        except BaseException:
            self.discard()
            raise
        finally:
            theirs.close()
        self.ready = False

    def _receive(self, timeout, nonce=None):
        self.control.settimeout(max(0.01, timeout))
        try:
            data = self.control.recv(4096)
        except (TimeoutError, OSError) as exc:
            raise ZygoteError(f"no answer from the zygote ({exc or type(exc).__name__})") from None
        if not data:
            raise ZygoteError("the zygote exited")
        try:
            msg = json.loads(data)
        except ValueError:
            raise ZygoteError("the zygote sent something that is not JSON") from None
        if nonce is not None and msg.get("nonce") != nonce:
            raise ZygoteError(f"unexpected answer from the zygote: {msg}")
        return msg

    def wait_ready(self, timeout: float) -> None:
        if not self.ready:
            msg = self._receive(timeout)
            if msg.get("op") != "ready":
                raise ZygoteError(f"the zygote did not start: {msg}")
            self.cpu, self.ready = float(msg.get("cpu", 0.0)), True
            # Host pids of bwrap's init and of the zygote (its only child now): the
            # runner forked next is init's other child, which a session watches.
            inits = procs.children(self.proc.pid)
            self.init_pid = inits[0] if len(inits) == 1 else None
            kids = procs.children(self.init_pid) if self.init_pid else []
            self.zygote_pid = kids[0] if len(kids) == 1 else None

    def fork(self, timeout: float) -> ForkedRunner:
        """A new runner process, ready for its first request."""
        nonce = secrets.token_hex(8)
        # The runner's stderr: a nameless file, as a fresh runner's log goes with its directory.
        log_file = tempfile.TemporaryFile(dir=self.top)
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        try:
            socket.send_fds(self.control, [json.dumps({"op": "fork", "nonce": nonce}).encode()],
                            [in_r, out_w, log_file.fileno()])
        except OSError as exc:
            os.close(in_w)
            os.close(out_r)
            log_file.close()
            raise ZygoteError(f"cannot reach the zygote: {exc}") from None
        finally:
            os.close(in_r)  # the zygote has its own copies now
            os.close(out_w)
        runner = ForkedRunner(self, os.fdopen(in_w, "wb"), os.fdopen(out_r, "rb"), log_file)
        self.out = runner
        msg = self._receive(timeout, nonce)
        if msg.get("op") != "forked":
            raise ZygoteError(f"the zygote did not fork: {msg}")
        if self.init_pid and self.zygote_pid:
            others = [p for p in procs.children(self.init_pid) if p != self.zygote_pid]
            runner.host_pid = others[0] if len(others) == 1 else None
        return runner

    def reset(self, timeout: float) -> None:
        """Kill what the last runner left and restore the sandbox; ZygoteError unless "clean"."""
        nonce = secrets.token_hex(8)
        try:
            self.control.send(json.dumps({"op": "reset", "nonce": nonce}).encode())
        except OSError as exc:
            raise ZygoteError(f"cannot reach the zygote: {exc}") from None
        msg = self._receive(timeout, nonce)
        if msg.get("op") != "clean":
            raise ZygoteError(f"the zygote could not reset its sandbox: {msg.get('detail', msg)}")
        self.cpu = float(msg.get("cpu", 0.0))
        self.out = None

    def discard(self) -> None:
        if self.proc is not None:
            procs.kill_tree(self.proc, foreign=self.adopted)
            self.proc = None
        self.control.close()
        self.log.close()
        self.out = None
        shutil.rmtree(self.top, ignore_errors=True)


class ForkedRunner:
    """What a session holds as its runner `proc`: pipes to one forked child."""

    def __init__(self, zygote: _Zygote, stdin: IO[bytes], stdout: IO[bytes], log_file: IO[bytes]) -> None:
        self.zygote, self.stdin, self.stdout, self.log = zygote, stdin, stdout, log_file
        self.stopped = False
        self.host_pid = None  # for `connection.RunnerConnection`: whether the runner stopped itself

    def stop(self) -> None:
        """`runners.stop_runner`: end this runner; the zygote resets its sandbox (or is discarded).

        The pipes are closed only after that: the runner is dead by then, so the
        session's reader thread has seen EOF and does not hold the pipe's lock.
        """
        if not self.stopped:
            self.stopped = True
            if self.zygote.out is self:
                self.zygote.server._after_runner(self.zygote)
        for pipe in (self.stdin, self.stdout):
            try:
                pipe.close()
            except OSError:
                pass


class ForkServer:
    """A `runners.RunnerSource` that forks runners from a warmed zygote; see the module docstring."""

    def __init__(self, limits: Optional[launcher.Limits] = None, require_isolation: bool = True,
                 start_timeout: float = 60.0, reply_timeout: float = 5.0, directory: Optional[str] = None) -> None:
        self.directory = directory  # where each zygote's own directory goes (tempfile's default if None)
        self.limits = limits or launcher.Limits()
        self.require_isolation = require_isolation
        self.start_timeout = start_timeout
        self.reply_timeout = reply_timeout
        self._zygote = None
        self.handed = 0  # runners handed to sessions
        self.missed = 0  # sessions that had to start their own
        self.zygotes = 0  # zygotes started
        self.keep_warm = True  # interface of pool.RunnerPool
        self.last_miss = ""  # why the last session that got no runner got none (for the log)
        self._lock = threading.RLock()  # take, the reset after a runner, and close: one at a time

    @staticmethod
    def usable() -> bool:
        """The zygote needs bubblewrap's pid namespace."""
        return launcher.probe().isolated

    def warm(self) -> None:
        """Start the zygote if there is none (it warms up while the caller does other work)."""
        with self._lock:
            if self._zygote is None and self.usable():
                try:
                    self._zygote = _Zygote(self, self.limits, self.require_isolation)
                    self.zygotes += 1
                except Exception as exc:  # noqa: BLE001 - sessions then start their own runners
                    log.warning("could not start a zygote: %s", exc)
                    self.last_miss = f"the zygote could not start ({exc})"
                    self._zygote = None

    def release(self) -> Optional[subprocess.Popen]:
        """Let go of the zygote without stopping it: another process owns it now.

        `sdpa-course` starts each worker's zygote before it forks the worker (the
        zygote warms up while the parent still imports), then releases it: its
        ends of the control socket and log close here, so that the zygote sees
        EOF when its worker goes.  Returns the zygote's process, which only
        this process, its parent, can reap or kill (`procs.kill_tree`).
        """
        zygote, self._zygote = self._zygote, None
        if zygote is None:
            return None
        zygote.control.close()
        zygote.log.close()
        return zygote.proc

    def adopt(self) -> None:
        """This process was forked from the one that started the zygote, and now owns it: it cannot poll
        the zygote's process (not its child), so `discard` kills it by its pid (``kill_tree(foreign=True)``)."""
        if self._zygote is not None:
            self._zygote.adopted = True

    def _discard(self, reason):
        self.last_miss = f"zygote discarded: {reason}"
        if self._zygote is not None:
            log.info("zygote discarded: %s", reason)
            self._zygote.discard()
            self._zygote = None

    def take(self, limits: launcher.Limits, require_isolation: bool) -> Optional[runners.HandedRunner]:
        """A runner for a session with these limits, forked from the zygote; None if none can be had."""
        with self._lock:
            return self._take(limits, require_isolation)

    def _take(self, limits, require_isolation):
        wanted = (limits, require_isolation)
        if wanted != (self.limits, self.require_isolation):
            self.limits, self.require_isolation = wanted
            self._discard("the sessions ask for other limits")
        zygote = self._zygote
        if zygote is not None and zygote.out is not None:
            self.missed += 1  # another session holds the runner: never share a sandbox
            self.last_miss = "another session holds the zygote's runner"
            return None
        self.warm()
        zygote = self._zygote
        if zygote is None:
            self.missed += 1
            self.last_miss = self.last_miss or "no zygote (bubblewrap has no pid namespace here)"
            return None
        runner = None
        try:
            zygote.wait_ready(self.start_timeout)
            runner = zygote.fork(self.reply_timeout)
            replies = runners.reply_queue()
            threading.Thread(target=runners.read_replies, args=(runner.stdout, replies),
                             daemon=True).start()
            _wait_for_ready(replies, self.start_timeout)
        except ZygoteError as exc:
            self._discard(str(exc))
            if runner is not None:
                runner.stop()
                runner.log.close()
            self.missed += 1
            return None
        self.handed += 1
        self.last_miss = ""
        return runners.HandedRunner(runner, replies, None, runner.log)

    def _after_runner(self, zygote):
        """A runner was stopped: reset the sandbox, or throw it away."""
        with self._lock:
            self._reset(zygote)

    def _reset(self, zygote):
        try:
            zygote.reset(self.reply_timeout)
        except ZygoteError as exc:
            self._discard(str(exc))
            return
        # RLIMIT_CPU counts the zygote's whole life: retire it well before that.
        if zygote.cpu > self.limits.cpu_seconds / 2:
            self._discard("CPU time limit approaching")

    def close(self) -> None:
        with self._lock:
            self._discard("closed")


def _wait_for_ready(replies, timeout):
    """Consume the runner's "ready" message; ZygoteError if it does not come."""
    try:
        reply = replies.get(timeout=timeout)
    except queue.Empty:
        raise ZygoteError("the forked runner did not start in time") from None
    header = reply[0] if isinstance(reply, tuple) else None
    if not (isinstance(header, dict) and header.get("status") == "ready"):
        raise ZygoteError(f"the forked runner did not start: {reply}")
