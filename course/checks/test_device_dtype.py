"""Device and dtype behaviour: same verdict with or without a GPU.

Scored checks use proxies that every grader has: the `meta` device (a tensor
made on the CPU inside a student function then meets a meta tensor and
fails, as it would meet a CUDA tensor) and float16/bfloat16 on the CPU.  A
failure on meta counts only with positive evidence (a device error or an
output off the device); data-dependent code that meta cannot run is not a
bug and is not penalised.  Real CUDA runs are reported but worth 0 points,
so a submission's score never depends on the grader's hardware.
"""
import torch

from autograder.grading import cases, composition, mutants, tolerances
from autograder.grading.assertions import (
    CheckFailed,
    TensorSpec,
    attention_output,
    attention_pair,
    expect_real_work,
    expect_tensor,
    require_ok,
    text_codes,
)
from autograder.grading.check_api import points, skip
from autograder.i18n import _
from solutions import sdpa as ref

PART = "device_dtype"

# Errors that mean a tensor made on the CPU met the input's device.  Not
# masked_fill's "Expected `value` to be on same device": CUDA accepts a 0-dim
# CPU value there, so on meta it would punish correct code.
DEVICE_ERROR = ("is not on the expected device", "Expected all tensors to be on the same device",
                "found at least two devices")


def _calls(rng):
    q, k, v = cases.qkv(rng, batch=(2,), L=3, S=5, d_k=4, d_v=2)
    s = cases.randn(rng, 2, 3, 5)
    mask = cases.random_bool_mask(rng, (3, 5))
    w = cases.softmax(s)
    return [("attention_scores", (q, k), {}), ("scale_scores", (s, 4), {}), ("apply_mask", (s, mask), {}),
            ("softmax", (s,), {}), ("attention_output", (w, v), {}),
            ("scaled_dot_product_attention", (q, k, v, mask), {}), ("causal_mask", (3, 5), {"device": "cpu"})]


def _expected(fn, args, kwargs):
    """The float64 reference output (the first tensor for attention)."""
    out = getattr(ref, fn)(*args, **kwargs)
    return out[0] if isinstance(out, tuple) else out


def _cpu_evidence(student, fn, args, kwargs, grading, subcases, gate=False):
    """The float64 CPU output, when it is real work (``assertions.expect_real_work``); None when there is
    none because of a mistake that lives in another part (this part grades devices and dtypes, not values)."""
    result = student.call(fn, *args, **kwargs)
    what = _("{function}（先要在 CPU 上得到可评分的结果）").format(function=fn)
    try:
        value, codes = expect_real_work(result, _expected(fn, args, kwargs), function=fn, args=args,
                                        kwargs=kwargs, select=0, what=what)
    except CheckFailed as failure:
        explained = _explained_elsewhere(student, grading, fn, args, result, failure, what)
        if explained is None:
            raise
        subcases.explained.append(explained)
        # Where the composition explains the values, the output still shows how the code treats devices
        # and dtypes: graded on it (only a call with no tensor to show leaves nothing to grade).
        return _returned_tensor(result)
    if gate and codes and grading.get("charge_once", True):
        # A known mistake's output is real work, but it shows no more than the mistake: a check that measures
        # against it (`gate`) keeps its points only if the part where the mistake lives charges it in full
        # (``hidden_checks.settle_charges``).  Checks that grade only devices and dtypes grade it as strict
        # grading does.
        subcases.explained.append(_known_mistake(student, grading, fn, args, kwargs, result, codes, what))
    return value


def _returned_tensor(result):
    """The tensor (attention's output) a call returned with its values, or None."""
    if not result.ok or result.forbidden:
        return None
    value = _tensor_of(result)
    return value if isinstance(value, TensorSpec) and not value.missing_data() else None


