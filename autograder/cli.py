"""``sdpa-course``: grade, report on and demo the attention course from the command line.

Run in the course directory (or pass ``--course DIR``)::

    sdpa-course autograde sdpa [--workers N] [--student ID ...] [--force] [--dask ADDRESS]
    sdpa-course report sdpa [--out DIR]
    sdpa-course check path/to/notebook.ipynb
    sdpa-course demo

``autograde`` gives the scores and feedback of ``nbgrader autograde`` (the
same converter, preprocessors and configuration), in parallel and
resumably; see `autograder.parallel` for how, and for running on a dask
cluster.  Options of the form ``--Class.trait=value`` are passed to nbgrader
as with ``nbgrader autograde`` (e.g. ``--SandboxedExecute.cell_timeout=8``).

Errors about the input are one line (what, where, what to do) and exit
status 2; failed submissions give exit status 1; Ctrl-C exits with 130 and
keeps everything already graded.  ``SDPA_COURSE_TRACEBACK=1`` shows a
traceback for unexpected errors.
"""
import argparse
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

from .parallel import ASSIGNMENT, DEFAULT_TIMEOUT, CourseError

PROG = "sdpa-course"
NBGRADER_OPTION = re.compile(r"^--[A-Za-z_]\w*\.[A-Za-z_]\w*=.*$", re.S)
DEMO_SAMPLES = ("correct-reference", "empty-release", "bug-mask-inverted", "bug-scale-missing",
                "bug-softmax-unstable", "bug-causal-off-by-one")


# How `sdpa-course autograde` reports where each submission's sandboxed runners came from.
RUNNER_SOURCES = {
    "zygote": "forked from a warmed zygote",
    "pre-started": "pre-started",
    "fresh": "started fresh",
    "mixed": "partly started fresh",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _parser():
    course = argparse.ArgumentParser(add_help=False)
    course.add_argument("--course", metavar="DIR", default=argparse.SUPPRESS,
                        help="the course directory (default: the current directory)")
    parser = _Parser(prog=PROG, description="Grade, report on and demo the scaled dot-product attention course.",
                     parents=[course])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    grade = sub.add_parser("autograde", parents=[course], help="grade all submissions, in parallel, resumably",
                           description="Autograde submitted/*/ASSIGNMENT with the scores and feedback of "
                                       "`nbgrader autograde`, in parallel.  Extra --Class.trait=value options "
                                       "go to nbgrader.")
    grade.add_argument("assignment", nargs="?", default=ASSIGNMENT, help=f"assignment name (default {ASSIGNMENT})")
    grade.add_argument("--workers", type=int, default=None, metavar="N",
                       help="grading processes (default: the number of CPUs)")
    grade.add_argument("--student", nargs="+", metavar="ID", default=None, help="grade only these students")
    grade.add_argument("--force", action="store_true", help="regrade students already in autograded/")
    grade.add_argument("--dask", metavar="ADDRESS", default=None,
                       help="grade on a dask.distributed cluster (scheduler address, e.g. tcp://head:8786)")
    grade.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                       help=f"give up on one submission after this long (default {DEFAULT_TIMEOUT:g})")
    grade.add_argument("--no-prewarm", dest="prewarm", action="store_false",
                       help="start every sandboxed runner fresh (no warmed zygote, no pre-started runner)")
    grade.add_argument("-v", "--verbose", action="store_true", help="show nbgrader's warnings for every student")

    report = sub.add_parser("report", parents=[course], help="CSV + HTML report with charts",
                            description="Write per-student per-cell CSV files and an HTML report with charts.")
    report.add_argument("assignment", nargs="?", default=ASSIGNMENT, help=f"assignment name (default {ASSIGNMENT})")
    report.add_argument("--out", metavar="DIR", default=None, help="output directory (default reports/ASSIGNMENT)")

    check = sub.add_parser("check", parents=[course], help="grade one notebook and print its feedback",
                           description="Grade one notebook outside the gradebook (in a throwaway copy of the "
                                       "course) and print the feedback.  Extra --Class.trait=value options go "
                                       "to nbgrader.")
    check.add_argument("notebook", help="the notebook to grade")
    check.add_argument("--assignment", default=ASSIGNMENT, help=f"assignment name (default {ASSIGNMENT})")
    check.add_argument("--student", default=None, metavar="ID",
                       help="grade as this student (the checks' random inputs depend on it; default: the ID in "
                            "a submitted/ID/... path, else 'check')")

    demo = sub.add_parser("demo", parents=[course], help="grade sample submissions in a demo course",
                          description="Build a demo course from this repository, grade sample submissions with "
                                      "stock `nbgrader autograde`, generate feedback and the report.")
    demo.add_argument("--dir", default=None, metavar="DIR", help="demo course directory (default .artifacts/demo)")
    return parser


