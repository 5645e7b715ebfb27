"""Sends the grader every source text compiled while the student's code can run.

The grader reads the notebook (``static_scan.py``), but code can hide its text there (a base64 string
handed to a library that evaluates text, `sympy.sympify` for one) and let some route compile it at run
time.  Whatever the route, the text passes through CPython's compiler, which raises the ``compile``
audit event first.  The hook installed here writes that text to the grader before it is compiled, so the
grader reads it with the same scan (``code_review.runtime_notes``).  The file name it is compiled under
goes with it: a library module imported from source, or parsed by IPython to show a traceback, is
recognised by the grader, which reads the file itself.  Code that is loaded without text (a ``.pyc`` from
a writable directory, an AST compiled outside IPython's running of a cell) is reported as unreadable, and
so is opening a process's memory map or memory under ``/proc``.

An installed file's code is loaded once per process: its source compiled, or its ``.pyc`` (whose bytes
must be the file's) loaded, a second time is reported as unreadable too.  The tripwires give torch's
functions of the families new bodies (``tripwires.py``); compiling the module again would give the
original ones back, from text the grader accepts as the library's own.  Only IPython's traceback display
parses an installed file again, and it builds no code from it.

The hook holds no switch.  An audit hook cannot be removed; it writes to the protocol stream the grader
reads, and checks before each write that the stream's descriptor is still the pipe it was given, ending
the process otherwise (a runner that ends shows the grader nothing, which earns nothing).  To reach the
hook's own state, code must first use what the scan holds or compile text, which is reported first.
"""
import hashlib
import json
import os
import pathlib
import re
import struct
import sys
import traceback
import types

MAX_TEXT_BYTES = 256 * 1024  # a longer text is reported by its digest (a library file's, or unreadable)
# A process's memory map and memory, under /proc (after symbolic links are followed): what a heap scan reads
# and writes.  Opening one is reported as unreadable, whatever name the path was built from.
_MEMORY_FILES = ("maps", "smaps", "smaps_rollup", "numa_maps", "mem", "pagemap")
_PROCESS_MEMORY = re.compile(rf"/proc/(?:\d+|self|thread-self)(?:/task/\d+)?/(?:{'|'.join(_MEMORY_FILES)})\Z")
# Where a traceback's display parses the files it shows (syntax trees only, never code).
_DISPLAY = tuple(os.sep + os.path.join(name, "")
                 for name in ("stack_data", "executing", os.path.join("IPython", "core")))
_PARSE = os.sep + "ast.py"  # `ast.parse`, through which the display compiles
_INSTALLED = tuple(os.path.realpath(p) + os.sep for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})


