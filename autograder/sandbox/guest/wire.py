"""Message framing and value encoding between the grader and the sandboxed runner.

Both sides import this module: the runner (inside the sandbox) to send
results, and the trusted grader to read them.  Decoding never unpickles and never executes anything:
tensors arrive as raw bytes plus a whitelisted dtype and a shape, so whatever
the student's process writes can at worst be wrong data, never code.
"""
import decimal
import fractions
import json
import math
import numbers
import struct
from typing import IO, TYPE_CHECKING, Any, Callable, Optional, Sequence

try:
    from . import messages  # the host imports the guest's files as a package
except ImportError:
    import messages  # the guest runs them as plain files, side by side

if TYPE_CHECKING:
    import torch

# dtype names that may cross the wire; anything else is refused on decode.
DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16",
          "int8", "uint8", "bool", "complex64", "complex128")

MAX_HEADER_BYTES = 8 * 2**20
MAX_MESSAGE_BYTES = 256 * 2**20
# What the trusted side accepts in one reply from a runner: a cell's outputs
# (the runner keeps a plot-heavy cell under 2 MiB) or a call's tensors (the
# checks' inputs are tiny).  Enforced as the bytes are read, before any
# allocation; a runner that sends more is killed.
MAX_REPLY_HEADER_BYTES = 4 * 2**20
MAX_REPLY_BLOB_BYTES = 16 * 2**20
STRIDED = "torch.strided"
MAX_TEXT = 2000
MAX_NAME = 64  # a dtype, device or layout name; a torch name is a few dozen characters at most
MAX_DIMS = 64  # dimensions of a tensor spec (PyTorch's own limit is about this)
MAX_DEPTH = 8
# The largest integer a float holds exactly: an int the runner sends is below it, a larger one travels as a float.
EXACT_INT = 2**53
MAX_ITEMS = 10_000


class WireError(Exception):
    """A message from the other side is malformed, too large, or truncated."""


def _read_exact(stream, n):
    chunks, got = [], 0
    while got < n:
        chunk = stream.read(n - got)
        if not chunk:
            raise EOFError("peer closed the channel")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def frame(header: dict, blobs: Sequence[bytes] = ()) -> bytes:
    """One message as bytes: length-prefixed header JSON, then the raw blobs."""
    header = dict(header, blobs=[len(b) for b in blobs])
    raw = json.dumps(header, allow_nan=False).encode()
    return b"".join([struct.pack(">I", len(raw)), raw, *blobs])


def send(stream: IO[bytes], header: dict, blobs: Sequence[bytes] = ()) -> None:
    """Write one message to a blocking stream (the runner's side)."""
    stream.write(frame(header, blobs))
    stream.flush()


def receive(stream: IO[bytes], max_header: int = MAX_HEADER_BYTES,
            max_blobs: int = MAX_MESSAGE_BYTES) -> tuple[dict, list[bytes]]:
    """Read one message; enforce size limits before allocating anything."""
    (size,) = struct.unpack(">I", _read_exact(stream, 4))
    if size > max_header:
        raise WireError(f"header of {size} bytes exceeds the limit of {max_header}")
    try:
        header = _storable(json.loads(_read_exact(stream, size)))
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than we walk
        raise WireError(f"header is not JSON we accept: {type(exc).__name__}") from None
    sizes = header.get("blobs", []) if isinstance(header, dict) else None
    if not isinstance(sizes, list) or not all(isinstance(s, int) and s >= 0 for s in sizes):
        raise WireError("bad blob table")
    if sum(sizes) > max_blobs:
        raise WireError(f"message of {sum(sizes)} bytes exceeds the limit of {max_blobs}")
    return header, [_read_exact(stream, s) for s in sizes]


def _storable(value: Any) -> Any:
    """`value` with every string valid Unicode: JSON's "\\ud800" decodes to a lone surrogate, which
    no notebook or gradebook can store, so one printed character would cost the whole submission."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, list):
        return [_storable(v) for v in value]
    if isinstance(value, dict):
        return {_storable(k): _storable(v) for k, v in value.items()}
    return value


def short(text: object, limit: int = MAX_TEXT) -> str:
    """`text` cut to `limit` characters (exception messages, reprs, names)."""
    text = str(text)
    return text if len(text) <= limit else text[:limit] + "…"


def exception_names(exc: BaseException) -> list[str]:
    """Class names of `exc`'s type and its bases (so a subclass of ValueError counts as one)."""
    return [cls.__name__ for cls in type(exc).__mro__][:MAX_DEPTH * 2]


