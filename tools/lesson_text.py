"""Chinese lesson text (markdown cell bodies) for the scaled dot-product attention notebook.

Each module-level UPPER_CASE constant is the body of one Jupyter markdown cell.
Prose is Simplified Chinese; identifiers and code are English.
"""

TITLE_AND_GOALS = r"""# 缩放点积注意力（Scaled Dot-Product Attention）

一句话概括：每个 Query 按照与各个 Key 的匹配程度，把所有允许访问的 Value 加权组合成自己的输出。

## 学习目标

- 说清楚注意力的计算机制：分数、缩放、掩码、softmax、加权求和各自起什么作用。
- 手算一个小例子，并写出每一步张量的形状。
- 用 PyTorch 从零实现缩放点积注意力（含因果掩码与 padding 掩码），并能定位常见 bug。

## 如何使用本 notebook

- 从上到下依次运行所有单元格。
- 把每一处 `# YOUR CODE HERE` / `raise NotImplementedError()` 替换成你自己的代码。
- 每个实现单元格后面紧跟一个锁定的检查单元格，里面是可见的检查；评分时还会运行隐藏检查（更多情形、随机张量、针对典型误解的诊断）。
- 不要删除或复制锁定的单元格。打印输出和警告都不影响评分。
- 只需要 `torch`、`numpy`、`matplotlib`。
- 在你的实现中**不要**调用 `torch.softmax`、`F.softmax`、`Tensor.softmax`、`F.log_softmax`、`F.scaled_dot_product_attention` 或 `nn.MultiheadAttention`：评分时它们会被禁用，用到它们的那一项检查将拿不到分。"""

WHY_ATTENTION = r"""## 为什么需要注意力

处理序列时，一个位置常常要借用其他位置的信息，而该借用哪些位置取决于当前内容。固定窗口（如卷积）或固定平均对所有输入一视同仁，表达不了“这一次该看哪里”。

注意力的思路是：让当前位置拿自己的“需求”去和每个候选位置比较，得到匹配分数，归一化成权重后再组合候选的内容。权重随输入而变，所以这是一种**内容相关**的选择。

弄懂这一个模块（分数、归一化、加权求和），后面的多头注意力、因果/padding 掩码乃至整个 Transformer 都是在它之上搭建的。"""

QKV_ROLES = r"""## Q、K、V 各自扮演什么角色

| 名称 | 直观含义 |
|---|---|
| Query（Q） | “我现在需要什么信息”：发起查询的位置 |
| Key（K） | 每个候选位置的“索引特征”，只用来和 Query 比较匹配度 |
| Value（V） | 每个候选位置真正被取出、被组合的内容 |

K 决定“读多少”，V 决定“读到什么”。两者的数值甚至维度都可以不同，不要混为一谈；但第 $j$ 个 Key 和第 $j$ 个 Value 必须属于同一个候选位置。

在真实模型里，Q、K、V 通常由输入经过可学习的线性投影得到；本 notebook 直接给出小张量，让你先专注于注意力本身。

还要注意：候选集合不变，只换一个 Query，得到的权重就可能完全不同，这正是“内容相关选择”的含义。"""

FORMULA = r"""## 公式与形状

$$\mathrm{Attention}(Q,K,V)=\mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}+M\right)V$$

| 变量 | 形状 | 含义 |
|---|---|---|
| $Q$ | `[..., L, d_k]` | 查询，每行对应一个查询位置 |
| $K$ | `[..., S, d_k]` | Key，每行是一个候选位置的索引特征 |
| $V$ | `[..., S, d_v]` | Value，每行是一个候选位置的内容 |
| $d_k$ | 标量 | Query 与 Key 的特征维度（点积的长度） |
| $M$ | 可广播到 `[..., L, S]` | 加性掩码：允许的位置为 $0$，禁止的位置为 $-\infty$；没有掩码时视为 $0$ |
| $L$ | 标量 | 查询位置数 |
| $S$ | 标量 | Key/Value 位置数（可以不等于 $L$） |
| $d_v$ | 标量 | Value 的特征维度（可以不等于 $d_k$） |
| 输出 | `[..., L, d_v]` | 每个查询得到一个 $d_v$ 维向量 |

其中 `...` 表示任意多个前导维（batch、head 等）。

计算流程：

1. **分数**：$QK^\top$，形状 `[..., L, S]`，第 $(i, j)$ 项是第 $i$ 个查询与第 $j$ 个 Key 的点积。
2. **缩放**：除以 $\sqrt{d_k}$。
3. **掩码**：在 softmax **之前**加上 $M$，禁止的位置变为 $-\infty$。
4. **softmax**：沿 Key 轴（最后一维，`dim=-1`）归一化，每个查询各自得到一组和为 1 的权重。
5. **加权求和**：权重 `@` $V$，得到 `[..., L, d_v]`。

softmax 沿错了轴，形状照样合法，代码也不报错，但含义已经变了，所以只能靠数值检查、不能靠形状检查发现。

为什么要缩放？若 q、k 的各分量方差约为 1，点积的方差约为 $d_k$，分数量级会随维度增长；分数过大时 softmax 几乎变成 one-hot（饱和），梯度也随之变得很小。除以 $\sqrt{d_k}$ 只是把分数尺度拉回稳定范围，并不是把分数“校准”成某种可信度。"""

