"""Assertion helpers for the hidden checks: compare, diagnose, explain.

The checks (``course/checks/test_*.py``) call the student's functions
through a session and hand the results to `expect_tensor` and friends.  A
failure raises `CheckFailed` carrying a Chinese message, the misconception
codes that the evidence supports, and a minimal failing example; the scoring
plugin turns that into feedback.  Nothing here runs student code.
"""
from __future__ import annotations

import contextvars
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

import torch

from course import FUNCTIONS

from ..i18n import _
from ..sandbox.guest import forbidden
from ..sandbox.guest.wire import STRIDED, OpaqueObject, TensorSpec
from . import cases, mutants, tolerances

if TYPE_CHECKING:
    from ..sandbox.session import CallResult


# Key of the tolerance in a failing example: kept in grading.json, never shown to students.
TOLERANCE_KEY = "tolerance"


@dataclass
class Replay:
    """How to call a function again: what a failed tensor comparison needs to be shrunk (``shrink``)."""

    function: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    select: Optional[int] = None


class CheckFailed(AssertionError):
    """A check failed for a reason we can explain to the student.

    `explained_by`: codes that account for the whole failure and live in other parts (a dtype mistake in a
    value check, a missing tuple in a check that reads only the output).  With each mistake charged once,
    the check keeps its points if those parts charged them (``hidden_checks.settle_charges``).
    `unexplained`: functions whose output differs in a way no known misconception explains, so that a
    person reads the failure (``feedback.unexplained_notes``).  `unfinished`: functions this check needed
    that still raise NotImplementedError (named in the message; their own parts say so too).
    """

    def __init__(self, message: str, codes: Iterable[str] = (), example: Optional[dict] = None,
                 explained_by: Iterable[str] = (), replay: Optional[Replay] = None,
                 unexplained: Iterable[str] = (), unfinished: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.codes = list(dict.fromkeys(codes))
        self.example = example or {}
        self.explained_by = list(dict.fromkeys(explained_by))
        self.replay = replay  # the call to shrink into a smaller failing example
        self.unexplained = list(dict.fromkeys(unexplained))
        self.unfinished = list(dict.fromkeys(unfinished))


# With each mistake charged once, the scoring plugin sets this to a list for each check: a failure that
# another part accounts for (`CheckFailed.explained_by`) is recorded there and the check goes on, so
# every later sub-case still runs before its credit is decided.  None (strict grading): it raises.
EXPLAINED: contextvars.ContextVar = contextvars.ContextVar("explained", default=None)


def _raise_unless_explained(failure: CheckFailed) -> None:
    collected = EXPLAINED.get()
    if collected is None or not failure.explained_by:
        raise failure
    collected.append(failure)


def record_dtype_only(failure: CheckFailed) -> None:
    """For a check that compares values itself: a dtype difference it records and goes on from (see `EXPLAINED`)."""
    _raise_unless_explained(failure)


def attention_pair(value: Any) -> Optional[tuple]:
    """The (output, weights) of an attention answer, or None: the one contract for what attention returns.

    A tuple or a list of two, as the visible check accepts; every hidden check reads the answer through
    this (or through `attention_output`), so no check is stricter than another about its form.
    """
    return tuple(value) if isinstance(value, (tuple, list)) and len(value) == 2 else None


def attention_output(value: Any) -> Any:
    """What a check that grades only the output reads: the first element of a tuple or list, else the value.

    Lenient on purpose: a wrong number of returned tensors is charged once, by the attention part
    (``returns-not-tuple``), not again by every check that only needs the output.
    """
    return value[0] if isinstance(value, (tuple, list)) and value else value


def forbidden_codes(names: Iterable[str]) -> list[str]:
    """The misconception code of each blocked call the runner reported (names it did not block give none)."""
    return [code for code in map(forbidden.code_of_blocked, names) if code]


def require_ok(result: CallResult, what: str) -> Any:
    """Fail unless the call returned normally without forbidden APIs."""
    if result.forbidden:
        names = ", ".join(dict.fromkeys(result.forbidden))
        raise CheckFailed(_("{what}：调用了评分时禁止的 API（{names}）。").format(what=what, names=names),
                          forbidden_codes(result.forbidden))
    if not result.ok:
        raise CheckFailed(_("{what}：{reason}").format(what=what, reason=result.describe()),
                          text_codes(f"{result.ename} {result.evalue}"))
    return result.value


def text_codes(text: str) -> list[str]:
    """Codes an exception's text names: PyTorch's own message for a fill value float16 cannot hold, or for
    tensors on two devices.  (A student may raise the same text: a code found so is only ever credited
    after its home part charged it in full, see ``hidden_checks.settle_charges``.)"""
    codes = []
    if "value cannot be converted to type" in text and "without overflow" in text:
        codes.append("half-overflow")
    if "is not on the expected device" in text or "Expected all tensors to be on the same device" in text:
        codes.append("device-mismatch")
    return codes


def _describe_args(args, kwargs):
    parts = []
    for value in list(args) + [f"{k}={v}" for k, v in kwargs.items()]:
        if isinstance(value, torch.Tensor):
            parts.append(f"{str(value.dtype).replace('torch.', '')}{list(value.shape)}")
        else:
            parts.append(repr(value) if not isinstance(value, str) else value)
    return ", ".join(parts)


def _sample(t, n=4):
    flat = t.detach().reshape(-1)[:n].to(torch.float64).tolist()
    return "[" + ", ".join(f"{x:.4g}" for x in flat) + (", …]" if t.numel() > n else "]")


def _first_difference(actual, expected, tol):
    bad = ~torch.isclose(actual.to(torch.float64), expected.to(torch.float64), atol=tol.atol, rtol=tol.rtol)
    if not bad.any():
        return {}
    index = tuple(int(i) for i in bad.nonzero()[0])
    row = index[:-1]
    return {_("位置"): list(index), _("你的值"): f"{float(actual[index]):.6g}",
            _("期望值"): f"{float(expected[index]):.6g}",
            _("你的这一行"): _sample(actual[row], 6) if row else _sample(actual, 6),
            _("期望的这一行"): _sample(expected[row], 6) if row else _sample(expected, 6)}


def _variant_outputs(function, args, kwargs, select=None, actual=None):
    """(code, output) for each runnable buggy variant of `function` on these inputs (and, given the
    student's `actual` output, those whose constant is read from it: ``mutants.fitted``)."""
    fitted = mutants.fitted(function, args, kwargs, actual) if isinstance(actual, torch.Tensor) else {}
    for code, makers in [*mutants.variants(function, args, kwargs).items(), *fitted.items()]:
        for make in makers:
            try:
                produced = make()
                if select is not None and produced is not None:
                    produced = produced[select]
            except Exception:  # noqa: BLE001 - a variant that cannot run is no evidence
                continue
            if isinstance(produced, torch.Tensor):
                yield code, produced.to(torch.float64)


def diagnose(function: str, args: Sequence, kwargs: dict, actual: torch.Tensor, expected: torch.Tensor,
             tol: tolerances.Tolerance, select: Optional[int] = None) -> list[str]:
    """Codes whose buggy variant reproduces `actual` but not `expected`."""
    found = []
    actual = actual.to(torch.float64)
    expected = expected.to(torch.float64)
    for code, produced in _variant_outputs(function, args, kwargs, select, actual):
        if code in found or produced.shape != actual.shape:
            continue
        matches = torch.isclose(actual, produced, atol=tol.atol, rtol=tol.rtol, equal_nan=True).all()
        distinct = produced.shape != expected.shape or not torch.isclose(
            produced, expected, atol=tol.atol, rtol=tol.rtol, equal_nan=True).all()
        if bool(matches) and bool(distinct):
            found.append(code)
    return found


def expect_tensor(result: CallResult, expected: torch.Tensor, *, function: str, args: Sequence,
                  kwargs: Optional[dict] = None, tol: Optional[tolerances.Tolerance] = None, what: str,
                  select: Optional[int] = None, dtype: Optional[torch.dtype] = None, device: str = "cpu",
                  diagnose_with: Optional[tuple[Sequence, dict]] = None, diagnose_values: bool = True) -> TensorSpec:
    """Check one returned tensor against the float64 `expected` value.

    `args`/`kwargs` are the float64 inputs (for diagnosis and the example);
    `select` picks an element when the function returns a tuple.  Values are
    diagnosed only where the check's inputs can tell the candidate bugs apart.
    """
    kwargs = kwargs or {}
    value = require_ok(result, what)
    if select is not None:
        pair = attention_pair(value)
        if pair is None:
            # A lone output where only the output is read: charged by the attention part; its values still count.
            _raise_unless_explained(CheckFailed(
                _("{what}：应返回 (output, weights) 两个张量，实际返回 {form}。").format(what=what, form=_form(value)),
                ["returns-not-tuple"],
                explained_by=["returns-not-tuple"] if select == 0 and isinstance(value, TensorSpec) else []))
            pair = (value, None)
        value = pair[select]
    if not isinstance(value, TensorSpec):
        raise CheckFailed(_("{what}：应返回 torch.Tensor，实际返回 {value}。").format(
            what=what, value=f"{value!r:.80}"))
    if value.subclass or value.layout != STRIDED:
        raise CheckFailed(_("{what}：{reason}。请返回普通的稠密张量。").format(what=what, reason=value.missing_data(_)))
    example = {_("输入"): _describe_args(args, kwargs), _("期望形状"): list(expected.shape),
               _("你的形状"): list(value.shape)}
    tol = tol or cases.default_tolerance(function, args, kwargs, select) or tolerances.floor_for(torch.float64)
    diag_args = diagnose_with or (args, kwargs)
    # A plain float64 call on the CPU can be replayed on smaller inputs to shrink the example.
    replay = Replay(function, tuple(args), dict(kwargs), select) if (
        dtype is None and device == "cpu" and diagnose_with is None and function in cases.REFERENCES) else None
    if tuple(value.shape) != tuple(expected.shape):
        codes = _shape_codes(function, diag_args, value, select)
        raise CheckFailed(_("{what}：输出形状应为 {expected}，实际为 {actual}。").format(
            what=what, expected=list(expected.shape), actual=list(value.shape)), codes, example,
                          replay=replay)
    want_dtype = str(dtype if dtype is not None else expected.dtype).replace("torch.", "")
    if value.dtype != want_dtype:
        _raise_unless_explained(CheckFailed(
            _("{what}：输出 dtype 应与输入一致（{expected}），实际为 {actual}。").format(
                what=what, expected=want_dtype, actual=value.dtype), ["dtype-changed"], example,
            explained_by=_dtype_only(function, args, kwargs, select, value, expected, dtype, tol)))
    if not value.device.startswith(device):
        raise CheckFailed(_("{what}：输出应在输入所在的设备 {expected} 上，实际在 {actual}。").format(
            what=what, expected=device, actual=value.device),
                          ["device-mismatch"], example)
    if value.dtype != want_dtype:
        return value  # right values at the precision returned (`_dtype_only`): the dtype part grades the rest
    if value.tensor is None:
        if device == "meta" and value.device == "meta":
            return value  # the check asked for a meta run: shape, dtype and device are all there is
        reason = value.missing_data(_)
        raise CheckFailed(_("{what}：{reason}，无法评分。").format(what=what, reason=reason), [], example)
    actual = value.tensor
    if tolerances.close(actual, expected, tol):
        return value
    example.update(_first_difference(actual, expected, tol))
    example[TOLERANCE_KEY] = tol.describe()  # for the instructor's JSON record; feedback leaves it out
    # Checks whose inputs were not designed to tell bugs apart pass diagnose_values=False.
    codes = diagnose(function, *diag_args, actual, expected, tol, select) if diagnose_values else []
    if torch.isnan(actual.to(torch.float64)).any() and not torch.isnan(expected.to(torch.float64)).any():
        message = _("{what}：输出里出现了 NaN。").format(what=what)
    else:
        message = _("{what}：数值与参考结果不符（最大误差 {error}）。").format(
            what=what, error=f"{tolerances.max_error(actual, expected):.3g}")
    raise CheckFailed(message, codes, example, replay=replay)


def expect_explained(result: CallResult, expected: torch.Tensor, *, function: str, args: Sequence,
                     kwargs: Optional[dict] = None, what: str, select: Optional[int] = None) -> TensorSpec:
    """Evidence for the device and dtype checks: a real tensor, right or wrong in a known way.

    Those checks certify how a function treats devices and dtypes, not its
    values (its own part grades those, once).  But a property of an output is
    only evidence when the output is real work: a dense tensor whose values
    this process received and found either correct or reproduced by a known
    misconception's mutant.  Returns the TensorSpec.
    """
    return expect_real_work(result, expected, function=function, args=args, kwargs=kwargs, what=what,
                            select=select)[0]


def expect_real_work(result: CallResult, expected: torch.Tensor, *, function: str, args: Sequence,
                     kwargs: Optional[dict] = None, what: str, select: Optional[int] = None) -> tuple:
    """`expect_explained`, and the codes whose mutants reproduce the output ([] when it is right): a
    check that grades such an output passes only if those codes are charged where they live."""
    kwargs = kwargs or {}
    value = require_ok(result, what)
    if select == 0 and isinstance(value, (tuple, list)) and value:
        value = attention_output(value)  # a function that returns only the output is graded for it elsewhere
    elif select is not None and attention_pair(value) is not None:
        value = attention_pair(value)[select]
    else:
        select = None  # a single tensor: the mutants' outputs are not tuples either
    if not isinstance(value, TensorSpec):
        raise CheckFailed(_("{what}：应返回 torch.Tensor，实际返回 {value}。").format(
            what=what, value=f"{value!r:.80}"))
    if value.missing_data():
        raise CheckFailed(_("{what}：{reason}，无法评分。").format(what=what, reason=value.missing_data(_)))
    actual = value.tensor
    if (actual.dtype == torch.bool) != (expected.dtype == torch.bool) or (
            expected.is_floating_point() and not actual.is_floating_point()):
        raise CheckFailed(_("{what}：输出 dtype {actual} 与参考结果 {expected} "
                            "不是同一类（布尔/浮点），无法评分。").format(
            what=what, actual=value.dtype, expected=str(expected.dtype).replace("torch.", "")))
    if actual.dtype == torch.bool:
        right = actual.shape == expected.shape and bool((actual == expected).all())
    else:
        probe = actual.dtype if actual.dtype in (torch.float32, torch.float16, torch.bfloat16) else torch.float64
        tol = cases.tolerance(cases.REFERENCES[function], args, probe, select=select, **kwargs) \
            if function in cases.REFERENCES else tolerances.floor_for(torch.float64)
        right = actual.shape == expected.shape and tolerances.close(actual, expected, tol)
    if right:
        return value, []
    codes = [code for code, produced in _variant_outputs(function, args, kwargs, select, actual)
             if produced.shape == actual.shape
             and bool(torch.isclose(actual.to(torch.float64), produced, equal_nan=True).all())]
    if codes:
        return value, list(dict.fromkeys(codes))
    raise CheckFailed(_("{what}：在 CPU 上的结果既不正确，也不是已诊断的错误，"
                        "设备与精度的检查无法评分。").format(what=what), unexplained=[function])


def _dtype_only(function, args, kwargs, select, value, expected, dtype, fine) -> list[str]:
    """["dtype-changed"] when the values are right at the lower of the precisions wanted and returned, and
    that precision still tells them from every known mistake: the dtype is then the only mistake of this
    output (the device and dtype part grades it).  A mistake the check itself would fail (at its own
    tolerance `fine`) must be told apart: at the coarse tolerance, or else (large inputs, where rounding
    them to bfloat16 moves the output by more than any mistake does) on the inputs rounded to that
    precision, where only the arithmetic's rounding is left.  Where neither tells them apart (bfloat16
    cannot tell d_k from d_v in the scale), the values are not shown right and the check fails here: a
    lower precision never hides a mistake of the function's own."""
    if value.tensor is None or function not in cases.REFERENCES \
            or tuple(value.shape) != tuple(expected.shape) or not value.tensor.is_floating_point():
        return []
    returned, wanted = value.tensor.dtype, dtype if dtype is not None else expected.dtype
    probe = max((returned, wanted), key=lambda d: torch.finfo(d).eps if d.is_floating_point else 0.0)
    reference = cases.REFERENCES[function]
    tol = cases.tolerance(reference, args, probe, select=select, **kwargs)
    if not tolerances.close(value.tensor, expected, tol):
        return []
    if not _told_apart(function, args, kwargs, select, value.tensor, expected, fine, tol):
        rounded = cases.cast(cases.cast(args, probe), torch.float64)
        output = reference(*rounded, **kwargs)
        on_rounded = output[select or 0] if isinstance(output, tuple) else output
        arithmetic = cases.tolerance(reference, rounded, probe, select=select, **kwargs)
        if not tolerances.close(value.tensor, on_rounded, arithmetic) or not _told_apart(
                function, rounded, kwargs, select, value.tensor, on_rounded, arithmetic, arithmetic):
            return []
    return ["dtype-changed"]


def _told_apart(function, args, kwargs, select, actual, expected, fine, coarse) -> bool:
    """Whether `actual` lies outside `coarse` of every known mistake's output that is not within `fine` of
    `expected`."""
    for _code, produced in _variant_outputs(function, args, kwargs, select, actual):
        if produced.shape == actual.shape and not tolerances.close(produced, expected, fine) \
                and tolerances.close(actual, produced, coarse):
            return False
    return True


def _shape_codes(function, diag_args, value, select):
    """Codes whose variant has the student's wrong shape (and values, when we have them)."""
    args, kwargs = diag_args
    codes = []
    for code, produced in _variant_outputs(function, args, kwargs, select):
        if code in codes or tuple(produced.shape) != tuple(value.shape):
            continue
        # Same shape is not enough when we have the values: they must match too.
        if value.tensor is None or bool(torch.isclose(value.tensor.to(torch.float64), produced,
                                                      equal_nan=True).all()):
            codes.append(code)
    spec = FUNCTIONS.get(function)
    return codes + (spec.shape_codes(list(args), value.shape) if spec is not None and spec.shape_codes else [])


def expect_unchanged_inputs(result: CallResult, args: Sequence, what: str) -> None:
    """Inputs must come back bit-for-bit unchanged (no in-place edits); their values must arrive."""
    after_all = result.args_after if isinstance(result.args_after, list) else []
    for position, before in enumerate(args):
        if not isinstance(before, torch.Tensor):
            continue
        after = after_all[position] if position < len(after_all) else None
        if not isinstance(after, TensorSpec) or after.tensor is None:
            raise CheckFailed(_("{what}：评分进程没有收到第 {position} 个输入在函数运行后的数值，"
                                "无法确认它没有被修改。").format(what=what, position=position + 1))
        if tuple(after.shape) != tuple(before.shape) or after.tensor.dtype != before.dtype:
            raise CheckFailed(_("{what}：第 {position} 个输入的形状或 dtype 在函数运行后变了。").format(
                what=what, position=position + 1),
                              ["inplace-mutation"])
        same_nan = torch.isnan(before.to(torch.float64)) & torch.isnan(after.tensor.to(torch.float64))
        if not bool(((before == after.tensor) | same_nan).all()):
            raise CheckFailed(_("{what}：第 {position} 个输入在函数运行后被修改了。").format(
                what=what, position=position + 1), ["inplace-mutation"])


def expect_raises(result: CallResult, exception_name: str, what: str, *, control: tuple) -> None:
    """The call must raise `exception_name` or a subclass of it (clear errors for bad shapes).

    `control` is (CallResult, expected, function, args): the same function on
    inputs whose shapes match.  It must return real work (see
    `expect_explained`), so that raising for everything earns nothing.
    """
    if result.forbidden:
        require_ok(result, what)
    control_result, expected, function, args = control
    expect_explained(control_result, expected, function=function, args=args,
                     what=_("{what}（这一项只在函数对形状匹配的输入能正常计算时计分）").format(what=what))
    if result.status == "raised" and exception_name in [result.ename, *result.exception_names]:
        return
    if result.status == "raised":
        # Evidence of a missing check is torch's own shape error surfacing; a stub's
        # NotImplementedError (or any other exception) says nothing about it.
        codes = ["shape-error-missing"] if result.ename == "RuntimeError" else []
        raise CheckFailed(_("{what}：应抛出 {expected}，实际抛出 {ename}: {evalue}").format(
            what=what, expected=exception_name, ename=result.ename, evalue=result.evalue), codes)
    if result.ok:
        raise CheckFailed(_("{what}：形状不匹配时应抛出 {expected}，但函数正常返回了。").format(
            what=what, expected=exception_name), ["shape-error-missing"])
    raise CheckFailed(_("{what}：{reason}").format(what=what, reason=result.describe()))


# Hand answers rounded to two decimals (error <= 0.005) are right answers, not misconceptions;
# every wrong answer the catalogue models is at least 0.05 away.
HAND_TOLERANCE = 6e-3


def expect_number(value: Any, expected: Any, *, what: str, tol: float = HAND_TOLERANCE,
                  codes_by_value: Iterable[tuple[str, Any]] = ()) -> None:
    """A hand-calculated number (or list of numbers) from the student's variables."""
    got = _as_floats(value)
    want = _as_floats(expected)
    if got is None:
        if _blank(value):
            raise CheckFailed(_("{what}：还没有填写。").format(what=what))
        raise CheckFailed(_("{what}：应是一个数（或一列数），收到的是 {form}。").format(what=what, form=_form(value)))
    if len(got) != len(want):
        raise CheckFailed(_("{what}：应有 {expected} 个数，收到 {actual} 个。").format(
            what=what, expected=len(want), actual=len(got)))
    if all(abs(g - w) <= tol * max(1.0, abs(w)) for g, w in zip(got, want)):
        return
    codes = [code for code, wrong in codes_by_value
             if len(_as_floats(wrong)) == len(got)
             and all(abs(g - w) <= tol * max(1.0, abs(w)) for g, w in zip(got, _as_floats(wrong)))]
    raise CheckFailed(_("{what}：答案不对。").format(what=what), codes, {_("你的答案"): [round(g, 4) for g in got]})


def _as_floats(value, depth=0):
    """The numbers in an answer, flattened; None unless every element is a real number.

    Accepts what the visible check accepts: ints, floats (the runner sends
    Fraction, Decimal and numpy scalars as floats), tensors and arrays of any
    shape with data, and lists or tuples of those.
    """
    if isinstance(value, TensorSpec):
        if value.tensor is None or value.dtype in ("bool", "complex64", "complex128"):
            return None
        return [float(x) for x in value.tensor.reshape(-1).to(torch.float64)]
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        try:
            return [float(value)]
        except OverflowError:  # an int no float holds: not a number this answer could be
            return None
    if isinstance(value, (list, tuple)) and depth < 8:
        out = []
        for item in value:
            inner = _as_floats(item, depth + 1)
            if inner is None:
                return None
            out.extend(inner)
        return out
    return None


def not_an_answer(name: str, value: Any, wanted: str) -> CheckFailed:
    """The failure for an answer variable of the wrong form: "not filled in yet" while it is still `...`,
    else `wanted` (translated, with {name} and {got}) and what it holds, shown without Python's repr."""
    if _blank(value):
        return CheckFailed(_("{name}：还没有填写。").format(name=name))
    return CheckFailed(wanted.format(name=name, got=_shown(value)))


def _shown(value: Any) -> str:
    """A wrong-form answer as a student recognises it: their text quoted, a number as written, else its kind."""
    if isinstance(value, str):
        return _("“{text}”").format(text=value[:40])
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:g}" if isinstance(value, float) else str(value)
    return _form(value)


def _blank(value: Any, depth: int = 0) -> bool:
    """An answer still as released: `...` (or None), alone or inside a list."""
    if value is None or (isinstance(value, OpaqueObject) and value.type_name == "ellipsis"):
        return True
    return isinstance(value, (list, tuple)) and depth < 8 and any(_blank(v, depth + 1) for v in value)


def _form(value: Any) -> str:
    """How a returned value looks, for a message: its type, and its length when it has one."""
    if isinstance(value, (tuple, list)):
        return _("{type}（{length} 个元素）").format(type=type(value).__name__, length=len(value))
    if isinstance(value, OpaqueObject):
        return value.type_name
    if isinstance(value, TensorSpec):
        return _("张量（{dtype}）").format(dtype=value.dtype)
    return type(value).__name__
