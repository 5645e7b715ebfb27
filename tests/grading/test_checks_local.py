"""The hidden checks against in-process implementations (fast, no sandbox).

Reference → full marks; each device/dtype mutant → loses the device_dtype
points with the right code; and the score is the same whether or not the
grader "has" CUDA (simulated by mapping cuda to cpu).
"""
from pathlib import Path

import pytest
import torch

from autograder.grading.hidden_checks import run_checks
from autograder.grading.local_student import LocalStudent, reference_namespace
from tests.support import points
from tests.support.checks import FUNCTION_PARTS, PARTS
from tests.support.points import AUTOMATIC

ROOT = Path(__file__).resolve().parents[2]


def _grade(namespace, parts=PARTS, cuda=False):
    student = LocalStudent(namespace, device_map={"cuda": "cpu"} if cuda else None)
    return run_checks(student, parts, seed_key=("sdpa", "local"), context={"cuda": cuda}), student


def test_reference_gets_every_point():
    results, _ = _grade(reference_namespace())
    lost = {p: [(c.name, c.message) for c in r.checks if not c.passed]
            for p, r in results.items() if r.points != r.max_points}
    assert not lost
    assert sum(r.max_points for r in results.values()) == AUTOMATIC
    # each part's check weights (`@pytest.mark.points`) add up to its cell's points in the notebook
    assert {part: r.max_points for part, r in results.items()} == points.part_points()


def _with(**overrides):
    namespace = reference_namespace()
    for source in overrides.values():
        exec(source, namespace)  # noqa: S102 - trusted test mutants
    return namespace


DEVICE_MUTANTS = {
    "device-mismatch": _with(apply_mask='''
def apply_mask(scores, mask=None):
    if mask is None:
        return scores
    fill = torch.full(scores.shape, float("-inf"), dtype=scores.dtype)
    return torch.where(mask, scores, fill)
'''),
    "dtype-changed": _with(scale_scores='''
def scale_scores(scores, d_k):
    return scores.float() / math.sqrt(d_k)
'''),
    "device-mismatch-causal": _with(causal_mask='''
def causal_mask(L, S, device=None):
    return torch.ones(L, S, dtype=torch.bool).tril()
'''),
    "half-overflow": _with(apply_mask='''
def apply_mask(scores, mask=None):
    if mask is None:
        return scores
    return scores.masked_fill(~mask, -1e9)
'''),
}


@pytest.mark.parametrize("code", sorted(DEVICE_MUTANTS))
@pytest.mark.parametrize("cuda", [False, True], ids=["cpu-only", "with-cuda"])
def test_device_mutants_lose_device_points(code, cuda):
    results, _ = _grade(DEVICE_MUTANTS[code], parts=["device_dtype"], cuda=cuda)
    part = results["device_dtype"]
    assert part.points < part.max_points
    assert code.replace("-causal", "") in part.codes


@pytest.mark.parametrize("name", ["reference"] + sorted(DEVICE_MUTANTS))
def test_score_does_not_depend_on_cuda(name):
    namespace = reference_namespace() if name == "reference" else DEVICE_MUTANTS[name]
    without, _ = _grade(namespace, cuda=False)
    with_cuda, student = _grade(namespace, cuda=True)
    assert any(device == "cuda" for _, device in student.calls), "the CUDA path did not run"
    assert {p: r.points for p, r in without.items()} == {p: r.points for p, r in with_cuda.items()}


def test_data_dependent_code_is_not_penalised_on_meta():
    """A correct softmax with a Python-level branch cannot run on meta; that is not a device bug."""
    namespace = _with(softmax='''
def softmax(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    if bool(torch.isinf(m).any()):
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    s = e.sum(dim=dim, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))
''')
    results, _ = _grade(namespace, parts=["device_dtype", "softmax"])
    assert results["device_dtype"].points == results["device_dtype"].max_points
    assert results["softmax"].points == results["softmax"].max_points


def test_cpu_scalar_fill_value_is_not_a_device_bug():
    """masked_fill with a 0-dim CPU tensor works on CUDA; meta rejects it, so it must not count."""
    namespace = _with(apply_mask='''
def apply_mask(scores, mask=None):
    if mask is None:
        return scores
    if mask.dtype == torch.bool:
        return scores.masked_fill(~mask, torch.tensor(float("-inf")))
    return scores + mask.to(scores.dtype)
''')
    results, _ = _grade(namespace, parts=["device_dtype", "apply_mask"])
    assert results["device_dtype"].points == results["device_dtype"].max_points
    assert results["apply_mask"].points == results["apply_mask"].max_points


def test_gpu_check_script_skips_cleanly_and_dry_runs():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "tools.gpu_check"], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: run `make gpu-check` instead")
    assert proc.returncode == 0 and "no CUDA device" in proc.stdout
    dry = subprocess.run([sys.executable, "-m", "tools.gpu_check", "--dry-run-on-cpu"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert dry.returncode == 0, dry.stderr
    device_points = points.part_points()["device_dtype"]
    assert "reference" in dry.stdout and f"device_dtype {device_points:g}/{device_points:g}" in dry.stdout


def test_unimplemented_functions_get_no_misconception_codes():
    """An empty notebook loses every point, but no code may claim to explain it."""
    namespace = reference_namespace()
    for name in ("attention_scores", "scale_scores", "apply_mask", "softmax", "attention_output",
                 "scaled_dot_product_attention", "causal_mask", "key_padding_to_attn_mask", "fixed_attention"):
        exec(f"def {name}(*args, **kwargs):\n    raise NotImplementedError()", namespace)  # noqa: S102
    results, _ = _grade(namespace, parts=FUNCTION_PARTS)
    assert all(r.points == 0 for r in results.values())
    assert not [code for r in results.values() for code in r.codes]


def test_hand_answers_rounded_to_two_decimals_keep_their_points():
    namespace = _with(answers="""
hand_scores = [0.0, 1.39, 3.22]
hand_scaled = [0.0, 0.69, 1.61]
hand_weights = [0.13, 0.25, 0.63]
hand_output = 12.0
hand_masked_output = 5.33
""")
    results, _ = _grade(namespace, parts=["hand_calculation"])
    assert results["hand_calculation"].points == results["hand_calculation"].max_points
    wrong = _with(answers="hand_masked_output = 8.0")
    results, _ = _grade(wrong, parts=["hand_calculation"])
    assert results["hand_calculation"].codes == ["mask-zero-fill"]


def test_failing_checks_are_scored_without_pytest_rendering_their_traceback(monkeypatch):
    """pytest's traceback (source excerpts, the check's module parsed again) costs CPU that nothing reads."""
    from _pytest.nodes import Node

    namespace = _with(scale="def scale_scores(scores, d_k):\n    return scores / d_k\n")
    expected, _ = _grade(namespace, ["scale_scores"])
    assert any(not c.passed for c in expected["scale_scores"].checks)

    rendered, original = [], Node._repr_failure_py

    def counted(self, *args, **kwargs):
        rendered.append(self.name)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Node, "_repr_failure_py", counted)
    results, _ = _grade(namespace, ["scale_scores"])
    monkeypatch.undo()
    assert rendered == []
    assert [(c.name, c.passed, c.points, c.message) for c in results["scale_scores"].checks] == \
        [(c.name, c.passed, c.points, c.message) for c in expected["scale_scores"].checks]
