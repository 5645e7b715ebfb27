"""The trusted reading of a student's code, done in a child process with a wall-clock budget and a memory cap.

Reading code is work the grading process does on what a student sent: IPython's rewriting of each cell, the
static scan, the texts the runners compiled at run time.  Red-team passes found one superlinear spot after
another there (a list search, a backtracking pattern, IPython tokenising a cell again for each line it rewrites,
a hash of a whole package per text), each outside the sandbox's time limits, and in the check service each held
the one grader and, holding the GIL, its HTTP loop.  Each spot is bounded now; this bounds the class.

A reading server (``python -m autograder.grading.reading_process``) is started once per grading process, imports
the scan and waits, single-threaded; for each submission it forks a child that reads the code from the server's
clean state, under a memory cap, and writes back a `Reading`.  The grading process waits at most `seconds` by the
wall clock; past it (or when the child dies) it kills the server with the child, and the reading is one holding
note: the notebook's points wait for a person (secure by default) and the grade goes on.  The next submission
starts a fresh server.
"""
from __future__ import annotations

import atexit
import os
import pickle
import re
import resource
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from ..i18n import _, language, using
from ..sandbox.procs import python_child_env

if TYPE_CHECKING:
    from ..sandbox.compiled_texts import CompiledTexts
    from .static_scan import Finding

READING_SECONDS = 30.0  # an honest notebook's reading takes a fraction of a second; 400,000 characters about 4 s
READING_MEMORY_MIB = 2048  # beyond what the server holds when the child is forked
MAX_NOTES = 200  # review notes kept per submission (`_at_most`)
START_SECONDS = 120.0  # the server imports the scan (torch, through the course's declarations)
MAX_REPLY_BYTES = 256 * 2**20
_LENGTH = struct.Struct(">Q")


@dataclass
class CodeToRead:
    """What the trusted side reads of one submission; indices are the notebook's cells."""

    sources: list[str]  # the student's code cells, in notebook order
    cells: list[int]  # their notebook indices
    runner_sources: list[str]  # the code cells the runner was given, in order
    positions: list[int]  # runner position -> notebook cell index
    compiled: Optional["CompiledTexts"] = None  # what the runners compiled at run time
    language: str = field(default_factory=language)


@dataclass
class Reading:
    """What the reading concluded: forbidden APIs reachable from each graded function, and the review notes
    (the scan's, then the run-time texts'), each pointing at a notebook cell."""

    forbidden: dict[str, list["Finding"]]
    notes: list[dict]
    complete: bool = True  # False: the reading did not finish (its one note holds the notebook)


def cell_of(request: tuple, positions: Sequence[int], cells: Sequence[int], sources: Sequence[str]) -> int:
    """The notebook cell a run-time report points to: the cell that was running, or for a check's call of a
    student function, the student cell (`cells`, with `sources`) that defines it, else the first one."""
    kind, what = request if isinstance(request, tuple) and len(request) == 2 else (None, None)
    if kind == "cell" and isinstance(what, int) and 0 <= what < len(positions):
        return positions[what]
    # [ \t], not \s: `^\s*` retried over every line of a run of blank lines (quadratic: a red-team check of
    # 318,000 blank characters held the grader 108 s)
    definition = re.compile(rf"^[ \t]*def[ \t]+{re.escape(str(what))}[ \t]*\(", re.M)
    return next((cell for cell, source in zip(cells, sources) if definition.search(source)),
                cells[0] if cells else 0)


def read_here(code: CodeToRead) -> Reading:
    """The reading itself, in this process (the server's child runs it; tests call it directly)."""
    from . import code_review

    with using(code.language):
        scan = code_review.review(code.sources)
        located: dict[str, int] = {}  # thousands of run-time texts ask for the same few requests

        def locate(request):
            key = repr(request)
            if key not in located:
                located[key] = cell_of(request, code.positions, code.cells, code.sources)
            return located[key]

        notes = code_review.review_notes(scan, code.cells)
        if code.compiled is not None:
            notes += code_review.runtime_notes(code.compiled, code.runner_sources, locate)
        return Reading(dict(scan.forbidden), _at_most(notes, MAX_NOTES))


