"""``python -m benchmarks guard-cost``: what the run-time guards cost a submission, on the same notebook.

What it measures and why: the guards of the threat model (``docs/design/sandbox.md``) -- the tripwires on
the built-in softmax and attention, the audit hook that reports every compiled text, and the look for ops
and modules that appear after start-up -- run in every runner, and the grader reads every reported text.
``make bench`` compares whole commits, whose lessons and checks differ too; this isolates the guards.

Runner side: the runner's own code (``autograder/sandbox/guest``) runs the solution notebook's code cells
in this machine's Python, without the sandbox, in two child processes: one with no guard installed, one
guarded as a zygote's runner is (its warm-up, the text report, a look after every cell).  The course's
demonstration cells that call a built-in are left out of both (graded, the grader computes those calls).
Each child runs the cells once to warm up, then `--passes` times; `--rounds` children of each kind
alternate, and the fastest pass of each kind is kept.

Trusted side: a sandboxed session runs the same notebook and the grader reads what it reported
(``code_review.runtime_notes``); a second session then shows what every later submission of a grading
process costs (the installation's files are read once per process).  Last, the whole reading of that
submission (the scan and the texts) in the grading process and, as grading does it, in a child process of
the reading server (``autograder/grading/reading_process.py``).

    python -m benchmarks guard-cost [--passes 5] [--rounds 4] [--notebook solutions/sdpa_solution.ipynb]
"""
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "solutions/sdpa_solution.ipynb"
# Run with `python -c` from the repository root: the guest files import each other by name.
CELLS = """
import json, os, sys, time
sys.path.insert(0, os.path.abspath("autograder/sandbox/guest"))
import nbformat
guarded, notebook, passes, skip = sys.argv[1] == "guarded", sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
from autograder.notebook.cells import code_cells
_positions, cells = code_cells(nbformat.read(notebook, as_version=4))
import runner, tripwires, warmup, source_report
if guarded:
    run, _files = warmup.warm_up(restore_files=False)
else:
    run = runner.new_runner()
run.proto_out = open(os.devnull, "wb")
if guarded:
    source_report.install(run.proto_out)
failed = []
def once():
    for i, source in enumerate(cells):
        if i in skip:
            continue
        reply, _out = run.op_exec({"source": source, "provided": True}, [])
        if reply["status"] != "ok":
            failed.append(i)
        if guarded:
            tripwires.cover_late_ops(run)
once()
first_failed = sorted(set(failed))
seconds = []
for _ in range(passes):
    started = time.perf_counter()
    once()
    seconds.append(time.perf_counter() - started)
print(json.dumps({"seconds": seconds, "failed": first_failed}))
"""


def add_arguments(parser):
    parser.add_argument("--passes", type=int, default=5, help="passes over the cells per process")
    parser.add_argument("--rounds", type=int, default=4, help="processes of each kind, alternating")
    parser.add_argument("--notebook", default=NOTEBOOK, help="whose code cells to run (default: %(default)s)")


def _cells(mode, notebook, passes, skip):
    proc = subprocess.run([sys.executable, "-c", CELLS, mode, notebook, str(passes), json.dumps(skip)], cwd=ROOT,
                          stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _course_cells(notebook):
    """(code cell sources, provided cells, demonstration cells) of the notebook, as grading runs them."""
    import nbformat

    from autograder.grading import code_review
    from autograder.notebook.cells import code_cells

    nb = nbformat.read(str(ROOT / notebook), as_version=4)
    positions, sources = code_cells(nb)
    return (sources, *code_review.cell_roles(nb, positions, sources))


def _trusted(sources, provided, demo):
    """Seconds of ``code_review.runtime_notes`` for the first and the second of two sessions on the notebook
    (the second as every later submission of a grading process), how many texts the second reported, and the
    whole reading of the second (``reading_process``: the scan and those texts) here and in its child process."""
    from autograder.grading import code_review, reading_process
    from autograder.sandbox.session import StudentSession

    timed = []
    for _ in range(2):
        with StudentSession(sources, provided_cells=provided, demo_cells=demo) as session:
            session.run_notebook()
            compiled = session.compiled
        started = time.perf_counter()
        code_review.runtime_notes(compiled, sources, lambda request: 0)
        timed.append(time.perf_counter() - started)
    positions = list(range(len(sources)))
    student = [i for i in positions if i not in provided]
    code = reading_process.CodeToRead([sources[i] for i in student], student, sources, positions, compiled)
    reading_process.read(code)  # the reading server's start and imports: once per grading process
    readings = {}
    for where, read in (("here", reading_process.read_here), ("child", reading_process.read)):
        best = []
        for _ in range(5):
            started = time.perf_counter()
            read(code)
            best.append(time.perf_counter() - started)
        readings[where] = min(best)
    return timed[0], timed[1], len(compiled.texts), readings


def run(args) -> int:
    sources, provided, demo = _course_cells(args.notebook)
    skip = sorted(demo)  # demonstration cells: graded, the grader computes their built-ins
    fastest = {"guarded": [], "plain": []}
    for round_ in range(args.rounds):  # the two kinds of process alternate, so a slow spell of the machine hits both
        for mode in (("guarded", "plain") if round_ % 2 == 0 else ("plain", "guarded")):
            result = _cells(mode, args.notebook, args.passes, skip)
            if result["failed"]:
                print(f"cells failed ({mode}): {result['failed']}", file=sys.stderr)
                return 1
            fastest[mode].append(min(result["seconds"]))
    fast, slow = min(fastest["plain"]), min(fastest["guarded"])
    first, later, texts, readings = _trusted(sources, provided, demo)
    print(f"runner, {args.notebook}'s code cells ({len(skip)} demonstration cells left out), fastest pass of "
          f"{args.rounds} processes x {args.passes} passes each:")
    share = 100 * (slow / fast - 1)
    print(f"  without guards {fast:.3f} s, guarded {slow:.3f} s: {slow - fast:+.3f} s ({share:+.1f}%)")
    print(f"grader, reading the {texts} texts the runner reported: {later:.3f} s per submission "
          f"({first:.2f} s for the first of a grading process)")
    print(f"grader, the whole reading of the code (scan and texts), fastest of 5: {readings['here']:.3f} s in the "
          f"grading process, {readings['child']:.3f} s in a child of the reading server")
    return 0
