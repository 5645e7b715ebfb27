"""The hidden checks' parts, in grading order, for tests that run them in-process."""

PARTS = ["hand_calculation", "shapes", "why_scale", "attention_scores", "scale_scores", "apply_mask", "softmax",
         "attention_output", "scaled_dot_product_attention", "causal_mask", "key_padding_to_attn_mask",
         "causal_alignment", "mha_mask", "empty_rows", "debugging_choice", "debugging_fix", "dropout", "device_dtype"]
# Parts graded by calling the student's functions (the others read answer variables).
FUNCTION_PARTS = ["attention_scores", "scale_scores", "apply_mask", "softmax", "attention_output",
                  "scaled_dot_product_attention", "causal_mask", "key_padding_to_attn_mask", "debugging_fix",
                  "device_dtype"]
