"""``python -m benchmarks class`` (``make bench``): stock `nbgrader autograde`, `sdpa-course autograde` and `check`.

What it measures and why: `sdpa-course` exists to grade a class faster than
stock nbgrader without changing a single grade, and every path an instructor
grades by should be fast, so this grades one generated class every way on
this machine and compares the time, the memory and every score.

Generates a class of N students that looks like a real one (``classroom.py``:
about 70% correct, 25% buggy, 5% hanging, crashing or unreadable; seeded),
prints the mix, and then, one after the other on this machine (``graders.py``
runs and watches them):

* ``sdpa-course check`` of one correct notebook in the course, which has no
  kept reference timings yet: it times the reference and keeps it (every
  copy below starts with it, as a course does after its first grading);
* stock ``nbgrader autograde`` on one copy of the course;
* ``sdpa-course autograde --workers W`` on another copy, for each W of
  ``--workers`` (default 1 and 2);
* ``sdpa-course check`` of one student of each kind.

It prints:

* seconds per submission for each, the ratios, and each one's start-up;
  a table per kind of submission (stock: each student's time from nbgrader's
  timestamped log; CLI: the worker seconds of its per-submission lines, and
  their share of the wall time; check: the whole command);
* the per-submission CPU floor: CPU of a correct submission's cells plus its
  hidden checks (``python -m benchmarks profile --zygote --kind correct``),
  divided by the cores -- no scheduler can grade faster than that -- and
  each command against it;
* for the widest CLI run, seconds per submission per block of completions
  (flat in N?) and the peak resident memory (VmHWM) of its process, the
  gradebook's single writer;
* whether every score and autograded notebook is identical to stock's, for
  every CLI run (and every check's score), naming each student that differs.

Above 200 students stock would take hours, so it grades a stratified sample
of ``--stock-sample`` students (default 50) and its class figure is an
estimate, labelled so.  ``--kill-at 0.1,0.5,0.9`` also grades a further copy
with the widest CLI run, SIGKILLs its process group at those fractions of the
clean run's time, re-runs it, and checks that the result equals the clean run.
Options of the form ``--Class.trait=value`` go to every command.

Where one submission's time and CPU go, stage by stage: ``python -m benchmarks profile``.

    python -m benchmarks class [--n 60] [--workers 1,2] [--seed 0] [--stock-sample K] [--kill-at F,F,...]
                               [--dir .artifacts/bench] [--keep] [--Class.trait=value ...]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from autograder.demo import course

from . import classroom, graders

ROOT = Path(__file__).resolve().parents[1]
ACCEPTS_NBGRADER_OPTIONS = True
STOCK_LIMIT = 200  # above this many students, stock grades a sample


def copy_course(base: Path, target: Path, students=None) -> Path:
    """A copy of the built course, with only `students`' submissions if given."""
    if target.exists():
        shutil.rmtree(target)
    keep = None if students is None else {s.id for s in students}

    def ignore(folder, names):
        return [n for n in names if keep is not None and Path(folder) == base / "submitted" and n not in keep]
    shutil.copytree(base, target, ignore=ignore)
    return target


FLOOR_KINDS = ("correct", "buggy")  # the kinds `profile --kind` measures


def cpu_floor(args, top: Path, kind: str = "correct"):
    """CPU floor figures from a `profile --zygote --kind KIND` run in its own process (None if it failed)."""
    out = top / f"floor-{kind}.json"
    cmd = [sys.executable, "-m", "benchmarks", "profile", "--zygote", "--kind", kind, "--n", "4",
           "--dir", str(top / f"floor-{kind}"), "--json", str(out), *args.nbgrader_args]
    with open(top / f"floor-{kind}.log", "w") as log:
        subprocess.run(cmd, cwd=ROOT, env=course.nbgrader_env(), stdout=log, stderr=subprocess.STDOUT)
    return json.loads(out.read_text()) if out.exists() else None


def per_kind(students, stock, clis, checks):
    """{kind: {"n", "stock", "w<W>" (worker mean s), "w<W>-share" (wall share), "check"}}; None where no figure."""
    rows = {}
    for kind in classroom.KINDS:
        ids = [s.id for s in students if s.kind == kind]
        if not ids:
            continue
        st = [stock.seconds[i] for i in ids if i in stock.seconds]
        row = {"n": len(ids), "stock": sum(st) / len(st) if st else None,
               "check": checks[kind][1].wall if kind in checks else None}
        for workers, cli in clis.items():
            worker_total = sum(v for v in cli.seconds.values() if v) or 1.0
            wk = [cli.seconds[i] for i in ids if cli.seconds.get(i) is not None]
            mean_w = sum(wk) / len(wk) if wk else None
            row[f"w{workers}"] = mean_w
            row[f"w{workers}-share"] = mean_w * cli.wall / worker_total if wk else None
        rows[kind] = row
    return rows