WORKED_EXAMPLE = r"""## 手算示例：一个查询、两个候选

已知：$d_k = 1$，因此 $\sqrt{d_k} = 1$；查询 $q = 1$；两个 Key 为 $k_1 = 0$、$k_2 = \ln 3$；两个 Value 为 $v_1 = 10$、$v_2 = 20$。

| 步骤 | 结果 |
|---|---|
| 分数 $q \cdot k_j$ | $[0,\ \ln 3]$ |
| 缩放（除以 1） | $[0,\ \ln 3]$ |
| 取指数 | $[e^{0},\ e^{\ln 3}] = [1,\ 3]$ |
| 除以总和 4 | 权重 $[0.25,\ 0.75]$ |
| 加权求和 | $0.25 \times 10 + 0.75 \times 20 = 17.5$ |

**屏蔽第二个 Key**：它的分数变成 $-\infty$，而 $e^{-\infty} = 0$，于是权重为 $[1,\ 0]$，输出为 $10$。输出的变化完全来自可访问位置的变化。

**把查询换成 $q = 0$**：两个分数都为 $0$，权重均匀，为 $[0.5,\ 0.5]$，输出为 $15$。候选没变，换了查询，权重就变了。

说明：

- 取 $d_k = 1$ 只是为了方便心算；真实代码必须用张量实际的 $d_k$ 做缩放。
- 权重 0.75 不代表第二条信息“有 75% 的把握是对的”，它只规定了这次计算中两个 Value 按什么比例混合。"""

HAND_CALC_TASK = r"""## 练习 1：手算（计分）

请先用纸笔算出结果，再填进下一个单元格。

已知 $d_k = 4$，一个查询：

$$q = [2,\ 0,\ 0,\ 0]$$

以及三个候选位置：

| 位置 | Key | Value（$d_v = 1$） |
|---|---|---|
| 1 | $k_1 = [0,\ 0,\ 0,\ 0]$ | $v_1 = 8$ |
| 2 | $k_2 = [\ln 2,\ 0,\ 0,\ 0]$ | $v_2 = 4$ |
| 3 | $k_3 = [\ln 5,\ 0,\ 0,\ 0]$ | $v_3 = 16$ |

需要填写的变量：

- `hand_scores`：原始点积 $q \cdot k_j$，含 3 个数的 list。
- `hand_scaled`：除以 $\sqrt{d_k}$ 之后的分数，含 3 个数的 list。
- `hand_weights`：softmax 之后的权重，含 3 个数的 list。
- `hand_output`：注意力输出（一个数）。
- `hand_masked_output`：把第三个 Key $k_3$ 屏蔽之后的输出（一个数）。

数值可以写成 Python 表达式，例如 `math.log(2)` 或分数 `1/3`。提示：利用 $e^{\ln a} = a$，整个计算都可以化成简单的分数。"""

SHAPES_TASK = r"""## 练习 2：形状推理（计分）

考虑一个交叉注意力：解码器提供查询，编码器提供 Key 和 Value。

| 量 | 值 |
|---|---|
| batch 大小 `B` | 2 |
| 头数 `H` | 4 |
| 查询位置数 `L`（解码器） | 5 |
| Key/Value 位置数 `S`（编码器） | 7 |
| `d_k` | 8 |
| `d_v` | 16 |

因此 `q` 的形状为 `[2, 4, 5, 8]`，`k` 为 `[2, 4, 7, 8]`，`v` 为 `[2, 4, 7, 16]`。

请在下一个单元格中填写（形状写成由 int 组成的 tuple）：

- `shape_scores`：（缩放后的）分数张量的形状。
- `shape_weights`：softmax 之后权重的形状。
- `shape_output`：注意力输出的形状。
- `shape_padding_mask`：把形状为 `[B, S]` 的 `key_padding_mask` 转换成 SDPA 约定的掩码后，它的形状（该掩码需要在 head 维和查询维上广播）。
- `softmax_dim`：softmax 所沿的维度编号，写成负整数。"""

