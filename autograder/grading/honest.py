"""What an honest holder of each misconception writes: the mistake, and no other.

Charge-once refunds a part whose failure a misconception of another part
explains (``composition``, or a known mistake's output in the device part).
The refund is sound only if the home part charged that misconception at least
as much as it charges a student who really holds it: these answer cells,
graded by the same checks on the same seed, are what a refund is measured against
(``hidden_checks.honest_failures``).  The demo class's one-bug samples are these
cells too, so what the catalogue shows is what a refund is measured against.
"""

# code -> (answer cell grade_id, its source with that one mistake)
SOURCES = {
    "scores-transposed": ("attention_scores", """
def attention_scores(q, k):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("d_k mismatch")
    return k @ q.transpose(-2, -1)
"""),
    "scores-scaled-early": ("attention_scores", """
def attention_scores(q, k):
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("d_k mismatch")
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
"""),
    "scale-missing": ("scale_scores", """
def scale_scores(scores, d_k):
    return scores
"""),
    "scale-by-dk": ("scale_scores", """
def scale_scores(scores, d_k):
    return scores / d_k
"""),
    "scale-multiplied": ("scale_scores", """
def scale_scores(scores, d_k):
    return scores * math.sqrt(d_k)
"""),
    "mask-inverted": ("apply_mask", """
def apply_mask(scores, mask=None):
    if mask is None:
        return scores
    if mask.dtype == torch.bool:
        return scores.masked_fill(mask, float("-inf"))
    return scores + mask
"""),
    "mask-zero-fill": ("apply_mask", """
def apply_mask(scores, mask=None):
    if mask is None:
        return scores
    if mask.dtype == torch.bool:
        return scores.masked_fill(~mask, 0.0)
    return scores + mask
"""),
    "mask-ignored": ("apply_mask", """
def apply_mask(scores, mask=None):
    return scores
"""),
    "half-overflow": ("apply_mask", """
def apply_mask(scores, mask=None):
    if mask is None:
        return scores
    if mask.dtype == torch.bool:
        return scores.masked_fill(~mask, -1e9)
    return scores + mask
"""),
    "fully-masked-nan": ("softmax", """
def softmax(x, dim=-1):
    exps = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return exps / exps.sum(dim=dim, keepdim=True)
"""),
    "softmax-unstable": ("softmax", """
def softmax(x, dim=-1):
    exps = torch.exp(x)
    total = exps.sum(dim=dim, keepdim=True)
    return torch.where(total > 0, exps / total, torch.zeros_like(exps))
"""),
    "softmax-global-max": ("softmax", """
def softmax(x, dim=-1):
    m = x.max()
    m = m if torch.isfinite(m) else torch.zeros_like(m)
    exps = torch.exp(x - m)
    total = exps.sum(dim=dim, keepdim=True)
    return exps / torch.where(total > 0, total, torch.ones_like(total))
"""),
    "dtype-changed": ("softmax", """
def softmax(x, dim=-1):
    x = x.float()
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    exps = torch.exp(x - m)
    total = exps.sum(dim=dim, keepdim=True)
    return exps / torch.where(total > 0, total, torch.ones_like(total))
"""),
    "assumes-square": ("scaled_dot_product_attention", """
def scaled_dot_product_attention(q, k, v, mask=None):
    L = q.shape[-2]
    scores = scale_scores(attention_scores(q, k), q.shape[-1]).reshape(*q.shape[:-1], L)
    weights = softmax(apply_mask(scores, mask), dim=-1)
    return attention_output(weights, v), weights
"""),
    "returns-not-tuple": ("scaled_dot_product_attention", """
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = scale_scores(attention_scores(q, k), q.shape[-1])
    return attention_output(softmax(apply_mask(scores, mask), dim=-1), v)
"""),
    "shape-error-missing": ("attention_scores", """
def attention_scores(q, k):
    return q @ k.transpose(-2, -1)
"""),
    "scale-wrong-dim": ("scaled_dot_product_attention", """
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = scale_scores(attention_scores(q, k), v.shape[-1])
    weights = softmax(apply_mask(scores, mask), dim=-1)
    return attention_output(weights, v), weights
"""),
    "mask-after-softmax": ("scaled_dot_product_attention", """
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = scale_scores(attention_scores(q, k), q.shape[-1])
    weights = softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask
    return attention_output(weights, v), weights
"""),
    "inplace-mutation": ("apply_mask", """
def apply_mask(scores, mask=None):
    if mask is None:
        return scores
    if mask.dtype == torch.bool:
        return scores.masked_fill_(~mask, float("-inf"))
    scores += mask
    return scores
"""),
    "softmax-dim-ignored": ("softmax", """
def softmax(x, dim=-1):
    m = x.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    exps = torch.exp(x - m)
    total = exps.sum(dim=-1, keepdim=True)
    return exps / torch.where(total > 0, total, torch.ones_like(total))
"""),
    "scale-low-precision": ("scale_scores", """
def scale_scores(scores, d_k):
    return scores / torch.sqrt(torch.tensor(d_k, dtype=torch.float32))
"""),
    "softmax-wrong-dim": ("scaled_dot_product_attention", """
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = scale_scores(attention_scores(q, k), q.shape[-1])
    weights = softmax(apply_mask(scores, mask), dim=-2)
    return attention_output(weights, v), weights
"""),
    "output-used-k": ("scaled_dot_product_attention", """
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = scale_scores(attention_scores(q, k), q.shape[-1])
    weights = softmax(apply_mask(scores, mask), dim=-1)
    return weights @ k, weights
"""),
    "causal-off-by-one": ("causal_mask", """
def causal_mask(L, S, device=None):
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(-1)
"""),
    "causal-bottom-right": ("causal_mask", """
def causal_mask(L, S, device=None):
    return torch.ones(L, S, dtype=torch.bool, device=device).tril(S - L)
"""),
    "padding-polarity": ("key_padding_to_attn_mask", """
def key_padding_to_attn_mask(key_padding_mask):
    return key_padding_mask.bool()[:, None, None, :]
"""),
    "padding-shape": ("key_padding_to_attn_mask", """
def key_padding_to_attn_mask(key_padding_mask):
    return ~key_padding_mask.bool()
"""),
}


def replacement(code: str) -> dict:
    """{grade_id: source} of the honest answer cell for `code` (a demo sample's `replace`)."""
    grade_id, source = SOURCES[code]
    return {grade_id: source}
