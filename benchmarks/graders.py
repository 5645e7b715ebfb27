"""Running and observing the two graders for ``python -m benchmarks class``.

Stock ``nbgrader autograde`` is run unchanged except for its log format: a
timestamp on every log line.  nbgrader grades one student after another and
names each one in its first log line (``Creating/updating student with ID
...``, then ``Sanitizing submitted/<id>/...``), so a student's time is from
its first line to the next student's.  That holds for students that fail
too (an unreadable notebook leaves no ``autograded/`` folder whose mtime
could be read) and needs no change to nbgrader.

``sdpa-course autograde`` prints one line per submission with the worker's
seconds; this module also notes when each line arrived, samples the peak
resident memory (VmHWM) of that process -- the only one that writes the
gradebook -- and can SIGKILL its whole process group at a given time.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from autograder.demo import course
from autograder.sandbox.guest import procfs

from .memory import high_water_mib

LOG_FORMAT = "%(created).3f %(levelname)s %(message)s"
STUDENT_ID = re.compile(r"s\d{4}-[A-Za-z0-9-]+")
# "[3/40] alice 1.2s 98 / 105 automatic points; codes mask-inverted" (or the gradebook's "98/110" without a
# grading record), or "[3/40] alice FAILED …"
PROGRESS = re.compile(r"^\[(\d+)/(\d+)\] (\S+) (?:([\d.]+)s \S+ ?/ ?\S+.*|FAILED (.*))$")
FORKED = re.compile(r"^grading \d+ submissions? with \d+ workers?$")  # printed once its workers are forked


@dataclass
class StockRun:
    wall: float
    returncode: int
    seconds: dict  # student -> seconds, from the log
    startup: float  # process start to the first student


@dataclass
class CliRun:
    wall: float
    returncode: Optional[int]
    seconds: dict = field(default_factory=dict)  # student -> worker seconds (None: failed, no figure)
    failed: dict = field(default_factory=dict)  # student -> the FAILED line's reason
    arrivals: list = field(default_factory=list)  # seconds from start at which each result line came
    forked: Optional[float] = None  # seconds from start to its "grading N submissions" line (course read, imports)
    memory: list = field(default_factory=list)  # (seconds from start, VmHWM MiB) samples
    summary: str = ""
    killed_at: Optional[float] = None
    left_alive: list = field(default_factory=list)  # its processes (workers, sandboxes) alive after the kill

    @property
    def peak_mib(self) -> float:
        return max((m for _, m in self.memory), default=0.0)


def env(tmp: Path) -> dict:
    """nbgrader's environment, with every temporary file of the runs under `tmp`."""
    tmp.mkdir(parents=True, exist_ok=True)
    return dict(course.nbgrader_env(), TMPDIR=str(tmp))


def run_stock(root: Path, students: list[str], extra: list[str], tmp: Path) -> StockRun:
    """Stock `nbgrader autograde` over the whole course; its log goes to root/bench-stock.log."""
    cmd = [sys.executable, "-m", "nbgrader", "autograde", course.ASSIGNMENT, "--log-level=INFO",
           f"--Application.log_format={LOG_FORMAT}", *extra]
    log = root / "bench-stock.log"
    began, t0 = time.time(), time.perf_counter()
    with open(log, "w", encoding="utf-8") as out:
        code = subprocess.run(cmd, cwd=root, env=env(tmp), stdout=out, stderr=subprocess.STDOUT).returncode
    wall, ended = time.perf_counter() - t0, time.time()
    starts = student_starts(log.read_text(encoding="utf-8", errors="replace"), set(students))
    order = sorted(starts, key=starts.get)
    seconds = {a: starts[b] - starts[a] for a, b in zip(order, order[1:])}
    if order:
        seconds[order[-1]] = ended - starts[order[-1]]
    return StockRun(wall, code, seconds, (starts[order[0]] - began) if order else wall)


def student_starts(log: str, students: set) -> dict:
    """{student: timestamp of the first log line that names them}."""
    starts = {}
    for line in log.splitlines():
        stamp, _, text = line.partition(" ")
        try:
            when = float(stamp)
        except ValueError:
            continue  # a traceback's continuation line
        for sid in STUDENT_ID.findall(text):
            if sid in students and sid not in starts:
                starts[sid] = when
    return starts


