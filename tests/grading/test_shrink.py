"""The smallest failing example: shrunk by re-running the student's function, never changing a score."""
import torch

from autograder.grading import honest, shrink
from autograder.grading.assertions import Replay
from autograder.grading.hidden_checks import run_checks
from autograder.grading.local_student import LocalStudent, reference_namespace


def _student(code=None, source=None):
    namespace = reference_namespace()
    if code:
        exec(honest.SOURCES[code][1], namespace)  # noqa: S102 - our own model of the mistake
    if source:
        exec(source, namespace)  # noqa: S102 - test code
    return LocalStudent(namespace)


def _numel(text):
    return text.count(",") + 1


def test_an_inverted_mask_shrinks_to_a_handful_of_numbers():
    scores = torch.randn(2, 3, 5, 7, dtype=torch.float64)
    mask = torch.rand(5, 7) > 0.4
    example = shrink.shrink(_student("mask-inverted"), Replay("apply_mask", (scores, mask)))
    assert "已自动缩小" in example["缩小"] and "2×3×5×7" in example["缩小"]
    assert "[1, 1, 1, 1]" in example["输入"], example
    assert "-inf" in example["你的输出"] + example["期望输出"] and _numel(example["期望输出"]) <= 4


def test_shrinking_keeps_the_failure_it_started_from():
    """A function wrong only when S > 3 cannot be shrunk below 4 keys."""
    wide = '''
_right = softmax
def softmax(x, dim=-1):
    out = _right(x, dim)
    return out * 2 if x.shape[-1] > 3 else out
'''
    example = shrink.shrink(_student(source=wide), Replay("softmax", (torch.randn(3, 6, dtype=torch.float64),)))
    assert "[1, 4]" in example["输入"], example


def test_a_case_the_budget_cannot_shrink_is_shown_as_it_was(monkeypatch):
    monkeypatch.setattr(shrink, "MAX_CALLS", 1)
    scores = torch.randn(2, 3, dtype=torch.float64)
    example = shrink.shrink(_student("scale-missing"), Replay("scale_scores", (scores, 4)))
    assert "没能在时限内" in example["缩小"] and "[2, 3]" in example["输入"]


def test_a_call_that_no_longer_fails_gives_no_example():
    scores = torch.randn(2, 3, dtype=torch.float64)
    assert shrink.shrink(_student(), Replay("scale_scores", (scores, 4))) is None


def test_shrinking_runs_after_the_scores_are_decided():
    """A stateful function that turns wrong after many calls: the extra calls of shrinking change no score."""
    counting = '''
_CALLS = [0]
_right = scale_scores
def scale_scores(scores, d_k):
    _CALLS[0] += 1
    return scores if _CALLS[0] == 1 else _right(scores, d_k)
'''
    results = run_checks(_student(source=counting), ["scale_scores"], seed_key=("sdpa", "s"), context={})
    lost = results["scale_scores"].max_points - results["scale_scores"].points
    failed = [c for c in results["scale_scores"].checks if not c.passed]
    assert len(failed) == 1 and lost == failed[0].max_points  # only the first call was wrong


def test_a_search_that_fails_keeps_the_example_and_every_score(monkeypatch):
    """Red team: a runner's malformed reply during shrinking (a number no float holds) escaped `run_checks`
    and left the notebook with no grade at all. Shrinking runs after the scores are decided; if it fails,
    the check keeps its unshrunk example and the part its points."""
    student = _student("mask-inverted")
    before = run_checks(student, ["apply_mask"], seed_key=("sdpa", "s"), context={})

    def broken(*_args):
        raise OverflowError("int too large to convert to float")

    monkeypatch.setattr(shrink, "shrink", broken)
    after = run_checks(student, ["apply_mask"], seed_key=("sdpa", "s"), context={})
    assert after["apply_mask"].points == before["apply_mask"].points < after["apply_mask"].max_points
    failed = [c for c in after["apply_mask"].checks if not c.passed and c.replay is not None]
    assert failed and all(c.example for c in failed)