IMPL_INTRO = r"""## 实现部分：总览

你将依次实现下列函数：

| 函数 | 作用 |
|---|---|
| `attention_scores(q, k)` | 原始点积分数 |
| `scale_scores(scores, d_k)` | 除以 $\sqrt{d_k}$ |
| `apply_mask(scores, mask=None)` | 在 softmax 之前施加掩码 |
| `softmax(x, dim=-1)` | 手写的、数值稳定的 softmax |
| `attention_output(weights, v)` | 用权重对 V 加权求和 |
| `scaled_dot_product_attention(q, k, v, mask=None)` | 把以上五步串起来 |
| `causal_mask(L, S, device=None)` | 生成因果掩码 |
| `key_padding_to_attn_mask(key_padding_mask)` | 转换 padding 掩码的格式 |

共同约定：

- 张量可以带任意多个前导维（batch、head……），只有最后两维有特定含义。
- 必须支持 $L \ne S$ 以及 $d_k \ne d_v$。
- 形状不匹配时（例如 q 与 k 的最后一维不同，或 k 与 v 的位置数不同）抛出 `ValueError`，并在信息里写清楚哪两个维度对不上。
- 保持输入的 dtype 和 device：不要写死 `float32`；输入在 GPU 上时，不要在 CPU 上新建张量。
- 永远不要原地修改输入。"""

SCORES_MD = r"""### 第 1 步：`attention_scores(q, k)`

返回原始点积 $QK^\top$：把 `q` 与“最后两维互换后的 `k`”做矩阵乘法，结果形状为 `[..., L, S]`。这一步**不做缩放**，缩放交给下一个函数。

若 `q` 与 `k` 的最后一维（$d_k$）不一致，抛出 `ValueError`。

提示：用 `k.transpose(-2, -1)` 或 `k.mT`。不要用 `k.T`：对超过 2 维的张量，`.T` 会把**所有**维度倒序，batch 维和 head 维也会被打乱（新版 PyTorch 已不建议这样用）。"""

SCALE_MD = r"""### 第 2 步：`scale_scores(scores, d_k)`

返回 `scores / sqrt(d_k)`。常见错误是除以 `d_k` 本身，或者乘以 `sqrt(d_k)`。

原因回顾：点积是 $d_k$ 项乘积之和，若各分量方差约为 1，点积的标准差约为 $\sqrt{d_k}$。除以 $\sqrt{d_k}$ 恰好让分数尺度不随维度变化，softmax 不会过早饱和。除以 $d_k$ 会把分数压得过小，权重趋于均匀；乘以 $\sqrt{d_k}$ 则让饱和更严重。

`d_k` 是 Python 数字，用 `math.sqrt` 即可，不需要为它专门新建张量。"""

MASK_MD = r"""### 第 3 步：`apply_mask(scores, mask=None)`

约定与 `F.scaled_dot_product_attention` 一致：

| `mask` 的类型 | 处理方式 |
|---|---|
| `None` | 原样返回 `scores` |
| 布尔张量 | `True` = 允许关注；`False` 的位置设为 `-inf` |
| 浮点张量 | 直接与 `scores` 相加（加性掩码） |

要点：

- `mask` 要能广播到 `scores` 的形状，例如 `[L, S]`（所有 batch 和 head 共用）或 `[B, 1, 1, S]`（每个样本屏蔽各自的某些 Key）。
- 返回新张量，不要原地修改 `scores`（用 `masked_fill` 或 `torch.where`，不要用 `masked_fill_`）。
- 禁止的位置用 `-inf`：用 `0` 毫无效果（0 本身就是一个完全正常的分数）；用 `-1e9` 在 float16 下会溢出。
- 掩码必须在 softmax **之前**施加；若在 softmax 之后再把权重置零，剩下的权重之和就不再是 1。"""

