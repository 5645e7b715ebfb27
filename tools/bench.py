"""Benchmark: stock `nbgrader autograde` vs `sdpa-course autograde --workers 2` (``make bench``).

Generates N submissions (default 60) from a mix of the catalogue's correct
and buggy samples, grades one copy of the course with stock ``nbgrader
autograde`` and another with ``sdpa-course autograde --workers W``, one
after the other on this machine, checks that every score and every
autograded notebook is identical, and prints seconds per submission for
both and the ratio.

``--profile`` instead grades a few submissions with the stock converter
in this process, timing each stage, and prints where one submission's
time goes; with ``--zygote`` the runners are forked from a warmed zygote,
as in the workers of ``sdpa-course autograde``.

    python tools/bench.py [--n 60] [--workers 2] [--dir .artifacts/bench] [--keep]
    python tools/bench.py --profile [--n 4] [--zygote]
"""
import argparse
import collections
import functools
import gc
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.demo import course, submissions  # noqa: E402


def build_courses(base, n):
    """A released course with n submissions (correct and buggy samples, in turn)."""
    if base.exists():
        shutil.rmtree(base)
    course.make_course(base)
    course.nbgrader(base, "generate_assignment", course.ASSIGNMENT, "--force")
    release = course.release_notebook(base)
    mix = submissions.CORRECT + submissions.BUGS
    built = {}
    for i in range(n):
        sample = mix[i % len(mix)]
        if sample.name not in built:
            built[sample.name] = submissions.build(sample, release)
        course.submit(base, f"s{i:03d}-{sample.name}", built[sample.name])
    return base


def timed(cmd, cwd):
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=course.nbgrader_env(), capture_output=True, text=True)
    return time.perf_counter() - started, proc


def notebooks(root):
    out = {}
    for path in sorted(Path(root, "autograded").glob(f"*/{course.ASSIGNMENT}/{course.ASSIGNMENT}.ipynb")):
        out[path.parent.parent.name] = json.loads(path.read_text(encoding="utf-8"))
    return out


def bench(args):
    top = Path(args.dir).resolve()
    print(f"building a course with {args.n} submissions in {top} ...", flush=True)
    base = build_courses(top / "base", args.n)
    stock, par = top / "stock", top / "parallel"
    for target in (stock, par):
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(base, target)
    load0 = os.getloadavg()[0]
    print("stock: nbgrader autograde ...", flush=True)
    t_stock, p_stock = timed([sys.executable, "-m", "nbgrader", "autograde", course.ASSIGNMENT, "--log-level=ERROR"],
                             stock)
    load1 = os.getloadavg()[0]
    print(f"parallel: sdpa-course autograde --workers {args.workers} ...", flush=True)
    t_par, p_par = timed([sys.executable, "-m", "autograder.cli", "autograde", course.ASSIGNMENT,
                          "--workers", str(args.workers)], par)
    load2 = os.getloadavg()[0]
    g_stock, g_par = course.grades(stock), course.grades(par)
    same_scores = g_stock == g_par and len(g_stock) == args.n
    nb_stock, nb_par = notebooks(stock), notebooks(par)
    same_notebooks = nb_stock == nb_par and len(nb_stock) == args.n
    print()
    print(f"{'':28}{'seconds':>9}{'s/submission':>14}   exit")
    print(f"{'stock nbgrader autograde':28}{t_stock:9.1f}{t_stock / args.n:14.2f}   {p_stock.returncode}")
    print(f"{f'sdpa-course --workers {args.workers}':28}{t_par:9.1f}{t_par / args.n:14.2f}   {p_par.returncode}")
    print(f"speed-up: {t_stock / t_par:.2f}x on {os.cpu_count()} CPUs "
          f"(1-min load average before/after each run: {load0:.1f} / {load1:.1f} / {load2:.1f})")
    print(f"identical scores: {same_scores} ({len(g_stock)} and {len(g_par)} students graded); "
          f"identical autograded notebooks: {same_notebooks}")
    if not same_scores:
        for student in sorted(set(g_stock) | set(g_par)):
            if g_stock.get(student) != g_par.get(student):
                print(f"  differs: {student}: stock {g_stock.get(student)} parallel {g_par.get(student)}")
    if p_par.returncode != 0:
        print(p_par.stdout[-2000:], p_par.stderr[-2000:])
    if not args.keep:
        shutil.rmtree(top, ignore_errors=True)
    return 0 if same_scores and same_notebooks else 1


# -- --profile: where one submission's time goes ----------------------------

SPAWN = "runner start (fresh: bwrap, python, IPython; or fork)"

