"""Chinese lesson text (markdown cell bodies) for the scaled dot-product attention notebook.

Each module-level UPPER_CASE constant is the body of one Jupyter markdown cell.
Prose is Simplified Chinese; identifiers and code are English.
"""

TITLE_AND_GOALS = r"""# 缩放点积注意力（Scaled Dot-Product Attention）

一句话概括：每个查询按照与各个键的匹配程度，把所有允许访问的值加权组合成自己的输出。

## 学习目标

- 说清楚注意力的计算机制：分数、缩放、掩码、softmax、加权求和各自起什么作用。
- 手算一个小例子，并写出每一步张量的形状。
- 用 PyTorch 从零实现缩放点积注意力（含因果掩码与填充掩码），并能用诊断实验定位常见 bug。
- 知道不同 API 的掩码约定（对齐方式、`True` 的含义、全屏蔽行的结果）以及 dropout 在训练与评估时的区别。

## 如何使用本 notebook

- 从上到下依次运行所有单元格。
- 把每一处 `# YOUR CODE HERE` / `raise NotImplementedError()` 替换成你自己的代码。
- 每个实现单元格后面紧跟一个锁定的检查单元格，里面是可见的检查；评分时还会运行隐藏检查（更多情形、随机张量、针对典型误解的诊断）。
- 不要删除或复制锁定的单元格。打印输出和警告都不影响评分。
- 只需要 `torch`、`numpy`、`matplotlib`。
- 在你的实现中**不要**调用 `torch.softmax`、`F.softmax`、`Tensor.softmax`、`F.log_softmax`、`F.scaled_dot_product_attention` 或 `nn.MultiheadAttention`：评分时它们会被禁用，用到它们的那一项检查将拿不到分。"""

PREREQUISITES = r"""## 学习前需要掌握

- **线性代数**：向量点积、矩阵乘法、转置；知道 `[L, d] @ [d, S]` 得到 `[L, S]`。
- **概率与统计的最基本概念**：均值、方差；独立随机变量之和的方差等于方差之和。
- **指数与对数**：$e^{\ln a} = a$，$e^{a-b} = e^a / e^b$。
- **softmax**：把一组实数变成一组非负、和为 1 的数。
- **PyTorch 张量**：`shape`、`dim`、广播（broadcasting）、`dtype`、`device`，以及 `@`、`sum(dim=..., keepdim=True)`、`masked_fill`、`torch.where` 这些操作。

不需要事先了解 Transformer；本 notebook 只讲其中的一个模块。"""

GLOSSARY = r"""## 术语表

本 notebook 的文字和检查信息统一使用下表左列的中文术语；代码里的变量名保持英文。

| 中文 | 英文 | 在本 notebook 中 |
|---|---|---|
| 查询 | query | `q`，形状 `[..., L, d_k]`，共 $L$ 个查询位置 |
| 键 | key | `k`，形状 `[..., S, d_k]`，共 $S$ 个键位置 |
| 值 | value | `v`，形状 `[..., S, d_v]`，与键一一对应 |
| 分数 | score | `scores`，形状 `[..., L, S]` |
| 权重 | (attention) weight | softmax 之后的分数，形状 `[..., L, S]` |
| 掩码 | mask | `mask`，规定每个查询可以关注哪些键 |
| 填充 | padding | 为了把长短不一的序列凑成同样长度而补上的位置 |
| 批量 | batch | 最前面的批量维，大小 `B` |
| 头 | head | 多头注意力中的头维，大小（头数）`H` |

“键轴”指分数和权重的最后一维（长度 $S$），“查询轴”指倒数第二维（长度 $L$）。"""

WHY_ATTENTION = r"""## 为什么需要注意力

处理序列时，一个位置常常要借用其他位置的信息，而该借用哪些位置取决于当前内容。固定窗口（如卷积）或固定平均对所有输入一视同仁，表达不了“这一次该看哪里”。

注意力的思路是：让当前位置拿自己的“需求”去和每个候选位置比较，得到匹配分数，归一化成权重后再组合候选的内容。权重随输入而变，所以这是一种**内容相关**的选择。

弄懂这一个模块（分数、归一化、加权求和），后面的多头注意力、因果掩码与填充掩码乃至整个 Transformer 都是在它之上搭建的。"""

QKV_ROLES = r"""## Q、K、V 各自扮演什么角色

| 名称 | 直观含义 |
|---|---|
| 查询 Q | “我现在需要什么信息”：发起查询的位置 |
| 键 K | 每个候选位置的“索引特征”，只用来和查询比较匹配度 |
| 值 V | 每个候选位置真正被取出、被组合的内容 |

K 决定“读多少”，V 决定“读到什么”。两者的数值甚至维度都可以不同，不要混为一谈；但第 $j$ 个键和第 $j$ 个值必须属于同一个候选位置。

在真实模型里，Q、K、V 通常由输入经过可学习的线性投影得到；本 notebook 直接给出小张量，让你先专注于注意力本身。

还要注意：候选集合不变，只换一个查询，得到的权重就可能完全不同，这正是“内容相关选择”的含义。"""

