"""Calls every softmax/attention alias we know of under the runner's tripwires; prints what was caught.

Run in its own process by ``test_tripwires.py``: the tripwires change torch for good.
"""
import importlib
import io
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "autograder" / "sandbox" / "guest"))

import runner as sandbox_runner  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

x = torch.randn(2, 3, 4, dtype=torch.float64)
keep = torch.rand(2, 3, 4) < 0.5
q = k = v = torch.randn(1, 2, 3, 4)
f32 = x.float()
_archive = io.BytesIO()
torch.jit.save(torch.jit.script(torch.nn.Identity()), _archive)  # before the tripwires: a real TorchScript archive
ARCHIVE = _archive.getvalue()
ALIASES = {
    "torch.softmax": lambda: torch.softmax(x, -1),
    "torch.log_softmax": lambda: torch.log_softmax(x, -1),
    "Tensor.softmax": lambda: x.softmax(-1),
    "Tensor.log_softmax": lambda: x.log_softmax(-1),
    "F.softmax": lambda: F.softmax(x, -1),
    "F.log_softmax": lambda: F.log_softmax(x, -1),
    "F.softmin": lambda: F.softmin(x, -1),
    "F.gumbel_softmax": lambda: F.gumbel_softmax(x, tau=1.0),
    "nn.Softmax": lambda: torch.nn.Softmax(-1)(x),
    "nn.LogSoftmax": lambda: torch.nn.LogSoftmax(-1)(x),
    "nn.Softmin": lambda: torch.nn.Softmin(-1)(x),
    "torch.special.softmax": lambda: torch.special.softmax(x, -1),
    "torch.special.log_softmax": lambda: torch.special.log_softmax(x, -1),
    "torch.sparse.softmax": lambda: torch.sparse.softmax(x.to_sparse(), -1),
    "torch.masked.softmax": lambda: torch.masked.softmax(x, -1),
    "torch._softmax": lambda: torch._softmax(x, -1, False),
    "torch._masked_softmax": lambda: torch._masked_softmax(x, ~keep, -1),
    "torch._safe_softmax": lambda: torch._safe_softmax(x, -1),
    "aten._softmax": lambda: torch.ops.aten._softmax(x, -1, False),
    "aten.softmax.int": lambda: torch.ops.aten.softmax.int(x, -1),
    "aten._masked_softmax": lambda: torch.ops.aten._masked_softmax(x, ~keep, -1),
    "aten._safe_softmax": lambda: torch.ops.aten._safe_softmax(x, -1),
    "aten.special_softmax": lambda: torch.ops.aten.special_softmax(x, -1),
    "aten._log_softmax": lambda: torch.ops.aten._log_softmax(x, -1, False),
    "torch._refs.softmax": lambda: torch._refs.softmax(x, -1),
    "torch._decomp _softmax": lambda: torch._decomp.decompositions._softmax(x, -1, False),
    "mkldnn _softmax": lambda: torch.ops.aten._softmax(f32.to_mkldnn(), -1, False),
    "redispatch to the mkldnn kernel": lambda: torch.ops.aten._softmax.default.redispatch(
        torch._C._dispatch_keys(f32.to_mkldnn()) & torch._C._after_ADInplaceOrView_keyset, f32.to_mkldnn(), -1, False),
    "F.scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(q, k, v),
    "aten.scaled_dot_product_attention": lambda: torch.ops.aten.scaled_dot_product_attention(q, k, v),
    "aten._scaled_dot_product_attention_math": lambda: torch.ops.aten._scaled_dot_product_attention_math(q, k, v),
    "aten._scaled_dot_product_flash_attention_for_cpu":
        lambda: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v),
    "torch._fused_sdp_choice": lambda: torch._fused_sdp_choice(q, k, v),
    "nn.MultiheadAttention": lambda: torch.nn.MultiheadAttention(4, 1, batch_first=True)(f32, f32, f32),
    "F.multi_head_attention_forward": lambda: F.multi_head_attention_forward(
        f32.transpose(0, 1), f32.transpose(0, 1), f32.transpose(0, 1), 4, 1, torch.randn(12, 4), torch.randn(12),
        None, None, False, 0.0, torch.randn(4, 4), torch.randn(4)),
    "torch._native_multi_head_attention": lambda: torch._native_multi_head_attention(
        f32, f32, f32, 4, 1, torch.randn(12, 4), torch.randn(12), torch.randn(4, 4), torch.randn(4)),
    "nn.TransformerEncoderLayer": lambda: torch.nn.TransformerEncoderLayer(4, 1, batch_first=True).eval()(f32),
    "flex_attention": lambda: torch.nn.attention.flex_attention.flex_attention(q, k, v),
    "distributions.Categorical.probs": lambda: torch.distributions.Categorical(logits=x).probs,
    # a softmax by logsumexp, reached by a name built at run time (red team: a resolver's string), and a
    # TorchScript archive, whose fused softmax ran past the kernel tripwires
    "distributions.Categorical.logits by a computed name": lambda: importlib.import_module(
        "torch." + "snoitubirtsid"[::-1]).Categorical(logits=x).logits.exp(),
    "torch.jit.load": lambda: torch.jit.load(io.BytesIO(ARCHIVE)),
    "torch.load of an archive": lambda: torch.load(io.BytesIO(ARCHIVE), weights_only=False),
    "torch._C.import_ir_module": lambda: torch._C.import_ir_module(None, "x.pt", None, {}, False),
}


def main():
    runner = sandbox_runner.Runner(None, None)
    runner.install_tripwires()
    caught = {}
    for name, call in ALIASES.items():
        before = len(runner.forbidden_used)
        try:
            call()
        except Exception:  # noqa: BLE001 - the tripwire raises; other errors leave `caught` False
            pass
        caught[name] = len(runner.forbidden_used) > before
    plain = float((torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)).sum())  # by hand still works
    print(json.dumps({"caught": caught, "ops": sandbox_runner.forbidden_ops(), "by_hand": plain}))


if __name__ == "__main__":
    main()
