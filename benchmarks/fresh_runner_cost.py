"""What one fresh runner costs (stock `nbgrader autograde` starts one per submission).

Times whole fresh-runner sessions: start (sandbox, warm-up), a set-up cell, a
function, a cell that draws a figure, and one meta-device call, as a
submission's grading does.  The first session is left out (page cache); the
next `--repeat` are averaged.  `--tree DIR` times the grading engine of
another checkout (e.g. a `git worktree` of an older commit) with this
interpreter, for before/after comparisons:

    python tools/fresh_runner_cost.py [--repeat 4] [--tree DIR]
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

CELLS = ["import torch\nimport torch.nn.functional as F\nimport matplotlib.pyplot as plt",
         "def double(x):\n    return x * 2",
         "fig, ax = plt.subplots()\nax.imshow(torch.rand(4, 4).numpy())\nax.set_title('t')\nplt.show()"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--tree", default=str(Path(__file__).resolve().parents[1]),
                        help="checkout whose autograder/ to time (default: this one)")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(args.tree).resolve()))
    import torch

    from autograder.sandbox.session import StudentSession

    seconds = []
    for _ in range(args.repeat + 1):
        started = time.perf_counter()
        with StudentSession(CELLS) as session:
            session.run_notebook()
            session.call("double", torch.ones(2), on_device="meta")
        seconds.append(time.perf_counter() - started)
    kept = seconds[1:]
    print(f"fresh runner session ({args.tree}): {statistics.mean(kept):.2f} s mean of {len(kept)} "
          f"(each: {' '.join(f'{s:.2f}' for s in kept)})")


if __name__ == "__main__":
    main()