def main(argv=None):
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    bad = [a for a in extra if not NBGRADER_OPTION.match(a)]
    if bad or (extra and args.command not in ("autograde", "check")):
        parser.exit(2, f"{PROG}: error: unrecognized arguments: {' '.join(bad or extra)} "
                       f"(see `{PROG} {args.command} --help`)\n")
    course = os.path.abspath(getattr(args, "course", None) or os.getcwd())
    try:
        if args.command == "autograde":
            return _autograde(args, course, extra)
        if args.command == "report":
            return _report(args, course)
        if args.command == "check":
            return _check(args, course, extra)
        return _demo(args)
    except CourseError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - one line, unless asked for the traceback
        if os.environ.get("SDPA_COURSE_TRACEBACK"):
            raise
        print(f"{PROG}: internal error: {type(exc).__name__}: {exc} (set SDPA_COURSE_TRACEBACK=1 for the "
              f"traceback)", file=sys.stderr)
        return 3


# -- autograde ---------------------------------------------------------------

def _autograde(args, course, extra):
    from .parallel import Autograder

    if args.workers is not None and args.workers < 1:
        raise CourseError(f"--workers must be at least 1 (got {args.workers})")
    if args.timeout <= 0:
        raise CourseError(f"--timeout must be positive (got {args.timeout:g})")
    run = Autograder(course, args.assignment, workers=args.workers, students=args.student, force=args.force,
                     dask=args.dask, timeout=args.timeout, prewarm=args.prewarm, nbgrader_args=extra,
                     verbose=args.verbose)
    summary = run.run()
    graded = len(summary.graded)
    done = graded + len(summary.failed)
    per = (f", {summary.wall / done:.2f} s per submission with {summary.workers} worker"
           f"{'s' * (summary.workers != 1)}") if done else ""
    print(f"graded {graded}, skipped {len(summary.skipped)} (already graded), failed {len(summary.failed)} "
          f"in {summary.wall:.1f} s{per}")
    if summary.runners:
        print("runners: " + ", ".join(f"{n} {RUNNER_SOURCES.get(k, k)}" for k, n in sorted(summary.runners.items())))
    for failure in summary.failed:
        print(failure.line())
    if summary.failed:
        print(f"failed submissions have no autograded/ folder; fix them (or the grader) and run "
              f"`{PROG} autograde {args.assignment}` again — graded ones are skipped")
    if summary.interrupted:
        left = summary.total - graded - len(summary.skipped) - len(summary.failed)
        print(f"interrupted: {graded} graded and saved, {left} not graded — run the same command again to "
              f"continue", file=sys.stderr)
        return 130
    return 1 if summary.failed else 0


# -- report ------------------------------------------------------------------

def _report(args, course):
    from . import report

    built = report.build(course, args.assignment, out=args.out)
    data = built["data"]
    print(f"{len(data.students)} students; report: {built['html']}")
    print(f"per-student per-cell scores: {built['cells_csv']}")
    return 0


# -- check -------------------------------------------------------------------

def _check(args, course, extra):
    from nbgrader.api import Gradebook

    from .parallel import Grader, check_course, failure_result, load_app, make_bundle

    path = os.path.abspath(args.notebook)
    if not os.path.isfile(path):
        raise CourseError(f"notebook {args.notebook} not found — pass the path of an .ipynb file")
    app = load_app(course, extra)
    check_course(app, args.assignment)
    with Gradebook(app.coursedir.db_url, app.coursedir.course_id) as gb:
        spec = gb.find_assignment(args.assignment)
        names = [nb.name for nb in spec.notebooks]
        cells = {nb.name: [(c.name, c.cell_type, float(c.max_score)) for c in nb.grade_cells]
                 for nb in spec.notebooks}
    stem = Path(path).stem
    name = stem if stem in names else names[0] if len(names) == 1 else None
    if name is None:
        raise CourseError(f"{args.notebook} is not one of the notebooks of {args.assignment} "
                          f"({', '.join(n + '.ipynb' for n in names)}) — rename it")
    student = args.student or _student_from_path(app, path, args.assignment) or "check"
    print(f"grading {path} as {name}.ipynb of {args.assignment}, student {student!r} (not saved to the gradebook)",
          file=sys.stderr)
    started = time.perf_counter()
    grader = Grader(make_bundle(app, args.assignment, extra), prewarm=False)
    try:
        result = grader.grade({"student": student, "files": {f"{name}.ipynb": (Path(path).read_bytes(), 0o644)}})
    finally:
        grader.close()
    if not result["ok"]:
        from .parallel import Failure

        info = result["failure"] or failure_result(student, "unknown error")["failure"]
        print(Failure(student, info["notebook"], info["cell"], info["reason"], info["stage"]).line())
        if result.get("log"):
            print(result["log"], file=sys.stderr)
        return 1
    nb = json.loads(result["files"][f"{name}.ipynb"][0].decode("utf-8"))
    report = json.loads(result["files"].get(f"{name}.grading.json", (b"{}",))[0].decode("utf-8"))
    print(_feedback_text(nb, report, cells[name], result["grades"].get(name, {}), time.perf_counter() - started))
    return 0