def stock_per_submission(students, stock, rows, sampled: bool) -> float:
    """Stock seconds per submission for the class: measured, or estimated from the sample's per-kind means."""
    if not sampled:
        return stock.wall / len(students)
    total = stock.startup + sum(row["n"] * (row["stock"] or 0.0) for row in rows.values())
    return total / len(students)


def blocks(arrivals, size):
    """Seconds per submission in each block of `size` completions (the first block includes start-up)."""
    out, previous = [], 0.0
    for end in range(size, len(arrivals) + 1, size):
        out.append((arrivals[end - 1] - previous) / size)
        previous = arrivals[end - 1]
    return out


def memory_at(memory, times):
    """The VmHWM sample last taken before each of `times`."""
    return [max((m for t, m in memory if t <= when), default=0.0) for when in times]


def fmt(value, width=10, digits=2):
    return f"{value:{width}.{digits}f}" if value is not None else f"{'-':>{width}}"


def print_times(students, stock, clis, checks, rows, sampled, loads, floor):
    n, k = len(students), len(stock.seconds)
    stock_each = stock_per_submission(students, stock, rows, sampled)
    label = f"stock, estimate from {k}" if sampled else "stock nbgrader autograde"
    print(f"\n{'':34}{'students':>9}{'seconds':>9}{'s/submission':>14}   exit")
    print(f"{label:34}{k:9d}{stock.wall:9.1f}{stock_each:14.2f}   {stock.returncode}")
    for workers, cli in clis.items():
        print(f"{f'sdpa-course autograde --workers {workers}':34}{n:9d}{cli.wall:9.1f}{cli.wall / n:14.2f}   "
              f"{cli.returncode}")
    if "correct" in checks:
        _, check = checks["correct"]
        print(f"{'sdpa-course check (a correct one)':34}{1:9d}{check.wall:9.1f}{check.wall:14.2f}   {check.returncode}")
    est = " (stock estimated: per-kind means of the sample, weighted by the class mix)" if sampled else ""
    widest = max(clis)
    print(f"ratio stock / CLI --workers {widest}: {stock_each / (clis[widest].wall / n):.2f}x on {os.cpu_count()} "
          f"CPUs{est}; 1-min load average before/after each run: {' / '.join(f'{x:.1f}' for x in loads)}")
    if floor is not None and floor["total"] > 0:
        for workers, cli in clis.items():
            per = floor["total"] / min(workers, floor["cores"])
            print(f"CLI --workers {workers}: {cli.wall / n / per:.2f}x its CPU floor ({per:.2f} s per submission on "
                  f"{min(workers, floor['cores'])} core{'s' * (min(workers, floor['cores']) != 1)})")
        if "correct" in checks:
            _, check = checks["correct"]
            bound = 2 * floor["total"] + 3.0
            print(f"check of a correct notebook: {check.wall:.2f} s from the command's start "
                  f"({check.grading or 0:.2f} s grading after its own start-up); the bound 2 x one submission's "
                  f"floor + 3 s = {bound:.2f} s: "
                  f"{'met' if check.wall <= bound else 'NOT met'}")
    starts = ", ".join(f"--workers {w} {c.arrivals[0] if c.arrivals else c.wall:.1f} s" + _forked(c)
                       for w, c in clis.items())
    print(f"start-up before the first result: stock {stock.startup:.1f} s (to its first student's first log line); "
          f"CLI {starts}")
    print(f"\nseconds per submission, by kind{' (stock: sampled students)' if sampled else ''}")
    heads = "".join(f"{f'w{w} worker':>11}{f'w{w} share':>10}" for w in clis)
    print(f"{'kind':12}{'n':>6}{'stock':>9}{heads}{'check':>9}  check's student")
    for kind, row in rows.items():
        cells = "".join(fmt(row[f"w{w}"], 11) + fmt(row[f"w{w}-share"], 10) for w in clis)
        who = checks[kind][0] if kind in checks else ""
        print(f"{kind:12}{row['n']:6d}{fmt(row['stock'], 9)}{cells}{fmt(row['check'], 9)}  {who}")
    total = "".join(f"{'':11}" + fmt(c.wall / n, 10) for c in clis.values())
    print(f"{'all':12}{n:6d}{fmt(stock_each, 9)}{total}")
    print("  stock: from each student's first log line to the next student's; wN worker: the seconds on the per-"
          "submission line of `--workers N` (a failed submission prints none); wN share: worker seconds scaled to add "
          "up to its wall time (wall / N in the last row); check: the whole `sdpa-course check` command of one "
          "student of that kind, start-up included")
    return stock_each