def install(stream) -> None:
    """Report to `stream` (the runner's protocol output) every text compiled from now on, for good."""
    fd = stream.fileno()
    identity = _identity(fd)
    trusted_roots = _INSTALLED
    installed = (*trusted_roots, os.path.dirname(os.path.realpath(__file__)) + os.sep)
    # the same directories as the import system names them (read-only in the sandbox, whatever links lead there)
    read_only_roots = tuple({*installed, os.path.dirname(os.path.abspath(__file__)) + os.sep,
                             *(os.path.abspath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix))})
    normpath, int_type, no_follow = os.path.normpath, int, os.O_NOFOLLOW
    loaded = _loaded_files()  # installed files whose code this process has loaded: loading one again is reported

    def named(path):
        """An installed file as the report names it: the same words wherever the course and Python are."""
        root = next((r for r in installed if path.startswith(r)), "")
        return os.path.relpath(path, os.path.dirname(root.rstrip(os.sep))) if root else path
    sys.dont_write_bytecode = True  # a student's own module is read as text on every import, never as .pyc
    # The runner's tracebacks are formatted without parsing fragments of source lines (Python 3.11's carets):
    # a fragment of torch's or the runner's code would reach the grader as a text it cannot place.
    if hasattr(traceback, "_extract_caret_anchors_from_line_segment"):
        traceback._extract_caret_anchors_from_line_segment = lambda segment: None
    write, flush, fstat, exit_now, dumps, pack = stream.write, stream.flush, os.fstat, os._exit, json.dumps, struct.pack
    getframe, realpath, str_type, bytes_type = sys._getframe, os.path.realpath, str, bytes
    pyc_path, sha256, display, same_bytes = _pyc_path, hashlib.sha256, _display, _is_pyc_of
    ipython_compiler, ipython_callers = _ipython_codes()
    flag_setter = types.coroutine.__code__  # `code.replace(co_flags=...)` of the generator it decorates

    def tree_from_ipython(frame):
        return _ipython_tree(frame, ipython_compiler, ipython_callers)
    fsdecode, process_memory, basename = os.fsdecode, _PROCESS_MEMORY, os.path.basename
    memory_files, any_pid = frozenset(_MEMORY_FILES), re.compile(r"/proc/\d+/")
    plain_paths = (pathlib.PosixPath, pathlib.PurePosixPath)
    process_events, native_bridges = PROCESS_EVENTS, NATIVE_BRIDGES  # the hook's own, not the module's globals

    runner_pid, getpid = os.getpid(), os.getpid

    def send(kind, data, filename=None, digest=None):
        if getpid() != runner_pid:  # a forked child: its start was reported by the runner already (`os.fork`),
            return                  # and its writes would interleave with the runner's on the one stream
        header = dumps({"op": "compiled", "kind": kind, "filename": filename, "sha256": digest,
                        "blobs": [len(data)]}).encode()
        try:
            if _identity_of(fstat(fd)) != identity:
                exit_now(70)
            write(pack(">I", len(header)) + header + data)
            flush()
        except BaseException:  # noqa: BLE001 - a report that cannot be sent ends the runner
            exit_now(70)

    def hook(event, args):
        if event == "compile":
            source = args[0] if args else None
            if type(source) is str_type:  # compiled as it is: a coding cookie in it means nothing
                data, kind = source.encode("utf-8", "surrogatepass"), "source"
            elif type(source) in (bytes_type, bytearray, memoryview):  # decoded as its cookie says
                data, kind = bytes_type(source), "source-bytes"
            elif tree_from_ipython(getframe(1)):
                return
            else:
                send("opaque", b"syntax tree")
                return
            filename = args[1] if len(args) > 1 and type(args[1]) is str_type else None
            filename = filename[:4096] if filename else None
            if filename and filename.startswith("/") and not display(getframe(1)):
                path = realpath(filename)
                if path.startswith(installed):
                    if path in loaded:
                        send("opaque", b"compiled again " + named(path).encode("utf-8", "replace")[-180:])
                        return
                    loaded.add(path)
            if len(data) <= MAX_TEXT_BYTES:
                send(kind, data, filename)
            else:  # too long to send: its digest, which the grader compares with the file it names
                send("cut", data[:1024], filename, sha256(data).hexdigest())
        elif event == "open":
            path = args[0] if args else None
            if type(path) in (str_type, bytes_type) or type(path) in plain_paths:
                name = fsdecode(path)
                opened = realpath(name)
                # `os.open` (no mode) of a relative name may be relative to any directory (`dir_fd`), which
                # the event does not carry: there, the file's own name decides, and the name must not be a link
                # followed (O_NOFOLLOW), which could lead anywhere (red team: a link named "a" in a temporary
                # directory, opened relative to that directory's descriptor, wrote /proc/self/mem unreported).
                relative = len(args) > 1 and args[1] is None and not name.startswith("/")
                flags = args[2] if len(args) > 2 and type(args[2]) is int_type else 0
                if process_memory.match(opened) or (relative and basename(name) in memory_files):
                    shown = any_pid.sub("/proc/<pid>/", opened)  # the same words in every run
                    send("opaque", b"opened " + shown.encode("utf-8", "replace")[:200])
                elif relative and not flags & no_follow:
                    send("opaque", b"opened a name relative to a directory descriptor, following links")
            elif type(path) is not int:
                send("opaque", b"opened a path given as an object")
        elif event in ("code.__new__", "function.__new__") or (
                event == "object.__setattr__" and len(args) > 1 and args[1] == "__code__"):
            # A code object or function built at run time (`types.CodeType`, `code.replace`, `types.FunctionType`),
            # or a function given another's code, runs what no text showed: renamed names, constants, a file name
            # that passes for IPython's (red team).  Whoever calls the constructor, it is unreadable: a library
            # that calls what it is handed (`copy`'s reconstruction, `contextlib.ExitStack`, `weakref.finalize`)
            # builds it for the student as well as their own code does (red team).  The one library caller
            # known by its code object is `types.coroutine`, which sets a flag on a generator's own code (the
            # stdlib's asyncio decorates with it when imported); nothing else in torch, numpy, matplotlib,
            # IPython or the standard library builds code when imported after torch, and every honest catalogue
            # sample is graded in full (`tests/test_pipeline.py`).
            caller = getframe(1)
            if caller is None or caller.f_code is not flag_setter:
                send("opaque", b"a code object or function built at run time")
        elif event in process_events:
            # A process started while the student's code can run runs code the grader never sees, without the
            # tripwires or this hook (red team: `torch.os.popen` of a fresh interpreter that sent back
            # `F.softmax`'s output through files), IPython's `!command` and shell aliases included: what a
            # command line runs depends on files, PATH and the environment, which the student's code sets
            # (red team: `!ls` with a PATH edit, `%cat /dev/null; sh …`, each started a softmax server).
            send("opaque", b"started a process: " + event.encode())
        elif event == "import" and len(args) > 1 and args[1] is not None:
            # A module loaded from a file (an extension module, `ExtensionFileLoader`): native code, which no
            # tripwire sees when it calls a kernel directly (red team: a C++ module written to /tmp, loaded by
            # `torch.utils.cpp_extension._import_module_from_library`, called `at::cpu::_softmax`).  Only the
            # installation's own files pass, named under its read-only directories as a plain str with no `..`:
            # nothing the student writes lies on that path, to be re-pointed between this check and the load
            # (red team: a str subclass; a link in /tmp re-pointed by a second audit hook).
            where = args[1]
            if type(where) is not str_type or normpath(where) != where or not where.startswith(read_only_roots):
                shown = where if type(where) is str_type else "a path given as an object"
                send("opaque", b"native code loaded from " + shown.encode("utf-8", "replace")[-160:])
        elif event == "sys.addaudithook":
            # A hook added after this one runs after it, on the same event, before CPython acts: it could change
            # what this hook just checked (red team: a link re-pointed between the check and the load).  Refused:
            # a RuntimeError here keeps the new hook out.
            send("opaque", b"added an audit hook")
            raise RuntimeError("no audit hook may be added while grading")
        elif event == "import" and args and type(args[0]) is str_type and args[0] in native_bridges:
            send("opaque", b"imported " + str_type(args[0]).encode("utf-8", "replace")[:64])
        elif event == "cpython.PyInterpreterState_New":
            # A subinterpreter runs without this hook (audit hooks are each interpreter's own): what it compiles,
            # loads or starts is never reported (red team: ctypes in `_xxsubinterpreters.run_string`).
            send("opaque", b"started a subinterpreter")
        elif event == "pickle.find_class" or event.startswith("ctypes."):
            # An unpickled object names any global, and ctypes reaches any library's symbols and any memory: a
            # red-team pickle, unpickled by a library under another name (`jupyter_client`'s `pickle_unpacker`),
            # built ctypes calls into torch's own CPU softmax kernel, which no dispatcher tripwire sees.  None
            # happens in an honest notebook's run (every honest catalogue sample is graded in full).
            send("opaque", b"native code, raw memory or an unpickled global: " + event.encode()[:64])
        elif event == "marshal.loads":
            caller = getframe(1)
            path = pyc_path(caller.f_code, caller.f_locals)
            real = realpath(path) if path else ""
            if not real.startswith(trusted_roots) or not same_bytes(real, args[0] if args else None):
                send("opaque", b"compiled module " + str_type(path).encode("utf-8", "replace")[:200])
            elif real in loaded:
                send("opaque", b"compiled module again " + named(real).encode("utf-8", "replace")[-170:])
            else:
                loaded.add(real)
                source = caller.f_locals.get("source_path")
                if type(source) is str_type:
                    loaded.add(realpath(source))

    sys.addaudithook(hook)
    global _unreadable
    _unreadable = lambda what: send("opaque", what[:200])  # noqa: E731


