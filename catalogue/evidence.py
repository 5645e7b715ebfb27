"""Evidence and bounds: points only for values that arrived and were checked; built-ins in disguise;
limits held by the grader, not by the student's process; nothing reaches the next student; fair answer forms.
"""
from autograder.demo.submissions import Sample

from .attacks import GARBAGE

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

RETURNS_LIST = """
def scaled_dot_product_attention(q, k, v, mask=None):
    if k.shape[-2] != v.shape[-2]:
        raise ValueError("S mismatch")
    weights = softmax(apply_mask(scale_scores(attention_scores(q, k), q.shape[-1]), mask), dim=-1)
    return [attention_output(weights, v), weights]
"""

EVIDENCE = [
    Sample("attack-sparse-outputs", "attack", "zero", dict(GARBAGE, **SPARSE_ZEROS),
           note="tensors of the right shape, dtype and device that carry no values"),
    Sample("attack-strip-tensor-data", "attack", "lose-all", append=(STRIP_TENSOR_DATA,), lose=TENSOR_PARTS,
           note="correct code, but the patched runner sends no tensor values", held=True),
    Sample("attack-return-none", "attack", "zero", dict(GARBAGE, **NONE_ANSWERS)),
    Sample("attack-disarm-tripwires", "attack", "lose-all", {"softmax": BUILTIN_SOFTMAX,
                                                            "scaled_dot_product_attention": BUILTIN_SDPA},
           append=(DISARM_TRIPWIRES,), lose=SOFTMAX_PARTS, codes=("softmax-builtin", "sdpa-builtin"), held=True),
    Sample("attack-masked-softmax", "attack", "lose-all", {"softmax": MASKED_SOFTMAX}, lose=SOFTMAX_PARTS,
           codes=("softmax-builtin",)),
    Sample("attack-captured-reference", "attack", "lose-all", {"softmax": CAPTURED_REFS}, lose=SOFTMAX_PARTS,
           codes=("softmax-builtin",)),
    Sample("attack-looked-up-name", "attack", "lose-all", {"softmax": LOOKED_UP_NAME}, lose=SOFTMAX_PARTS,
           codes=("softmax-builtin",), held=True),
    Sample("attack-unwired-sdpa", "attack", "lose-all", {"scaled_dot_product_attention": UNWIRED_SDPA},
           lose=("scaled_dot_product_attention-check", "device_dtype-check"), codes=("sdpa-builtin",), held=True),
    Sample("attack-forked-helper", "attack", "lose-all", {"softmax": FORKED_HELPER}, lose=TENSOR_PARTS,
           codes=("softmax-builtin",), note="process creation: a forbidden use anywhere counts for every function",
           held=True),
    Sample("attack-deep-expression", "attack", "full", append=(DEEP_EXPRESSION,),
           note="the static scan must not crash the grader", held=True),
    Sample("attack-stop-and-small-pipe", "attack", "lose", append=(STOP_AND_SMALL_PIPE, BIG_CELL),
           lose=tuple(g for g in TENSOR_PARTS) + ANSWER_PARTS, held=None,
           note="every wait on the runner has a wall-clock deadline; it loses all, or, where a check got its "
                "answer before the runner stopped (a loaded machine), those points are held for review"),
    Sample("attack-runner-out-of-gc-sight", "attack", "full",
           append=(STOP_AND_SMALL_PIPE.replace("gc.unfreeze()\n", ""), BIG_CELL),
           note="without gc.unfreeze() the runner is not in gc.get_objects(), forked or fresh alike: the same "
                "grade from both graders", held=True),
    Sample("attack-tell-runners-apart", "attack", "full", append=(TELL_RUNNERS_APART,),
           note="a fresh runner warms up and forks as a zygote does: the same grade from stock and sdpa-course",
           held=True),
    Sample("attack-output-flood", "attack", "full", append=(OUTPUT_FLOOD, "print('y' * 8_000_000)"),
           note="outputs are capped in the grader: the notebook stays small", held=True),
    Sample("attack-zygote-state", "attack", "full", append=(ZYGOTE_STATE,),
           note="aimed at later runners of the same zygote sandbox", held=True),
    Sample("fairness-answer-forms", "fairness", "full", FAIR_FORMS,
           note="Fraction, Decimal, numpy and tensor answers; a ValueError subclass"),
    Sample("fairness-own-names", "fairness", "full", OWN_NAMES,
           note="a method Ops.softmax, an attribute self.softmax_dim and a key 'softmax', all the student's own"),
    Sample("fairness-returns-list", "fairness", "full", {"scaled_dot_product_attention": RETURNS_LIST},
           note="[output, weights], as the visible check's unpacking accepts: every check reads it alike"),
]
