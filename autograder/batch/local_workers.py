"""Local grading workers: processes forked from ``sdpa-course``, one submission at a time each.

Each worker's temporary files (course copy, runner sandboxes) live in one
``sdpa-worker-<pid>-*`` directory that the parent removes when the worker
ends, even when it had to kill it; those of a run that was itself killed
are removed by the next run (`remove_stale_worker_dirs`).
"""
from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Optional, Union

from ..sandbox import procs
from ..sandbox.procs import die_with_parent
from .coursedir import CourseError
from .failures import reason_of
from .worker import Grader, runner_settings, uses_sandboxed_execute

if TYPE_CHECKING:
    from multiprocessing.context import ForkContext, SpawnContext

    from ..sandbox.forkserver import ForkServer


def _fork_main(conn, bundle, prewarm, parent_pid, tmp, early=None, others=()):
    """Body of a local worker process (multiprocessing).

    `early`: the fork server whose zygote the parent started for this worker
    (`start_zygotes`); `others`: the ones it started for the workers forked
    after this one, whose ends this process lets go of at once.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what Ctrl-C means
    die_with_parent()
    if os.getppid() != parent_pid:
        os._exit(1)
    for other in others:
        other.release()
    if early is not None:
        early.adopt()
    # Everything this worker creates (its course copy, runner and zygote dirs) goes
    # under `tmp`, which the parent removes even when it had to kill the worker.
    tempfile.tempdir = tmp
    grader = None
    try:
        try:
            grader = Grader(bundle, prewarm=prewarm, pool=early)
        except Exception as exc:  # noqa: BLE001
            conn.send(("init-error", exc.args[0] if isinstance(exc, CourseError) else reason_of(exc)))
            return
        while True:
            try:
                task = conn.recv()
            except EOFError:
                return
            if task is None:
                return
            conn.send(("result", grader.grade(task)))
    finally:
        if grader is not None:
            grader.close()



WORKER_TMP_PREFIX = "sdpa-worker-"  # + the pid of the sdpa-course process that owns it + "-"


def remove_stale_worker_dirs() -> None:
    """Remove the worker dirs (and sandbox-probe dirs) of `sdpa-course` runs that were killed (their
    process is gone).

    Only our own dirs (same owner), and only when the owning pid is dead; a
    reused pid keeps its dirs until a later run, which is harmless.
    """
    top = tempfile.gettempdir()
    try:
        names = os.listdir(top)
    except OSError:
        return
    from ..sandbox.launcher import PROBE_TMP_PREFIX

    for name in names:
        prefix = next((p for p in (WORKER_TMP_PREFIX, PROBE_TMP_PREFIX) if name.startswith(p)), None)
        if prefix is None:
            continue
        pid = name[len(prefix):].split("-", 1)[0]
        path = os.path.join(top, name)
        try:
            if not pid.isdigit() or os.stat(path).st_uid != os.geteuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


def worker_dir() -> str:
    """A new directory for one worker's temporary files (see `remove_stale_worker_dirs`)."""
    return tempfile.mkdtemp(prefix=f"{WORKER_TMP_PREFIX}{os.getpid()}-")


def start_zygotes(count: int, app=None) -> list[tuple[str, ForkServer]]:
    """Start `count` workers' zygotes now, each in its worker's directory: they warm up (imports, seconds
    of CPU) while this process still imports what the workers inherit, on a core that would idle.

    Without `app` (the course not read yet), with the default runner settings; a course configured
    otherwise gets new zygotes at its first runner.  [] where workers would not use them: no fork server
    here (no bubblewrap), no SandboxedExecute, or settings the workers should report themselves (an
    invalid value in ``nbgrader_config.py``).
    """
    from ..sandbox.forkserver import ForkServer

    if count < 1 or not ForkServer.usable():
        return []
    if app is None:
        from ..sandbox.session import Budget

        settings = {"start_timeout": Budget().start_timeout}
    else:
        try:
            if not uses_sandboxed_execute(app):
                return []
            settings = runner_settings(app)
        except Exception:  # noqa: BLE001 - each worker reads the same settings and reports what is wrong
            return []
    early = []
    try:
        for _ in range(count):
            tmp = worker_dir()
            server = ForkServer(**settings, directory=tmp)  # starts nothing yet
            early.append((tmp, server))
            server.warm()
    except BaseException:
        stop_zygotes(early)
        raise
    return early


def stop_zygotes(early: list) -> None:
    """Stop the zygotes of `start_zygotes` that no worker took, remove their directories, empty the list."""
    for tmp, server in early:
        proc = server.release()
        if proc is not None:
            procs.kill_tree(proc)
        shutil.rmtree(tmp, ignore_errors=True)
    early.clear()


class LocalWorker:
    """One forked grading process and the task it holds."""

    def __init__(self, ctx: Union[ForkContext, SpawnContext], bundle: dict, prewarm: bool,
                 early: Optional[tuple[str, ForkServer]] = None, others: Sequence[ForkServer] = ()) -> None:
        """`early`: (its directory, the fork server whose zygote was started for it, `start_zygotes`);
        `others`: the fork servers started for workers not forked yet."""
        self.conn, child = ctx.Pipe()
        self.tmp, server = early if early is not None else (worker_dir(), None)
        self.proc = ctx.Process(target=_fork_main, args=(child, bundle, prewarm, os.getpid(), self.tmp,
                                                         server, tuple(others)),
                                name="sdpa-grader", daemon=True)
        self.proc.start()
        child.close()
        # The worker owns the zygote now; this process keeps only its bwrap process, to kill and reap it.
        self.zygote_proc = server.release() if server is not None else None
        self.task, self.since, self.retired = None, None, False

    def assign(self, task: dict) -> None:
        self.task, self.since = task, time.monotonic()
        self.conn.send(task)

    def retire(self) -> None:
        """No more work: let it exit now (and kill its spare runner), without waiting."""
        if not self.retired:
            self.retired = True
            try:
                self.conn.send(None)
            except (OSError, ValueError):
                pass

    def stop(self, wait: float = 5.0) -> None:
        self.retire()
        self.proc.join(wait)
        self.kill()

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()
        # Its sandboxes die with it (bwrap --die-with-parent), except the zygote started here, which
        # this process ends and reaps (the worker has stopped it already, unless it was killed).
        if self.zygote_proc is not None:
            procs.kill_tree(self.zygote_proc)
            self.zygote_proc = None
        shutil.rmtree(self.tmp, ignore_errors=True)