def _at_most(notes: list[dict], most: int) -> list[dict]:
    """The first `most` notes, and past them one that counts the rest (and holds if any of them held): a
    person reads a few flagged lines, and each note is logged, stored and rendered (a red-team notebook made
    37,000, 17 s of grading)."""
    if len(notes) <= most:
        return notes
    rest = notes[most:]
    return notes[:most] + [{"cell": rest[0]["cell"], "line": rest[0]["line"], "category": "dynamic-code",
                            "holds": any(note["holds"] for note in rest),
                            "detail": _("还有 {count} 处代码被标出，没有一一列出").format(count=len(rest))}]


def unfinished(code: CodeToRead, why: str) -> Reading:
    """The reading of a submission whose reading did not finish: one note that holds its points."""
    with using(code.language):
        return Reading({}, [{"cell": code.cells[0] if code.cells else 0, "line": 0, "category": "dynamic-code",
                             "holds": True, "detail": _("评分程序没能读完你的代码：{why}").format(why=why)}],
                       complete=False)


def read(code: CodeToRead, seconds: float = READING_SECONDS, memory_mib: int = READING_MEMORY_MIB) -> Reading:
    """Read `code` in a child of this process's reading server, waiting at most `seconds`."""
    with _LOCK, using(code.language):
        try:
            reply = _server().ask(code, seconds, memory_mib)
        except _Overrun:
            reply = _("读了 {seconds:g} 秒还没读完").format(seconds=seconds)
        except _Failed as exc:
            reply = _("读代码的进程出错了（{error}）").format(error=exc)
    return reply if isinstance(reply, Reading) else unfinished(code, str(reply))


def start() -> None:
    """Start this process's reading server ahead of the first reading (``nbgrader/warm.py``)."""
    with _LOCK:
        _server()


def stop() -> None:
    """Stop this process's reading server (a later reading starts another)."""
    global _SERVER
    with _LOCK:
        if _SERVER is not None and _SERVER.owner == os.getpid():
            _SERVER.kill()
        _SERVER = None


class _Overrun(Exception):
    pass


class _Failed(Exception):
    pass