_unreadable = None  # set by `install`: what the runner itself finds it cannot vouch for


def report_unreadable(what: bytes) -> None:
    """Tell the grader of something the runner found after the fact that it cannot vouch for (held)."""
    if _unreadable is not None:
        _unreadable(what)


_KNOWN = ({}, set())  # (module name -> its files' real paths, all of them), as `remember_loaded` left them


def remember_loaded() -> None:
    """Note the files of every module imported so far (the zygote's warm-up calls this, once: resolving
    some four thousand paths costs a fifth of a second, which no forked runner should pay again)."""
    files, known = _KNOWN
    for name, module in list(sys.modules.items()):
        if name not in files:
            files[name] = _files_of(module)
            known.update(files[name])


def _loaded_files() -> set:
    """The real paths of the source and compiled files of every module imported so far."""
    remember_loaded()  # only the modules imported since the warm-up's call are resolved here
    return set(_KNOWN[1])


def _files_of(module) -> tuple:
    found = []
    for attr in ("__file__", "__cached__"):
        try:
            path = vars(module).get(attr)
        except TypeError:
            continue
        if type(path) is str and path.startswith("/"):
            found.append(os.path.realpath(path))
    return tuple(found)


def _display(frame) -> bool:
    """Whether a compile is a traceback display's parse: `ast.parse` called from stack_data, executing or
    IPython's own modules (a syntax tree only: compiling that tree to code is reported by itself)."""
    if frame is None or not frame.f_code.co_filename.endswith(_PARSE) or frame.f_code.co_name != "parse":
        return False
    caller = frame.f_back
    if caller is None or not any(place in caller.f_code.co_filename for place in _DISPLAY):
        return False
    return os.path.realpath(caller.f_code.co_filename).startswith(_INSTALLED)  # their files, not a namesake


