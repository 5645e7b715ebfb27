"""``python -m benchmarks fresh-runner-cost``: what one fresh runner costs (the fallback where no zygote can start).

What it measures and why: where no zygote can start, grading pays a fresh
runner's whole session for every submission, so its start-up is a floor
under the time per submission there; ``--tree`` compares two checkouts
(before/after a change).

Times whole fresh-runner sessions: start (sandbox, warm-up), a set-up cell, a
function, a cell that draws a figure, and one meta-device call, as a
submission's grading does.  The first session is left out (page cache); the
next `--repeat` are averaged.  The sessions run in a child process whose
working directory is the checkout timed, so that its ``autograder/`` is the one
imported (``--tree DIR``: another checkout, e.g. a `git worktree` of an older
commit, with this interpreter):

    python -m benchmarks fresh-runner-cost [--repeat 4] [--tree DIR]
"""
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CELLS = ["import torch\nimport torch.nn.functional as F\nimport matplotlib.pyplot as plt",
         "def double(x):\n    return x * 2",
         "fig, ax = plt.subplots()\nax.imshow(torch.rand(4, 4).numpy())\nax.set_title('t')\nplt.show()"]
# Run with `python -c` in the checkout timed: its directory comes first on sys.path, so its autograder is used.
SESSIONS = """
import json, sys, time
import torch
from autograder.sandbox.session import StudentSession
cells, sessions = json.loads(sys.argv[1]), int(sys.argv[2])
seconds = []
for _ in range(sessions):
    started = time.perf_counter()
    with StudentSession(cells) as session:
        session.run_notebook()
        session.call("double", torch.ones(2), on_device="meta")
    seconds.append(time.perf_counter() - started)
print(json.dumps(seconds))
"""


def add_arguments(parser):
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--tree", default=str(ROOT), help="checkout whose autograder/ to time (default: this one)")


def run(args) -> int:
    tree = Path(args.tree).resolve()
    proc = subprocess.run([sys.executable, "-c", SESSIONS, json.dumps(CELLS), str(args.repeat + 1)], cwd=tree,
                          stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        return proc.returncode
    kept = json.loads(proc.stdout.strip().splitlines()[-1])[1:]
    print(f"fresh runner session ({args.tree}): {statistics.mean(kept):.2f} s mean of {len(kept)} "
          f"(each: {' '.join(f'{s:.2f}' for s in kept)})")
    return 0
