"""What the static read flags: the tables a course maintainer edits.

`static_scan` applies them; each entry maps a name to the category a person
reviewing the notebook sees (``LABELS``).  The forbidden families themselves
are defined once, with the runner's tripwire, in ``sandbox/guest/forbidden.py``.
"""
import re
import sys

from ..i18n import N_
from ..sandbox import guest
from ..sandbox.guest import forbidden

STAR_NAMES = forbidden.STAR_NAMES

# Review tables.  Attribute names suspicious on any object:
REVIEW_ATTRS = {
    "introspection": {"f_back", "f_globals", "f_locals", "f_builtins", "tb_frame", "__globals__", "__closure__",
                      "__code__", "__subclasses__", "__builtins__", "_getframe", "__wrapped__", "__dict__",
                      "getclosurevars", "__getattribute__", "__getattr__", "setprofile", "settrace",
                      # a generator's, coroutine's or frame's code, and a code object's parts (a red-team cell
                      # renamed the names a lambda's code reads and built a function from it)
                      "gi_code", "cr_code", "ag_code", "gi_frame", "cr_frame", "ag_frame", "f_code",
                      "co_consts", "co_names", "co_code"},
    "native-code": {"CDLL", "PyDLL", "cdll", "pydll", "pythonapi", "LoadLibrary", "load_library", "_C",
                    "redispatch"},  # and RAW_MEMORY, below
    "process-limits": {"setrlimit", "prlimit", "setpriority", "sched_setaffinity", "sched_setscheduler",
                       "sched_setparam"},
    "other-processes": {"killpg", "pthread_kill", "pidfd_open", "pidfd_send_signal"},
    "dynamic-code": {"import_module", "__import__", "attrgetter", "methodcaller", "getattr_static",
                     # a module's loader compiles any file; a formatter's get_field reads any attribute chain
                     "get_code", "exec_module", "load_module", "source_to_code", "__loader__", "__spec__",
                     "get_field", "user_ns", "user_global_ns",
                     # IPython runs source text, or rewrites the next cells before they run (so the scan
                     # reads one text and another runs)
                     "run_cell", "run_cell_async", "run_code", "run_ast_nodes", "safe_execfile",
                     "safe_execfile_ipy", "safe_run_module", "input_transformers_post",
                     "input_transformers_cleanup", "input_transformer_manager", "ast_transformers",
                     "find_cell_magic", "find_line_magic", "find_magic", "magics_manager", "define_macro",
                     "register_magic_function", "register_magics", "addsitedir"},
    "grader-internals": {"display_formatter", "display_pub", "displayhook", "user_ns_hidden", "proto_out",
                         "proto_in", "forbidden_used", "blocking", "_aten_library", "_libraries", "_destroy",
                         "install_tripwires", "remove_tripwires", "disarm", "aten_plan", "student_files",
                         "provided_files", "_exec_armed", "StudentCodeWatch", "forbidden_call", "_ask_grader",
                         "_exec_demo", "_dispatch_library", "_DispatchModule", "__course_forbidden_call__",
                         "cover_late_ops", "_COVERED", "_SEEN", "report_unreadable", "_unreadable"},
}
# Ways to view memory at an address the code chooses, with no bounds check: numpy's array interfaces (an
# object whose `__array_interface__` holds a raw address), `as_strided`, `ctypeslib`, torch's storage from a
# raw pointer.  A red-team pass scanned the heap through them and reset the tripwire libraries.  Any name,
# attribute, definition or string spelling one of them holds (`native-code`).
RAW_MEMORY = {"__array_interface__", "__array_struct__", "__cuda_array_interface__", "__array_finalize__",
              "as_strided", "ctypeslib", "_new_with_weak_ptr", "_new_shared_filename_cpu", "from_address",
              "string_at", "wstring_at", "addressof", "memmove", "memset", "DummyArray"}
