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


# Blocked whatever their names, by the module that defines them: `torch.distributions` replays a softmax
# without reaching a family's kernel (`Categorical(logits=x).logits` is one by logsumexp), and a TorchScript
# archive runs code no text showed, whose softmax a fuser may run past the kernel tripwires.  A red-team pass
# reached both by names built at run time, which no static read can follow.
BLOCKED_MODULES = ("torch.distributions",)
BLOCKED_ENTRY_POINTS = {"torch.jit._serialization": ("load",),  # `torch.jit.load`, and `torch.load` of an archive
                        "torch._C": ("import_ir_module", "import_ir_module_from_buffer", "_load_for_lite_interpreter",
                                     "_load_for_lite_interpreter_from_buffer", "_import_ir_module_from_package")}
_BLOCKED_ENTRY_NAMES = frozenset(f"{module}.{attr}" for module, attrs in BLOCKED_ENTRY_POINTS.items() for attr in attrs)


def blocked(name: str) -> bool:
    """Whether the runner blocks a function, class or op of this name."""
    return bool(RUNTIME.search(name))


def blocked_module(module: object) -> bool:
    """Whether every function defined in `module` (a `__module__` value) is blocked."""
    return isinstance(module, str) and any(module == m or module.startswith(m + ".") for m in BLOCKED_MODULES)


def code_of_blocked(name: str) -> Optional[str]:
    """The misconception code of a blocked call ("aten::_softmax", "torch.nn.functional.softmax", ...)."""
    if blocked_module(name.rsplit(".", 1)[0]) or name in _BLOCKED_ENTRY_NAMES:
        return "softmax-builtin"
    return next((code for code, (runtime, _) in FAMILIES.items() if runtime.search(name)), None)


def code_in_source(identifier: str) -> Optional[str]:
    """The misconception code an identifier of the student's source belongs to, or None."""
    return next((code for code, (_, source) in FAMILIES.items() if source.search(identifier)), None)


def forbidden_ops() -> list:
    """Qualified names ("aten::_softmax", "aten::softmax.int", ...) of every registered op in the families."""
    import torch

    return sorted(name for name in torch._C._dispatch_get_all_op_names() if blocked(name.split("::")[-1]))
