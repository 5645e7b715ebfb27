"""The part ``attention_output``: the weighted sum of the values, weights @ v."""
from .references import weighted_sum
from .spec import GradedFunction

PART = "attention_output"

FUNCTIONS = (
    GradedFunction("attention_output", ("weights", "v"), axes=(("L", "S"), ("S", "E")), reference=weighted_sum),
)
# Its one mistake, using K for V, shows in the attention part that composes it (output-used-k).
MISTAKES = ()
