"""The part ``debugging_fix``: the attention the student repaired in the debugging task (output only)."""
from . import references
from .scaled_dot_product_attention import ATTENTION_MODELS, output_shape_codes, picked
from .spec import GradedFunction

PART = "debugging_fix"

FUNCTIONS = (
    GradedFunction("fixed_attention", ("q", "k", "v", "mask"),
                   axes=(("L", "D"), ("S", "D"), ("S", "E"), ("L", "S")), reference=references.sdpa_output,
                   models=ATTENTION_MODELS, variants=picked(lambda r: None if r is None else r[0]), shape_codes=output_shape_codes,
                   computes_attention=True),
)
# The mistakes it may show live in the parts they belong to: this part grades the repair.
MISTAKES = ()
