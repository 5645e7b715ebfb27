"""``python -m benchmarks profile``: where one submission's time and CPU go.

What it measures and why: the stages of the stock pipeline, so that work on
speed goes where the time is, and the per-submission CPU floor that ``make
bench`` compares the CLI with: no scheduler can beat CPU / cores.

Grades a few submissions with the stock converter in this process, timing
each stage by wrapping it, and adds up the CPU spent where the work really
is: the runner's (the student's cells, and answering the hidden checks'
calls) and the grading process's inside the hidden checks.  Their sum for a
correct submission is the CPU floor.  ``--zygote`` forks the runners from a
warmed zygote, as the workers of ``sdpa-course autograde`` do; ``--json FILE``
writes the CPU figures (``class`` takes its CPU floor from there).  Options of
the form ``--Class.trait=value`` go to nbgrader.

    python -m benchmarks profile [--n 4] [--zygote] [--kind correct] [--json FILE] [--Class.trait=value ...]
"""
from __future__ import annotations

import collections
import functools
import gc
import json
import os
import sys
import time
from pathlib import Path

from autograder.demo import course
from autograder.sandbox.guest import procfs

from . import classroom

ROOT = Path(__file__).resolve().parents[1]
ACCEPTS_NBGRADER_OPTIONS = True
SPAWN = "runner start (fresh: bwrap, python, IPython; or fork)"


def process_cpu(pid: int) -> float:
    """CPU seconds of a live process and of the children it waited for (0 if it is gone)."""
    return procfs.cpu_seconds(pid) or 0.0


class _Stages:
    """Seconds per stage, and CPU per submission, from wrappers installed around the pipeline."""

    def __init__(self):
        self.times = collections.defaultdict(float)
        self.stage = None
        self.cpu = {"runner": 0.0, "checks": 0.0}
        self.per_submission = []  # (runner CPU, checks CPU) of each graded notebook

    def wrap(self, owner, name, label, mark=None, cpu=None):
        """Replace owner.name by a version that adds its wall time to `label` (and its CPU to `cpu`)."""
        original = getattr(owner, name)

        @functools.wraps(original)
        def timed_call(*a, **k):
            previous = self.stage
            if mark:
                self.stage = mark
            t, c = time.perf_counter(), time.process_time()
            try:
                return original(*a, **k)
            finally:
                self.times[label] += time.perf_counter() - t
                if cpu:
                    self.cpu[cpu] += time.process_time() - c
                self.stage = previous
        setattr(owner, name, timed_call)

    def snapshot(self):
        """Close one submission's CPU account."""
        done = [sum(x) for x in zip(*self.per_submission)] if self.per_submission else [0.0, 0.0]
        self.per_submission.append((self.cpu["runner"] - done[0], self.cpu["checks"] - done[1]))


def _instrument(stages, zygote):
    """Wrap the pipeline's stages; returns the fork server when runners come from a zygote."""
    from autograder.grading import hidden_checks
    from autograder.nbgrader import execute
    from autograder.sandbox import session

    original_request = session.StudentSession._request

    def request(self, msg, blobs, timeout, *where):
        t, spawned = time.perf_counter(), stages.times[SPAWN]
        try:
            return original_request(self, msg, blobs, timeout, *where)
        finally:
            spent = time.perf_counter() - t - (stages.times[SPAWN] - spawned)  # a (re)start is counted apart
            if stages.stage == "checks":
                stages.times["  checks: waiting for the student's functions (runner)"] += spent
            elif msg.get("op") == "exec":
                first = not getattr(self, "_bench_seen", False)
                self._bench_seen = True
                label = "cells: first cell (import torch, matplotlib)" if first else "cells: the other cells"
                stages.times[label] += spent

    original_kill = session.StudentSession._kill

    def kill(self):
        pid = getattr(self, "_pid", None)  # the runner's host pid: read its CPU before it goes
        if getattr(self, "proc", None) is not None and pid:
            stages.cpu["runner"] += process_cpu(pid)
        return original_kill(self)

    session.StudentSession._request = request
    session.StudentSession._kill = kill
    stages.wrap(session.StudentSession, "_spawn", SPAWN)
    stages.wrap(hidden_checks, "run_checks", "hidden checks (pytest), total", mark="checks", cpu="checks")
    stages.wrap(execute.SandboxedExecute, "preprocess", "SandboxedExecute, total")
    gc_time = {"t": 0.0, "s": 0.0}

    def on_gc(phase, info):
        if phase == "start":
            gc_time["s"] = time.perf_counter()
        elif stages.stage == "checks":
            gc_time["t"] += time.perf_counter() - gc_time["s"]
            stages.times["  checks: garbage collections (pytest's gc.collect)"] = gc_time["t"]

    gc.callbacks.append(on_gc)
    if not zygote:
        return None
    from autograder.sandbox import forkserver

    server = forkserver.ForkServer()
    server.warm()
    stages.wrap(forkserver._Zygote, "wait_ready", "  runner start: waiting for the zygote to warm up (once)")
    stages.wrap(forkserver._Zygote, "fork", "  runner start: forking a runner from the zygote")
    stages.wrap(forkserver._Zygote, "reset", "resetting the zygote's sandbox after each runner")
    return server