def encode(value: Any, blobs: list[bytes], depth: int = 0) -> Any:
    """Turn a (student-produced) value into JSON-able data plus blobs.

    Runs in the runner; anything exotic becomes its type name and a short repr.
    """
    import torch  # the runner always has torch; keep module import cheap

    if depth > MAX_DEPTH:
        return {"__object__": "too-deep", "repr": "…"}
    if value is None or isinstance(value, (bool, str)):
        return short(value) if isinstance(value, str) else value
    if isinstance(value, int):
        number = int.__int__(value)  # int's own value: a subclass's __abs__ or __int__ may say anything
        if abs(number) < EXACT_INT:
            return number
        return {"__float__": repr(float(number)) if abs(number) < 2**1023 else ("inf" if number > 0 else "-inf")}
    if isinstance(value, float):
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if isinstance(value, numbers.Integral) and not isinstance(value, torch.Tensor):
        try:  # numpy.int64 and friends
            return encode(int(value), blobs, depth)
        except (TypeError, ValueError, OverflowError):
            pass
    if isinstance(value, (fractions.Fraction, decimal.Decimal)) or (
            isinstance(value, numbers.Real) and not isinstance(value, torch.Tensor)):
        try:  # Fraction(1, 8), Decimal("0.125"): exact numbers a student may write
            return encode(float(value), blobs, depth)
        except (TypeError, ValueError, OverflowError):
            pass
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).replace("torch.", "")
        spec = {"__tensor__": None, "dtype": dtype, "shape": list(value.shape),
                "device": str(value.device), "layout": str(value.layout)}
        if type(value) not in (torch.Tensor, torch.nn.Parameter):
            spec["subclass"] = short(type(value).__name__)
            return spec
        if dtype not in DTYPES or value.layout != torch.strided or value.device.type == "meta":
            return spec
        data = value.detach().to("cpu").contiguous()
        if data.dtype == torch.bfloat16:
            raw = data.view(torch.int16).numpy().tobytes()
        else:
            raw = data.numpy().tobytes()
        spec["__tensor__"] = len(blobs)
        blobs.append(raw)
        return spec
    if isinstance(value, (list, tuple)):
        items = [encode(v, blobs, depth + 1) for v in list(value)[:MAX_ITEMS]]
        return {"__tuple__": items} if isinstance(value, tuple) else items
    try:
        import numpy
        if isinstance(value, numpy.ndarray):
            return encode(torch.from_numpy(numpy.ascontiguousarray(value).reshape(value.shape)), blobs, depth)
        if isinstance(value, numpy.generic):
            return encode(value.item(), blobs, depth)
    except Exception:  # noqa: BLE001 - a broken numpy must not break encoding
        pass
    if isinstance(value, dict):
        return {"__dict__": [[short(k), encode(v, blobs, depth + 1)]
                             for k, v in list(value.items())[:MAX_ITEMS]]}
    try:
        text = repr(value)
    except Exception as exc:  # noqa: BLE001 - student __repr__ may raise
        text = f"<repr failed: {type(exc).__name__}>"
    return {"__object__": type(value).__name__, "repr": short(text)}


def decode(data: Any, blobs: Sequence[bytes], depth: int = 0) -> Any:
    """Rebuild values on the trusted side from plain data; never runs code.  What the encoder never sends (an
    integer a float cannot hold exactly, a float tag that is no float's text) is malformed: WireError."""
    if depth > MAX_DEPTH + 1:
        raise WireError("value nested too deeply")
    if isinstance(data, int) and not isinstance(data, bool) and abs(data) >= EXACT_INT:
        raise WireError("integer out of range")
    if isinstance(data, str) and len(data) > MAX_TEXT + 1:  # the encoder cuts every text (`short`)
        raise WireError("text too long")
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [decode(v, blobs, depth + 1) for v in _items(data)]
    if not isinstance(data, dict):
        raise WireError(f"unexpected {type(data).__name__}")
    if "__float__" in data:
        text = data["__float__"]
        if not isinstance(text, str) or len(text) > 64:
            raise WireError("bad float")
        try:
            return float(text)
        except ValueError:
            raise WireError("bad float") from None
    if "__tuple__" in data:
        return tuple(decode(v, blobs, depth + 1) for v in _items(data["__tuple__"]))
    if "__dict__" in data:
        pairs = [pair for pair in _items(data["__dict__"]) if isinstance(pair, list) and len(pair) == 2]
        if len(pairs) != len(data["__dict__"]):
            raise WireError("bad dict item")
        return {short(k): decode(v, blobs, depth + 1) for k, v in pairs}
    if "__tensor__" in data:
        return TensorSpec.from_wire(data, blobs)
    if "__object__" in data:
        return OpaqueObject(short(data["__object__"], MAX_NAME * 4), short(data.get("repr", "")))
    raise WireError("unknown value tag")


