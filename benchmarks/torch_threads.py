"""``python -m benchmarks torch-threads``: CPU and wall time of one hidden-check tolerance, by torch threads.

What it measures and why: grading workers run torch with one thread; this is
the evidence for that choice (what a second thread buys, alone and beside a
busy process).

    python -m benchmarks torch-threads [--calls 2000] [--busy]

``--busy`` runs one CPU-bound process beside it, as a second worker or a
runner would be on a 2-core machine.
"""
import subprocess
import sys
import time


def measure(threads: int, calls: int) -> tuple[float, float]:
    import torch

    from autograder.grading import cases

    torch.set_num_threads(threads)
    q, k, v = cases.qkv(torch.Generator().manual_seed(0))
    for _ in range(50):  # first calls pay for lazy initialisation
        cases.tolerance(cases.sdpa, (q, k, v), torch.float64, select=0)
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        cases.tolerance(cases.sdpa, (q, k, v), torch.float64, select=0)
    return (time.perf_counter() - wall) / calls * 1e3, (time.process_time() - cpu) / calls * 1e3


def add_arguments(parser):
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--busy", action="store_true", help="run one CPU-bound process beside it")


def run(args) -> int:
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.busy else None
    try:
        for threads in (1, 2):
            wall, cpu = measure(threads, args.calls)
            print(f"{threads} thread(s): {wall:.3f} ms wall, {cpu:.3f} ms CPU per tolerance"
                  f"{' (one busy process beside it)' if hog else ''}")
    finally:
        if hog is not None:
            hog.kill()
    return 0
