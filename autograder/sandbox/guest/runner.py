"""What runs student code: executes cells, answers calls.

It runs inside the sandbox (see ``launcher.py``) with just the files of
``guest/`` mounted, started by ``zygote.py`` (the guest's one program) in
a runner forked from a zygote or in a fresh runner, warmed up alike.  The
trusted grader talks to it over the original stdin and stdout, which are
moved to private descriptors before any student code runs; the student's
own prints go to captured cell outputs instead.

Nothing here decides a grade: it only reports what the student's code did.
"""
import os
import sys
import threading
import time
import traceback
from typing import BinaryIO, Iterable, NoReturn, Optional

# `python -I` leaves this directory off sys.path; the guest files import each other by name.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import messages  # noqa: E402
import no_programs  # noqa: E402
import source_report  # noqa: E402
import wire  # noqa: E402

GUEST_DIR = os.path.dirname(os.path.abspath(__file__))
MAX_STREAM_CHARS_PER_CELL = 20_000
MAX_DISPLAY_BYTES_PER_CELL = 2 * 2**20

# Built-in softmax and attention (``forbidden.py``, the one definition) raise
# wherever the student's code runs (``tripwires.py``).  This tripwire lives in
# the student's process, so it is only a second layer: the trusted grader also
# scans the student's code (``static_scan.py``).
import tripwires  # noqa: E402
from forbidden import forbidden_ops  # noqa: E402,F401 - the probe and older callers read it here
from tripwires import ForbiddenAPIError  # noqa: E402,F401