def _known_mistake(student, grading, fn, args, kwargs, result, codes, what):
    """What a CPU output that is a known mistake's is charged to: for attention, the helpers' mistakes when
    the student's own helpers composed give it (double scaling is `scale-by-dk`'s output too, but it lives in
    `attention_scores`); otherwise the codes whose mutants reproduce it."""
    named = "".join(f"[{c}]" for c in codes)
    message = _("{function}：在 CPU 上的结果不正确，与已知错误 {codes} 的结果相同。").format(function=fn, codes=named)
    if fn == "scaled_dot_product_attention":
        q, k, v, *rest = args
        explained = composition.explain_result(student, grading, result, q, k, v,
                                               rest[0] if rest else kwargs.get("mask"), weights=False,
                                               what=what, failure=CheckFailed(message, codes))
        if explained is not None:
            return explained
    return composition.ExplainedElsewhere(message, codes, [fn], {"message": message, "codes": codes, "example": {}},
                                          groups=[codes])  # each of these mutants gives this very output


def _explained_elsewhere(student, grading, fn, args, result, failure, what):
    """Why attention has no CPU result to grade, when the reason is charged in another part: the student's own
    helpers composed correctly fail the same way, or the code assumes L == S (it is right on square inputs)."""
    if fn != "scaled_dot_product_attention" or not grading.get("charge_once", True):
        return None
    explained = composition.explain_result(student, grading, result, *args, weights=False, what=what,
                                           failure=failure)
    if explained is not None:
        return explained
    q, k, v, mask = args
    if q.shape[-2] == k.shape[-2]:
        return None
    square = (q, k[..., :q.shape[-2], :], v[..., :q.shape[-2], :], mask[..., :q.shape[-2]])
    pair = attention_pair(student.call(fn, *square).value)
    out, _weights = cases.sdpa(*square)
    if pair is None or not isinstance(pair[0], TensorSpec) or pair[0].missing_data() \
            or pair[0].shape != tuple(out.shape) or not torch.allclose(pair[0].tensor.double(), out, rtol=0, atol=1e-9):
        return None
    return composition.ExplainedElsewhere(_("{what}：L != S 时没有结果，L == S 时正确 [assumes-square]。").format(what=what),
                                          ["assumes-square"], [fn], {"message": failure.message,
                                                                      "codes": failure.codes + ["assumes-square"],
                                                                      "example": failure.example})


def _raised_elsewhere(student, grading, fn, args, result, what):
    """A low-precision call that raised for a reason another part charges: for attention, its own helpers
    composed correctly raise the same way; for a helper, PyTorch's own message for a cause that lives in
    that very helper (a fill value float16 cannot hold, in apply_mask)."""
    if result.status != "raised" or result.forbidden or not grading.get("charge_once", True):
        return None
    if fn == "scaled_dot_product_attention":
        return composition.explain_result(student, grading, result, *args, weights=False, what=what)
    codes = [c for c in text_codes(f"{result.ename} {result.evalue}") if composition.HOME.get(c) == fn]
    if not codes:
        return None
    detail = result.describe()
    return composition.ExplainedElsewhere(_("{what}：{detail}（原因在它所在的部分扣分）").format(what=what, detail=detail),
                                          codes, [], {"message": _("{what}：{detail}").format(what=what, detail=detail),
                                                      "codes": codes, "example": {}})


def _tensor_of(result):
    return attention_output(result.value)


