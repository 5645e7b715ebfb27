"""Where a session's runner process comes from: the `RunnerSource` contract and its plumbing.

A session starts a fresh runner itself unless it was given a `RunnerSource`
(``pool.py``: one started ahead of need; ``forkserver.py``: forked from a
warmed zygote).  The source is passed explicitly to each `StudentSession`
(by nbgrader resources from a batch worker), never installed globally.
"""
from __future__ import annotations

import os
import queue
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Optional, Protocol, Union

from . import kernel_tripwires, launcher, procs
from .guest import FILES, ZYGOTE, wire

if TYPE_CHECKING:
    from pathlib import Path


class Runner(Protocol):
    """A runner that is not a sandbox of its own (``forkserver.ForkedRunner``): it knows how to stop itself.

    A fresh runner is the `subprocess.Popen` of its sandbox instead.
    """

    stdin: IO[bytes]
    stdout: IO[bytes]

    def stop(self) -> None: ...


@dataclass
class HandedRunner:
    """A started, ready runner handed over by a `RunnerSource`."""

    proc: Union[subprocess.Popen, Runner]
    replies: queue.Queue  # a `reply_queue()` filled by a `read_replies` thread
    directory: Optional[str]  # its `runner_dirs` top directory (removed by the session), or None
    log: object  # its open log file (closed by the session)


class RunnerSource(Protocol):
    """Runners started ahead of need.

    `take` returns a runner that runs in a sandbox made by
    `launcher.sandboxed_popen` with these `limits` (and isolation, if
    required), has sent "ready" and never ran any student's code -- or None,
    and the session starts its own.  Each runner goes to one session.
    """

    keep_warm: bool  # start the next runner when one is taken (False: no more work is coming)
    handed: int  # runners handed to sessions
    missed: int  # sessions that had to start their own

    def take(self, limits: launcher.Limits, require_isolation: bool) -> Optional[HandedRunner]: ...

    def warm(self) -> None: ...

    def close(self) -> None: ...


SANDBOX_PREFIX = "sdpa-sandbox-"  # of a runner's or a zygote's directory, whose scratch the sandbox sees


def runner_dirs() -> tuple[str, str, IO[bytes]]:
    """(top, scratch, log file) of a new runner: the sandbox sees only scratch, not its own log.

    The log is a nameless file in `top`, as a forked runner's is in its
    zygote's.  The session removes `top` when the runner ends.
    """
    top = tempfile.mkdtemp(prefix=SANDBOX_PREFIX)
    scratch = os.path.join(top, "scratch")
    os.mkdir(scratch)
    return top, scratch, tempfile.TemporaryFile(dir=top)


def runner_command(limits: launcher.Limits) -> tuple[list[str], list[Path]]:
    """argv and read-only mounts of a runner's sandbox: a zygote's, and a fresh runner's alike.

    One command for both, so that student code finds the same program,
    arguments and files whichever it runs in (``guest/zygote.py`` decides by
    what it was given on fd 0: a control socket, or a runner's pipe).  The
    numbers are a zygote's runners' RLIMIT_NPROC and uid range.
    """
    kernel_tripwires.ensure_built()  # mounted below; a runner cannot start without it
    numbers = (limits.max_processes, launcher.UID_BASE, launcher.UID_SPAN)
    return [sys.executable, "-I", str(ZYGOTE), *map(str, numbers)], list(FILES)


REPLY_QUEUE_FRAMES = 4  # replies read ahead of the grader; the runner blocks behind them


def read_replies(stream: IO[bytes], replies: queue.Queue) -> None:
    """Reader thread: frames from the runner into `replies`, each capped as it is read."""
    try:
        while True:
            replies.put(wire.receive(stream, wire.MAX_REPLY_HEADER_BYTES, wire.MAX_REPLY_BLOB_BYTES))
    except (wire.WireError, EOFError, OSError, ValueError) as exc:  # worded where it is read (`wait`)
        replies.put(exc)


def reply_queue() -> queue.Queue:
    return queue.Queue(maxsize=REPLY_QUEUE_FRAMES)


def stop_runner(proc: Union[subprocess.Popen, Runner]) -> None:
    """Kill a runner's whole sandbox and close our ends of its pipes.

    A runner forked by ``forkserver.py`` knows how to stop itself: its zygote
    kills it and resets the sandbox it shares with the next runner.
    """
    stop = getattr(proc, "stop", None)
    if stop is not None:
        stop()
        return
    procs.kill_tree(proc)
    for pipe in (proc.stdin, proc.stdout):
        try:
            pipe.close()
        except OSError:
            pass
