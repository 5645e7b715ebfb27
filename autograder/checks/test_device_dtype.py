"""Device and dtype behaviour: same verdict with or without a GPU.

Scored checks use proxies that every grader has: the `meta` device (a tensor
made on the CPU inside a student function then meets a meta tensor and
fails, as it would meet a CUDA tensor) and float16/bfloat16 on the CPU.  A
failure on meta counts only with positive evidence (a device error or an
output off the device); data-dependent code that meta cannot run is not a
bug and is not penalised.  Real CUDA runs are reported but worth 0 points,
so a submission's score never depends on the grader's hardware.
"""
import pytest
import torch

from autograder import cases
from autograder.checking import CheckFailed, expect_tensor, require_ok
from autograder.wire import TensorSpec

PART = "device_dtype"

# Errors that mean a tensor made on the CPU met the input's device.  Not
# masked_fill's "Expected `value` to be on same device": CUDA accepts a 0-dim
# CPU value there, so on meta it would punish correct code.
DEVICE_ERROR = ("is not on the expected device", "Expected all tensors to be on the same device",
                "found at least two devices")


def _calls(rng, dtype=torch.float64):
    q, k, v = cases.qkv(rng, batch=(2,), L=3, S=5, d_k=4, d_v=2)
    s = cases.randn(rng, 2, 3, 5)
    mask = cases.random_bool_mask(rng, (3, 5))
    w = cases.softmax(s)
    return [("attention_scores", (q, k), {}), ("scale_scores", (s, 4), {}), ("apply_mask", (s, mask), {}),
            ("softmax", (s,), {}), ("attention_output", (w, v), {}),
            ("scaled_dot_product_attention", (q, k, v, mask), {}), ("causal_mask", (3, 5), {"device": "cpu"})]


def _first_tensor(value):
    if isinstance(value, tuple) and value:
        return value[0]
    return value


@pytest.mark.points(3)
def test_meta_device(student, rng):
    """在输入所在的设备上计算（meta 设备代替 GPU）"""
    for fn, args, kwargs in _calls(rng):
        require_ok(student.call(fn, *args, **kwargs), f"{fn}（先要在 CPU 上能运行）")
        if "device" in kwargs:
            kwargs = dict(kwargs, device="meta")  # a function told where to build its output
        result = student.call(fn, *args, on_device="meta", **kwargs)
        if result.forbidden:
            require_ok(result, fn)
        if result.status == "raised":
            text = f"{result.ename}: {result.evalue}"
            if any(marker in text for marker in DEVICE_ERROR):
                raise CheckFailed(f"{fn}：输入在另一个设备上时出错：{text}", ["device-mismatch"])
            continue  # data-dependent code, or a bug the value checks already grade
        value = _first_tensor(result.value) if result.ok else None
        if isinstance(value, TensorSpec) and value.device != "meta":
            raise CheckFailed(f"{fn}：输入在 meta 设备上，输出却在 {value.device} 上。", ["device-mismatch"])


@pytest.mark.points(2)
def test_half_precision_keeps_dtype(student, rng):
    """float16 / bfloat16 输入：每个函数的输出保持输入的 dtype"""
    for dtype in (torch.float16, torch.bfloat16):
        for fn, args, kwargs in _calls(rng):
            if not any(isinstance(a, torch.Tensor) and a.is_floating_point() for a in args):
                continue  # e.g. causal_mask: its output is bool whatever the precision
            low = cases.cast(args, dtype)
            value = _first_tensor(require_ok(student.call(fn, *low, **kwargs), f"{fn}（{dtype}）"))
            name = str(dtype).replace("torch.", "")
            if isinstance(value, TensorSpec) and value.dtype != name:
                raise CheckFailed(f"{fn}：输入为 {name}，输出却是 {value.dtype}。", ["dtype-changed"])


@pytest.mark.points(2)
def test_half_precision_accuracy(student, rng):
    """float16 / bfloat16 注意力的误差不超过同精度参考实现的误差（乘以系数）"""
    q, k, v = cases.qkv(rng, batch=(2, 2), L=6, S=9, d_k=16, d_v=8)
    mask = cases.random_bool_mask(rng, (6, 9), full_row=3)
    for dtype in (torch.float16, torch.bfloat16):
        args = cases.cast((q, k, v, mask), dtype)
        out64, _ = cases.sdpa(*cases.cast(args, torch.float64))
        tol = cases.tolerance(cases.sdpa, cases.cast(args, torch.float64), dtype)
        expect_tensor(student.call("scaled_dot_product_attention", *args), out64, function="scaled_dot_product_attention",
                      args=tuple(cases.cast(args, torch.float64)), select=0, tol=tol, dtype=dtype,
                      what=f"{str(dtype).replace('torch.', '')} 注意力", diagnose_values=False)


@pytest.mark.points(0)
def test_cuda_when_present(student, rng, grading):
    """真实 GPU 上的检查（仅在评分机有 CUDA 时运行，不计分）"""
    if not grading.get("cuda"):
        pytest.skip("评分机没有 CUDA")
    q, k, v = cases.qkv(rng, batch=(2, 2), L=6, S=9, d_k=16, d_v=8)
    mask = cases.random_bool_mask(rng, (6, 9), full_row=3)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        args = cases.cast((q, k, v, mask), dtype)
        out64, _ = cases.sdpa(*cases.cast(args, torch.float64))
        tol = cases.tolerance(cases.sdpa, cases.cast(args, torch.float64), dtype)
        expect_tensor(student.call("scaled_dot_product_attention", *args, on_device="cuda"), out64,
                      function="scaled_dot_product_attention", args=tuple(cases.cast(args, torch.float64)), select=0,
                      tol=tol, dtype=dtype, device="cuda", what=f"CUDA {dtype}", diagnose_values=False)
