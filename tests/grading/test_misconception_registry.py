"""The misconception registry is the one declaration of a code: everything else that names one agrees with it."""
import ast
from pathlib import Path

import nbformat
import pytest
import torch

from autograder.demo.submissions import BUGS, CORRECT
from autograder.grading import composition, honest, mutants
from autograder.grading.assertions import forbidden_codes
from autograder.grading.misconceptions import CATALOGUE, COMPOSITE_HOME
from autograder.notebook.cells import is_test_cell, part_of
from autograder.sandbox.guest import forbidden

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "source" / "sdpa" / "sdpa.ipynb"
# Every module that names a code: the course (its declarations and checks), the grading engine, the demo
# class, the catalogue.
NAMING_MODULES = sorted([*(ROOT / "course").rglob("*.py"), *(ROOT / "autograder" / "grading").rglob("*.py"),
                         ROOT / "autograder" / "demo" / "submissions.py", *(ROOT / "catalogue").glob("*.py")])


def _parts():
    nb = nbformat.read(str(SOURCE), as_version=4)
    return {part_of(cell) for cell in nb.cells if is_test_cell(cell)} - {None}


def test_every_home_is_a_graded_part_of_the_source_notebook():
    parts = _parts()
    assert {m.code: m.home for m in CATALOGUE.values() if m.home not in parts} == {}


def test_credit_elsewhere_is_given_only_for_codes_with_an_honest_holder():
    assert COMPOSITE_HOME == composition.HOME
    assert set(COMPOSITE_HOME) <= set(honest.SOURCES)


def _representative_calls():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 4, 5), torch.randn(2, 3, 4, 5), torch.randn(2, 3, 4, 6)
    k_long, v_long = torch.randn(2, 3, 6, 5), torch.randn(2, 3, 6, 6)
    mask = torch.rand(4, 4) > 0.3
    scores = q @ k.transpose(-2, -1)
    return {
        "attention_scores": [(q, k)],
        "scale_scores": [(scores, 5)],
        "apply_mask": [(scores, mask), (scores, mask.float())],
        "softmax": [(q,)],
        "scaled_dot_product_attention": [(q, k, v, mask), (q, k_long, v_long, None)],
        "fixed_attention": [(q, k, v, mask)],
        "causal_mask": [(4, 6)],
        "key_padding_to_attn_mask": [(torch.rand(2, 4) > 0.5,)],
    }


def test_modelled_by_names_exactly_the_functions_whose_mutants_reproduce_the_code():
    found = {}
    for function, calls in _representative_calls().items():
        for args in calls:
            for code in mutants.variants(function, args, {}):
                found.setdefault(code, set()).add(function)
    declared = {m.code: set(m.modelled_by) for m in CATALOGUE.values() if m.modelled_by}
    assert found == declared


def _named_codes(path):
    """String constants in the places a module names a misconception code."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []

    def strings(node):
        return [(n.value, n.lineno) for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]

    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in ("codes", "also", "codes_by_value"):
            value = node.value
            if node.arg == "codes_by_value" and isinstance(value, (ast.List, ast.Tuple)):
                out += [(e.elts[0].value, e.lineno) for e in value.elts
                        if isinstance(e, ast.Tuple) and isinstance(e.elts[0], ast.Constant)]
            elif isinstance(value, (ast.List, ast.Tuple, ast.Constant)):
                out += strings(value)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append"
              and isinstance(node.func.value, (ast.Name, ast.Attribute))
              and getattr(node.func.value, "id", getattr(node.func.value, "attr", "")) == "codes"):
            out += [s for arg in node.args for s in strings(arg)]
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "codes" for t in node.targets):
            value = node.value
            for branch in (value.body, value.orelse) if isinstance(value, ast.IfExp) else (value,):
                if isinstance(branch, (ast.List, ast.Tuple)):
                    out += strings(branch)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "CheckFailed" and len(node.args) > 1:
            if isinstance(node.args[1], (ast.List, ast.Tuple)):
                out += strings(node.args[1])
    return out


def test_the_code_reader_finds_codes_where_modules_name_them():
    # The reader below must see the forms the modules use; a reader that sees nothing would pass vacuously.
    named = {code for path in NAMING_MODULES for code, _ in _named_codes(path)}
    assert {"assumes-square", "shape-error-missing", "half-overflow", "scale-missing", "padding-shape"} <= named


@pytest.mark.parametrize("path", NAMING_MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_code_a_module_names_is_registered(path):
    unknown = [(code, line) for code, line in _named_codes(path) if code not in CATALOGUE]
    assert unknown == []


def test_every_forbidden_family_has_a_registered_code():
    assert set(forbidden.FAMILIES) <= set(CATALOGUE)


def test_every_op_the_tripwire_blocks_has_a_code():
    ops = forbidden.forbidden_ops()
    assert ops, "no aten op matched the families: the pattern or torch changed"
    assert [op for op in ops if forbidden.code_of_blocked(op) is None] == []
    for op in ("aten::_efficient_attention_forward", "aten::_flash_attention_forward",
               "aten::_cudnn_attention_forward"):
        if op in ops:
            assert forbidden_codes([op]) == ["sdpa-builtin"]
    assert forbidden_codes(["torch.nn.attention.flex_attention.flex_attention"]) == ["sdpa-builtin"]
    assert forbidden_codes(["aten::_masked_softmax", "torch.Tensor.softmax"]) == ["softmax-builtin"] * 2
    assert forbidden_codes(["aten::_native_multi_head_attention"]) == ["sdpa-builtin"]


def test_every_python_function_the_tripwire_wraps_has_a_code():
    import importlib

    names = []
    for path in forbidden.PY_NAMESPACES:
        try:
            owner = torch.Tensor if path == "torch.Tensor" else importlib.import_module(path)
        except ImportError:
            continue
        names += [f"{path}.{attr}" for attr in dir(owner) if forbidden.blocked(attr)]
    assert names
    assert [name for name in names if not forbidden_codes([name])] == []


def test_every_misconception_has_its_one_bug_sample_in_its_home_part():
    samples = {s.name: s for s in BUGS}
    answer_cell = {"hand_calculation": "hand-calc-answers"}  # parts whose answer cell has another id
    problems = []
    for m in CATALOGUE.values():
        sample = samples.get(m.sample_name)
        if sample is None:
            problems.append((m.code, "no sample"))
        elif m.code not in sample.codes:
            problems.append((m.code, f"{sample.name} does not expect the code"))
        elif m.home != "device_dtype" and answer_cell.get(m.home, m.home) not in sample.replace:
            # (the device and dtype part has no answer cell of its own: it grades every function)
            problems.append((m.code, f"{sample.name} replaces {sorted(sample.replace)}, not the home {m.home}"))
    assert problems == []


def test_correct_samples_name_no_code():
    assert [s.name for s in CORRECT if s.codes] == []
