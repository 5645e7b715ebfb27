"""``python -m benchmarks load``: correct submissions graded beside CPU-hungry processes lose nothing.

What it measures and why: time limits are derived from the reference's own
timing, so the evidence that a loaded machine costs no correct answer a point
is to grade correct answers under load, and count what the retry absorbed.

Builds a course whose students all submit correct notebooks (every sample in
``autograder.demo.submissions.CORRECT``, including one written with slow
Python loops), starts ``--hogs`` busy-looping processes (default: two per
CPU), and grades with the stock command and/or ``sdpa-course autograde``.
``--delay S`` starts the hogs S seconds after grading begins, so the limits
were measured on an idle machine and the load arrives afterwards (the hard
case).  Prints, per command: students below full marks, limit events, and
how many overruns the retry absorbed.  Exit status 1 if any correct
submission lost a point.

    python -m benchmarks load [--copies 3] [--hogs 4] [--delay 0] [--only stock|cli]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from autograder.demo import course, submissions
from autograder.grading import record

HOG = [sys.executable, "-c", "while True: pass"]


def build(top, copies):
    base = course.make_course(top / "base")
    course.nbgrader(base, "generate_assignment", course.ASSIGNMENT, "--force")
    release = course.release_notebook(base)
    for sample in submissions.CORRECT:
        nb = submissions.build(sample, release)
        for i in range(copies):
            course.submit(base, f"{sample.name}-{i}", nb)
    return base


def grade(base, target, command, hogs, delay):
    shutil.copytree(base, target)
    procs = []

    def start_hogs():  # separate processes holding none of our pipes (close_fds), so grading's output ends
        procs.extend(subprocess.Popen(HOG, close_fds=True) for _ in range(hogs))

    timer = threading.Timer(delay, start_hogs)
    timer.start()
    started = time.perf_counter()
    try:
        proc = subprocess.run(command, cwd=target, env=course.nbgrader_env(), capture_output=True, text=True)
    finally:
        timer.cancel()
        for p in procs:
            p.kill()
    return time.perf_counter() - started, proc


def summarise(target):
    """(students below full marks, limit events, retries, overruns charged without one) from the gradebook
    and grading.json."""
    lost, events, retried, at_once = [], [], 0, 0
    for student, cells in sorted(course.grades(target).items()):
        got = sum(score or 0 for score, _ in cells.values())
        full = sum(top for _, top in cells.values())
        if got < full:
            lost.append(f"{student} {got:g}/{full:g}")
        path = Path(target, "autograded", student, course.ASSIGNMENT, record.filename(course.ASSIGNMENT))
        if path.exists():
            report = json.loads(path.read_text(encoding="utf-8"))
            events += [f"{student}: {e.get('kind')} {e.get('function') or e.get('grade_id') or e.get('cell')}"
                       for e in report.get("events", [])]
            retried += (report.get("limits") or {}).get("retried", 0)
            at_once += (report.get("limits") or {}).get("charged_without_retry", 0)
    return lost, events, retried, at_once


def add_arguments(parser):
    parser.add_argument("--copies", type=int, default=3, help="students per correct sample")
    parser.add_argument("--hogs", type=int, default=2 * (os.cpu_count() or 1), help="busy-looping processes")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before the hogs start")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--only", choices=("stock", "cli"))


def run(args) -> int:
    top = Path(tempfile.mkdtemp(prefix="sdpa-load-"))
    try:
        base = build(top, args.copies)
        n = len(submissions.CORRECT) * args.copies
        commands = {"stock": [sys.executable, "-m", "nbgrader", "autograde", course.ASSIGNMENT, "--log-level=ERROR"],
                    "cli": [sys.executable, "-m", "autograder.cli", "autograde", course.ASSIGNMENT,
                            "--workers", str(args.workers)]}
        print(f"{n} correct submissions ({', '.join(s.name for s in submissions.CORRECT)} x {args.copies}); "
              f"{args.hogs} busy-looping processes on {os.cpu_count()} CPUs from {args.delay:g} s", flush=True)
        charged = False
        for name, command in commands.items():
            if args.only and name != args.only:
                continue
            seconds, proc = grade(base, top / name, command, args.hogs, args.delay)
            lost, events, retried, at_once = summarise(top / name)
            charged |= bool(lost) or proc.returncode != 0
            print(f"{name:6} {seconds:7.1f} s  exit {proc.returncode}  below full marks: {len(lost)}/{n}  "
                  f"limit events: {len(events)}  overruns absorbed by the retry: {retried}  "
                  f"charged without a retry (the runner had its core): {at_once}", flush=True)
            for line in lost + events:
                print("    " + line)
            if proc.returncode != 0:
                print(proc.stderr[-1500:])
        print("no correct submission lost a point" if not charged else "A CORRECT SUBMISSION LOST POINTS")
        return 1 if charged else 0
    finally:
        shutil.rmtree(top, ignore_errors=True)