REVIEW_ATTRS["native-code"] |= RAW_MEMORY
# How copy and pickle rebuild an object: a class that defines one of these has `copy.copy` (an installed frame)
# call what it returns, and a red-team cell had it build a function from code with replaced names, out of the
# audit hook's sight; `codeobj` hands out a function's code.  Any name, attribute or definition (`dynamic-code`).
RECONSTRUCTION = {"__reduce__", "__reduce_ex__", "__copy__", "__deepcopy__", "__setstate__", "__getnewargs__",
                  "__getnewargs_ex__", "_reconstruct", "codeobj"}
REVIEW_ATTRS["dynamic-code"] |= RECONSTRUCTION
ATTR_CODE = {name: code for code, names in REVIEW_ATTRS.items() for name in names}
# Top-level modules that other modules hold as attributes (`torch.os`, `torch.nn.functional.torch`): a dotted
# name through one of them is read from there on (`_Scanner.qualname`).
TOP_LEVEL_MODULES = frozenset(sys.stdlib_module_names) | {
    "torch", "numpy", "scipy", "IPython", "matplotlib", "sympy", "pandas", "functorch", "typing_extensions",
    "yaml", "dill", "cloudpickle", "joblib", "mock", "nbformat", "traitlets", "ipykernel", "jupyter_client"}
# Qualified names (after the student's import aliases) whose last part is too common to flag alone.
QUALNAME_CODE = {
    **dict.fromkeys(("sys._getframe", "inspect.currentframe", "inspect.stack", "inspect.trace",
                     "inspect.getouterframes", "inspect.getinnerframes", "sys._current_frames",
                     "sys._current_exceptions", "traceback.walk_stack", "traceback.walk_tb",
                     "traceback.extract_stack", "traceback.StackSummary.extract"), "introspection"),
    **dict.fromkeys(("os.kill", "os.killpg", "signal.pthread_kill", "os.pidfd_open", "signal.pidfd_send_signal"),
                    "other-processes"),
    **dict.fromkeys(("os.nice", "os.setpriority", "os.sched_setaffinity", "os.sched_setscheduler",
                     "os.sched_setparam", "resource.setrlimit", "resource.prlimit"), "process-limits"),
    **dict.fromkeys(("os.fork", "os.forkpty", "os.posix_spawn", "os.posix_spawnp", "os.system", "os.popen",
                     "os.execv", "os.execve", "os.execl", "os.execle", "os.execlp", "os.execlpe", "os.execvp",
                     "os.execvpe", "os.spawnv", "os.spawnve", "os.spawnl", "os.spawnle", "os.spawnlp", "os.spawnvp",
                     "concurrent.futures.ProcessPoolExecutor"), "process-creation"),
    "concurrent.futures.ThreadPoolExecutor": "threads",
    **dict.fromkeys(("importlib.import_module", "builtins.exec", "builtins.eval", "builtins.compile",
                     "builtins.__import__", "types.FunctionType", "types.LambdaType", "types.CodeType",
                     "types.MethodType",
                     # string annotations evaluated; objects rebuilt from files (pickle inside)
                     "typing.get_type_hints", "typing.ForwardRef", "typing_extensions.get_type_hints",
                     "torch.load", "torch.serialization.load", "numpy.load", "pandas.read_pickle",
                     # names resolved from strings
                     "torch._import_dotted_name", "torch._utils._import_dotted_name", "string.Formatter",
                     "logging.config.BaseConfigurator", "logging.config.DictConfigurator",
                     "logging.config.dictConfig", "logging.config.fileConfig", "logging.config.listen",
                     "logging.config._resolve", "unittest.mock.patch", "mock.patch"), "dynamic-code"),
    **dict.fromkeys(("torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline"), "native-code"),
    # TorchScript built from bytes or from a string by torch's own parser: no text reaches the grader, and a
    # fuser may run a built-in's kernel past the tripwires (red team: oneDNN's softmax in a loaded archive)
    **dict.fromkeys(("torch.jit.load", "torch.jit._serialization.load", "torch.jit.CompilationUnit",
                     "torch.jit._script.CompilationUnit", "torch.jit._load_for_lite_interpreter",
                     "torch.export.load", "torch._export.load"), "dynamic-code"),
}
# Names of the grader's own modules: the guest files a runner imports by bare name, and this package.
GRADER_STRINGS = {path.stem for path in guest.FILES} | {"autograder"}
# Modules whose every use is flagged.
MODULE_CODE = {"gc": "introspection", "inspect": "introspection",
               "ctypes": "native-code", "_ctypes": "native-code", "cffi": "native-code", "_cffi_backend": "native-code",
               # subprocess's own C half (no audit event), and interpreters this process's audit hook does not watch
               "_posixsubprocess": "process-creation", "_xxsubinterpreters": "dynamic-code",
               "_xxinterpchannels": "dynamic-code", "_interpreters": "dynamic-code",
               "mmap": "native-code", "fcntl": "process-limits", "subprocess": "process-creation",
               "multiprocessing": "process-creation", "pty": "process-creation", "socket": "other-processes",
               "threading": "threads", "_thread": "threads",
               # code objects loaded from compiled files (a library's .pyc rebuilt into a function), and the
               # modules that run source text, load objects or resolve dotted names given as strings
               **dict.fromkeys(("marshal", "timeit", "code", "codeop", "runpy", "pickle", "_pickle", "copyreg", "site",
                                "shelve", "dill", "cloudpickle", "doctest", "pdb", "bdb", "cProfile", "profile",
                                "trace", "pydoc", "zipimport", "imp", "pkgutil", "importlib", "builtins",
                                # the import system's own modules: they build code from any bytes and any path
                                "_imp", "_frozen_importlib", "_frozen_importlib_external",
                                # loaders that import modules and call functions named in the data they read
                                # (`!!python/object/apply:builtins.vars`): names the scan never sees
                                "yaml", "_yaml", "ruamel", "jsonpickle", "joblib", "pkg_resources"),
                               "dynamic-code"),
               # a mock's `patch` resolves any dotted string (`patch(target).get_original()`) and edits any
               # mapping (`patch.dict("sys.modules")`)
               "mock": "dynamic-code",
               **dict.fromkeys(GRADER_STRINGS, "grader-internals")}
