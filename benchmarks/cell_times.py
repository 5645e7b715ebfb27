"""``python -m benchmarks cell-times``: wall seconds of each code cell of the source notebook, run as grading
runs it.

What it measures and why: where a correct submission's runner time goes, cell
by cell, so that the lesson's slow cells can be found.

The reference is timed as grading times it (``calibration.measure``: its
cells, then its hidden checks), in runners forked from one warmed zygote (as
`sdpa-course autograde` workers run them); the first run is left out (it
waits for the zygote), the next `--repeat` are averaged.

    python -m benchmarks cell-times [--repeat 3] [--top 12]
"""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def add_arguments(parser):
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--top", type=int, default=12, help="cells to print, slowest first")


def run(args) -> int:
    import nbformat

    from autograder.nbgrader.calibration import measure
    from autograder.sandbox import launcher
    from autograder.sandbox.forkserver import ForkServer
    from autograder.sandbox.session import StudentSession

    source = nbformat.read(str(ROOT / "source" / "sdpa" / "sdpa.ipynb"), as_version=4)
    server = ForkServer(launcher.Limits(), True, start_timeout=60) if ForkServer.usable() else None
    if server is not None:
        server.warm()
    means: dict[str, float] = {}
    try:
        # The very measurement grading makes of the reference (calibration.measure), cell by cell.
        for run in range(args.repeat + 1):
            times = measure(source, lambda sources, display, roles: StudentSession(
                sources, display_cells=display, provided_cells=roles[0], demo_cells=roles[1],
                runner_source=server))
            for key, seconds in times.cells.items() if run else ():
                means[key] = means.get(key, 0.0) + seconds / args.repeat
    finally:
        if server is not None:
            server.close()
    print(f"code cells of source/sdpa/sdpa.ipynb, mean wall seconds of {args.repeat} runs "
          f"({'forked from a zygote' if server else 'fresh runners'}):")
    for key, seconds in sorted(means.items(), key=lambda item: -item[1])[:args.top]:
        print(f"  {seconds:6.3f}  {key}")
    print(f"  {sum(means.values()):6.3f}  all {len(means)} cells")
    return 0