FORMULA = r"""## 公式与形状

$$\mathrm{Attention}(Q,K,V)=\mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}+M\right)V$$

| 变量 | 形状 | 含义 |
|---|---|---|
| $Q$ | `[..., L, d_k]` | 查询，每行对应一个查询位置 |
| $K$ | `[..., S, d_k]` | 键，每行是一个候选位置的索引特征 |
| $V$ | `[..., S, d_v]` | 值，每行是一个候选位置的内容 |
| $d_k$ | 标量 | 查询与键的特征维度（点积的长度） |
| $M$ | 可广播到 `[..., L, S]` | 加性掩码：允许的位置为 $0$，禁止的位置为 $-\infty$；没有掩码时视为 $0$ |
| $L$ | 标量 | 查询位置数 |
| $S$ | 标量 | 键/值位置数（可以不等于 $L$） |
| $d_v$ | 标量 | 值的特征维度（可以不等于 $d_k$） |
| 输出 | `[..., L, d_v]` | 每个查询得到一个 $d_v$ 维向量 |

其中 `...` 表示任意多个前导维（批量维、头维等）。

计算流程：

1. **分数**：$QK^\top$，形状 `[..., L, S]`，第 $(i, j)$ 项是第 $i$ 个查询与第 $j$ 个键的点积。
2. **缩放**：除以 $\sqrt{d_k}$。
3. **掩码**：在 softmax **之前**加上 $M$，禁止的位置变为 $-\infty$。
4. **softmax**：沿键轴（最后一维，`dim=-1`）归一化。只要一个查询至少有一个允许的键，它就得到一组非负、和为 1 的权重；一个键都不允许的查询行需要单独约定（见后面“没有任何允许键的查询行”一节）。
5. **加权求和**：权重 `@` $V$，得到 `[..., L, d_v]`。

softmax 沿错了轴，形状照样合法，代码也不报错，但含义已经变了，所以只能靠数值检查、不能靠形状检查发现。

为什么要缩放？假设查询 $q$ 和键 $k$ 的各分量**相互独立、均值为 0、方差为 1**。那么每一项 $q_i k_i$ 的均值为 0、方差为 $\mathrm{E}[q_i^2]\,\mathrm{E}[k_i^2] = 1$，$d_k$ 项独立相加，点积 $q \cdot k$ 的均值为 0、方差为 $d_k$，标准差为 $\sqrt{d_k}$。分数的量级随维度增长，softmax 就越来越接近 one-hot（饱和）；维度足够大时，它对分数的梯度也随之变小。除以 $\sqrt{d_k}$ 正好把分数的方差拉回 1。这个推导依赖上面的假设；实际模型中的 q、k 并不严格满足，但缩放仍然让分数尺度大体不随 $d_k$ 变化。缩放不是把分数“校准”成某种可信度。下一节用实验看看这件事。"""

WHY_SCALE_MD = r"""## 实验：为什么要除以 $\sqrt{d_k}$

下一个单元格做一个小实验：取 $S = 16$ 个键，查询和键的各分量都独立地取自标准正态分布 $N(0, 1)$，对 $d_k = 1, 2, 4, \dots, 512$ 分别计算

- **平均最大权重**：每个查询的权重中最大的那一个，再对 2000 个查询取平均。权重均匀时它等于 $1/16 \approx 0.06$，完全集中在一个键上时等于 1。
- **softmax 梯度的大小**：softmax 的输出 $p$ 对输入分数的雅可比矩阵是 $J = \mathrm{diag}(p) - p\,p^\top$，它决定了反向传播时有多少梯度能穿过 softmax 回到分数。这里取它的 Frobenius 范数，同样对查询取平均。

每个 $d_k$ 都算两遍：不缩放（分数为 $q \cdot k$）和缩放（分数为 $q \cdot k / \sqrt{d_k}$），然后画成两张图（横轴为对数刻度）。运行它，仔细看两条曲线怎样随 $d_k$ 变化。"""

WHY_SCALE_TASK = r"""### 练习：从图中读出结论（计分）

根据上面的两张图和打印的表格，下面哪一项说法正确？把 `scale_answer` 设为对应的字母（一个大写字母的字符串）。

- A. 不缩放时，$d_k$ 越大，权重越接近均匀分布，因此梯度越大
- B. 缩放之后，平均最大权重仍随 $d_k$ 增大而趋近 1，只是增长得慢一些
- C. 不缩放时，$d_k$ 越大，平均最大权重越接近 1；$d_k$ 较大时（图中 16 以上）softmax 的梯度也越来越小；缩放之后两者基本不随 $d_k$ 变化
- D. 缩放与否只改变输出的数值范围，对 softmax 的梯度没有影响"""