class _Server:
    """One reading server, the child of this process (`owner`), in its own process group."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        self.proc = subprocess.Popen([sys.executable, "-m", "autograder.grading.reading_process", str(self.owner)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=python_child_env(),
                                     cwd="/", start_new_session=True)
        self.ready = False
        atexit.register(self.kill)  # never outlives its grading process (it would end at its stdin's end anyway)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ask(self, code: CodeToRead, seconds: float, memory_mib: int):
        if not self.ready:  # the first reading waits for the imports too, then for its own budget
            if self._receive(time.monotonic() + START_SECONDS) != "ready":
                self.kill()
                raise _Failed("the reading server did not start")
            self.ready = True
        deadline = time.monotonic() + seconds
        self._send(_frame((code, memory_mib * 2**20, seconds)), deadline)
        return self._receive(deadline)

    def _send(self, data: bytes, deadline: float) -> None:
        """Write the request by the wall clock too: a server that stops reading is killed."""
        fd, view = self.proc.stdin.fileno(), memoryview(data)
        try:
            while view:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([], [fd], [], left)[1]:
                    self.kill()
                    raise _Overrun()
                view = view[os.write(fd, view[:2**16]):]
        except OSError as exc:
            self.kill()
            raise _Failed(type(exc).__name__) from None

    def _receive(self, deadline: float):
        """One framed reply, read by the wall clock: past `deadline`, or from a server that died, the server is
        killed (with the child reading) and the caller told."""
        data = bytearray()
        need = _LENGTH.size
        fd = self.proc.stdout.fileno()
        while len(data) < need:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.kill()
                raise _Overrun()
            chunk = os.read(fd, min(need - len(data), 2**20))
            if not chunk:
                self.kill()
                raise _Failed("the reading process ended")
            data += chunk
            if need == _LENGTH.size and len(data) == need:
                (size,) = _LENGTH.unpack(bytes(data))
                if size > MAX_REPLY_BYTES:
                    self.kill()
                    raise _Failed("its reply was too long")
                need += size
        try:
            return pickle.loads(data[_LENGTH.size:])  # noqa: S301 - from our own process, never the student's
        except Exception as exc:  # noqa: BLE001 - a reply cut short by a child that died while writing it
            self.kill()
            raise _Failed(f"its reply could not be read: {type(exc).__name__}") from None

    def kill(self) -> None:
        if self.owner != os.getpid():  # a forked process's copy of its parent's server: not its own to end
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the server and the child reading
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


_LOCK = threading.Lock()
_SERVER: Optional[_Server] = None


def _server() -> _Server:
    global _SERVER
    if _SERVER is None or _SERVER.owner != os.getpid() or not _SERVER.alive():
        if _SERVER is not None and _SERVER.owner == os.getpid():
            _SERVER.kill()
        _SERVER = _Server()  # a forked process never uses its parent's server
    return _SERVER


def _frame(obj) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(data)) + data


def _read_exact(fd: int, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = os.read(fd, min(size - len(data), 2**20))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _serve() -> None:
    """The server's loop: for each request from stdin, fork a child that reads and writes the reply."""
    from .. import i18n
    from . import code_review  # noqa: F401 - the scan, the course's declarations and IPython, imported once
    from .code_review import _as_ipython_runs

    _as_ipython_runs("x = 1")  # imports IPython's transformers
    for locale in i18n.LOCALES.values():  # the message catalogs, read once: not under a child's memory cap
        i18n.catalog(locale)
    fd_in, fd_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # stray prints go to stderr, never into the replies
    _write_all(fd_out, _frame("ready"))
    while True:
        try:
            (size,) = _LENGTH.unpack(_read_exact(fd_in, _LENGTH.size))
            code, memory, seconds = pickle.loads(_read_exact(fd_in, size))  # noqa: S301 - from our own grader
        except EOFError:  # the grading process is gone
            return
        pid = os.fork()
        if pid == 0:
            _child(code, memory, seconds, fd_out)
        _pid, status = os.waitpid(pid, 0)
        if status != 0:  # it wrote no reply (a child that replied exits 0): the grader need not wait its budget
            with using(code.language):
                _write_all(fd_out, _frame(_("读代码的进程出错了（{error}）").format(error=_exit_text(status))))


def _exit_text(status: int) -> str:
    if not os.WIFSIGNALED(status):
        return f"exit {os.WEXITSTATUS(status)}"
    try:
        return signal.Signals(os.WTERMSIG(status)).name
    except ValueError:
        return f"signal {os.WTERMSIG(status)}"


def _child(code: CodeToRead, memory: int, seconds: float, fd_out: int) -> None:
    status = 0
    try:
        with open("/proc/self/statm") as fh:
            virtual = int(fh.read().split()[0]) * resource.getpagesize()
        # Soft limits: only this process's own code runs here, and the reply is written after lifting the cap.
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        resource.setrlimit(resource.RLIMIT_AS, (virtual + memory, hard))
        cpu = int(seconds) + 2  # a backstop, should the grading process be gone
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, resource.getrlimit(resource.RLIMIT_CPU)[1]))
        try:
            reply: object = read_here(code)
        except MemoryError:
            reply = MemoryError
        except Exception as exc:  # noqa: BLE001 - the grader holds the notebook and says so
            reply = exc
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
        with using(code.language):
            if reply is MemoryError:
                reply = _("读的时候要的内存超过了 {limit} MiB").format(limit=memory // 2**20)
            elif isinstance(reply, Exception):
                reply = _("读代码的进程出错了（{error}）").format(error=type(reply).__name__)
        _write_all(fd_out, _frame(reply))
    except BaseException:  # noqa: BLE001 - no reply: the grader's wall clock decides
        status = 1
    os._exit(status)


if __name__ == "__main__":
    # Run as the imported module, not as __main__: the readings it sends back are its classes by their real name.
    from autograder.grading.reading_process import _serve
    from autograder.sandbox.procs import die_with_parent

    die_with_parent(int(sys.argv[1]))  # not only at its stdin's end: that waits for the imports
    _serve()