def profile(args) -> int:
    """Grade args.n submissions in this process and print where the time and CPU go."""
    started = time.perf_counter()
    top = Path(args.dir).resolve() / "profile"
    out = Path(args.json).resolve() if args.json else None  # before chdir: a relative FILE is from here
    students = classroom.of_kind(args.n, args.kind) if args.kind else classroom.generate(args.n, args.seed,
                                                                                            rare=0)
    root = classroom.write_class(top, students)
    os.chdir(root)
    t0 = time.perf_counter()
    from nbgrader.apps.autogradeapp import AutogradeApp

    from autograder.batch.worker import autograde_class
    t_import = time.perf_counter() - t0

    stages = _Stages()
    server = _instrument(stages, args.zygote)
    app = AutogradeApp()
    app.initialize(["--log-level=ERROR", *args.nbgrader_args])
    app.coursedir.assignment_id = course.ASSIGNMENT
    converter = autograde_class()(coursedir=app.coursedir, parent=app)  # hands each notebook `server`
    converter.runner_source = server
    convert = converter.convert_single_notebook

    def convert_and_count(notebook_filename):
        try:
            return convert(notebook_filename)
        finally:
            stages.snapshot()
    converter.convert_single_notebook = convert_and_count
    t1 = time.perf_counter()
    converter.start()
    total = time.perf_counter() - t1
    if server is not None:
        server.close()
    report(stages, total, len(converter.assignments), server is not None, t_import, t0 - started)
    figures = cpu_figures(stages.per_submission)
    if args.json:
        out.write_text(json.dumps(figures))
    return 0


def cpu_figures(per_submission: list) -> dict:
    """Mean CPU per submission, leaving out the first (it pays this process's one-time imports)."""
    counted = per_submission[1:] or per_submission
    n = len(counted) or 1
    runner = sum(r for r, _ in counted) / n
    checks = sum(c for _, c in counted) / n
    return {"runner": runner, "checks": checks, "total": runner + checks, "submissions": len(counted),
            "cores": os.cpu_count() or 1}


def report(stages, total, n, zygote, t_import, t_build):
    """The profile's printout: once-per-run costs, then each stage per submission, then CPU."""
    times = stages.times
    accounted = times["SandboxedExecute, total"] + times["hidden checks (pytest), total"]
    how = "runners forked from a zygote (as sdpa-course workers do)" if zygote else "a fresh runner each"
    print(f"\nstock `nbgrader autograde` pipeline, {n} submissions, in-process, {how} (course built in "
          f"{t_build:.0f} s):")
    print(f"  once per run:   importing nbgrader/torch/pytest and the grading engine {t_import:.2f} s")
    print(f"  per submission: {total / n:.2f} s, of which")
    for label, value in sorted(times.items(), key=lambda kv: -kv[1]):
        print(f"  {value / n:8.2f} s  {label}")
    print(f"  {(total - accounted) / n:8.2f} s  the rest: sanitizing, nbconvert, gradebook writes, files")
    f = cpu_figures(stages.per_submission)
    print(f"  CPU per submission (mean of {f['submissions']}, the first left out): runner {f['runner']:.2f} s "
          f"(cells and answering the checks{'' if zygote else ', runner start included'}) + grading process in "
          f"the hidden checks {f['checks']:.2f} s = {f['total']:.2f} s")


def add_arguments(parser):
    parser.add_argument("--n", type=int, default=4, help="submissions (default 4; the first is left out of CPU)")
    parser.add_argument("--seed", type=int, default=0, help="the class generator's seed")
    parser.add_argument("--dir", default=str(ROOT / ".artifacts" / "bench"))
    parser.add_argument("--zygote", action="store_true",
                        help="fork the runners from a warmed zygote, as sdpa-course workers do")
    parser.add_argument("--kind", choices=classroom.KINDS[:2], default=None,
                        help="only correct (or buggy) submissions")
    parser.add_argument("--json", default=None, metavar="FILE", help="write the CPU figures here")


def run(args) -> int:
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    return profile(args)
