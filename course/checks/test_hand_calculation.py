"""Hand calculation: d_k = 4, q = [2,0,0,0], keys [0], [ln2], [ln5], values 8, 4, 16."""
import math

from autograder.grading.assertions import expect_number
from autograder.grading.check_api import points

PART = "hand_calculation"

RAW = [0.0, 2 * math.log(2), 2 * math.log(5)]
SCALED = [x / 2 for x in RAW]
VALUES = [8.0, 4.0, 16.0]


def _softmax(xs):
    exps = [math.exp(x) for x in xs]
    return [e / sum(exps) for e in exps]


def _out(weights):
    return sum(w * v for w, v in zip(weights, VALUES))


WEIGHTS = _softmax(SCALED)
UNSCALED_WEIGHTS = _softmax(RAW)
BY_DK_WEIGHTS = _softmax([x / 4 for x in RAW])


@points(2)
def test_raw_scores(student):
    """原始分数 q·k"""
    expect_number(student.get("hand_scores"), RAW, what="hand_scores",
                  codes_by_value=[("scores-scaled-early", SCALED)])


@points(2)
def test_scaled_scores(student):
    """缩放后的分数"""
    expect_number(student.get("hand_scaled"), SCALED, what="hand_scaled",
                  codes_by_value=[("scale-missing", RAW), ("scale-by-dk", [x / 4 for x in RAW]),
                                  ("scale-multiplied", [x * 2 for x in RAW])])


@points(2)
def test_weights(student):
    """softmax 权重"""
    expect_number(student.get("hand_weights"), WEIGHTS, what="hand_weights",
                  codes_by_value=[("scale-missing", UNSCALED_WEIGHTS), ("scale-by-dk", BY_DK_WEIGHTS)])


@points(2)
def test_output(student):
    """加权输出"""
    expect_number(student.get("hand_output"), _out(WEIGHTS), what="hand_output",
                  codes_by_value=[("scale-missing", _out(UNSCALED_WEIGHTS)), ("scale-by-dk", _out(BY_DK_WEIGHTS)),
                                  ("output-used-k", sum(w * k for w, k in zip(WEIGHTS, RAW)))])


@points(2)
def test_masked_output(student):
    """屏蔽第三个 Key 后的输出"""
    kept = _softmax(SCALED[:2])
    zero_fill = _softmax([SCALED[0], SCALED[1], 0.0])
    expect_number(student.get("hand_masked_output"), _out(kept + [0.0]), what="hand_masked_output",
                  codes_by_value=[("mask-zero-fill", _out(zero_fill)), ("mask-after-softmax", _out(WEIGHTS[:2] + [0.0])),
                                  ("mask-ignored", _out(WEIGHTS)), ("mask-inverted", VALUES[2])])