def profile(args):
    started = time.perf_counter()
    top = Path(args.dir).resolve() / "profile"
    root = build_courses(top, args.n)
    os.chdir(root)
    t0 = time.perf_counter()
    from nbgrader.apps.autogradeapp import AutogradeApp

    from autograder.batch.worker import autograde_class
    from autograder.nbgrader import execute, trusted_scoring
    from autograder.sandbox import session
    t_import = time.perf_counter() - t0

    times, counts = collections.defaultdict(float), collections.Counter()
    stage = {"name": None}

    def wrap(owner, name, label, mark=None):
        original = getattr(owner, name)

        @functools.wraps(original)
        def timed_call(*a, **k):
            previous = stage["name"]
            if mark:
                stage["name"] = mark
            t = time.perf_counter()
            try:
                return original(*a, **k)
            finally:
                times[label] += time.perf_counter() - t
                counts[label] += 1
                stage["name"] = previous
        setattr(owner, name, timed_call)

    original_request = session.StudentSession._request

    def request(self, msg, blobs, timeout):
        t, spawned = time.perf_counter(), times[SPAWN]
        try:
            return original_request(self, msg, blobs, timeout)
        finally:
            spent = time.perf_counter() - t - (times[SPAWN] - spawned)  # a (re)start is counted apart
            if stage["name"] == "checks":
                times["  checks: waiting for the student's functions (runner)"] += spent
            elif msg.get("op") == "exec":
                first = not getattr(self, "_bench_seen", False)
                self._bench_seen = True
                label = "cells: first cell (import torch, matplotlib)" if first else "cells: the other cells"
                times[label] += spent

    session.StudentSession._request = request
    wrap(session.StudentSession, "_spawn", SPAWN)
    wrap(trusted_scoring, "run_checks", "hidden checks (pytest), total", mark="checks")
    wrap(execute.SandboxedExecute, "preprocess", "SandboxedExecute, total")
    gc_time = {"t": 0.0, "s": 0.0}

    def on_gc(phase, info):
        if phase == "start":
            gc_time["s"] = time.perf_counter()
        elif stage["name"] == "checks":
            gc_time["t"] += time.perf_counter() - gc_time["s"]

    gc.callbacks.append(on_gc)
    server = None
    if args.zygote:
        from autograder.sandbox import forkserver

        server = forkserver.ForkServer()
        server.warm()
        wrap(forkserver._Zygote, "wait_ready", "  runner start: waiting for the zygote to warm up (once)")
        wrap(forkserver._Zygote, "fork", "  runner start: forking a runner from the zygote")
        wrap(forkserver._Zygote, "reset", "resetting the zygote's sandbox after each runner")
    app = AutogradeApp()
    app.initialize(["--log-level=ERROR"])
    app.coursedir.assignment_id = course.ASSIGNMENT
    converter = autograde_class()(coursedir=app.coursedir, parent=app)  # hands each notebook `server`
    converter.runner_source = server
    t1 = time.perf_counter()
    converter.start()
    total = time.perf_counter() - t1
    n = len(converter.assignments)
    times["  checks: garbage collections (pytest's gc.collect)"] = gc_time["t"]
    accounted = times["SandboxedExecute, total"] + times["hidden checks (pytest), total"]
    how = "runners forked from a zygote (as sdpa-course workers do)" if server else "a fresh runner each"
    if server is not None:
        server.close()
    print(f"\nstock `nbgrader autograde` pipeline, {n} submissions, in-process, {how} (course built in "
          f"{t0 - started:.0f} s):")
    print(f"  once per run:   importing nbgrader/torch/pytest and the grading engine {t_import:.2f} s")
    print(f"  per submission: {total / n:.2f} s, of which")
    for label, value in sorted(times.items(), key=lambda kv: -kv[1]):
        print(f"  {value / n:8.2f} s  {label}")
    print(f"  {(total - accounted) / n:8.2f} s  the rest: sanitizing, nbconvert, gradebook writes, files")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=None, help="submissions (default 60; 4 with --profile)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--dir", default=str(ROOT / ".artifacts" / "bench"))
    parser.add_argument("--keep", action="store_true", help="keep the course copies")
    parser.add_argument("--profile", action="store_true", help="time the stages of the stock pipeline instead")
    parser.add_argument("--zygote", action="store_true",
                        help="with --profile: fork the runners from a warmed zygote, as sdpa-course workers do")
    args = parser.parse_args()
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    if args.profile:
        args.n = args.n or 4
        return profile(args)
    args.n = args.n or 60
    return bench(args)


if __name__ == "__main__":
    sys.exit(main())