WORKED_EXAMPLE = r"""## 手算示例：一个查询、两个候选

已知：$d_k = 1$，因此 $\sqrt{d_k} = 1$；查询 $q = 1$；两个键为 $k_1 = 0$、$k_2 = \ln 3$；两个值为 $v_1 = 10$、$v_2 = 20$。

| 步骤 | 结果 |
|---|---|
| 分数 $q \cdot k_j$ | $[0,\ \ln 3]$ |
| 缩放（除以 1） | $[0,\ \ln 3]$ |
| 取指数 | $[e^{0},\ e^{\ln 3}] = [1,\ 3]$ |
| 除以总和 4 | 权重 $[0.25,\ 0.75]$ |
| 加权求和 | $0.25 \times 10 + 0.75 \times 20 = 17.5$ |

**屏蔽第二个键**：它的分数变成 $-\infty$，而 $e^{-\infty} = 0$，于是权重为 $[1,\ 0]$，输出为 $10$。输出的变化完全来自可访问位置的变化。

**把查询换成 $q = 0$**：两个分数都为 $0$，权重均匀，为 $[0.5,\ 0.5]$，输出为 $15$。候选没变，换了查询，权重就变了。

说明：

- 取 $d_k = 1$ 只是为了方便心算；真实代码必须用张量实际的 $d_k$ 做缩放。
- 权重 0.75 不代表第二条信息“有 75% 的把握是对的”，它只规定了这次计算中两个值按什么比例混合。

下一个单元格用 PyTorch 重算一遍。注意 softmax 里减去的是**每一行自己的最大值**（`amax(dim=-1, keepdim=True)`），而不是整个张量的最大值，原因在第 4 步会讲。"""

HAND_CALC_TASK = r"""## 练习 1：手算（计分）

请先用纸笔算出结果，再填进下一个单元格。

已知 $d_k = 4$，一个查询：

$$q = [2,\ 0,\ 0,\ 0]$$

以及三个候选位置：

| 位置 | 键 | 值（$d_v = 1$） |
|---|---|---|
| 1 | $k_1 = [0,\ 0,\ 0,\ 0]$ | $v_1 = 8$ |
| 2 | $k_2 = [\ln 2,\ 0,\ 0,\ 0]$ | $v_2 = 4$ |
| 3 | $k_3 = [\ln 5,\ 0,\ 0,\ 0]$ | $v_3 = 16$ |

需要填写的变量：

- `hand_scores`：原始点积 $q \cdot k_j$，含 3 个数的 list。
- `hand_scaled`：除以 $\sqrt{d_k}$ 之后的分数，含 3 个数的 list。
- `hand_weights`：softmax 之后的权重，含 3 个数的 list。
- `hand_output`：注意力输出（一个数）。
- `hand_masked_output`：把第三个键 $k_3$ 屏蔽之后的输出（一个数）。

数值可以写成 Python 表达式，例如 `math.log(2)` 或分数 `1/3`。提示：利用 $e^{\ln a} = a$，整个计算都可以化成简单的分数。"""

SHAPES_TASK = r"""## 练习 2：形状推理（计分）

考虑一个交叉注意力：解码器提供查询，编码器提供键和值。

| 量 | 值 |
|---|---|
| 批量大小 `B` | 2 |
| 头数 `H` | 4 |
| 查询位置数 `L`（解码器） | 5 |
| 键/值位置数 `S`（编码器） | 7 |
| `d_k` | 8 |
| `d_v` | 16 |

因此 `q` 的形状为 `[2, 4, 5, 8]`，`k` 为 `[2, 4, 7, 8]`，`v` 为 `[2, 4, 7, 16]`。

请在下一个单元格中填写（形状写成由 int 组成的 tuple）：

- `shape_scores`：（缩放后的）分数张量的形状。
- `shape_weights`：softmax 之后权重的形状。
- `shape_output`：注意力输出的形状。
- `shape_padding_mask`：把形状为 `[B, S]` 的 `key_padding_mask` 转换成 SDPA 约定的掩码后，它的形状（该掩码需要在头维和查询维上广播）。
- `softmax_dim`：softmax 所沿的维度编号，写成负整数。"""