class Runner:
    def __init__(self, proto_in: Optional[BinaryIO], proto_out: Optional[BinaryIO]) -> None:
        self.proto_in, self.proto_out = proto_in, proto_out
        self.outputs = None  # the current cell's nbformat outputs
        self.forbidden_used = []
        self.student_files, self.provided_files = set(), set()  # IPython's code names of the cells run
        self._exec_provided = False  # the cell being run is the course's, not the student's
        self._exec_demo = False  # ... and demonstrates a built-in: the grader may compute one for its own code
        self._students = tripwires.StudentCode(self)
        self._builtin_calls = 0  # built-in results asked of the grader (each gets its own dropout seed)
        self._builtin_skipped = False  # a top-level statement of a student's cell could not run here (`run_code`)
        self._skip_noted = False
        self.shell = None

    # -- capture -----------------------------------------------------------
    def _start_shell(self):
        from IPython.core.displayhook import DisplayHook
        from IPython.core.displaypub import DisplayPublisher
        from IPython.core.interactiveshell import InteractiveShell

        runner = self

        class Publisher(DisplayPublisher):
            def publish(self, data: dict, metadata: Optional[dict] = None, *args, **kwargs) -> None:
                runner._add_display("display_data", data, metadata or {})

            def clear_output(self, wait: bool = False) -> None:
                if runner.outputs is not None:
                    runner.outputs.clear()

        class Hook(DisplayHook):
            def write_format_data(self, format_dict: dict, md_dict: Optional[dict] = None) -> None:
                runner._add_display("execute_result", format_dict, md_dict or {})

        class Shell(InteractiveShell):
            displayhook_class = Hook
            display_pub_class = Publisher

            def _showtraceback(self, etype, evalue, stb):
                # Frames of the guest's own files (a tripwire raising) say nothing to the student, and
                # their paths would differ from one course directory to the next.
                stb = [entry for entry in stb if GUEST_DIR not in entry]
                runner._add_output({"output_type": "error", "ename": etype.__name__,
                                    "evalue": wire.short(evalue), "traceback": stb[-40:]})

            def enable_gui(self, gui=None):
                # `%matplotlib inline` asks for no event loop; a Jupyter kernel accepts it, and so must grading
                # (red team: the magic above a `def` stopped the cell, 34 points lost)
                pass

            def ask_exit(self) -> None:
                runner._stream("stderr", messages._(messages.EXIT_IGNORED) + "\n")

            async def run_code(self, code_obj, result=None, *, async_=False):
                # A statement at the top level of the student's own cell that ran in their kernel but cannot
                # run here (it reaches a blocked built-in, as a self-check printed above the `def` does, or
                # imports a module grading lacks): the cell goes on past it, and from then on the student's
                # cells go on past a name it would have bound (a NameError, in this cell or a later one), so
                # the functions they define are graded as written.  Going on past a failure gains a cell
                # nothing it could not have had with `try`.
                fired = len(runner.forbidden_used)
                failed = await super().run_code(code_obj, result, async_=async_)
                error = getattr(result, "error_in_exec", None)
                builtin, missing = len(runner.forbidden_used) > fired, isinstance(error, ModuleNotFoundError)
                if failed and runner.outputs is not None and not runner._exec_provided and (
                        builtin or missing or (runner._builtin_skipped and isinstance(error, NameError))):
                    if not runner._skip_noted:
                        why = messages.MODULE_STATEMENT_SKIPPED if missing else messages.BUILTIN_STATEMENT_SKIPPED
                        runner._stream("stderr", messages._(why) + "\n")
                    runner._builtin_skipped = runner._skip_noted = True
                    return False
                return failed

        from traitlets.config import Config

        # No history: no sqlite file and no saving thread (a forked runner must
        # start from a single-threaded process, see zygote.py).
        config = Config()
        config.HistoryManager.enabled = False
        self.shell = Shell.instance(config=config, colors="NoColor", history_length=0)
        # Which code is the student's: IPython names each cell's code when it compiles it.
        cache = self.shell.compile.cache

        def named(transformed_code, number=0, raw_code=None):
            name = cache(transformed_code, number, raw_code)
            (runner.provided_files if runner._exec_provided else runner.student_files).add(name)
            return name
        self.shell.compile.cache = named

    def _add_output(self, output):
        if self.outputs is not None:
            self.outputs.append(output)

    def _add_display(self, kind, data, metadata):
        if self.outputs is None:
            return
        size = sum(len(str(v)) for v in data.values())
        used = sum(len(str(o.get("data", ""))) for o in self.outputs)
        if used + size > MAX_DISPLAY_BYTES_PER_CELL:
            self._stream("stderr", messages._(messages.DISPLAY_TRUNCATED) + "\n")
            return
        out = {"output_type": kind, "data": {k: v for k, v in data.items() if isinstance(v, str)},
               "metadata": metadata if isinstance(metadata, dict) else {}}
        if kind == "execute_result":
            out["execution_count"] = None
        self._add_output(out)

    def _stream(self, name, text):
        if self.outputs is None or not text:
            return
        used = sum(len(o.get("text", "")) for o in self.outputs if o["output_type"] == "stream")
        if used >= MAX_STREAM_CHARS_PER_CELL:
            return
        text = text[: MAX_STREAM_CHARS_PER_CELL - used]
        if used + len(text) >= MAX_STREAM_CHARS_PER_CELL:
            text += "\n" + messages._(messages.STREAM_TRUNCATED) + "\n"
        last = self.outputs[-1] if self.outputs else None
        if last and last["output_type"] == "stream" and last["name"] == name:
            last["text"] += text
        else:
            self.outputs.append({"output_type": "stream", "name": name, "text": text})

    # -- operations --------------------------------------------------------
    def op_exec(self, msg: dict, blobs: list[bytes]) -> tuple[dict, list[bytes]]:
        """Run a cell; "quiet" (a replay whose outputs nobody reads) renders no figure and returns no
        outputs, "figures": false returns the text outputs only (the grader has the figures already)."""
        import warnings

        # The tripwires never come off.  In a provided cell that demonstrates a built-in, a call that only
        # the course's own code leads to is computed by the grader (`forbidden_call`).
        self._exec_provided = bool(msg.get("provided"))
        self._exec_demo = self._exec_provided and bool(msg.get("demo"))
        self._skip_noted = False  # this cell went on past a failure and said so (`run_code`)
        self.outputs = []
        old = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _Stream(self, "stdout"), _Stream(self, "stderr")
        formatter = self.shell.display_formatter
        shown = list(formatter.active_types)
        if msg.get("quiet") or msg.get("figures") is False:
            formatter.active_types = ["text/plain"]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("default")
                result = self.shell.run_cell(str(msg.get("source", "")), store_history=False)
            flush = getattr(sys.modules.get("matplotlib_inline.backend_inline"), "flush_figures", None)
            if flush is not None:
                flush()
            ok = result.success
        finally:
            self._exec_provided, self._exec_demo = False, False
            sys.stdout, sys.stderr = old
            formatter.active_types = shown
            outputs, self.outputs = self.outputs, None
        return {"status": "ok" if ok else "error", "outputs": [] if msg.get("quiet") else outputs}, []

    def op_get(self, msg: dict, blobs: list[bytes]) -> tuple[dict, list[bytes]]:
        name = str(msg.get("name", ""))
        if name not in self.shell.user_ns:
            return {"status": "missing"}, []
        out_blobs = []
        return {"status": "ok", "value": wire.encode(self.shell.user_ns[name], out_blobs)}, out_blobs

    def op_call(self, msg: dict, blobs: list[bytes]) -> tuple[dict, list[bytes]]:
        import torch

        fn = self.shell.user_ns.get(str(msg.get("fn", "")))
        if not callable(fn):
            return {"status": "missing"}, []
        args = [self._materialise(a, blobs) for a in msg.get("args", [])]
        kwargs = {str(k): self._materialise(v, blobs) for k, v in msg.get("kwargs", {}).items()}
        before = len(self.forbidden_used)
        self.outputs = []  # swallow prints made during the call
        old = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _Stream(self, "stdout"), _Stream(self, "stderr")
        started = time.perf_counter()
        try:
            import warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = fn(*args, **kwargs)
            status, extra = "ok", {}
        except BaseException as exc:  # noqa: BLE001 - report every failure as data
            if isinstance(exc, KeyboardInterrupt):
                raise
            status = "raised"
            tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
            extra = {"ename": type(exc).__name__, "evalue": wire.short(exc),
                     "exception_names": wire.exception_names(exc),
                     "traceback": wire.short("".join(tb[-6:]))}
            value = None
        finally:
            sys.stdout, sys.stderr = old
            self.outputs = None
        seconds = time.perf_counter() - started
        out_blobs = []
        reply = {"status": status, "seconds": seconds,
                 "forbidden": list(dict.fromkeys(self.forbidden_used[before:])), **extra}
        if status == "ok":
            reply["value"] = wire.encode(value, out_blobs)
        if msg.get("return_args"):
            reply["args_after"] = [wire.encode(a, out_blobs) if isinstance(a, torch.Tensor) else None
                                   for a in args]
        return reply, out_blobs

    @staticmethod
    def _materialise(data, blobs):
        value = wire.decode(data, blobs)
        if isinstance(value, wire.TensorSpec):
            import torch

            if value.device == "meta":
                return torch.empty(value.shape, dtype=getattr(torch, value.dtype), device="meta")
            return value.tensor.clone().to(value.device)
        return value

    # -- forbidden APIs ----------------------------------------------------
    def install_tripwires(self) -> None:
        """Make every built-in softmax and attention raise, for good (`tripwires.install`); in the warm-up."""
        tripwires.install(self)

    def forbidden_call(self, name: str, args: tuple, kwargs: dict):
        """What every entry point of the families does: raise, or (the course's own call in a demo cell)
        return the result the grader computed.  The grader, not this process, decides whether it may."""
        if self.permits(sys._getframe(2)):
            return self._ask_grader(name, args, kwargs)
        self.forbidden_used.append(name)
        raise ForbiddenAPIError(messages._(messages.FORBIDDEN_FUNCTION).format(name=name))

    def permits(self, frame) -> bool:
        """Whether a built-in reached from `frame` is the course's own demonstration: a provided demo cell
        is running, in the main thread alone, and no code of the student's is on the stack."""
        if not self._exec_demo or threading.current_thread() is not threading.main_thread() \
                or threading.active_count() > 1:
            return False
        while frame is not None:
            if self._students(frame.f_code.co_filename):
                return False
            frame = frame.f_back
        return True

    def _ask_grader(self, name: str, args: tuple, kwargs: dict):
        """The built-in's result, computed by the grader on copies of the arguments (plain data only)."""
        import torch

        blobs = []
        self._builtin_calls += 1
        request = {"op": "builtin", "name": name, "args": [wire.encode(a, blobs) for a in args],
                   "kwargs": {str(k): wire.encode(v, blobs) for k, v in kwargs.items()},
                   "seed": (torch.initial_seed() + self._builtin_calls) % 2**53}
        wire.send(self.proto_out, request, blobs)
        reply, out = wire.receive(self.proto_in)
        if reply.get("status") == "error":
            raise RuntimeError(wire.short(reply.get("evalue", "")))
        if reply.get("status") != "ok":
            self.forbidden_used.append(name)
            raise ForbiddenAPIError(messages._(messages.FORBIDDEN_FUNCTION).format(name=name))
        device = next((a.device for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)), "cpu")
        return _local(wire.decode(reply.get("value"), out), device)

    def serve(self) -> None:
        handlers = {"exec": self.op_exec, "call": self.op_call, "get": self.op_get}
        while True:
            try:
                msg, blobs = wire.receive(self.proto_in)
            except EOFError:
                return
            op = msg.get("op")
            if "messages" in msg:  # the notebook's language: sent with a runner's first request
                messages.use(msg["messages"])
            if op == "bye":
                return
            handler = handlers.get(op)
            if handler is None:
                reply, out = {"status": "bad-op"}, []
            else:
                reply, out = handler(msg, blobs)
                for op_name in tripwires.cover_late_ops(self):  # before the reply: read with this one
                    source_report.report_unreadable(b"an op of the families registered after start-up: "
                                                    + op_name.encode("utf-8", "replace"))
            reply["id"] = msg.get("id")  # lets the grader drop frames it did not ask for
            wire.send(self.proto_out, reply, out)


