"""A correct answer keeps every point whatever the student's seed (inputs are seeded per student id).

The checks run in this process on each correct sample's functions (``LocalStudent``) for many student
ids: a tolerance that fits one seed's inputs but not another's shows up as a lost point.  Found this way:
softmax as exp(x - logsumexp(x)) lost 2 points on 2% of seeds (``cases.EQUIVALENTS``).
"""
import nbformat
import pytest
import torch

from autograder.demo import submissions
from autograder.grading import cases, tolerances
from autograder.grading.hidden_checks import run_checks
from autograder.grading.local_student import LocalStudent, reference_namespace
from autograder.notebook.cells import is_test_cell, part_of
from catalogue import ROOT

SEEDS = 30
CODE_SAMPLES = [s for s in submissions.CORRECT if s.replace]


def _parts():
    nb = nbformat.read(str(ROOT / "source" / "sdpa" / "sdpa.ipynb"), as_version=4)
    return [p for p in (part_of(c) for c in nb.cells if is_test_cell(c)) if p]


@pytest.mark.slow
@pytest.mark.parametrize("sample", CODE_SAMPLES, ids=lambda s: s.name)
def test_correct_samples_keep_every_point_for_many_student_ids(sample):
    namespace = reference_namespace()
    for source in sample.replace.values():
        exec(source, namespace)  # noqa: S102 - our own sample code
    parts = _parts()
    for i in range(SEEDS):
        results = run_checks(LocalStudent(namespace), parts, seed_key=("sdpa", f"{sample.name}-{i}"))
        lost = {c.name: c.message for r in results.values() for c in r.checks if not c.passed}
        assert not lost, f"student id {sample.name}-{i}: {lost}"


@pytest.mark.parametrize("formulation", [
    lambda x: torch.exp(x - torch.logsumexp(x, -1, keepdim=True)),
    lambda x: torch.log_softmax(x, -1).exp(),
], ids=["exp-minus-logsumexp", "log_softmax-exp"])
def test_softmax_tolerance_covers_correct_formulations_on_large_scores(formulation):
    """The inputs of the fully-masked-row check: one row of scores in the thousands."""
    for seed in range(500):
        rng = torch.Generator().manual_seed(seed)
        x = cases.randn(rng, 3, 5)
        x[0] = x[0] * 1e3 + 2e3
        x[1] = float("-inf")
        x[2, :2] = float("-inf")
        student = torch.nan_to_num(formulation(x), nan=0.0)
        tol = cases.default_tolerance("softmax", (x,), {})
        assert tolerances.close(student, cases.softmax(x), tol), (seed, tol.describe())
