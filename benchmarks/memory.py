"""``python -m benchmarks memory``: peak memory of the grading process, per submission: a normal one and a flood.

What it measures and why: outputs are capped in the grader, so a submission
that floods its outputs must not make the grading process (the one that holds
the notebook and writes the gradebook) grow; this compares its peak with a
normal submission's.

Usage: python -m benchmarks memory [SAMPLE ...]
       (default: correct-reference attack-output-flood attack-stop-and-small-pipe)

Each sample is graded alone by stock `nbgrader autograde --student NAME` on a
temporary copy of the course.  The grading process's own peak resident set
(VmHWM of that pid, sampled until it exits; sandboxed runners are other
processes and do not count) is printed with the wall time and the size of
the autograded notebook.
"""
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import catalogue
from autograder.demo import course

DEFAULT = ("correct-reference", "attack-output-flood", "attack-stop-and-small-pipe")


def high_water_mib(pid):
    """Peak resident memory (VmHWM) of a live process in MiB; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def grade_one(root, student):
    """(peak MiB of the grading process, seconds, autograded notebook bytes, exit code)."""
    cmd = [sys.executable, "-m", "nbgrader", "autograde", course.ASSIGNMENT, "--student", student, "--force",
           "--log-level=ERROR"]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=root, env=course.nbgrader_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, high_water_mib(proc.pid))
        time.sleep(0.02)
    seconds = time.perf_counter() - started
    notebook = Path(root) / "autograded" / student / course.ASSIGNMENT / f"{course.ASSIGNMENT}.ipynb"
    return peak, seconds, notebook.stat().st_size if notebook.exists() else 0, proc.returncode


def add_arguments(parser):
    parser.add_argument("samples", nargs="*", default=DEFAULT, metavar="SAMPLE", help="catalogue sample names")


def run(args) -> int:
    names = args.samples
    chosen = [s for s in catalogue.CATALOGUE if s.name in names]
    with tempfile.TemporaryDirectory() as tmp:
        root = course.make_course(Path(tmp) / "course")
        course.nbgrader(root, "generate_assignment", course.ASSIGNMENT, "--force")
        release = course.release_notebook(root)
        for sample in chosen:
            course.submit(root, sample.name, catalogue.build(sample, release))
        print(f"{'sample':32s} {'peak RSS MiB':>12s} {'seconds':>8s} {'notebook KiB':>12s}  exit")
        for sample in chosen:
            peak, seconds, size, code = grade_one(root, sample.name)
            print(f"{sample.name:32s} {peak:12.0f} {seconds:8.1f} {size / 1024:12.0f}  {code}")
    return 0