IMPL_INTRO = r"""## 实现部分：总览

你将依次实现下列函数：

| 函数 | 作用 |
|---|---|
| `attention_scores(q, k)` | 原始点积分数 |
| `scale_scores(scores, d_k)` | 除以 $\sqrt{d_k}$ |
| `apply_mask(scores, mask=None)` | 在 softmax 之前施加掩码 |
| `softmax(x, dim=-1)` | 手写的、数值稳定的 softmax |
| `attention_output(weights, v)` | 用权重对值加权求和 |
| `scaled_dot_product_attention(q, k, v, mask=None)` | 把以上五步串起来 |
| `causal_mask(L, S, device=None)` | 生成因果掩码 |
| `key_padding_to_attn_mask(key_padding_mask)` | 转换填充掩码的格式 |

共同约定：

- 张量可以带任意多个前导维（批量维、头维……），只有最后两维有特定含义。
- 必须支持 $L \ne S$ 以及 $d_k \ne d_v$。
- 形状不匹配时（例如 q 与 k 的最后一维不同，或 k 与 v 的位置数不同）抛出 `ValueError`，并在信息里写清楚哪两个维度对不上。
- 保持输入的 dtype 和 device：不要写死 `float32`；输入在 GPU 上时，不要在 CPU 上新建张量。
- 永远不要原地修改输入。"""

SCORES_MD = r"""### 第 1 步：`attention_scores(q, k)`

返回原始点积 $QK^\top$：把 `q` 与“最后两维互换后的 `k`”做矩阵乘法，结果形状为 `[..., L, S]`。这一步**不做缩放**，缩放交给下一个函数。

若 `q` 与 `k` 的最后一维（$d_k$）不一致，抛出 `ValueError`。

提示：用 `k.transpose(-2, -1)` 或 `k.mT`。不要用 `k.T`：对超过 2 维的张量，`.T` 会把**所有**维度倒序，批量维和头维也会被打乱（新版 PyTorch 已不建议这样用）。"""

SCALE_MD = r"""### 第 2 步：`scale_scores(scores, d_k)`

返回 `scores / sqrt(d_k)`。常见错误是除以 `d_k` 本身，或者乘以 `sqrt(d_k)`。

原因回顾：点积是 $d_k$ 项乘积之和；若查询和键的各分量相互独立、均值为 0、方差为 1，点积的标准差就是 $\sqrt{d_k}$。除以 $\sqrt{d_k}$ 让分数尺度不随维度变化，softmax 不会过早饱和（前面的实验画出了这一点）。除以 $d_k$ 会把分数压得过小，权重趋于均匀；乘以 $\sqrt{d_k}$ 则让饱和更严重。

`d_k` 是 Python 数字，用 `math.sqrt` 即可，不需要为它专门新建张量。"""

MASK_MD = r"""### 第 3 步：`apply_mask(scores, mask=None)`

约定与 `F.scaled_dot_product_attention` 一致：

| `mask` 的类型 | 处理方式 |
|---|---|
| `None` | 原样返回 `scores` |
| 布尔张量 | `True` = 允许关注；`False` 的位置设为 `-inf` |
| 浮点张量 | 直接与 `scores` 相加（加性掩码） |

要点：

- `mask` 要能广播到 `scores` 的形状，例如 `[L, S]`（所有批量和头共用）或 `[B, 1, 1, S]`（每个样本屏蔽各自的某些键）。
- 返回新张量，不要原地修改 `scores`（用 `masked_fill` 或 `torch.where`，不要用 `masked_fill_`）。
- 禁止的位置用 `-inf`。填 `0` 起不到屏蔽作用：0 本身是一个完全正常的分数，被“屏蔽”的键照样分到 $e^{0 - m}/Z$ 的权重；它还会改变这一行其余键的权重（分母变了），只是不等于屏蔽。用 `-1e9` 在 float16 下会溢出。
- 掩码必须在 softmax **之前**施加；若在 softmax 之后再把权重置零，剩下的权重之和就不再是 1。"""

SOFTMAX_MD = r"""### 第 4 步：`softmax(x, dim=-1)`

手写数值稳定的 softmax：

$$\mathrm{softmax}(x)_j = \frac{e^{x_j - m}}{\sum_{j'} e^{x_{j'} - m}}, \qquad m = \max_{j'} x_{j'}$$

- 最大值 $m$ 要沿 `dim` **逐切片**求，并保留该维（`keepdim=True`）以便广播；不能用整个张量的全局最大值，否则数值偏小的行可能全部下溢为 0，进而出现 0/0。
- **为什么可以减**：softmax 具有平移不变性，所有分量减去同一个数，相当于分子分母同乘 $e^{-m}$，结果不变。
- **为什么必须减**：`exp(1000)` 会溢出为 `inf`，`inf / inf` 得到 NaN。减去最大值后指数的参数都不大于 0，最大的一项恰好是 $e^{0} = 1$。
- **全是 `-inf` 的切片**（某个查询没有任何允许的键）：此时 $m = -\infty$，$x - m$ 变成 `-inf - (-inf)`，结果是 NaN。要求这种切片输出全 0 而不是 NaN，需要单独处理非有限的最大值以及为 0 的分母。
- 必须遵守传入的 `dim`，不要写死最后一维。"""

