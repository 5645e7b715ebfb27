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
import time
import traceback
from typing import BinaryIO, Callable, Iterable, NoReturn, Optional

# `python -I` leaves this directory off sys.path; the guest files import each other by name.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire  # noqa: E402

MAX_STREAM_CHARS_PER_CELL = 20_000
MAX_DISPLAY_BYTES_PER_CELL = 2 * 2**20

# Built-in softmax and attention (``forbidden.py``, the one definition) are
# forbidden inside student functions while checks run.  This tripwire lives in
# the student's process, so it is only a second layer: the trusted grader also
# scans the student's code (``static_scan.py``).
from forbidden import KERNEL_KEYS, PY_NAMESPACES, blocked, forbidden_ops  # noqa: E402


class ForbiddenAPIError(RuntimeError):
    """Raised when student code reaches a built-in softmax or attention."""


class Runner:
    def __init__(self, proto_in: Optional[BinaryIO], proto_out: Optional[BinaryIO]) -> None:
        self.proto_in, self.proto_out = proto_in, proto_out
        self.outputs = None  # the current cell's nbformat outputs
        self.forbidden_used = []
        self.blocking = False
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
                runner._add_output({"output_type": "error", "ename": etype.__name__,
                                    "evalue": wire.short(evalue), "traceback": stb[-40:]})

            def ask_exit(self) -> None:
                runner._stream("stderr", "exit() 在评分时被忽略。\n")

        from traitlets.config import Config

        # No history: no sqlite file and no saving thread (a forked runner must
        # start from a single-threaded process, see zygote.py).
        config = Config()
        config.HistoryManager.enabled = False
        self.shell = Shell.instance(config=config, colors="NoColor", history_length=0)

    def _add_output(self, output):
        if self.outputs is not None:
            self.outputs.append(output)

    def _add_display(self, kind, data, metadata):
        if self.outputs is None:
            return
        size = sum(len(str(v)) for v in data.values())
        used = sum(len(str(o.get("data", ""))) for o in self.outputs)
        if used + size > MAX_DISPLAY_BYTES_PER_CELL:
            self._stream("stderr", "[输出过大，已截断]\n")
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
            text += "\n[输出过长，已截断]\n"
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
        self.blocking = bool(msg.get("block_forbidden", True))
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
            self.blocking = False
            sys.stdout, sys.stderr = old
            self.outputs = None
        seconds = time.perf_counter() - started
        out_blobs = []
        reply = {"status": status, "seconds": seconds,
                 "forbidden": self.forbidden_used[before:], **extra}
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
    def wrap_forbidden_functions(self) -> None:
        """Replace forbidden Python entry points by wrappers that raise while a check calls.

        Done before any student code runs, so a reference a notebook captures at
        the top (`impl = torch._refs.softmax`) is the wrapper too.
        """
        import functools
        import importlib

        import torch

        runner = self

        def tripwire(name: str, original: Callable) -> Callable:
            # wraps(): torch looks some of these up again through `__wrapped__` and friends.
            @functools.wraps(original)
            def guarded(*args, **kwargs):
                if runner.blocking:
                    runner.forbidden_used.append(name)
                    raise ForbiddenAPIError(f"评分时禁止使用 {name}：请自己实现这一步。")
                return original(*args, **kwargs)
            return guarded

        for path in PY_NAMESPACES:
            try:
                owner = importlib.import_module(path) if path != "torch.Tensor" else torch.Tensor
            except Exception:  # noqa: BLE001 - a namespace missing in this torch is fine
                continue
            for attr in [a for a in dir(owner) if blocked(a)]:
                value = getattr(owner, attr, None)
                if isinstance(value, type) and issubclass(value, torch.nn.Module):
                    if "forward" in vars(value):
                        value.forward = tripwire(f"{path}.{attr}", value.forward)
                elif callable(value) and not isinstance(value, type):
                    try:
                        setattr(owner, attr, tripwire(f"{path}.{attr}", value))
                    except (AttributeError, TypeError):
                        pass

    def install_tripwires(self) -> None:
        """Make every forbidden kernel raise (after the notebook ran: its top-level code may use them)."""
        import warnings

        import torch

        runner = self

        def aten_tripwire(op_name: str) -> Callable:
            def kernel(*args, **kwargs):
                runner.forbidden_used.append(op_name)
                raise ForbiddenAPIError(f"评分时禁止使用内置 softmax/注意力（{op_name}）。")
            return kernel

        self._libraries = {}  # kept alive: destroying a Library removes its kernels
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for qualified in forbidden_ops():
                namespace, name = qualified.split("::", 1)
                library = self._libraries.get(namespace)
                if library is None:
                    library = self._libraries[namespace] = torch.library.Library(namespace, "IMPL")
                for key in KERNEL_KEYS:
                    # Only where the op has a kernel: a new composite kernel next to a backend
                    # one would make the dispatcher assert instead of reaching the tripwire.
                    if not torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key):
                        continue
                    try:
                        library.impl(name, aten_tripwire(qualified), key)
                    except Exception:  # noqa: BLE001 - op or key absent in this build
                        pass

    def serve(self) -> None:
        handlers = {"exec": self.op_exec, "call": self.op_call, "get": self.op_get}
        self.wrap_forbidden_functions()
        tripwires = False
        while True:
            try:
                msg, blobs = wire.receive(self.proto_in)
            except EOFError:
                return
            op = msg.get("op")
            if op == "bye":
                return
            if op != "exec" and not tripwires:
                # Installed once the notebook has run, so top-level code (e.g.
                # the final comparison with F.scaled_dot_product_attention)
                # still works, but student functions called by checks cannot.
                self.install_tripwires()
                tripwires = True
            handler = handlers.get(op)
            if handler is None:
                reply, out = {"status": "bad-op"}, []
            else:
                reply, out = handler(msg, blobs)
            reply["id"] = msg.get("id")  # lets the grader drop frames it did not ask for
            wire.send(self.proto_out, reply, out)


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
    wire.send(proto_out, {"status": "ready", "pid": os.getpid()})
    runner.serve()
    proto_out.flush()
    os._exit(0)
