"""``python -m benchmarks sandbox-cost``: what the sandbox costs, stock `nbgrader autograde` with and without it.

What it measures and why: every submission runs in a sandbox (bubblewrap, a
fresh runner); this is its price per submission, and the check that it
changes no score.

Usage: python -m benchmarks sandbox-cost [--n 8]

Grades the same N sample submissions (a mix of correct and buggy ones) in two
fresh course copies, once sandboxed and once with SDPA_SANDBOX=off, checks
that every score is identical, and prints seconds per submission for both.
"""
import os
import sys
import tempfile
import time
from pathlib import Path

import catalogue
from autograder.demo import course

MIX = ["correct-reference", "bug-mask-inverted", "bug-scale-by-dk", "correct-alternatives", "bug-softmax-unstable",
       "bug-causal-off-by-one", "correct-noisy", "bug-padding-polarity"]


def grade(root, n, sandbox):
    course.nbgrader(root, "generate_assignment", course.ASSIGNMENT, "--force")
    release = course.release_notebook(root)
    by_name = {s.name: s for s in catalogue.CATALOGUE}
    for i in range(n):
        course.submit(root, f"s{i:03d}", catalogue.build(by_name[MIX[i % len(MIX)]], release))
    if not sandbox:
        os.environ["SDPA_SANDBOX"] = "off"
    try:
        started = time.perf_counter()
        course.nbgrader(root, "autograde", course.ASSIGNMENT,
                        *([] if sandbox else ["--SandboxedExecute.allow_unisolated=True"]))
        seconds = time.perf_counter() - started
    finally:
        os.environ.pop("SDPA_SANDBOX", None)
    return seconds, course.grades(root)


def add_arguments(parser):
    parser.add_argument("--n", type=int, default=8, help="number of submissions (default 8)")


def run(args) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        on_s, on = grade(course.make_course(Path(tmp) / "sandboxed"), args.n, sandbox=True)
        off_s, off = grade(course.make_course(Path(tmp) / "plain"), args.n, sandbox=False)
    print(f"sandboxed:   {on_s / args.n:.2f} s per submission ({args.n} submissions, {on_s:.1f} s)")
    print(f"unsandboxed: {off_s / args.n:.2f} s per submission ({args.n} submissions, {off_s:.1f} s)")
    print(f"overhead:    {(on_s - off_s) / args.n:+.2f} s per submission")
    if on != off:
        print("SCORES DIFFER between the two runs", file=sys.stderr)
        return 1
    print("scores identical")
    return 0