def _student_from_path(app, path, assignment):
    parts = Path(path).parts
    submitted = os.path.basename(os.path.normpath(app.coursedir.submitted_directory))
    if len(parts) >= 4 and parts[-2] == assignment and parts[-4] == submitted:
        return parts[-3]
    return None


def _feedback_text(nb, report, grade_cells, auto_scores, seconds):
    lines = []
    shown = {}
    for cell in nb.get("cells", []):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and cell.get("cell_type") == "code":
            outputs = cell.get("outputs", [])
            text = ""
            if outputs and outputs[0].get("output_type") == "display_data":
                text = _plain(outputs[0].get("data", {}).get("text/plain", ""))
            shown[meta.get("grade_id")] = text
    auto_total = auto_max = 0.0
    for grade_id, cell_type, max_score in grade_cells:
        if cell_type == "code":
            score = auto_scores.get(grade_id) or 0.0
            auto_total += score
            auto_max += max_score
            # The feedback's first line is "<grade_id>：<score> / <max> 分（...）".
            lines.append(shown.get(grade_id) or f"{grade_id}: {score:g} / {max_score:g} (no feedback)")
        else:
            lines.append(f"{grade_id}: graded by hand ({max_score:g} points)")
        lines.append("")
    for event in report.get("events", []):
        lines.append(f"!! sandbox: {event}")
    sandbox = report.get("sandbox", {})
    if sandbox and not sandbox.get("isolated"):
        lines.append(f"!! the code ran WITHOUT sandbox isolation ({sandbox.get('mechanism')})")
    lines.append(f"automatic score: {auto_total:g} / {auto_max:g}   ({seconds:.1f} s)")
    return "\n".join(lines)


def _plain(text):
    return "".join(text) if isinstance(text, list) else str(text)


# -- demo --------------------------------------------------------------------

def _demo(args):
    from . import course as coursekit
    from . import report, samples

    root = Path(args.dir or Path(coursekit.ROOT) / ".artifacts" / "demo").resolve()
    started = time.perf_counter()

    def step(text):
        print(f"[{time.perf_counter() - started:5.1f}s] {text}", flush=True)

    def nbgrader(*cmd):
        proc = coursekit.nbgrader(root, *cmd, check=False)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
            step(f"   `nbgrader {' '.join(cmd)}` exited with {proc.returncode}: {tail[0]}")
        return proc

    step(f"building the demo course in {root}")
    if root.exists():
        shutil.rmtree(root)
    coursekit.make_course(root)
    step("nbgrader generate_assignment sdpa")
    proc = nbgrader("generate_assignment", coursekit.ASSIGNMENT, "--force")
    if proc.returncode != 0:
        raise CourseError(f"`nbgrader generate_assignment` failed in {root} — see `make release` for the details")
    release = coursekit.release_notebook(root)
    catalogue = {s.name: s for s in samples.CATALOGUE}
    chosen = [catalogue[name] for name in DEMO_SAMPLES if name in catalogue]
    for sample in chosen:
        coursekit.submit(root, sample.name, samples.build(sample, release))
    step(f"submitted {len(chosen)} sample notebooks: {', '.join(s.name for s in chosen)}")
    step("nbgrader autograde sdpa   (stock nbgrader, our sandbox + trusted scoring)")
    nbgrader("autograde", coursekit.ASSIGNMENT)
    step("nbgrader generate_feedback sdpa")
    nbgrader("generate_feedback", coursekit.ASSIGNMENT)
    step("sdpa-course report sdpa")
    built = report.build(str(root), coursekit.ASSIGNMENT)
    grades = coursekit.grades(root)
    step("done")
    print()
    width = max(len(s.name) for s in chosen) + 2
    print(f"{'student':{width}}{'score':>10}   {'expected':12}codes named in the feedback")
    for sample in chosen:
        cells = grades.get(sample.name)
        if not cells:
            print(f"{sample.name:{width}}{'FAILED':>10}   {sample.expect:12}(not graded: see the output above)")
            continue
        earned = sum(s or 0 for s, _ in cells.values())
        possible = sum(m for _, m in cells.values())
        named = _codes(root, sample.name)
        verdict = getattr(samples, "verdict", None)
        mark = ("ok" if verdict(sample, cells, named)[0] else "NOT MET") if verdict else ""
        expected = f"{sample.expect} {mark}".strip()
        print(f"{sample.name:{width}}{f'{earned:g}/{possible:g}':>10}   {expected:12}{' '.join(named) or '-'}")
    print()
    print("feedback (open in a browser):")
    for sample in chosen:
        path = coursekit.feedback_html(root, sample.name)
        print(f"  {path if path.exists() else str(path) + '  (missing)'}")
    print(f"class report: {built['html']}")
    return 0


def _codes(root, student):
    path = Path(root) / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.grading.json"
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return list(dict.fromkeys(code for cell in report.get("cells", []) for check in cell.get("checks", [])
                              for code in check.get("codes", [])))


if __name__ == "__main__":
    sys.exit(main())