SOFTMAX_MD = r"""### 第 4 步：`softmax(x, dim=-1)`

手写数值稳定的 softmax：

$$\mathrm{softmax}(x)_j = \frac{e^{x_j - m}}{\sum_{j'} e^{x_{j'} - m}}, \qquad m = \max_{j'} x_{j'}$$

- 最大值 $m$ 要沿 `dim` **逐切片**求，并保留该维（`keepdim=True`）以便广播；不能用整个张量的全局最大值，否则数值偏小的行可能全部下溢为 0，进而出现 0/0。
- **为什么可以减**：softmax 具有平移不变性，所有分量减去同一个数，相当于分子分母同乘 $e^{-m}$，结果不变。
- **为什么必须减**：`exp(1000)` 会溢出为 `inf`，`inf / inf` 得到 NaN。减去最大值后指数的参数都不大于 0，最大的一项恰好是 $e^{0} = 1$。
- **全是 `-inf` 的切片**（某个查询没有任何允许的 Key）：此时 $m = -\infty$，$x - m$ 变成 `-inf - (-inf)`，结果是 NaN。要求这种切片输出全 0 而不是 NaN，需要单独处理非有限的最大值以及为 0 的分母。
- 必须遵守传入的 `dim`，不要写死最后一维。"""

OUTPUT_MD = r"""### 第 5 步：`attention_output(weights, v)`

`weights` 的形状为 `[..., L, S]`，`v` 的形状为 `[..., S, d_v]`，矩阵乘法 `weights @ v` 得到 `[..., L, d_v]`：每个查询的输出是各 Value 行按权重的加权和。若 `weights` 的最后一维与 `v` 的位置数不一致，抛出 `ValueError`。

务必乘以 `v` 而不是 `k`。当 $d_k = d_v$ 时，误用 K 在形状上完全合法，只有数值会出错，所以这种错误只能通过核对数值来发现。"""

SDPA_MD = r"""### 第 6 步：`scaled_dot_product_attention(q, k, v, mask=None)`

把前五个函数按顺序组合起来：分数 → 缩放（用 `q.shape[-1]` 作为 $d_k$）→ 掩码 → 沿最后一维 softmax → 乘以 V。返回二元组 `(output, weights)`，形状分别为 `[..., L, d_v]` 和 `[..., L, S]`。

如果某个查询行的所有 Key 都被屏蔽，它的权重应全为 0，输出也全为 0，这与 PyTorch 2.5 及以上版本中 `F.scaled_dot_product_attention` 的行为一致。"""

MASKS_MD = r"""### 第 7 步：两种常用掩码

**`causal_mask(L, S, device=None)`**：返回形状为 `[L, S]` 的布尔张量，`True` = 可以关注。查询位置 $i$ 只能看到 $j \le i$ 的 Key，即包含对角线的下三角，左上角对齐，与 `F.scaled_dot_product_attention(..., is_causal=True)` 完全一致。以 $L = 3,\ S = 4$ 为例（1 表示 `True`，0 表示 `False`）：

| 查询 \ Key | 0 | 1 | 2 | 3 |
|---|---|---|---|---|
| 0 | 1 | 0 | 0 | 0 |
| 1 | 1 | 1 | 0 | 0 |
| 2 | 1 | 1 | 1 | 0 |

**`key_padding_to_attn_mask(key_padding_mask)`**：`nn.MultiheadAttention` 的 `key_padding_mask` 形状为 `[B, S]`，其中 `True` = padding，应当**忽略**。这与 SDPA 布尔掩码（`True` = 允许关注）的极性恰好**相反**。转换方法：先取反，再 reshape 成 `[B, 1, 1, S]`，使它能在 head 维和查询维上广播。

教训：不同 API 对 `True` 的约定可能相反。每次都要查阅该 API 的文档，不要凭变量名去猜。"""

HEATMAP_MD = r"""### 可视化：因果注意力权重

下一个单元格用你的实现在因果掩码下计算注意力，并把权重画成热力图（行 = 查询，列 = Key）。对角线以上的上三角应当恰好为 0，且每一行之和为 1。"""

DEBUG_MD = r"""## 练习 3：找 bug（计分）

下一个（锁定的）单元格定义了 `buggy_attention(q, k, v, mask=None)`，其中恰好藏着**一个**常见错误。请你：

1. 在给出的示例上运行它，并与你自己的 `scaled_dot_product_attention` 比较输出和权重（例如：权重沿哪一维和为 1、被屏蔽位置的权重是多少、输出的形状和数值）。
2. 把 `bug_choice` 设为下表中对应选项的字母（一个大写字母的字符串）。
3. 写出修复后的 `fixed_attention(q, k, v, mask=None)`，接口与 `buggy_attention` 相同。

可选项：

- A. 没有除以 sqrt(d_k)
- B. softmax 沿查询维（dim=-2）而不是 Key 维归一化
- C. 布尔掩码的含义用反了（True 被当成屏蔽）
- D. 用 K 而不是 V 做加权求和
- E. 在 softmax 之后才施加掩码"""

