"""A grading process fed through its stdin and stdout, and its handle on the caller's side.

Dask workers are daemonic processes and may not fork with multiprocessing,
so each one starts ``python -m autograder.batch.transport --serve``: a
worker (``worker.py``) that reads the course bundle, then tasks, and writes
results.  Messages use the sandbox's length-prefixed framing (``wire.frame``)
with one pickled blob: both ends are our own trusted processes.
"""
from __future__ import annotations

import argparse
import os
import pickle
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from typing import IO, Any, Optional, Union

from ..sandbox.guest import wire
from ..sandbox.procs import die_with_parent, python_child_env
from .coursedir import CourseError
from .failures import exit_text, failure_result, reason_of
from .worker import Grader

# Bundles carry the course's source, release and gradebook; results carry a notebook's files.
MAX_FRAME_BYTES = 1 << 30


def send_frame(stream: IO[bytes], obj: Any) -> None:
    """Write one pickled object as a framed message."""
    stream.write(wire.frame({"kind": "pickle"}, [pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)]))
    stream.flush()


def recv_frame(stream: IO[bytes]) -> Any:
    """Read one framed, pickled object (EOFError when the other side closed)."""
    _, blobs = wire.receive(stream, wire.MAX_HEADER_BYTES, MAX_FRAME_BYTES)
    return pickle.loads(blobs[0])  # noqa: S301 - from our own grading process


def serve_stdio() -> None:
    """``python -m autograder.batch.transport --serve``: a grading process fed through stdin/stdout."""
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # stray prints go to stderr, never into the protocol
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    graders: dict[str, Grader] = {}
    try:
        try:
            received = recv_frame(proto_in)
            for bundle in received if isinstance(received, list) else [received]:
                graders[bundle["assignment"]] = Grader(bundle, prewarm=True)
        except EOFError:
            return
        except Exception as exc:  # noqa: BLE001
            send_frame(proto_out, ("init-error", exc.args[0] if isinstance(exc, CourseError) else reason_of(exc)))
            return
        send_frame(proto_out, ("ready", os.getpid()))
        while True:
            try:
                task = recv_frame(proto_in)
            except EOFError:
                return
            # one bundle: its grader; several (the check service's assignments): the one the task names
            grader = graders.get(task.get("assignment")) if len(graders) > 1 else next(iter(graders.values()))
            send_frame(proto_out, ("result", grader.grade(task) if grader is not None else failure_result(
                task["student"], f"no grader for the assignment {task.get('assignment')!r}")))
    finally:
        for grader in graders.values():
            grader.close()


class ProcessGrader:
    """A ``--serve`` grading process, used from dask workers (daemonic: no multiprocessing there) and by the
    check service (`bundle`: a list, one grader per assignment, a task's "assignment" picks it)."""

    def __init__(self, bundle: Union[dict, list]) -> None:
        env = python_child_env()
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")  # nbgrader runs alembic
        self.proc = subprocess.Popen([sys.executable, "-m", "autograder.batch.transport", "--serve"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                     cwd=tempfile.gettempdir(), start_new_session=True)
        self.replies = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        send_frame(self.proc.stdin, bundle)
        kind, detail = self._get(600)
        if kind != "ready":
            self.kill()
            raise RuntimeError(f"grading process did not start: {detail}")

    def _read(self):
        try:
            while True:
                self.replies.put(recv_frame(self.proc.stdout))
        except Exception as exc:  # noqa: BLE001
            self.replies.put(("gone", exc))

    def _get(self, timeout):
        try:
            return self.replies.get(timeout=timeout)
        except queue.Empty:
            return ("timeout", None)

    def grade(self, task: dict, timeout: float) -> Optional[dict]:
        try:
            send_frame(self.proc.stdin, task)
        except OSError:
            return None
        kind, payload = self._get(timeout)
        if kind == "result":
            return payload
        if kind == "timeout":
            self.kill()
            return failure_result(task["student"], f"grading took longer than {timeout:g} s (grading process "
                                                   f"killed)")
        self.kill()
        return failure_result(task["student"], f"grading process died ({exit_text(self.proc.wait())})")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()



if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="grading process of sdpa-course (used by --dask workers)")
    parser.add_argument("--serve", action="store_true", required=True)
    parser.parse_args()
    serve_stdio()