# Packages below a top-level module whose every use is flagged, as MODULE_CODE's are.
# Submodules that import and run code from files they are pointed at (`torch.hub.load(dir, source="local")`
# runs a `hubconf.py`), or build modules from archives: as `importlib` is.
SUBMODULE_CODE = {"unittest.mock": "dynamic-code", "torch.hub": "dynamic-code", "torch.package": "dynamic-code",
                  "torch.jit.mobile": "dynamic-code",
                  # builds and loads extension modules: native code (red team: a module written to /tmp, loaded
                  # by `_import_module_from_library`, called `at::cpu::_softmax` past the tripwires)
                  "torch.utils.cpp_extension": "native-code"}


def module_code(qualname: str):
    """The flag of a module or of any name in it (`MODULE_CODE`, `SUBMODULE_CODE`), else None."""
    for package, code in SUBMODULE_CODE.items():
        if qualname == package or qualname.startswith(package + "."):
            return code
    return MODULE_CODE.get(qualname.split(".")[0])
# Uses of a flagged module that only read or tidy what the student's code made: flagged, never held.
# IPython methods that run source text (also reached as `ip.ex(...)` after `ip = get_ipython()`).
IPYTHON_CODE_METHODS = {"run_cell", "run_cell_async", "ex", "ev", "run_code", "run_ast_nodes", "safe_execfile",
                        "safe_execfile_ipy", "safe_run_module", "runcode", "compile", "transform_cell"}