DEVICE_MD = r"""## GPU 与低精度

下面的单元格会在有 GPU 时把你的实现放到 GPU 上运行（否则用 CPU），并以 float64 的结果为参照，比较 float32、float16、bfloat16 的误差。半精度的误差明显大于 float32 是正常的，bfloat16 的有效位数更少，误差通常又比 float16 大一些。

要让代码在任意设备、任意精度上都能工作，请注意：

- **在输入所在的设备上创建张量**：掩码、常数等要用 `device=scores.device`（dtype 也跟随输入）。在 CPU 上新建的张量与 GPU 张量一起运算会直接报错。
- **用 `-inf` 而不是 `-1e9`**：float16 能表示的最大有限值是 65504，`-1e9` 根本无法表示；在 float16 张量上执行 `masked_fill(mask, -1e9)` 会报错或溢出。而 `-inf` 在每种浮点类型中都能精确表示。
- **逐行减最大值在半精度下尤其重要**：float16 中 `exp(x)` 在 $x$ 超过约 11 时就溢出成 `inf`，不减最大值的 softmax 很容易得到 NaN。
- **不要写死 dtype**（如 `dtype=torch.float32`），也**不要**在张量计算中途调用 `.item()`：它会把数据拷回 CPU、强制 GPU 同步，还会让代码只适用于单个元素。"""

MISTAKES = r"""## 常见错误

1. 把 K 和 V 当成同一个东西，或者默认 $L = S$（交叉注意力中两者通常不同）。
2. softmax 沿错了轴（例如 `dim=-2`）：形状不报错，但每个查询的权重不再和为 1。
3. 忘记屏蔽未来位置或 padding 位置，或者把某个 API 中 `True` 的含义理解反了。
4. 在 softmax 之后才施加掩码，或者用 `0` 代替 `-inf` 作为屏蔽值。
5. 除以 $d_k$ 而不是 $\sqrt{d_k}$，或者干脆忘了缩放。
6. softmax 里减去全局最大值而不是逐行最大值，或者根本不减最大值，导致溢出或下溢。
7. 全部被屏蔽的行产生 NaN，并随后续计算扩散到整个张量。
8. 把注意力权重当成事实、置信度或因果重要性的证据。"""

FAQ_INTRO = r"""## 思考题（由老师人工批改）

下面两道题没有自动检查，由老师人工批改。请用你自己的话回答，每题 2–4 句即可，写在题目下方的答案单元格中。"""

WRITTEN_Q1 = r"""**问题 1：** Query、Key、Value 一定来自同一个序列吗？请举一个例子说明。"""

WRITTEN_A1 = r"""不一定。在自注意力中，Q、K、V 由同一个序列经过不同的投影得到，此时 $L = S$。在交叉注意力中（例如机器翻译的解码器），Q 来自解码器一侧的序列，K 和 V 来自编码器的输出，因此查询位置数 $L$ 可以不等于候选位置数 $S$。无论哪种情况，K 和 V 都必须来自同一组位置，并且一一对应。"""

WRITTEN_Q2 = r"""**问题 2：** 注意力权重的和为 1，是否说明它们是“答对的概率”？"""

WRITTEN_A2 = r"""不是。softmax 归一化只是让每个查询的权重构成一个分布，用来规定在这次计算中如何混合各个 Value。这些数字既没有经过概率校准，也没有经过事实验证；某个位置的权重高，既不能证明它就是正确答案，也不能证明它对模型输出具有因果上的重要性。"""

FINAL_COMPARE_MD = r"""## 最终对照：与 PyTorch 官方实现比较

最后一个单元格在随机张量上同时调用你的 `scaled_dot_product_attention` 和 `torch.nn.functional.scaled_dot_product_attention`，分别使用因果掩码和 padding 掩码，并打印两者输出的最大绝对误差。在 float32 下这个误差应当非常接近 0；如果明显偏大，请回头检查掩码的极性、softmax 的轴和缩放因子。"""

SUMMARY_MD = r"""## 小结

- 注意力 = 匹配分数 → 缩放 → 掩码 → 沿 Key 轴 softmax → 对 V 加权求和。
- Q 表达“要什么”，K 决定“和谁匹配”，V 决定“取出什么”；$L$ 与 $S$、$d_k$ 与 $d_v$ 都可以不同。
- 除以 $\sqrt{d_k}$ 用来控制分数尺度，防止 softmax 饱和。
- 掩码要在 softmax 之前用 `-inf` 施加，并且要核对每个 API 中 `True` 的含义。
- 手写 softmax 要逐行减最大值，全屏蔽行返回 0 而不是 NaN；代码要跟随输入的 dtype 和 device。
- 注意力权重描述的是计算中的组合方式，不是正确性或因果重要性的证明。"""
