"""The class of ``python -m benchmarks class``: N students that look like a real one, seeded and deterministic.

About 70% correct (the demo's correct variants), 25% buggy (one sample per
misconception, in turn) and about 5% that make grading hard, split between
hanging, crashing and unreadable notebooks (at least one of each, so small
classes show every kind).  Payloads come from the sample catalogue where it
has them (``catalogue/``); the few it lacks are defined here.  A
student id names its sample (``s0007-hang-loop-cell``), so timings can be
grouped by kind without any other bookkeeping.
"""
from __future__ import annotations

import collections
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import nbformat

import catalogue
from autograder.demo import course
from autograder.demo.submissions import BUGS, CORRECT, Sample

KINDS = ("correct", "buggy", "hanging", "crashing", "unreadable")
RARE = ("hanging", "crashing", "unreadable")
PREFIX = {"correct": "correct", "bug": "buggy", "hang": "hanging", "crash": "crashing", "unreadable": "unreadable"}

_CATALOGUE = {s.name: s for s in catalogue.CATALOGUE}
# Hanging and crashing samples the catalogue lacks (the catalogue grades attacks, not accidents).
_EXTRA = {
    "hang-sleep-cell": Sample("hang-sleep-cell", "attack", "lose", append=("import time\ntime.sleep(3600)",)),
    "crash-segfault": Sample("crash-segfault", "attack", "lose", append=("import ctypes\nctypes.string_at(0)",)),
    "crash-import-error": Sample("crash-import-error", "attack", "lose",
                                 append=("import my_helpers_from_home  # a module only on the student's laptop",)),
}
# label -> where its notebook comes from: a catalogue sample, one of _EXTRA, or raw bytes.
_RENAMED = {
    "correct-solution-notebook": "solution-notebook",
    "hang-loop-cell": "attack-infinite-loop-cell",
    "hang-loop-function": "attack-infinite-loop-function",  # scale_scores loops; sdpa calls it
    "crash-exit": "attack-exit-kernel",
    "crash-kill": "attack-kill-kernel",
}
SAMPLES = {
    "correct": [s.name if s.name.startswith("correct") else f"correct-{s.name}" for s in CORRECT],
    "buggy": [s.name for s in BUGS],
    "hanging": ["hang-loop-cell", "hang-loop-function", "hang-sleep-cell"],
    "crashing": ["crash-exit", "crash-kill", "crash-segfault", "crash-import-error"],
    "unreadable": ["unreadable-empty", "unreadable-truncated"],
}


@dataclass(frozen=True)
class Student:
    id: str
    kind: str
    sample: str


def kind_of(student_id: str) -> str:
    """The kind a generated student id carries (``s0007-hang-loop-cell`` -> hanging)."""
    return PREFIX[student_id.split("-")[1]]


def counts(n: int, rare: float = 0.05) -> dict[str, int]:
    """Students per kind: rare kinds share `rare` of n (at least one each), buggy 25%, the rest correct."""
    if rare <= 0:
        each = 0
    else:
        each = max(1, round(n * rare / len(RARE)))
    buggy = round(n * 0.25)
    out = {"correct": n - buggy - each * len(RARE), "buggy": buggy, **{k: each for k in RARE}}
    if out["correct"] < 0:
        raise ValueError(f"--n {n} is too small for one hanging, crashing and unreadable notebook each")
    return out


def generate(n: int, seed: int = 0, rare: float = 0.05) -> list[Student]:
    """The class: each kind's samples taken in turn from a seeded start, then shuffled with the seed."""
    rng = random.Random(seed)
    drawn = []
    for kind, count in counts(n, rare).items():
        names = SAMPLES[kind]
        start = rng.randrange(len(names))
        drawn += [(kind, names[(start + i) % len(names)]) for i in range(count)]
    rng.shuffle(drawn)
    return [Student(f"s{i:04d}-{sample}", kind, sample) for i, (kind, sample) in enumerate(drawn)]


def of_kind(n: int, kind: str) -> list[Student]:
    """n students of one kind, its samples in turn (``--profile --kind correct`` measures the CPU floor)."""
    names = SAMPLES[kind]
    return [Student(f"s{i:04d}-{names[i % len(names)]}", kind, names[i % len(names)]) for i in range(n)]


def sample_of(students: list[Student], k: int) -> list[Student]:
    """A stratified subset of about k students: each kind in proportion, every kind present at least once."""
    by_kind = collections.defaultdict(list)
    for s in students:
        by_kind[s.kind].append(s)
    chosen = set()
    for members in by_kind.values():
        chosen.update(s.id for s in members[:max(1, round(k * len(members) / len(students)))])
    return [s for s in students if s.id in chosen]


def describe(students: list[Student]) -> list[str]:
    """The mix, as printed: counts per kind, then per sample."""
    n = len(students)
    per_kind = collections.Counter(s.kind for s in students)
    per_sample = collections.Counter(s.sample for s in students)
    lines = ["  " + ", ".join(f"{kind} {per_kind[kind]} ({100 * per_kind[kind] / n:.0f}%)" for kind in KINDS
                              if per_kind[kind])]
    for kind in KINDS:
        names = [f"{name} {per_sample[name]}" for name in SAMPLES[kind] if per_sample[name]]
        if names:
            lines.append(f"  {kind + ':':12}" + ", ".join(names))
    return lines


def payload(sample: str, release: nbformat.NotebookNode) -> bytes:
    """The bytes a student with this sample submits."""
    if sample.startswith("unreadable-"):
        whole = nbformat.writes(catalogue.build(_CATALOGUE["correct-reference"], release)).encode()
        return b"" if sample == "unreadable-empty" else whole[: len(whole) // 2]
    source = _EXTRA.get(sample) or _CATALOGUE[_RENAMED.get(sample, sample)]
    return nbformat.writes(catalogue.build(source, release)).encode()


def write_class(base: Path, students: list[Student]) -> Path:
    """A released course at `base` (replaced) with every student's submission in submitted/."""
    if base.exists():
        shutil.rmtree(base)
    course.make_course(base)
    course.nbgrader(base, "generate_assignment", course.ASSIGNMENT, "--force")
    release = course.release_notebook(base)
    built = {}
    for s in students:
        if s.sample not in built:
            built[s.sample] = payload(s.sample, release)
        path = base / "submitted" / s.id / course.ASSIGNMENT / f"{course.ASSIGNMENT}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(built[s.sample])
    return base