def _forked(cli) -> str:
    """Where a CLI run's start-up went: reading the course and importing (to its workers' fork), then the first
    submission in a new worker."""
    if cli.forked is None or not cli.arrivals:
        return ""
    return f" (workers forked at {cli.forked:.1f} s, the first result {cli.arrivals[0] - cli.forked:.1f} s later)"


def print_kind_floors(rows, floors, clis):
    """Each kind's CLI seconds against that kind's own CPU floor: what the class ratio mixes together."""
    print("\nper kind, against that kind's CPU floor (the CPU of its cells and hidden checks, runners forked from a "
          "zygote): the wN worker's seconds on its core, and the wN share against the floor on N cores")
    for kind in FLOOR_KINDS:
        floor, row = floors.get(kind), rows.get(kind)
        if floor is None or floor["total"] <= 0 or row is None:
            continue
        parts = []
        for workers in clis:
            cores = min(workers, floor["cores"])
            worker, share = row[f"w{workers}"], row[f"w{workers}-share"]
            if worker is not None:
                parts.append(f"w{workers} worker {worker:.2f} s = {worker / floor['total']:.2f}x, share {share:.2f} s "
                             f"= {share / (floor['total'] / cores):.2f}x on {cores} core{'s' * (cores != 1)}")
        print(f"  {kind}: floor {floor['total']:.2f} s CPU; " + "; ".join(parts))


def print_floor(floor):
    if floor is None or floor["total"] <= 0:
        print("\nCPU floor: not measured (see floor-correct.log under --dir, kept with --keep)")
        return
    per = floor["total"] / floor["cores"]
    runner = f"{floor['runner']:.2f} s" if floor["runner"] > 0 else "unavailable (no runner pid)"
    print(f"\nCPU floor of a correct submission: {floor['total']:.2f} s CPU (the runner: cells and answering the "
          f"checks {runner}; the grading process in the hidden checks {floor['checks']:.2f} s; mean of "
          f"{floor['submissions']}, runners forked from a zygote) = {per:.2f} s per submission on "
          f"{floor['cores']} cores")