OUTPUT_MD = r"""### 第 5 步：`attention_output(weights, v)`

`weights` 的形状为 `[..., L, S]`，`v` 的形状为 `[..., S, d_v]`，矩阵乘法 `weights @ v` 得到 `[..., L, d_v]`：每个查询的输出是各个值按权重的加权和。若 `weights` 的最后一维与 `v` 的位置数不一致，抛出 `ValueError`。

务必乘以 `v` 而不是 `k`。当 $d_k = d_v$ 时，误用键在形状上完全合法，只有数值会出错，所以这种错误只能通过核对数值来发现。"""

SDPA_MD = r"""### 第 6 步：`scaled_dot_product_attention(q, k, v, mask=None)`

把前五个函数按顺序组合起来：分数 → 缩放（用 `q.shape[-1]` 作为 $d_k$）→ 掩码 → 沿最后一维 softmax → 乘以值 V。返回二元组 `(output, weights)`，形状分别为 `[..., L, d_v]` 和 `[..., L, S]`。

如果某个查询行的所有键都被屏蔽，它的权重应全为 0，输出也全为 0，这与 PyTorch 2.5 及以上版本中 `F.scaled_dot_product_attention` 的行为一致。这只是一种约定，后面专门有一节讨论。"""

MASKS_MD = r"""### 第 7 步：两种常用掩码

**`causal_mask(L, S, device=None)`**：返回形状为 `[L, S]` 的布尔张量，`True` = 可以关注。查询位置 $i$ 只能看到 $j \le i$ 的键，即包含对角线的下三角，**左上角对齐**，与 `F.scaled_dot_product_attention(..., is_causal=True)` 完全一致（$L \ne S$ 时的另一种对齐方式见后面一节）。以 $L = 3,\ S = 4$ 为例（1 表示 `True`，0 表示 `False`）：

| 查询 \ 键 | 0 | 1 | 2 | 3 |
|---|---|---|---|---|
| 0 | 1 | 0 | 0 | 0 |
| 1 | 1 | 1 | 0 | 0 |
| 2 | 1 | 1 | 1 | 0 |

**`key_padding_to_attn_mask(key_padding_mask)`**：`nn.MultiheadAttention` 的 `key_padding_mask` 形状为 `[B, S]`，其中 `True` = 填充位置，应当**忽略**。这与 SDPA 布尔掩码（`True` = 允许关注）的极性恰好**相反**。转换方法：先取反，再 reshape 成 `[B, 1, 1, S]`，使它能在头维和查询维上广播。

教训：不同 API 对 `True` 的约定可能相反。每次都要查阅该 API 的文档，不要凭变量名去猜。"""

HEATMAP_MD = r"""### 可视化：因果注意力权重

下一个单元格用你的实现在因果掩码下计算注意力，并把权重画成热力图（行 = 查询，列 = 键）。对角线以上的上三角应当恰好为 0，且每一行之和为 1。"""

EMPTY_ROWS_MD = r"""## 没有任何允许键的查询行

掩码一多（因果掩码、填充掩码、再叠加别的限制），就可能出现这样的查询：它这一行的掩码**全是 `False`**，一个可以关注的键都没有。例如一批序列采用**左侧填充**（把填充位置补在序列开头）再叠加因果掩码：第一个查询只能看第一个键，而那恰好是填充位置。

**怎样发现这些行**：对布尔掩码（`True` = 允许关注）沿键轴问“有没有任何一个 `True`”，再取反：

```python
empty = ~mask.any(dim=-1)   # 形状 [..., L]，True 表示这一行没有任何允许的键
```

**这些行的输出是一种约定，不是数学推出来的结果**：softmax 的分母是 0，公式本身没有定义。不同实现的做法不同：

| 实现 | 全屏蔽行的权重与输出 |
|---|---|
| 本 notebook 的 `scaled_dot_product_attention`、`F.scaled_dot_product_attention`（PyTorch ≥ 2.5） | 全 0 |
| `nn.MultiheadAttention`、PyTorch 文档里给出的 SDPA 参考代码（先填 `-inf` 再调用 softmax） | NaN |
| 用一个很大的有限负数（如 `-1e9`；《动手学深度学习》的 `masked_softmax` 用 `-1e6`）代替 `-inf` 的实现 | 另一种结果，见下面的练习 |

NaN 会在后续的加法、矩阵乘法和梯度里扩散，所以实际代码要么保证每行至少有一个允许的键，要么在这些行上明确地把输出置零，要么在计算损失时跳过它们。下一个单元格在一个小例子上比较前两种约定。"""

EMPTY_ROWS_TASK = r"""### 练习：数出空行（计分）

上一个单元格里的 `mask_demo` 形状为 `[2, 4, 4]`（2 个样本，各 4 个查询、4 个键）。

- `n_empty_rows`：`mask_demo` 中一共有多少个查询行没有任何允许的键？请用代码算出（一个 int）。
- `fill_weight`：如果屏蔽时不用 `-inf`，而是把禁止位置的分数设为 `-1e9`（其余步骤不变，softmax 逐行减最大值），这些空行里每个权重是多少？（一个数；提示：这一行的 4 个分数都变成了什么？）"""