def _items(data: Any) -> list:
    """A container's items as the encoder sends them: a list of at most MAX_ITEMS, else malformed."""
    if not isinstance(data, list) or len(data) > MAX_ITEMS:
        raise WireError("container too long" if isinstance(data, list) else "bad container")
    return data


class OpaqueObject:
    """A value the runner could not send as data (shown by type and repr)."""

    def __init__(self, type_name: str, text: str) -> None:
        self.type_name, self.text = type_name, text

    def __repr__(self):
        return f"<{self.type_name}: {self.text}>"


class TensorSpec:
    """Metadata of a tensor the runner returned, with its data when it has any.

    Everything but `tensor` is the runner's claim.  `tensor` is data this
    process rebuilt itself from bytes whose count matched the claimed dtype
    and shape, so only a spec with `tensor` is evidence of values.
    """

    def __init__(self, dtype: str, shape: tuple[int, ...], device: str, layout: str,
                 tensor: Optional["torch.Tensor"], subclass: Optional[str] = None) -> None:
        self.dtype, self.shape, self.device, self.layout, self.tensor = dtype, shape, device, layout, tensor
        self.subclass = subclass

    def missing_data(self, translate: Callable[[str], str] = str) -> str:
        """Why this spec carries no usable values ('' if it does): a layout, a subclass, no bytes.

        `translate` puts the message in the notebook's language (the host's gettext)."""
        if self.subclass:
            return translate(messages.TENSOR_SUBCLASS).format(subclass=self.subclass)
        if self.layout != STRIDED:
            return translate(messages.TENSOR_LAYOUT).format(layout=self.layout.replace("torch.", ""))
        if self.tensor is None:
            return translate(messages.TENSOR_NO_VALUES)
        return ""

    @classmethod
    def from_wire(cls, data: dict, blobs: Sequence[bytes]) -> "TensorSpec":
        import torch

        dtype, shape = data.get("dtype"), data.get("shape")
        if not isinstance(shape, list) or len(shape) > MAX_DIMS or \
                not all(isinstance(s, int) and 0 <= s < EXACT_INT for s in shape):
            raise WireError("bad tensor shape")
        index, tensor = data.get("__tensor__"), None
        if index is not None:
            if dtype not in DTYPES or not isinstance(index, int) or not 0 <= index < len(blobs):
                raise WireError("bad tensor payload")
            raw = bytearray(blobs[index])
            torch_dtype = getattr(torch, dtype)
            wire_dtype = torch.int16 if torch_dtype == torch.bfloat16 else torch_dtype
            numel = math.prod(shape)
            if numel * torch.empty((), dtype=wire_dtype).element_size() != len(raw):
                raise WireError("tensor payload size does not match its shape")
            flat = torch.frombuffer(raw, dtype=wire_dtype) if numel else torch.empty(0, dtype=wire_dtype)
            tensor = flat.view(torch_dtype).reshape(shape)
        # every name the runner sends ends up in a check's message: capped here, on the trusted side
        layout, subclass = short(data.get("layout", "?"), MAX_NAME), data.get("subclass")
        if tensor is not None and (layout != STRIDED or subclass is not None):
            tensor = None  # values of another layout or a subclass are not evidence
        return cls(short(dtype, MAX_NAME), tuple(shape), short(data.get("device", "?"), MAX_NAME), layout, tensor,
                   short(subclass, MAX_NAME * 4) if subclass is not None else None)

    def __repr__(self):
        return f"TensorSpec({self.dtype}, {list(self.shape)}, {self.device})"


def encode_arg(tensor: "torch.Tensor", blobs: list[bytes], device: str) -> dict:
    """Encode an input tensor for a call, with the device it must live on."""
    spec = encode(tensor, blobs)
    spec["device"] = device
    return spec