@points(3)
def test_meta_device(student, rng, grading):
    """在输入所在的设备上计算（meta 设备代替 GPU）"""
    subcases = composition.SubCases(grading)
    for fn, args, kwargs in _calls(rng):
        cpu = _cpu_evidence(student, fn, args, kwargs, grading, subcases)
        if cpu is None:
            continue
        if "device" in kwargs:
            kwargs = dict(kwargs, device="meta")  # a function told where to build its output
        result = student.call(fn, *args, on_device="meta", **kwargs)
        if result.forbidden:
            require_ok(result, fn)
        if result.status == "raised":
            text = f"{result.ename}: {result.evalue}"
            if any(marker in text for marker in DEVICE_ERROR):
                raise CheckFailed(_("{function}：输入在另一个设备上时出错：{error}").format(function=fn, error=text),
                                  ["device-mismatch"])
            continue  # data-dependent code (it computed real values on the CPU above)
        require_ok(result, _("{function}（meta 设备）").format(function=fn))
        value = _tensor_of(result)
        if not isinstance(value, TensorSpec):
            raise CheckFailed(_("{function}：输入在 meta 设备上时应返回张量，实际返回 {value!r:.60}。").format(function=fn, value=value))
        if value.device != "meta":
            raise CheckFailed(_("{function}：输入在 meta 设备上，输出却在 {device} 上。").format(function=fn, device=value.device),
                              ["device-mismatch"])
        if (tuple(value.shape), value.dtype) != (tuple(cpu.shape), cpu.dtype):
            raise CheckFailed(_("{function}：meta 设备上的输出 {dtype}{shape} 与 CPU 上的 {cpu_dtype}{cpu_shape} 不一致。").format(
                function=fn, dtype=value.dtype, shape=list(value.shape), cpu_dtype=cpu.dtype, cpu_shape=list(cpu.shape)))
    subcases.settle()


@points(2)
def test_half_precision_keeps_dtype(student, rng, grading):
    """float16 / bfloat16 输入：每个函数的输出保持输入的 dtype"""
    calls = [c for c in _calls(rng) if any(isinstance(a, torch.Tensor) and a.is_floating_point() for a in c[1])]
    shapes = {}  # fn -> shape of its float64 CPU output, once that is real work (None: none to grade)
    subcases = composition.SubCases(grading)
    for dtype in (torch.float16, torch.bfloat16):
        name = str(dtype).replace("torch.", "")
        for fn, args, kwargs in calls:  # causal_mask is left out: its output is bool whatever the precision
            if fn not in shapes:
                cpu = _cpu_evidence(student, fn, args, kwargs, grading, subcases)
                shapes[fn] = None if cpu is None else tuple(cpu.shape)
            if shapes[fn] is None:
                continue
            low = cases.cast(args, dtype)
            result = student.call(fn, *low, **kwargs)
            label = _("{function}（{dtype}）").format(function=fn, dtype=name)
            elsewhere = _raised_elsewhere(student, grading, fn, low, result, label)
            if elsewhere is not None:
                subcases.explained.append(elsewhere)
                continue
            require_ok(result, label)
            value = _tensor_of(result)
            if not isinstance(value, TensorSpec) or value.missing_data():
                reason = value.missing_data(_) if isinstance(value, TensorSpec) else _("返回了 {value!r:.60}").format(value=value)
                raise CheckFailed(_("{function}（{dtype}）：{reason}。").format(function=fn, dtype=name, reason=reason))
            if value.dtype != name:
                raise CheckFailed(_("{function}：输入为 {dtype}，输出却是 {got}。").format(function=fn, dtype=name, got=value.dtype),
                                  ["dtype-changed"])
            if tuple(value.shape) != shapes[fn]:
                raise CheckFailed(_("{function}（{dtype}）：输出形状 {shape} 与 float64 时的 {expected} 不一致。").format(
                    function=fn, dtype=name, shape=list(value.shape), expected=list(shapes[fn])))
    subcases.settle()


def _same(actual, expected):
    """Equal at float64's floor, NaN where the other has NaN."""
    return tolerances.close_nan_alike(actual, expected, tolerances.floor_for(torch.float64))


def _rounding_of_known_mistakes(fn, args64, own, dtype):
    """How far rounding in `dtype` moves the output of each known mistake whose float64 output is the student's
    own.  A student who holds that mistake computes in `dtype` what it computes, so its rounding is theirs too:
    scores multiplied by sqrt(d_k) instead of divided are d_k times larger, and half precision holds them
    coarser; a large constant added to the scores swallows them in bfloat16."""
    found = []
    exact, rounded = mutants.variants(fn, args64, {}), mutants.variants(fn, tuple(cases.cast(args64, dtype)), {})
    for code, makers in exact.items():
        for make, make_low in zip(makers, rounded.get(code, [])):
            try:
                out64, low = make(), make_low()
            except Exception:  # noqa: BLE001 - a mistake that raises in this precision has no rounding to show
                continue
            out64, low = (r[0] if isinstance(r, tuple) else r for r in (out64, low))
            if isinstance(out64, torch.Tensor) and isinstance(low, torch.Tensor) and _same(out64, own):
                found.append(tolerances.derive(out64, low, dtype))
    return found