CAUSAL_ALIGN_MD = r"""## 因果掩码的两种对齐方式

当 $L = S$ 时，“查询 $i$ 只能看键 $j \le i$”没有歧义。当 $L \ne S$ 时，就要决定查询和键从哪一端对齐：

- **左上角对齐**（top-left）：查询 $i$ 能看到 $j \le i$ 的键。这就是你实现的 `causal_mask`，也是 `F.scaled_dot_product_attention(..., is_causal=True)` 和 `torch.nn.attention.bias.causal_upper_left` 的约定。
- **右下角对齐**（bottom-right）：最后一个查询对齐最后一个键，查询 $i$ 能看到 $j \le i + (S - L)$ 的键。PyTorch 用 `torch.nn.attention.bias.causal_lower_right(L, S)` 表示它，可以直接作为 `attn_mask` 传给 `F.scaled_dot_product_attention`。

两种都是正确的约定，用在不同场合。**用 KV 缓存逐步生成**就需要右下角对齐：前面已经生成的 $S - L$ 个词元的键和值存在缓存里，这一步只为最新的 $L$ 个词元计算查询。这 $L$ 个查询其实位于整条序列的最后 $L$ 个位置，第 $i$ 个查询的真实位置是 $i + (S - L)$，它应当能看到缓存里的所有键以及它自己。若错用左上角对齐，它只能看到最前面的几个键。

下一个单元格打印 $L = 3,\ S = 5$ 时的两种掩码，并用同一组查询、键、值比较两种对齐下的输出。"""

CAUSAL_ALIGN_TASK = r"""### 练习：KV 缓存中的一步（计分）

缓存里已有 4 个词元，这一步一次送入 2 个新词元，所以 $L = 2$、$S = 6$。只看这一步的**第一个**新查询（$i = 0$）：

- `n_keys_top_left`：用左上角对齐的因果掩码时，它能关注几个键？（一个 int）
- `n_keys_bottom_right`：用右下角对齐的因果掩码时，它能关注几个键？（一个 int）"""

MHA_MASK_MD = r"""## `nn.MultiheadAttention` 的布尔掩码：极性相反

前面转换 `key_padding_mask` 时已经遇到过一次极性相反。`nn.MultiheadAttention` 的 `attn_mask`（形状 `[L, S]` 或 `[B·H, L, S]`）也一样：

| API | 布尔掩码中 `True` 的含义 |
|---|---|
| `F.scaled_dot_product_attention(attn_mask=...)`、本 notebook 的 `apply_mask` | 允许关注 |
| `nn.MultiheadAttention(...)(attn_mask=...)` | **不允许**关注 |
| `nn.MultiheadAttention(...)(key_padding_mask=...)` | 这个键是填充位置，忽略它 |

两者的浮点掩码都是直接加到分数上，这一点相同。下一个单元格用一个只有 1 个头的 `nn.MultiheadAttention` 演示：把上三角（$j > i$）设为 `True` 传给 `attn_mask`，返回的权重中恰好是这些位置为 0。"""

MHA_MASK_TASK = r"""### 练习：把掩码交给 `nn.MultiheadAttention`（计分）

你手上有一个按 SDPA 约定写的布尔掩码 `allowed`（`True` = 允许关注）。要让 `nn.MultiheadAttention` 得到同样的屏蔽效果，`attn_mask` 应当传入什么？把 `mha_mask_answer` 设为对应的字母。

- A. `allowed`
- B. `~allowed`
- C. `allowed.float()`
- D. `allowed.transpose(-2, -1)`"""

DEBUG_MD = r"""## 练习 3：找 bug（计分）

下一个（锁定的）单元格给出三个候选实现 `candidate_1`、`candidate_2`、`candidate_3`，接口都是 `(q, k, v, mask=None)`，`mask` 为布尔掩码（`True` = 允许关注），返回输出 `[..., L, d_v]`。它们的写法各不相同，看上去都说得通；其中**有的正确，有的有错**。光读代码不容易判断，请用实验来诊断。

**两个诊断工具**：

1. **看权重**：候选函数只返回输出，不返回权重。把单位矩阵当作值传进去，`v = torch.eye(S)`，输出的第 $i$ 行就是第 $i$ 个查询的权重（因为 $\sum_j w_{ij} e_j = w_i$）。
2. **两个探针**：
   - **行和**：每个至少有一个允许键的查询，权重之和应为 1（在浮点误差以内）。
   - **掩码探针**：掩码为 `False` 的位置，权重应恰好为 0。

另外可以把输出和你自己的 `scaled_dot_product_attention` 直接比较。注意：有的错误只在传入掩码时才会出现，所以有掩码、无掩码两种情况都要试。下面的单元格已经准备好探针输入 `q_probe`、`k_probe`、`v_probe`、`mask_probe`（每个查询至少有一个允许的键）。

**要做的事**：

1. 在“诊断”单元格里写你的诊断代码（里面已经有一个开头）。这个单元格不计分，评分时也不运行；如果想多做几个实验，可以在它下面自己新建单元格。
2. 为每个候选选出一项结论，把 `verdict_1`、`verdict_2`、`verdict_3` 设为对应的字母（一个大写字母的字符串；不同候选可以选同一个字母）。
3. 挑一个有错的候选，改掉它的错误，写成 `fixed_attention(q, k, v, mask=None)`，接口与候选相同。

可选的结论：

- A. 没有错误：有无掩码都与正确的注意力一致
- B. 有的查询的权重之和不等于 1
- C. 被屏蔽的键仍然分到了非零权重
- D. 每行权重之和为 1、被屏蔽的键权重为 0，但数值仍与正确结果不同（例如缩放因子不对）"""