def run_cli(root: Path, workers: int, extra: list[str], tmp: Path, kill_after: Optional[float] = None) -> CliRun:
    """`sdpa-course autograde --workers W`, watched; SIGKILL to its process group after `kill_after` s."""
    cmd = [sys.executable, "-m", "autograder.cli", "autograde", course.ASSIGNMENT, "--workers", str(workers), *extra]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=root, env=env(tmp), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    run = CliRun(0.0, None)
    out = []
    readers = [threading.Thread(target=_read_progress, args=(proc.stderr, run, t0), daemon=True),
               threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)]
    for reader in readers:
        reader.start()
    while proc.poll() is None:
        now = time.perf_counter() - t0
        run.memory.append((now, high_water_mib(proc.pid)))
        if kill_after is not None and run.killed_at is None and now >= kill_after:
            kill_group(proc.pid)
            run.killed_at = now
        time.sleep(0.05)
    run.returncode = proc.wait()
    run.wall = time.perf_counter() - t0
    for reader in readers:
        reader.join()
    run.summary = "".join(out)
    if run.killed_at is not None:
        run.left_alive = wait_gone(proc.pid, tmp)
    return run


@dataclass
class CheckRun:
    wall: float  # the whole command, interpreter start-up included
    returncode: int
    score: Optional[float]  # from its "automatic score: X / Y" line (None: no such line)
    grading: Optional[float]  # the seconds on that line: grading alone, after the command's own start-up
    output: str


CHECK_SCORE = re.compile(r"^automatic score: ([\d.]+) / [\d.]+\s+\(([\d.]+) s\)", re.M)


def run_check(root: Path, notebook: Path, student: str, extra: list[str], tmp: Path) -> CheckRun:
    """`sdpa-course check NOTEBOOK --student ID` in the course at `root`, timed from the command's start."""
    cmd = [sys.executable, "-m", "autograder.cli", "check", str(notebook), "--student", student, *extra]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=root, env=env(tmp), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    m = CHECK_SCORE.search(done.stdout)
    return CheckRun(wall, done.returncode, float(m.group(1)) if m else None, float(m.group(2)) if m else None,
                    done.stdout + done.stderr)


def _read_progress(stream, run, t0):
    """Collect the per-submission lines of `sdpa-course autograde` as they come."""
    for line in stream:
        if run.forked is None and FORKED.match(line.strip()):
            run.forked = time.perf_counter() - t0
        m = PROGRESS.match(line.strip())
        if not m:
            continue
        run.arrivals.append(time.perf_counter() - t0)
        student = m.group(3)
        run.seconds[student] = float(m.group(4)) if m.group(4) else None
        if m.group(5):
            run.failed[student] = m.group(5)


def kill_group(pgid: int) -> None:
    """SIGKILL every process of the group: the CLI and its workers (their sandboxes die with them)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def survivors(pgid: int, tmp: Path) -> list[int]:
    """Live (non-zombie) processes of group `pgid`, or using `tmp` (sandboxes run in sessions of their own)."""
    return procfs.group_or_mentioning(pgid, os.fsencode(str(tmp)))


def wait_gone(pgid: int, tmp: Path, timeout: float = 10.0) -> list[int]:
    """Wait until the killed run's processes are gone; returns those still there at the timeout."""
    deadline = time.monotonic() + timeout
    while (left := survivors(pgid, tmp)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def graded(root: Path) -> list[str]:
    """Students with an autograded/ folder (for the CLI: exactly those whose grades are saved)."""
    top = root / "autograded"
    return sorted(p.name for p in top.iterdir() if not p.name.startswith(".")) if top.exists() else []


def notebooks(root: Path, students: list[str]) -> dict:
    """{student: autograded notebook JSON} for those of `students` that have one."""
    out = {}
    for student in students:
        path = root / "autograded" / student / course.ASSIGNMENT / f"{course.ASSIGNMENT}.ipynb"
        if path.exists():
            out[student] = json.loads(path.read_text(encoding="utf-8"))
    return out


def score_text(cells: Optional[dict]) -> str:
    """A gradebook entry in words: total auto score, or why there is none."""
    if cells is None:
        return "no gradebook entry"
    if all(score is None for score, _ in cells.values()):
        return f"no auto score (0 of {sum(top for _, top in cells.values()):g})"
    return f"{sum(score or 0 for score, _ in cells.values()):g}/{sum(top for _, top in cells.values()):g}"


def compare(a_root: Path, b_root: Path, students: list[str]) -> tuple[list[str], list[str]]:
    """(students whose scores differ, students whose autograded notebooks differ or exist in one only)."""
    a, b = course.grades(a_root), course.grades(b_root)
    scores = [s for s in students if a.get(s) != b.get(s)]
    nb_a, nb_b = notebooks(a_root, students), notebooks(b_root, students)
    books = [s for s in students if nb_a.get(s) != nb_b.get(s)]
    return scores, books
