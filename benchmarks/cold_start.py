"""``python -m benchmarks cold-start``: grading one late student: `sdpa-course autograde --student X`, stock, check.

What it measures and why: a late submission is graded alone, so each
command's start-up (imports, zygote; the CLI's bundle and worker) is not
spread over a class; this shows what one student costs with each.

Builds a course whose class (``--graded`` correct submissions) is already
graded, adds one late student, and times each command grading only that
student -- stock ``nbgrader autograde --student``, ``sdpa-course autograde
--student``, ``sdpa-course check`` of the late notebook -- on separate
copies, alternating ``--repeat`` times.  The reference timing was kept in
the course when the class was graded (``nbgrader/calibration_file.py``), so
none of them measures it again.  Prints each time, the medians, and whether
the scores agree.

``--tree DIR`` also times the grading engine of another checkout (its
``autograder/``, e.g. a `git worktree` of an older commit), alternating with
this one, on a copy of the course that kept its own reference timings first
(the kept timings are keyed to the engine's code): a before-and-after
comparison of start-up, on one machine at one time.

    python -m benchmarks cold-start [--graded 20] [--repeat 3] [--tree DIR]
"""
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder.demo import course, submissions

LATE = "late-student"
# `sdpa-course check` of the late student's notebook, run in the course directory
CHECK_LATE = [sys.executable, "-m", "autograder.cli", "check",
              f"submitted/{LATE}/{course.ASSIGNMENT}/{course.ASSIGNMENT}.ipynb"]


def build(top: Path, graded: int) -> Path:
    base = course.make_course(top / "base")
    course.nbgrader(base, "generate_assignment", course.ASSIGNMENT, "--force")
    release = course.release_notebook(base)
    for i in range(graded):
        sample = submissions.CORRECT[i % len(submissions.CORRECT)]
        course.submit(base, f"on-time-{i:03d}", submissions.build(sample, release))
    subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", course.ASSIGNMENT], cwd=base,
                   env=course.nbgrader_env(), check=True, capture_output=True)
    course.submit(base, LATE, submissions.build(submissions.CORRECT[0], release))
    return base


def with_engine(base: Path, target: Path, tree: Path) -> Path:
    """A copy of the course graded by `tree`'s autograder/ (and course/, where it has one), which has timed
    the reference and kept it."""
    shutil.copytree(base, target, ignore=shutil.ignore_patterns("autograder", "course"))
    for package in ("autograder", "course"):
        if (tree / package).is_dir():
            shutil.copytree(tree / package, target / package, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(CHECK_LATE, cwd=target, env=course.nbgrader_env(), check=True, capture_output=True)
    return target


def timed(base: Path, target: Path, command: list[str]) -> tuple[float, dict]:
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(base, target)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=target, env=course.nbgrader_env(), check=True, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if "check" in command:  # nothing saved: its score is the total on its last line
        m = re.search(r"^automatic score: ([\d.]+) /", done.stdout, re.M)
        return seconds, float(m.group(1)) if m else None
    cells = course.grades(target).get(LATE)
    return seconds, sum(score or 0 for score, _ in cells.values()) if cells else None


def add_arguments(parser):
    parser.add_argument("--graded", type=int, default=20, help="students graded before the late one")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tree", default=None, metavar="DIR",
                        help="also time this checkout's autograder/, alternating with this one's")


def run(args) -> int:
    commands = {
        "stock nbgrader autograde --student": [sys.executable, "-m", "nbgrader", "autograde", course.ASSIGNMENT,
                                               "--student", LATE, "--log-level=ERROR"],
        "sdpa-course autograde --student": [sys.executable, "-m", "autograder.cli", "autograde", course.ASSIGNMENT,
                                            "--student", LATE],
        "sdpa-course check": CHECK_LATE,
    }
    top = Path(tempfile.mkdtemp(prefix="sdpa-cold-"))
    try:
        print(f"building a course with {args.graded} graded students and one late one ...", flush=True)
        bases = {"": build(top, args.graded)}
        if args.tree:
            bases[f" [{args.tree}]"] = with_engine(bases[""], top / "other", Path(args.tree).resolve())
        times = {name + label: [] for label in bases for name in commands}
        scores = {}
        for _ in range(args.repeat):
            for name, command in commands.items():
                for label, base in bases.items():
                    seconds, scores[name + label] = timed(base, top / "run", command)
                    times[name + label].append(seconds)
                    print(f"  {name + label:36} {seconds:6.1f} s", flush=True)
        for name, values in times.items():
            print(f"{name:38} median {statistics.median(values):5.1f} s  ({', '.join(f'{v:.1f}' for v in values)})")
        same = len({repr(v) for v in scores.values()}) == 1
        print(f"same scores for {LATE}: {same}")
        return 0 if same else 1
    finally:
        shutil.rmtree(top, ignore_errors=True)