DROPOUT_MD = r"""## 训练与评估：注意力上的 dropout

许多 Transformer 实现会在注意力权重算出来之后再做一次 dropout（随机丢弃），作为正则化：`nn.MultiheadAttention` 的 `dropout` 参数、`F.scaled_dot_product_attention` 的 `dropout_p` 参数都是作用在权重上的。规则是：

- **训练时**：每个权重以概率 $p$ 被置为 0，没被置零的权重除以 $1 - p$，这样每个权重的**期望**保持不变。于是训练时一行权重之和不再恰好为 1，只是期望为 1。
- **评估（推理）时**：不做 dropout，权重原样使用。`nn.Dropout` 和 `nn.MultiheadAttention` 根据模块的 `training` 标志自动切换：`model.train()` 打开，`model.eval()` 关闭。
- **函数式接口不知道模块处于哪种模式**：`F.dropout(x, p, training=...)` 需要你显式传入 `training`，`F.scaled_dot_product_attention` 只要 `dropout_p > 0` 就会丢弃。所以在自己写的模块里，通常写成 `dropout_p=self.dropout_p if self.training else 0.0`。

评估时忘了关掉 dropout，同一个输入每次运行的输出都不一样；训练时关掉了 dropout，则失去了正则化效果。下一个单元格在同一行权重上对比两种模式。"""

DROPOUT_TASK = r"""### 练习：dropout 的两种模式（计分）

- `dropout_kept_value`：训练模式下，对权重做 $p = 0.2$ 的 dropout。一个值为 0.4 的权重如果没有被置零，它会变成多少？（一个数）
- `dropout_sdpa_answer`：一个自己写的模块在 `forward` 里总是调用 `F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)`。调用 `model.eval()` 之后再运行它，会发生什么？把 `dropout_sdpa_answer` 设为对应的字母。

- A. 不会丢弃：`model.eval()` 会让这个函数自动停止 dropout
- B. 仍会随机丢弃：这个函数不知道模块处于哪种模式，每次运行的输出都可能不同
- C. 会报错：评估模式下不允许向它传入丢弃概率
- D. 不会丢弃：评估时 PyTorch 会把所有随机数固定下来"""

DEVICE_MD = r"""## GPU 与低精度

下面的单元格会在有 GPU 时把你的实现放到 GPU 上运行（否则用 CPU），并以 float64 的结果为参照，比较 float32、float16、bfloat16 的误差。半精度的误差明显大于 float32 是正常的，bfloat16 的有效位数更少，误差通常又比 float16 大一些。

要让代码在任意设备、任意精度上都能工作，请注意：

- **在输入所在的设备上创建张量**：掩码、常数等要用 `device=scores.device`（dtype 也跟随输入）。在 CPU 上新建的张量与 GPU 张量一起运算会直接报错。
- **用 `-inf` 而不是 `-1e9`**：float16 能表示的最大有限值是 65504，`-1e9` 根本无法表示；在 float16 张量上执行 `masked_fill(mask, -1e9)` 会报错或溢出。而 `-inf` 在每种浮点类型中都能精确表示。
- **逐行减最大值在半精度下尤其重要**：float16 中 `exp(x)` 在 $x$ 超过约 11 时就溢出成 `inf`，不减最大值的 softmax 很容易得到 NaN。
- **不要写死 dtype**（如 `dtype=torch.float32`），也**不要**在张量计算中途调用 `.item()`：它会把数据拷回 CPU、强制 GPU 同步，还会让代码只适用于单个元素。"""

