"""A runner that does the work right, then sends it the way an adversary might.

Run as ``python hostile_runner.py MODE``; it speaks the runner protocol on
stdin/stdout (see ``autograder/sandbox/guest/wire.py``).  Every answer is computed with the
reference solution, so whatever a mode still earns was earned by tampering
with the evidence, not by doing the work.  Used by ``test_evidence.py``.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from autograder.sandbox.guest import wire  # noqa: E402
from course.checks import test_hand_calculation as hand  # noqa: E402
from solutions import sdpa as ref  # noqa: E402

ANSWERS = {
    "hand_scores": hand.RAW, "hand_scaled": hand.SCALED, "hand_weights": hand.WEIGHTS,
    "hand_output": hand._out(hand.WEIGHTS), "hand_masked_output": hand._out(hand._softmax(hand.SCALED[:2]) + [0.0]),
    "shape_scores": (2, 4, 5, 7), "shape_weights": (2, 4, 5, 7), "shape_output": (2, 4, 5, 16),
    "shape_padding_mask": (2, 1, 1, 7), "softmax_dim": -1, "verdict_1": "B", "verdict_2": "A", "verdict_3": "C",
    "scale_answer": "C", "mha_mask_answer": "B", "dropout_sdpa_answer": "B", "n_keys_top_left": 1,
    "n_keys_bottom_right": 5, "n_empty_rows": 2, "fill_weight": 0.25, "dropout_kept_value": 0.5,
}
# Float-to-float changes are the graded `dtype-changed` misconception (charged once, by the
# dtype checks); these are dtypes in which no float or mask answer can be evidence.
OTHER_DTYPE = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16,
               torch.bfloat16: torch.int16, torch.bool: torch.uint8, torch.int64: torch.float64}


def _tensors(value, change):
    """`value` with every tensor replaced by change(tensor) (lists and tuples kept)."""
    if isinstance(value, torch.Tensor):
        return change(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_tensors(v, change) for v in value)
    return value


def _as_tensor(value):
    """Plain answers become tensors, so that the tensor sabotage reaches them too."""
    if isinstance(value, str):
        return None
    return torch.tensor(value, dtype=torch.float64 if isinstance(value, float) or (
        isinstance(value, (list, tuple)) and any(isinstance(x, float) for x in value)) else torch.int64)


def _strip(data, blobs, edit):
    """Apply `edit` to every encoded tensor dict in `data` (the JSON form)."""
    if isinstance(data, dict) and "__tensor__" in data:
        edit(data, blobs)
    elif isinstance(data, dict):
        for value in data.values():
            _strip(value, blobs, edit)
    elif isinstance(data, list):
        for value in data:
            _strip(value, blobs, edit)


def _no_values(spec, blobs):
    spec["__tensor__"] = None


def _sparse(spec, blobs):
    spec["__tensor__"], spec["layout"] = None, "torch.sparse_coo"


def _subclass(spec, blobs):
    spec["subclass"] = "Cheat"


def _meta(spec, blobs):
    spec["__tensor__"], spec["device"] = None, "meta"


def _lie(spec, blobs):
    spec["shape"] = [2 * max(1, s) for s in spec["shape"]] or [2]


ENCODED = {"no-data": _no_values, "sparse": _sparse, "subclass": _subclass, "meta-claim": _meta,
           "lying-header": _lie}


def sabotage(mode, value, is_answer):
    """The value as this mode sends it (before encoding)."""
    if mode == "none":
        return None
    if mode in ENCODED and is_answer:
        return _as_tensor(value)
    if mode == "wrong-shape":
        if is_answer:
            if isinstance(value, (list, tuple)):
                return list(value) + [1]
            return "" if isinstance(value, str) else [value] if isinstance(value, int) else [value, value]
        return _tensors(value, lambda t: torch.cat([t.reshape(-1), t.reshape(-1)[:1]]))
    if mode == "wrong-dtype":
        if is_answer:
            if isinstance(value, (list, tuple)):
                return [str(x) for x in value]
            return 2 if isinstance(value, str) else float(value) if isinstance(value, int) else str(value)
        return _tensors(value, lambda t: t.to(OTHER_DTYPE.get(t.dtype, torch.float64)))
    if mode == "nan":
        if is_answer:
            if isinstance(value, (list, tuple)):
                return [float("nan")] * len(value)
            return "E" if isinstance(value, str) else 0 if isinstance(value, int) else float("nan")
        return _tensors(value, lambda t: ~t if t.dtype == torch.bool else torch.full_like(t, float("nan")))
    return value


def call(msg, blobs):
    args = [_materialise(a, blobs) for a in msg.get("args", [])]
    kwargs = {k: _materialise(v, blobs) for k, v in msg.get("kwargs", {}).items()}
    fn = getattr(ref, msg["fn"], None)
    if fn is None:
        return {"status": "missing"}, None, args
    try:
        return {"status": "ok"}, fn(*args, **kwargs), args
    except Exception as exc:  # noqa: BLE001 - reported like a runner does
        return {"status": "raised", "ename": type(exc).__name__, "evalue": str(exc),
                "exception_names": wire.exception_names(exc)}, None, args


def _materialise(data, blobs):
    value = wire.decode(data, blobs)
    if isinstance(value, wire.TensorSpec):
        if value.device == "meta":
            return torch.empty(value.shape, dtype=getattr(torch, value.dtype), device="meta")
        return value.tensor.clone()
    return value


def main():
    mode = sys.argv[1]
    proto_in, proto_out = sys.stdin.buffer, sys.stdout.buffer
    wire.send(proto_out, {"status": "ready"})
    previous = None
    while True:
        try:
            msg, blobs = wire.receive(proto_in)
        except EOFError:
            return
        op, out_blobs = msg.get("op"), []
        if op == "exec":
            reply = {"status": "ok", "outputs": []}
        elif op == "get":
            name = msg.get("name")
            if name not in ANSWERS:
                reply = {"status": "missing"}
            else:
                reply = {"status": "ok", "value": wire.encode(sabotage(mode, ANSWERS[name], True), out_blobs)}
        elif op == "call":
            reply, value, args = call(msg, blobs)
            if reply["status"] == "ok":
                reply["value"] = wire.encode(sabotage(mode, value, False), out_blobs)
            if msg.get("return_args"):
                reply["args_after"] = [wire.encode(sabotage(mode, a, False), out_blobs) for a in args]
        else:
            reply = {"status": "bad-op"}
        if mode in ENCODED:
            for key in ("value", "args_after"):
                _strip(reply.get(key), out_blobs, ENCODED[mode])
            if mode != "lying-header" and mode != "subclass":
                out_blobs = []  # no values at all
                for key in ("value", "args_after"):
                    _strip(reply.get(key), out_blobs, lambda spec, b: spec.update({"__tensor__": None}))
        if mode == "huge":
            reply["padding"] = "x" * (wire.MAX_REPLY_HEADER_BYTES + 1)
        reply["id"] = previous if mode == "stale-ids" else msg.get("id")
        previous = msg.get("id")
        wire.send(proto_out, reply, out_blobs)


if __name__ == "__main__":
    main()
