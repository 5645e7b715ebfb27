"""The built-in softmax and attention that graded functions may not use: the one definition.

The runner (in the student's process) blocks them at call time; the trusted
grader imports this module to read the same families in the student's source
(``grading/static_scan.py``) and to name the misconception of a blocked call
(``grading/assertions.py``).  Standard library only, so both sides can load it.

Each family is a name pattern, not a hand list: aliases, private kernels,
overloads and Python references of a torch release are found by name.
Attention is tried first, so ``_masked_softmax`` is softmax but
``_native_multi_head_attention`` is attention.
"""
import re
from typing import Optional

SOFTMAX = r"soft(max|min)"
ATTENTION = (r"scaled_dot_product|scaled_dot_attention|_fused_sdp|flash_attention|efficient_attention|"
             r"cudnn_attention|multi_?head_?attention|flex_attention|transformer_encoder_layer|_transformer")
# Torch's own sdpa helpers (`sdpa_kernel`, ...) are blocked where torch defines them; in the student's
# source a name containing "sdpa" is usually the student's own function, so the static read leaves it.
RUNTIME_ONLY = r"sdpa"
# `nn.Transformer*` classes, which the static read flags by name; at run time they reach the blocked
# multi-head attention anyway.
SOURCE_ONLY = r"^transformer"

FAMILIES = {  # code -> (pattern at run time, pattern in the source); the order is the order of precedence
    "sdpa-builtin": (re.compile(rf"(?i)({ATTENTION}|{RUNTIME_ONLY})"), re.compile(rf"(?i)({ATTENTION}|{SOURCE_ONLY})")),
    "softmax-builtin": (re.compile(rf"(?i){SOFTMAX}"), re.compile(rf"(?i){SOFTMAX}")),
}
RUNTIME = re.compile("|".join(f"({runtime.pattern.removeprefix('(?i)')})" for runtime, _ in FAMILIES.values()), re.I)

# Python namespaces whose matching functions and nn.Module classes the runner wraps.
PY_NAMESPACES = ("torch", "torch.Tensor", "torch.nn.functional", "torch.special", "torch.sparse", "torch.masked",
                 "torch.nested", "torch._refs", "torch._refs.nn.functional", "torch._refs.special",
                 "torch._decomp.decompositions", "torch.nn", "torch.nn.attention",
                 "torch.nn.attention.flex_attention")
# Dispatch keys under which the runner registers its aten tripwire kernels.
KERNEL_KEYS = ("CPU", "CUDA", "Meta", "MkldnnCPU", "QuantizedCPU", "SparseCPU", "SparseCUDA", "SparseCsrCPU",
               "NestedTensorCPU", "NestedTensorCUDA", "CompositeImplicitAutograd", "CompositeExplicitAutograd")
# What `from torch... import *` may bind from the families (the static read follows star imports).
STAR_NAMES = ("softmax", "log_softmax", "softmin", "scaled_dot_product_attention", "multi_head_attention_forward")


def blocked(name: str) -> bool:
    """Whether the runner blocks a function, class or op of this name."""
    return bool(RUNTIME.search(name))


def code_of_blocked(name: str) -> Optional[str]:
    """The misconception code of a blocked call ("aten::_softmax", "torch.nn.functional.softmax", ...)."""
    return next((code for code, (runtime, _) in FAMILIES.items() if runtime.search(name)), None)


def code_in_source(identifier: str) -> Optional[str]:
    """The misconception code an identifier of the student's source belongs to, or None."""
    return next((code for code, (_, source) in FAMILIES.items() if source.search(identifier)), None)


def forbidden_ops() -> list:
    """Qualified names ("aten::_softmax", "aten::softmax.int", ...) of every registered op in the families."""
    import torch

    return sorted(name for name in torch._C._dispatch_get_all_op_names() if blocked(name.split("::")[-1]))
