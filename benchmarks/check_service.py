"""``python -m benchmarks check-service``: how fast "Check my work" answers, alone and under a rush, and its memory.

What it measures and why: the check service keeps the course's grader warm so that a student's press gets
its answer in seconds (targets: a correct notebook within 3 s, a buggy one within 5 s, on 2 cores).  It
prints how long the service takes to start and to warm its graders (it grades each assignment's notebook
once), then the seconds from the press to the answer for one student at a time (the first check once warm,
then correct and buggy notebooks in turn), then under a rush: STUDENTS students, each pressing once at a
random moment within WITHIN seconds (half correct, half with an inverted mask), as p50/p95/max and how many were
answered, refused or left waiting; and the peak resident memory of the service with its sandboxes.

Loopback only: the service (``python -m autograder.service``) on a temporary copy of the course, against a
stand-in hub (``autograder/demo/check_service.py``).  A client polls for its answer every POLL seconds, as
JupyterLab's panel does (0.4 s), so each figure is within that of the true time.

Usage: python -m benchmarks check-service [--students 60] [--within 60] [--repeat 3] [--json FILE]
"""
from __future__ import annotations

import json
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path

import nbformat

import catalogue
from autograder.demo import course, submissions
from autograder.demo.check_service import LocalService
from autograder.notebook.editions import EDITIONS

ASSIGNMENT = "sdpa_en"


def add_arguments(parser):
    parser.add_argument("--students", type=int, default=60, help="students in the rush (default 60)")
    parser.add_argument("--within", type=float, default=60, help="seconds over which they press (default 60)")
    parser.add_argument("--repeat", type=int, default=3, help="one-at-a-time checks of each kind (default 3)")
    parser.add_argument("--poll", type=float, default=0.4, help="seconds between a client's polls (default 0.4)")
    parser.add_argument("--json", help="also write the figures to this file")


def _notebook(root, name):
    (sample,) = [s for s in catalogue.CATALOGUE if s.name == name]
    return json.loads(nbformat.writes(submissions.build(sample, course.release_notebook(root, ASSIGNMENT))))


def _press(service, token, notebook, poll):
    """(seconds from the press to the answer, its state)."""
    started = time.perf_counter()
    status, reply = service.call("/check", token, {"assignment": ASSIGNMENT, "notebook": notebook})
    if status != 202:
        return time.perf_counter() - started, f"http {status}"
    try:
        reply = service.answer(token, ASSIGNMENT, within_s=600, poll_s=poll)
    except TimeoutError:
        return time.perf_counter() - started, "no answer"
    return time.perf_counter() - started, reply.get("state", "?")


class _Memory(threading.Thread):
    """Peak resident memory of a process and its descendants (sandboxes included), sampled every 0.2 s."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak_mib, self.stop = pid, 0.0, threading.Event()

    def run(self):
        from autograder.sandbox.guest import procfs

        while not self.stop.is_set():
            total = 0
            for pid in (self.pid, *procfs.descendants(self.pid)):
                try:
                    with open(f"/proc/{pid}/status") as f:
                        total += next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
                except OSError:
                    continue
            self.peak_mib = max(self.peak_mib, total / 1024)
            time.sleep(0.2)


def _percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def run(args):
    with tempfile.TemporaryDirectory(prefix="bench-check-service-") as tmp:
        root = course.make_course(Path(tmp) / "course")
        for assignment in EDITIONS:
            course.nbgrader(root, "generate_assignment", assignment, "--force")
        correct, buggy = _notebook(root, "correct-reference"), _notebook(root, "bug-mask-inverted")
        tokens = {f"tok-{i}": {"name": f"student-{i}"} for i in range(args.students)} | {"tok-solo": {"name": "solo"}}
        started = time.perf_counter()
        service = LocalService(root, tokens, Path(tmp), ["--per-hour", "1000"])
        ready = time.perf_counter() - started
        service.wait_for("graders warm")
        warm = time.perf_counter() - started
        memory = _Memory(service.proc.pid)
        memory.start()
        try:
            first = _press(service, "tok-solo", correct, args.poll)
            alone = {"correct": [], "buggy": []}
            for _ in range(args.repeat):
                for kind, notebook in (("correct", correct), ("buggy", buggy)):
                    alone[kind].append(_press(service, "tok-solo", notebook, args.poll)[0])
            rush = []
            rng = random.Random(0)

            def student(i):
                time.sleep(rng.uniform(0, args.within))
                rush.append(_press(service, f"tok-{i}", correct if i % 2 else buggy, args.poll))

            threads = [threading.Thread(target=student, args=(i,), daemon=True) for i in range(args.students)]
            rush_started = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=args.within + 600)
            rush_seconds = time.perf_counter() - rush_started
        finally:
            memory.stop.set()
            service.close()
    answered = [s for s, state in rush if state == "answered"]
    figures = {
        "service ready after start (s)": round(ready, 2),
        "graders warm after start (s)": round(warm, 2),
        "first check once warm (s)": round(first[0], 2),
        "correct, one at a time (s)": [round(s, 2) for s in alone["correct"]],
        "buggy, one at a time (s)": [round(s, 2) for s in alone["buggy"]],
        "rush": {"students": args.students, "within (s)": args.within,
                 "answered": len(answered), "other": sorted({state for _, state in rush if state != "answered"}),
                 "p50 (s)": round(_percentile(answered, 50), 2), "p95 (s)": round(_percentile(answered, 95), 2),
                 "max (s)": round(max(answered, default=float("nan")), 2),
                 "all answered after (s)": round(rush_seconds, 1)},
        "peak memory, service and sandboxes (MiB)": round(memory.peak_mib),
        "poll interval (s)": args.poll, "date": time.strftime("%Y-%m-%d"),
    }
    print(f"check service on loopback ({time.strftime('%Y-%m-%d %H:%M')}), assignment {ASSIGNMENT}")
    print(f"  ready after start            {ready:6.2f} s")
    print(f"  graders warm after start     {warm:6.2f} s (each assignment's grader graded its notebook once)")
    print(f"  first check once warm        {first[0]:6.2f} s ({first[1]})")
    print(f"  correct, one at a time       median {statistics.median(alone['correct']):.2f} s, "
          f"max {max(alone['correct']):.2f} s (n={args.repeat})")
    print(f"  buggy, one at a time         median {statistics.median(alone['buggy']):.2f} s, "
          f"max {max(alone['buggy']):.2f} s (n={args.repeat})")
    r = figures["rush"]
    print(f"  rush: {args.students} students within {args.within:g} s: {r['answered']} answered "
          f"(p50 {r['p50 (s)']:.2f} s, p95 {r['p95 (s)']:.2f} s, max {r['max (s)']:.2f} s), "
          f"other outcomes {r['other'] or 'none'}; all done after {rush_seconds:.0f} s")
    print(f"  peak memory, service and sandboxes: {memory.peak_mib:.0f} MiB")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")
    return 0 if len(answered) == args.students else 1
