"""The course: what is taught and graded, apart from the engine that grades it (``autograder``).

One module per graded part declares its functions and the mistakes that live
in it (``course.spec``); ``course/checks`` holds the hidden checks, one file
per part.  This module gathers the declarations for the engine:

- `FUNCTIONS`: {name: GradedFunction} of every function a check calls;
- `PART_FUNCTIONS`: {part: names of the functions its checks call};
- `MISTAKES`: {code: (home part, Mistake)}: each mistake with the part that
  declares it, the part that charges it.
"""
import importlib

from .spec import GradedFunction, Mistake

# The parts that grade functions or are the home of a mistake, in the order the lesson teaches them.
PARTS = ("attention_scores", "scale_scores", "apply_mask", "softmax", "attention_output",
         "scaled_dot_product_attention", "causal_mask", "key_padding_to_attn_mask", "debugging_fix", "device_dtype")


def _gather():
    functions, part_functions, mistakes = {}, {}, {}
    for part in PARTS:
        module = importlib.import_module(f"{__name__}.{part}")
        assert module.PART == part, f"course/{part}.py declares PART = {module.PART!r}"
        for function in module.FUNCTIONS:
            assert function.name not in functions, f"{function.name} is declared twice"
            functions[function.name] = function
        part_functions[part] = tuple(f.name for f in module.FUNCTIONS) + tuple(getattr(module, "ALSO_CALLS", ()))
        for mistake in module.MISTAKES:
            assert mistake.code not in mistakes, f"{mistake.code} is declared twice"
            mistakes[mistake.code] = (part, mistake)
    return functions, {p: fs for p, fs in part_functions.items() if fs}, mistakes


FUNCTIONS: dict[str, GradedFunction]
PART_FUNCTIONS: dict[str, tuple[str, ...]]
MISTAKES: dict[str, tuple[str, Mistake]]
FUNCTIONS, PART_FUNCTIONS, MISTAKES = _gather()