MISTAKES = r"""## 常见错误

1. 把键 K 和值 V 当成同一个东西，或者默认 $L = S$（交叉注意力中两者通常不同）。
2. softmax 沿错了轴（例如沿查询轴）：形状不报错，但每个查询的权重不再和为 1。
3. 忘记屏蔽未来位置或填充位置，或者把某个 API 中 `True` 的含义理解反了（`nn.MultiheadAttention` 与 SDPA 相反）。
4. 在 softmax 之后才施加掩码，或者用 `0` 代替 `-inf` 作为屏蔽值。
5. 除以 $d_k$ 而不是 $\sqrt{d_k}$，或者干脆忘了缩放。
6. softmax 里减去全局最大值而不是逐行最大值，或者根本不减最大值，导致溢出或下溢。
7. 全部被屏蔽的行产生 NaN，并随后续计算扩散到整个张量。
8. $L \ne S$ 时用错了因果掩码的对齐方式（KV 缓存需要右下角对齐）。
9. 评估时忘了关闭 dropout，或者训练时没有打开。
10. 把注意力权重当成事实、置信度或因果重要性的证据。"""

FAQ_INTRO = r"""## 思考题（由老师人工批改）

下面两道题没有自动检查，由老师人工批改。请用你自己的话回答，每题 2–4 句即可，写在题目下方的答案单元格中。"""

WRITTEN_Q1 = r"""**问题 1：** 查询、键、值一定来自同一个序列吗？请举一个例子说明。"""

WRITTEN_A1 = r"""不一定。在自注意力中，Q、K、V 由同一个序列经过不同的投影得到，此时 $L = S$。在交叉注意力中（例如机器翻译的解码器），Q 来自解码器一侧的序列，K 和 V 来自编码器的输出，因此查询位置数 $L$ 可以不等于候选位置数 $S$。无论哪种情况，K 和 V 都必须来自同一组位置，并且一一对应。"""

WRITTEN_Q2 = r"""**问题 2：** 注意力权重的和为 1，是否说明它们是“答对的概率”？"""

WRITTEN_A2 = r"""不是。softmax 归一化只是让每个查询的权重构成一个分布，用来规定在这次计算中如何混合各个值。这些数字既没有经过概率校准，也没有经过事实验证；某个位置的权重高，既不能证明它就是正确答案，也不能证明它对模型输出具有因果上的重要性。"""

FINAL_COMPARE_MD = r"""## 最终对照：与 PyTorch 官方实现比较

最后一个单元格在随机张量上同时调用你的 `scaled_dot_product_attention` 和 `torch.nn.functional.scaled_dot_product_attention`，同时使用因果掩码和填充掩码，并打印两者输出的最大绝对误差。在 float32 下这个误差应当非常接近 0；如果明显偏大，请回头检查掩码的极性、softmax 的轴和缩放因子。"""

SUMMARY_MD = r"""## 小结

- 注意力 = 匹配分数 → 缩放 → 掩码 → 沿键轴 softmax → 对值加权求和。
- Q 表达“要什么”，K 决定“和谁匹配”，V 决定“取出什么”；$L$ 与 $S$、$d_k$ 与 $d_v$ 都可以不同。
- 除以 $\sqrt{d_k}$ 用来控制分数尺度，防止 softmax 饱和、梯度变小（实验中 $d_k = 512$ 时差别非常明显）。
- 掩码要在 softmax 之前用 `-inf` 施加，并且要核对每个 API 中 `True` 的含义和因果掩码的对齐方式。
- 没有任何允许键的查询行用 `~mask.any(dim=-1)` 找出来；它们的输出是约定（0 或 NaN），要心中有数。
- dropout 只在训练时打开；函数式接口要自己根据 `training` 传参。
- 手写 softmax 要逐行减最大值，全屏蔽行返回 0 而不是 NaN；代码要跟随输入的 dtype 和 device。
- 注意力权重描述的是计算中的组合方式，不是正确性或因果重要性的证明。"""


REFERENCES_MD = r"""## 参考资料

- Ashish Vaswani 等，*Attention Is All You Need*，NeurIPS 2017，第 3.2.1 节 “Scaled Dot-Product Attention”（缩放的理由见该节的脚注 4）。https://arxiv.org/abs/1706.03762
- 《动手学深度学习》（中文版），“注意力机制”一章中的“注意力评分函数”一节（缩放点积注意力与掩码 softmax）。https://zh.d2l.ai/chapter_attention-mechanisms/attention-scoring-functions.html
- PyTorch 文档：`torch.nn.functional.scaled_dot_product_attention`（布尔掩码 `True` = 允许关注、`is_causal` 左上角对齐、`dropout_p`，以及一段等价的参考代码）。https://pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html
- PyTorch 文档：`torch.nn.attention.bias`（`causal_upper_left`、`causal_lower_right`）。https://pytorch.org/docs/stable/nn.attention.bias.html
- PyTorch 文档：`torch.nn.MultiheadAttention`（`attn_mask` 与 `key_padding_mask` 中 `True` = 不允许关注）。https://pytorch.org/docs/stable/generated/torch.nn.MultiheadAttention.html"""
