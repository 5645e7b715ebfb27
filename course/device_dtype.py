"""The part ``device_dtype``: every function keeps its inputs' device and dtype (meta device, float16)."""
from autograder.i18n import N_

from .spec import Honest, Mistake

PART = "device_dtype"
# It grades the other parts' functions on other devices and dtypes; it has none of its own.
FUNCTIONS = ()
ALSO_CALLS = ("attention_scores", "scale_scores", "apply_mask", "softmax", "attention_output",
              "scaled_dot_product_attention", "causal_mask")

MISTAKES = (
    Mistake("dtype-changed", N_("输出的 dtype 与输入不同（例如写死了 float32，或把 float16 变成了 float32）。"),
            N_("新建张量时用 dtype=x.dtype，或用 *_like 函数。"),
            composite_credit=True, honest=Honest("softmax", """
def softmax(x, dim=-1):
    x = x.float()
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    exps = torch.exp(x - m)
    total = exps.sum(dim=dim, keepdim=True)
    return exps / torch.where(total > 0, total, torch.ones_like(total))
""")),
    # The device part is where it shows (no GPU needed: the meta device); its sample is written by hand.
    Mistake("device-mismatch", N_("在函数内部新建的张量没有放到输入所在的设备上（GPU 上会报错）。"),
            N_("新建张量时传 device=x.device，或用 *_like 函数。")),
)