@points(2)
def test_half_precision_accuracy(student, rng, grading):
    """float16 / bfloat16 注意力与你自己的 float64 结果之差，不超过同精度参考实现的误差（乘以系数）"""
    q, k, v = cases.qkv(rng, batch=(2, 2), L=6, S=9, d_k=16, d_v=8)
    mask = cases.random_bool_mask(rng, (6, 9), full_row=3)
    fn = "scaled_dot_product_attention"
    subcases = composition.SubCases(grading)
    charge_once = grading.get("charge_once", True)
    for dtype in (torch.float16, torch.bfloat16):
        args = cases.cast((q, k, v, mask), dtype)
        args64 = tuple(cases.cast(args, torch.float64))
        name = str(dtype).replace("torch.", "")
        target, _weights = cases.sdpa(*args64)
        truth = target
        if charge_once:
            # Precision is what this check grades: a value mistake (a known misconception,
            # charged in its own part) moves the float64 target too.
            own = _cpu_evidence(student, fn, args64, {}, grading, subcases, gate=True)
            if own is None:
                continue
            target = own.tensor
        tol = cases.tolerance(cases.sdpa, args64, dtype)
        if charge_once and not _same(target, truth):
            tol = tolerances.widest([tol, *_rounding_of_known_mistakes(fn, args64, target, dtype)])
        result = student.call(fn, *args)
        label = _("{dtype} 注意力").format(dtype=name)
        elsewhere = _raised_elsewhere(student, grading, fn, args, result, label)
        if elsewhere is not None:
            subcases.explained.append(elsewhere)
            continue
        low = _tensor_of(result)
        if charge_once and isinstance(low, TensorSpec) and low.tensor is not None and low.dtype == name \
                and low.device == "cpu" and tolerances.close(low.tensor, truth, tol):
            continue  # right by PyTorch's own result, whatever the student's float64 one (charged in its part)
        if isinstance(low, TensorSpec) and low.tensor is not None and low.tensor.shape == target.shape:
            # Where the student's own float64 result is NaN (a known misconception, charged in
            # its part), there is no precision to measure: both sides are left out there.
            unmeasured = torch.isnan(target)
            target = target.masked_fill(unmeasured, 0.0)
            low.tensor = low.tensor.masked_fill(unmeasured, 0.0)
        subcases.run(expect_tensor, result, target, function=fn, args=args64, select=0, tol=tol, dtype=dtype,
                     what=label, diagnose_values=False)
    subcases.settle()


@points(0)
def test_cuda_when_present(student, rng, grading):
    """真实 GPU 上的检查（仅在评分机有 CUDA 时运行，不计分）"""
    if not grading.get("cuda"):
        skip(_("评分机没有 CUDA"))
    q, k, v = cases.qkv(rng, batch=(2, 2), L=6, S=9, d_k=16, d_v=8)
    mask = cases.random_bool_mask(rng, (6, 9), full_row=3)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        args = cases.cast((q, k, v, mask), dtype)
        out64, _weights = cases.sdpa(*cases.cast(args, torch.float64))
        tol = cases.tolerance(cases.sdpa, cases.cast(args, torch.float64), dtype)
        expect_tensor(student.call("scaled_dot_product_attention", *args, on_device="cuda"), out64,
                      function="scaled_dot_product_attention", args=tuple(cases.cast(args, torch.float64)), select=0,
                      tol=tol, dtype=dtype, device="cuda", what=f"CUDA {dtype}", diagnose_values=False)