# torch's settings that notebooks set for reproducibility or speed: flags its kernels read, not code (a red-team
# pass found `torch.backends.cudnn.deterministic = True` holding every point as a module edit).
BACKEND_FLAGS = {"torch.backends.cudnn.deterministic", "torch.backends.cudnn.benchmark", "torch.backends.cudnn.enabled",
                 "torch.backends.cudnn.allow_tf32", "torch.backends.cuda.matmul.allow_tf32",
                 "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
                 "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction", "torch.backends.mkldnn.enabled",
                 "torch.backends.opt_einsum.enabled",
                 # and the newer precision settings torch points users to
                 *(f"torch.backends.{where}fp32_precision" for where in (
                     "", "cuda.matmul.", "cudnn.", "cudnn.conv.", "cudnn.rnn.", "mkldnn.", "mkldnn.matmul.",
                     "mkldnn.conv.", "mkldnn.rnn."))}
# Calls of these with only lambdas and numbers time the student's own function (`timeit.timeit(lambda:
# softmax(x), number=100)`): flagged, never held.  A string statement or `globals` is source text run.
TIMING_CALLS = {"timeit.timeit", "timeit.repeat", "timeit.Timer"}
HARMLESS = {"gc.collect", "inspect.signature", "inspect.getsource", "inspect.getdoc", "inspect.isfunction",
            "inspect.isclass", "inspect.ismethod", "pickle.dump", "pickle.dumps", "pdb.set_trace",
            "yaml.safe_load", "yaml.safe_load_all", "yaml.safe_dump", "yaml.safe_dump_all"}
NAME_CODE = {"exec": "dynamic-code", "eval": "dynamic-code", "compile": "dynamic-code",
             "__import__": "dynamic-code", "__builtins__": "introspection"}
LOOKUP_BUILTINS = {"getattr", "setattr", "delattr", "vars", "globals"}  # flagged when passed around, not called
SO_FILE = re.compile(r"\.so(\.\d+)*$")
# Magics whose body is Python run in the user namespace (scanned as such), and
# magics that run code the scan cannot read (shell, other files, other interpreters), or change what later
# magics and cells mean: `store -r` unpickles a file (as `pickle.load`), `alias_magic` gives a magic of this
# table another name, `autocall` makes IPython rewrite later lines the scan reads as written (red team).
PYTHON_MAGICS = {"time", "timeit", "prun", "capture"}
FOREIGN_MAGICS = {"run", "load", "loadpy", "sx", "system", "sc", "bash", "sh", "script", "python", "python2",
                  "python3", "pypy", "perl", "ruby", "writefile", "file", "store", "alias_magic", "autocall",
                  # shell commands: IPython's aliases (`%cat x; sh …` runs any line), new ones, the installers
                  "alias", "unalias", "rehashx", "mkdir", "rmdir", "mv", "rm", "cp", "cat", "ls", "ll", "lf", "lk",
                  "ldir", "lx", "pip", "conda", "mamba", "micromamba", "uv"}
MODULE_MUTATORS = {"pop", "update", "clear", "setdefault", "popitem", "__setitem__", "__delitem__"}
# Methods that store a value into the object they are called on (`cache.append(torch.softmax)`).
CONTAINER_STORES = {"append", "extend", "insert", "add", "update", "setdefault", "__setitem__", "appendleft",
                    "extendleft", "put", "put_nowait", "push"}
# Calls that look a name up at run time: a string passed to them is a name, not text.
LOOKUP_CALLS = {"getattr", "hasattr", "setattr", "attrgetter", "methodcaller", "getattr_static", "import_module",
                "__getattr__", "__getattribute__", "get", "__getitem__"}

