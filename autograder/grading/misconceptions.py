"""The registry of known mistakes: each misconception declared once.

Codes are part of the product's interface (reports count them, tests key on
them): never rename one.  An entry says what the code means to a student
(`explanation`, `hint`), the graded part where the mistake lives (`home`:
the part that charges it), whether other parts that fail only because of it
keep their points when each mistake is charged once (`composite_credit`;
``composition.HOME``), which graded functions have an executable model of it
in ``mutants.py`` (`modelled_by`; empty when a check observes it directly),
and the one-bug sample of the demo class that shows it (`sample`).
``tests/grading/test_misconception_registry.py`` holds every other use of a
code (mutants, checks, samples, docs) to this list.
"""
from dataclasses import dataclass

from ..i18n import N_


@dataclass(frozen=True)
class Misconception:
    code: str
    explanation: str
    hint: str
    home: str  # the graded part (a test cell's part) where the mistake lives
    composite_credit: bool = False
    modelled_by: tuple = ()  # graded functions whose mutants reproduce it
    sample: str = ""  # the demo class's one-bug sample; "" means "bug-<code>"

    @property
    def sample_name(self) -> str:
        return self.sample or f"bug-{self.code}"


_CATALOGUE = [
    Misconception("scores-transposed", N_("分数矩阵的两个位置维反了：算成了 K·Qᵀ（形状 [..., S, L]），而不是 Q·Kᵀ（[..., L, S]）。"),
                  N_("用 q @ k.transpose(-2, -1)：行对应查询，列对应 Key。"),
                  home="attention_scores", composite_credit=True,
                  modelled_by=("attention_scores", "fixed_attention", "scaled_dot_product_attention",)),
    Misconception("scale-missing", N_("没有把分数除以 sqrt(d_k)。"), N_("缩放一步是 scores / math.sqrt(d_k)。"),
                  home="scale_scores", composite_credit=True,
                  modelled_by=("fixed_attention", "scale_scores", "scaled_dot_product_attention",)),
    Misconception("scale-by-dk", N_("分数除以了 d_k，而不是 sqrt(d_k)。"), N_("用 math.sqrt(d_k)（或 d_k ** 0.5）。"),
                  home="scale_scores", composite_credit=True,
                  modelled_by=("fixed_attention", "scale_scores", "scaled_dot_product_attention",)),
    Misconception("scale-multiplied", N_("分数乘以了 sqrt(d_k)，方向反了。"), N_("缩放是除法：scores / math.sqrt(d_k)。"),
                  home="scale_scores", composite_credit=True,
                  modelled_by=("fixed_attention", "scale_scores", "scaled_dot_product_attention",)),
    Misconception("scale-wrong-dim", N_("缩放用的维度不是 d_k（用成了 d_v、L 或 S）。"),
                  N_("d_k 是 q 和 k 的最后一维：q.shape[-1]。"),
                  home="scaled_dot_product_attention",
                  modelled_by=("fixed_attention", "scaled_dot_product_attention",)),
    Misconception("scores-scaled-early", N_("attention_scores 里已经做了缩放；这个函数只应返回原始点积。"),
                  N_("把除以 sqrt(d_k) 留给 scale_scores。"),
                  home="attention_scores", composite_credit=True,
                  modelled_by=("attention_scores",)),
    Misconception("mask-inverted", N_("布尔掩码的含义用反了：把 True 当成了“屏蔽”。"),
                  N_("在 F.scaled_dot_product_attention 的约定里 True 表示“允许关注”，被屏蔽的是 False 的位置。"),
                  home="apply_mask", composite_credit=True,
                  modelled_by=("apply_mask", "causal_mask", "fixed_attention", "scaled_dot_product_attention",)),
    Misconception("mask-zero-fill", N_("被屏蔽的位置填了 0，而不是 -inf；0 是完全合法的分数，softmax 后仍有权重。"),
                  N_("用 float('-inf') 填充被屏蔽的位置。"),
                  home="apply_mask", composite_credit=True,
                  modelled_by=("apply_mask", "fixed_attention", "scaled_dot_product_attention",)),
    Misconception("mask-after-softmax", N_("掩码在 softmax 之后才施加，剩下的权重不再和为 1。"),
                  N_("先把被屏蔽的分数设为 -inf，再做 softmax。"),
                  home="scaled_dot_product_attention",
                  modelled_by=("fixed_attention", "scaled_dot_product_attention",)),
    Misconception("mask-ignored", N_("掩码没有起作用：结果与不加掩码时相同。"), N_("检查 mask 是否真的被用到了分数上。"),
                  home="apply_mask", composite_credit=True,
                  modelled_by=("apply_mask", "fixed_attention", "scaled_dot_product_attention",)),
    Misconception("fully-masked-nan", N_("某一行的所有位置都被屏蔽时，输出了 NaN，而应输出全 0。"),
                  N_("-inf - (-inf) 得 NaN：行最大值为 -inf 时改用 0，并在总和为 0 时避免 0/0。"),
                  home="softmax", composite_credit=True,
                  modelled_by=("fixed_attention", "scaled_dot_product_attention", "softmax",)),
    Misconception("softmax-wrong-dim", N_("softmax 沿错误的维度归一化（例如沿查询维），形状没错但含义变了。"),
                  N_("沿 Key 位置维（dim=-1）归一化，并尊重参数 dim。"),
                  home="scaled_dot_product_attention",
                  modelled_by=("fixed_attention", "scaled_dot_product_attention",)),
    Misconception("softmax-dim-ignored", N_("softmax 没有沿参数 dim 指定的那一维归一化：dim 被忽略、写死成了某一维，或者默认值不是 -1。"),
                  N_("max 和 sum 都用参数 dim（keepdim=True），默认值与 F.softmax 的用法一致：dim=-1。"),
                  home="softmax", composite_credit=True,
                  modelled_by=("softmax",)),
    Misconception("scale-low-precision", N_("缩放用的 sqrt(d_k) 是低精度（float32 或 float16）张量：float64 的分数只得到了 float32 精度的结果。"),
                  N_("用 Python 的 math.sqrt(d_k)，或按分数的 dtype 建张量（见“GPU 与低精度”一节）。"),
                  home="scale_scores", composite_credit=True,
                  modelled_by=("scale_scores",)),
    Misconception("softmax-unstable", N_("softmax 没有先减去最大值，大分数时 exp 溢出成 inf/NaN。"),
                  N_("先减去沿 dim 的最大值（keepdim=True），再取 exp。"),
                  home="softmax", composite_credit=True,
                  modelled_by=("fixed_attention", "scaled_dot_product_attention", "softmax",)),
    Misconception("softmax-global-max", N_("减去的是整个张量的最大值，而不是每个切片自己的最大值；尺度不同的行会下溢成 0/0。"),
                  N_("用 x.amax(dim=dim, keepdim=True)。"),
                  home="softmax", composite_credit=True,
                  modelled_by=("fixed_attention", "scaled_dot_product_attention", "softmax",)),
    Misconception("softmax-builtin", N_("使用了内置的 softmax（torch.softmax / F.softmax / Tensor.softmax 等），本题要求手写。"),
                  N_("用 exp、减最大值和求和自己实现。"),
                  home="softmax"),
    Misconception("sdpa-builtin", N_("使用了内置的注意力（F.scaled_dot_product_attention / nn.MultiheadAttention），本题要求自己组合各步。"),
                  N_("用你自己写的五个函数组合出注意力。"),
                  home="scaled_dot_product_attention"),
    Misconception("output-used-k", N_("加权求和用了 K 而不是 V。"), N_("输出是 weights @ v。"),
                  home="scaled_dot_product_attention",
                  modelled_by=("fixed_attention", "scaled_dot_product_attention",)),
    Misconception("causal-off-by-one", N_("因果掩码错位了一格：对角线被屏蔽，或者多看了一个未来位置。"),
                  N_("查询 i 可以看到 j <= i 的 Key：torch.ones(L, S).tril()。"),
                  home="causal_mask",
                  modelled_by=("causal_mask",)),
    Misconception("causal-bottom-right", N_("因果掩码按右下角对齐了；本题与 is_causal=True 一样按左上角对齐。"),
                  N_("用 tril() 且 diagonal=0，不要用 S - L 的偏移。"),
                  home="causal_mask",
                  modelled_by=("causal_mask",)),
    Misconception("padding-polarity", N_("padding 掩码的极性没有转换：MultiheadAttention 里 True 表示屏蔽，SDPA 里 True 表示允许。"),
                  N_("取反（~key_padding_mask），再变形为 [B, 1, 1, S]。"),
                  home="key_padding_to_attn_mask",
                  modelled_by=("key_padding_to_attn_mask",)),
    Misconception("padding-shape", N_("padding 掩码的形状不对，无法正确广播到 [B, H, L, S]。"),
                  N_("用 [:, None, None, :] 变成 [B, 1, 1, S]。"),
                  home="key_padding_to_attn_mask"),
    Misconception("assumes-square", N_("代码默认 L == S（查询数等于 Key 数）；交叉注意力里两者可以不同。"),
                  N_("分清 q.shape[-2]（L）与 k.shape[-2]（S）。"),
                  home="scaled_dot_product_attention", composite_credit=True),
    Misconception("inplace-mutation", N_("函数原地修改了输入张量。"), N_("返回新张量：用 masked_fill 而不是 masked_fill_，不要对输入赋值。"),
                  home="apply_mask"),
    Misconception("dtype-changed", N_("输出的 dtype 与输入不同（例如写死了 float32，或把 float16 变成了 float32）。"),
                  N_("新建张量时用 dtype=x.dtype，或用 *_like 函数。"),
                  home="device_dtype", composite_credit=True),
    Misconception("device-mismatch", N_("在函数内部新建的张量没有放到输入所在的设备上（GPU 上会报错）。"),
                  N_("新建张量时传 device=x.device，或用 *_like 函数。"),
                  home="device_dtype"),  # the device part is where it shows (no GPU needed: the meta device)
    Misconception("half-overflow", N_("用了 -1e9 之类的大常数：float16 放不下，会报错或溢出。"), N_("用 float('-inf')。"),
                  home="apply_mask", composite_credit=True,
                  modelled_by=("apply_mask", "fixed_attention", "scaled_dot_product_attention",)),
    Misconception("shape-error-missing", N_("形状不匹配时没有抛出 ValueError。"), N_("先检查维度，再用清楚的信息 raise ValueError(...)。"),
                  home="attention_scores"),
    Misconception("returns-not-tuple", N_("scaled_dot_product_attention 应返回 (output, weights) 两个张量。"),
                  N_("return output, weights"),
                  home="scaled_dot_product_attention", composite_credit=True),
]

CATALOGUE = {m.code: m for m in _CATALOGUE}
# Where each misconception that a composite may pass on lives: the helper whose own part charges it.
COMPOSITE_HOME = {m.code: m.home for m in _CATALOGUE if m.composite_credit}
# Every code's home: where a device or dtype check that graded a known mistake's output has it charged.
HOMES = {m.code: m.home for m in _CATALOGUE}