def _is_pyc_of(path: str, data) -> bool:
    """Whether `data` (what the import system unmarshals) is the code in the compiled file at `path`."""
    if type(data) not in (bytes, bytearray, memoryview):
        return False
    try:
        with open(path, "rb") as file:
            return file.read()[16:] == bytes(data)  # after the .pyc header (magic, flags, source stamp)
    except OSError:
        return False


def _identity(fd):
    return _identity_of(os.fstat(fd))


def _identity_of(st):
    return st.st_dev, st.st_ino


def _ipython_codes():
    """IPython's own code objects where it compiles a syntax tree made from text it has just parsed: the
    compiler, and its callers while a cell runs and in `%time`/`%timeit`.  Frames are matched by these objects
    themselves: a name and a file name can be given to any code (red team: generator code renamed
    `run_ast_nodes` in a file named like IPython's compiled a rewritten tree unreported)."""
    import codeop
    import inspect

    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.magics.execution import ExecutionMagics

    def code(function):
        return inspect.unwrap(function).__code__

    return code(codeop.Compile.__call__), ((code(InteractiveShell.run_ast_nodes),
                                            code(InteractiveShell.run_cell_async)),
                                           (code(ExecutionMagics.timeit),), (code(ExecutionMagics.time),))


# Modules that reach native code or run code past this hook, imported while the student's code runs: cffi's
# backend loads and calls any library's symbols (as ctypes does), the subinterpreter modules run code in an
# interpreter this hook does not watch.
NATIVE_BRIDGES = frozenset(("_cffi_backend", "cffi", "_xxsubinterpreters", "_xxinterpchannels", "_interpreters",
                            "_interpchannels", "_interpqueues"))
# Audit events of starting a process or replacing this one (`os.exec*`, `os.posix_spawn`, `subprocess`, `os.fork`).
PROCESS_EVENTS = frozenset(("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.fork", "os.forkpty",
                            "os.spawn", "pty.spawn"))


def _ipython_tree(frame, compiler, callers_by_place):
    """Whether a syntax tree is compiled by IPython's compiler, called by IPython where it runs a cell's
    text or a `%time`/`%timeit` line (`_ipython_codes`)."""
    codes = []
    while frame is not None and len(codes) < 3:
        codes.append(frame.f_code)
        frame = frame.f_back
    if not codes or codes[0] is not compiler:
        return False
    return any(len(codes) > len(callers) and all(c is caller for c, caller in zip(codes[1:], callers))
               for callers in callers_by_place)


def _pyc_path(code, local):
    """The file the import system is loading compiled code from (`_compile_bytecode`'s argument), else None."""
    if code.co_name == "_compile_bytecode" and code.co_filename.startswith("<frozen importlib"):
        path = local.get("bytecode_path")
        return path if isinstance(path, str) else None
    return None