# APIs that record, trace, compile, look up or intercept another function's work.  Each use is a review
# flag ("recording").  A graded function that reaches one of the first group is charged as using a
# built-in: what it replays may be a built-in's work with no forbidden kernel left in it (a decomposition
# from `torch._decomp`'s table, an FX graph of `torch.softmax`, `Categorical(logits=...).probs`), and a
# by-hand answer has no use for them.  The second group also compiles the student's own code
# (`torch.jit.script`, `torch.compile`, `torch.func.vmap`): flagged, never charged; the run-time
# tripwires are armed while anything of the student's is traced or compiled.
RECORDING_CHARGED = ("torch.fx", "torch._decomp", "torch._refs", "torch._prims", "torch._prims_common",
                     "torch.export", "torch._export", "torch.distributions", "torch._dynamo", "torch._inductor",
                     "torch._functorch", "functorch", "torch.library", "torch._library",
                     "torch.utils._python_dispatch", "torch._subclasses", "torch.onnx", "torch.package")
RECORDING_REVIEWED = ("torch.compile", "torch.jit", "torch.func", "torch.overrides")


def recording(qualname: "str | None") -> "str | None":
    """"charged" or "reviewed" for a qualified name in one of the recording groups, else None."""
    if not qualname:
        return None
    for group, prefixes in (("charged", RECORDING_CHARGED), ("reviewed", RECORDING_REVIEWED)):
        if any(qualname == p or qualname.startswith(p + ".") for p in prefixes):
            return group
    return None


LABELS = {
    "softmax-builtin": N_("内置 softmax"),
    "sdpa-builtin": N_("内置注意力实现"),
    "introspection": N_("窥探栈帧或对象"),
    "module-edit": N_("改动模块"),
    "native-code": N_("加载本地代码"),
    "process-limits": N_("改动进程限制或调度"),
    "other-processes": N_("触及其他进程"),
    "dynamic-code": N_("动态执行代码"),
    "grader-internals": N_("触及评分程序内部"),
    "process-creation": N_("另起进程"),
    "threads": N_("另起线程"),
    "recording": N_("记录、编译或截获计算"),
    # a charged recording API (`RECORDING_CHARGED`) used where no graded function can be seen to reach it:
    # handed through an argument, an exception, a file loaded at run time (red team)
    "recording-unfollowed": N_("会重放内置计算的接口，用在评分程序跟不到去向的地方"),
}


# Review categories whose code the grader cannot read to the end: a notebook with one of them anywhere
# it runs has its points held until a person has read the flagged lines (`ScanResult.held`).  Code
# that cannot read a forbidden function's work by itself is left out: "recording" (compiling or
# tracing the student's own code, with the tripwires armed; charged where it replays a built-in).
HOLDING = frozenset(LABELS) - {"softmax-builtin", "sdpa-builtin", "recording"}
# What a student's code may read on sys.stdout and sys.stderr: the file methods.  During a cell these
# are the runner's streams; any other attribute looks behind them.
STREAM_NAMES = {"sys.stdout", "sys.stderr", "sys.stdin", "sys.__stdout__", "sys.__stderr__", "sys.__stdin__"}
FILE_ATTRIBUTES = {"write", "writelines", "flush", "isatty", "fileno", "encoding", "errors", "name", "mode",
                   "closed", "readable", "writable", "seekable", "newlines", "line_buffering", "write_through",
                   "close", "read", "readline", "readlines", "seek", "tell", "truncate", "reconfigure"}
# Calls that only show what a top-level expression finds (`dir(torch)` as a cell's last line): a
# read whose result is displayed and dropped, flagged but not held.
DISPLAY_CALLS = {"dir", "vars", "help", "print", "sorted", "list", "len", "type", "repr", "display", "set", "str",
                 "globals", "locals"}
# Methods such a line may call on what it found (`[n for n in dir(torch) if n.endswith("max")]`).
DISPLAY_METHODS = {"startswith", "endswith", "lower", "upper", "strip", "split", "replace", "find", "count", "join",
                   "format", "items", "keys", "values", "get"}


def family(name: str) -> "str | None":
    """The forbidden code an identifier belongs to; attention wins over softmax."""
    return forbidden.code_in_source(name)