def print_scale(cli, n, workers):
    size = 100 if n >= STOCK_LIMIT else max(1, -(-n // 4))
    per_block = blocks(cli.arrivals, size)
    ends = [cli.arrivals[i - 1] for i in range(size, len(cli.arrivals) + 1, size)]
    print(f"\nCLI --workers {workers} seconds per submission per block of {size} completions (the first includes "
          "start-up): " + " ".join(f"{x:.2f}" for x in per_block))
    print(f"peak resident memory (VmHWM) of the sdpa-course process, the gradebook's only writer: "
          f"{cli.peak_mib:.0f} MiB; at each block end: " + " ".join(f"{m:.0f}" for m in memory_at(cli.memory, ends)))


def print_comparison(stock_root, cli_root, students, cli, label):
    ids = [s.id for s in students]
    scores, books = graders.compare(stock_root, cli_root, ids)
    g_stock, g_cli = course.grades(stock_root), course.grades(cli_root)
    print(f"{label}: scores identical to stock's for {len(ids) - len(scores)} of {len(ids)} students"
          + ("" if scores else " (all)"))
    for s in scores:
        why = f" — CLI: FAILED {cli.failed[s]}" if s in cli.failed else ""
        print(f"  differs: {s}: stock {graders.score_text(g_stock.get(s))}, CLI "
              f"{graders.score_text(g_cli.get(s))}{why}")
    nb_stock, nb_cli = graders.notebooks(stock_root, ids), graders.notebooks(cli_root, ids)
    both = sorted(set(nb_stock) & set(nb_cli))
    print(f"{label}: autograded notebooks identical for {len(both) - len([s for s in books if s in both])} of "
          f"{len(both)} in both; only stock has {len(set(nb_stock) - set(nb_cli))}, only the CLI "
          f"{len(set(nb_cli) - set(nb_stock))}; neither {len(set(ids) - set(nb_stock) - set(nb_cli))}")
    for s in books:
        print(f"  differs: {s}: " + ("contents" if s in both else "stock has it" if s in nb_stock else "CLI has it"))
    return not scores and not books


def check_scores_agree(stock_root, checks):
    """`sdpa-course check` printed each student's stock total (no score where stock has no auto score)."""
    grades = course.grades(stock_root)
    same = True
    for student, run in checks.values():
        cells = grades.get(student) or {}
        scored = [score for score, _ in cells.values() if score is not None]
        stock_total = sum(scored) if scored else None
        ok = (run.score is None and stock_total is None) or (
            run.score is not None and stock_total is not None and abs(run.score - stock_total) < 1e-9)
        same &= ok
        if not ok:
            print(f"  differs: check of {student}: {run.score}, stock {graders.score_text(grades.get(student))}")
    print(f"sdpa-course check: scores identical to stock's for {len(checks) - (not same)} of {len(checks)} "
          "students checked" if same else "sdpa-course check: scores DIFFER from stock's (above)")
    return same


def kill_times(fractions, wall, startup):
    """Seconds into each interrupted run at which to kill it: fraction F of the expected time is the clean
    run's start-up plus F of its grading time, and each run resumes from where the previous one was killed."""
    grading = max(wall - startup, 0.0)
    return [startup + (f - before) * grading for f, before in zip(fractions, [0.0] + fractions[:-1])]


def resume(args, base, students, clean, top, tmp, workers):
    """Kill CLI runs at args.kill_at fractions of the clean run's time, resume, compare with the clean run."""
    root = copy_course(base, top / "resume")
    reference = course.grades(clean["root"])
    ok = True
    print(f"\nresumability: SIGKILL to the CLI's process group at {', '.join(f'{f:g}' for f in args.kill_at)} of "
          f"the clean run's {clean['wall']:.0f} s (start-up {clean['startup']:.0f} s, paid again by every run), "
          f"then a run to the end")
    for fraction, after in zip(args.kill_at, kill_times(args.kill_at, clean["wall"], clean["startup"])):
        run = graders.run_cli(root, workers, args.nbgrader_args, tmp, kill_after=after)
        saved = graders.graded(root)
        now = course.grades(root)
        wrong = [s for s in saved if now.get(s) != reference.get(s)]
        ok &= not wrong and not run.left_alive
        when = f"killed at {run.killed_at:.1f} s" if run.killed_at is not None else "finished before the kill"
        print(f"  {fraction:g}: {when}: {len(saved)} of {len(students)} in autograded/, "
              + ("each with the clean run's grades" if not wrong else f"DIFFERENT grades: {', '.join(wrong)}")
              + (f"; STILL ALIVE: {run.left_alive}" if run.left_alive else "; no worker or sandbox left"))
    final = graders.run_cli(root, workers, args.nbgrader_args, tmp)
    _, books = graders.compare(clean["root"], root, [s.id for s in students])
    same = course.grades(root) == reference
    staging = (root / "autograded" / ".sdpa-staging").exists()
    stale = [p.name for p in tmp.iterdir()] if tmp.exists() else []
    print(f"  resumed: {final.summary.strip().splitlines()[0] if final.summary.strip() else final.returncode}")
    print(f"  after resuming, the gradebook {'equals' if same else 'DIFFERS from'} the clean run's, autograded "
          f"notebooks {'equal' if not books else 'DIFFER: ' + ', '.join(books)}; staging left: {staging}; "
          f"temporary dirs left: {len(stale)}")
    return ok and same and not books and not staging and not stale


def submitted_notebook(root: Path, student: str) -> Path:
    return root / "submitted" / student / course.ASSIGNMENT / f"{course.ASSIGNMENT}.ipynb"


def bench(args) -> int:
    started = time.perf_counter()
    top = Path(args.dir).resolve()
    tmp = top / "tmp"
    n = args.n
    students = classroom.generate(n, args.seed, args.rare)
    k = args.stock_sample if args.stock_sample is not None else (n if n <= STOCK_LIMIT else 50)
    sample = students if k >= n else classroom.sample_of(students, k)
    print(f"class of {n} students (seed {args.seed}), built in {top}:")
    print("\n".join(classroom.describe(students)))
    if len(sample) < n:
        print(f"stock grades a stratified sample of {len(sample)}:\n" + "\n".join(classroom.describe(sample)[:1]))
    base = classroom.write_class(top / "base", students)
    first = {kind: next(s.id for s in sample if s.kind == kind) for kind in classroom.KINDS
             if any(s.kind == kind for s in sample)}
    # The reference is timed once per machine, course and torch (docs/design/time-limits.md): the first check
    # measures it and keeps it in the course, and every copy below starts with it, as a course does after its
    # first grading.
    print("sdpa-course check of one correct notebook, in a course with no kept reference timings ...", flush=True)
    cold = graders.run_check(base, submitted_notebook(base, first["correct"]), first["correct"], args.nbgrader_args,
                             tmp)
    kept = (base / ".sdpa-calibration").exists()
    stock_root = copy_course(base, top / "stock", sample)
    roots = {w: copy_course(base, top / f"cli{w}") for w in args.workers}
    loads = [os.getloadavg()[0]]
    print(f"stock: nbgrader autograde on {len(sample)} ...", flush=True)
    stock = graders.run_stock(stock_root, [s.id for s in sample], args.nbgrader_args, tmp)
    loads.append(os.getloadavg()[0])
    clis = {}
    for workers, root in roots.items():
        print(f"CLI: sdpa-course autograde --workers {workers} on {n} ...", flush=True)
        clis[workers] = graders.run_cli(root, workers, args.nbgrader_args, tmp)
        loads.append(os.getloadavg()[0])
    print("sdpa-course check of one student of each kind ...", flush=True)
    checks = {kind: (student, graders.run_check(base, submitted_notebook(base, student), student,
                                                 args.nbgrader_args, tmp)) for kind, student in first.items()}
    loads.append(os.getloadavg()[0])
    print(f"CPU floor: python -m benchmarks profile --zygote --kind {{{','.join(FLOOR_KINDS)}}} --n 4 ...", flush=True)
    floors = {kind: cpu_floor(args, top, kind) for kind in FLOOR_KINDS}
    floor = floors["correct"]
    rows = per_kind(students, stock, clis, checks)
    print(f"\nthe first sdpa-course check, which also timed the reference solution: {cold.wall:.1f} s (exit "
          f"{cold.returncode}); reference timings kept in the course: {kept}")
    print_floor(floor)
    print_times(students, stock, clis, checks, rows, len(sample) < n, loads, floor)
    print_kind_floors(rows, floors, clis)
    widest = max(clis)
    print_scale(clis[widest], n, widest)
    print()
    same = all([print_comparison(stock_root, roots[w], sample, clis[w], f"--workers {w}") for w in clis])
    same &= check_scores_agree(stock_root, checks)
    resumed = True
    if args.kill_at:
        cli = clis[widest]
        clean = {"root": roots[widest], "wall": cli.wall, "startup": cli.arrivals[0] if cli.arrivals else 0.0}
        resumed = resume(args, base, students, clean, top, tmp, widest)
    for cli in clis.values():
        if cli.returncode not in (0, 1):
            print(cli.summary[-2000:])
    print(f"\nbench took {(time.perf_counter() - started) / 60:.1f} min; course copies in {top}"
          + ("" if args.keep else " (removed)"))
    if not args.keep:
        shutil.rmtree(top, ignore_errors=True)
    return 0 if same and resumed else 1


def worker_counts(text):
    values = sorted({int(x) for x in text.split(",") if x.strip()})
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError("worker counts of at least 1, e.g. 1,2")
    return values


def fractions(text):
    values = sorted(float(x) for x in text.split(",") if x.strip())
    if not values or not all(0 < v < 1 for v in values):
        raise argparse.ArgumentTypeError("fractions between 0 and 1, e.g. 0.1,0.5,0.9")
    return values


def add_arguments(parser):
    parser.add_argument("--n", type=int, default=None, help="students (default 60)")
    parser.add_argument("--workers", type=worker_counts, default=[1, 2], metavar="W,W,...",
                        help="grade the class once with each of these `sdpa-course autograde --workers` (default 1,2)")
    parser.add_argument("--seed", type=int, default=0, help="the class generator's seed")
    parser.add_argument("--rare", type=float, default=0.05,
                        help="share of hanging, crashing and unreadable notebooks together (at least one each)")
    parser.add_argument("--stock-sample", type=int, default=None, metavar="K",
                        help=f"stock grades a stratified sample of K (default: all up to {STOCK_LIMIT}, else 50)")
    parser.add_argument("--kill-at", type=fractions, default=None, metavar="F,F,...",
                        help="also kill a CLI run at these fractions of its expected time, resume, compare")
    parser.add_argument("--dir", default=str(ROOT / ".artifacts" / "bench"))
    parser.add_argument("--keep", action="store_true", help="keep the course copies")


def run(args) -> int:
    """`args.nbgrader_args`: the --Class.trait=value options, for both graders."""
    os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    args.n = args.n or 60
    return bench(args)