def _local(value, device):
    """A decoded value as the caller's: tensors on its device, containers rebuilt."""
    if isinstance(value, wire.TensorSpec):
        if value.tensor is None:
            raise RuntimeError(value.missing_data(messages._))
        return value.tensor.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_local(v, device) for v in value)
    return value


class _Stream:
    """sys.stdout/sys.stderr replacement that records stream outputs."""

    encoding = "utf-8"

    def __init__(self, runner, name):
        self.runner, self.name = runner, name

    def write(self, text: object) -> int:
        self.runner._stream(self.name, str(text))
        return len(str(text))

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def writelines(self, lines: Iterable[object]) -> None:
        for line in lines:
            self.write(line)


def take_stdio() -> tuple[BinaryIO, BinaryIO]:
    """Move the protocol off fds 0/1 so that C-level prints cannot corrupt it."""
    proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
    proto_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    return proto_in, proto_out


def new_runner() -> Runner:
    """A runner with its IPython shell; no protocol yet, no student code run."""
    # Figures show inline, as in JupyterLab, and land in the cell's outputs.
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    runner = Runner(None, None)
    runner._start_shell()
    return runner


def serve(runner: Runner, proto_in: BinaryIO, proto_out: BinaryIO) -> NoReturn:
    """Announce "ready", answer requests until "bye" or EOF, then exit the process."""
    runner.proto_in, runner.proto_out = proto_in, proto_out
    # From here on student code can run: no program can be started, and every text compiled is sent to the
    # grader first.
    no_programs.install()
    source_report.install(proto_out)
    wire.send(proto_out, {"status": "ready", "pid": os.getpid()})
    runner.serve()
    proto_out.flush()
    os._exit(0)
