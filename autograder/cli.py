"""``sdpa-course``: grade, report on and demo the attention course from the command line.

Run in the course directory (or pass ``--course DIR``)::

    sdpa-course autograde sdpa [--workers N] [--student ID ...] [--force] [--dask ADDRESS]
    sdpa-course report sdpa [--out DIR]
    sdpa-course export [EDITION ...] [--format csv|canvas|moodle] [--out FILE]
    sdpa-course check path/to/notebook.ipynb
    sdpa-course demo

``autograde`` gives the scores and feedback of ``nbgrader autograde`` (the
same converter, preprocessors and configuration), in parallel and
resumably; see `autograder.batch.run` for how, and for running on a dask
cluster.  Options of the form ``--Class.trait=value`` are passed to nbgrader
as with ``nbgrader autograde`` (e.g. ``--SandboxedExecute.cell_timeout=8``).

Errors about the input are one line (what, where, what to do) and exit
status 2; failed submissions give exit status 1; Ctrl-C exits with 130 and
keeps everything already graded.  ``SDPA_COURSE_TRACEBACK=1`` shows a
traceback for unexpected errors.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn, Optional

from .batch.coursedir import ASSIGNMENT, CourseError
from .batch.dask_cluster import DEFAULT_TIMEOUT
from .i18n import LOCALES
from .notebook.editions import EDITIONS
from .sandbox.launcher import SandboxUnavailableError

PROG = "sdpa-course"
NBGRADER_OPTION = re.compile(r"^--[A-Za-z_]\w*\.[A-Za-z_]\w*=.*$", re.S)


# How `sdpa-course autograde` reports where each submission's sandboxed runners came from.
RUNNER_SOURCES = {
    "zygote": "forked from a warmed zygote",
    "pre-started": "pre-started",
    "fresh": "started fresh",
    "mixed": "partly started fresh",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
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
    report.add_argument("--out", metavar="DIR", default=None, help="writes DIR/ASSIGNMENT/ (default: reports)")
    report.add_argument("--language", choices=sorted(LOCALES), default=None,
                        help="language of the page and charts (default: the assignment's edition's)")

    export = sub.add_parser("export", parents=[course], help="grades to upload: CSV, Canvas or Moodle",
                            description="One row per student, in the edition they submitted (a student who "
                                        "submitted both: the one submitted last), for a spreadsheet (csv, a "
                                        "column per part) or a learning-management system's gradebook import.")
    export.add_argument("editions", nargs="*", metavar="EDITION",
                        help=f"only these editions ({', '.join(EDITIONS)}; default: all of them, each student once)")
    export.add_argument("--format", choices=("csv", "canvas", "moodle"), default="csv",
                        help="csv (default), canvas or moodle")
    export.add_argument("--out", metavar="FILE", default=None, help="the file to write (default grades-FORMAT.csv)")

    check = sub.add_parser("check", parents=[course], help="grade one notebook and print its feedback",
                           description="Grade one notebook outside the gradebook (in a throwaway copy of the "
                                       "course) and print the feedback.  Extra --Class.trait=value options go "
                                       "to nbgrader.")
    check.add_argument("notebook", help="the notebook to grade")
    check.add_argument("--assignment", default=None,
                       help=f"assignment name (default: the edition the notebook is named after, e.g. "
                            f"sdpa_en.ipynb is graded as sdpa_en; else {ASSIGNMENT})")
    check.add_argument("--student", default=None, metavar="ID",
                       help="grade as this student (the checks' random inputs depend on it; default: the ID in "
                            "a submitted/ID/... path, else 'check')")

    demo = sub.add_parser("demo", parents=[course], help="grade sample submissions in a demo course",
                          description="Build a demo course from this repository, grade sample submissions with "
                                      "stock `nbgrader autograde`, generate feedback and the report.")
    demo.add_argument("--dir", default=None, metavar="DIR", help="demo course directory (default .artifacts/demo)")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
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
        if args.command == "export":
            return _export(args, course)
        if args.command == "check":
            from .notebook.editions import edition_of

            return _check(args, course, extra, args.assignment or edition_of(args.notebook) or ASSIGNMENT)
        from .demo.run import run_demo

        return run_demo(args.dir)
    except (CourseError, SandboxUnavailableError) as exc:  # the input, or a sandbox that cannot start
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - one line, unless asked for the traceback
        problem = _gradebook_problem(exc, course)
        if problem:
            print(f"{PROG}: error: {problem}", file=sys.stderr)
            return 2
        if os.environ.get("SDPA_COURSE_TRACEBACK"):
            raise
        print(f"{PROG}: internal error: {type(exc).__name__}: {exc} (set SDPA_COURSE_TRACEBACK=1 for the "
              f"traceback)", file=sys.stderr)
        return 3


def _gradebook_problem(exc: BaseException, course: str) -> Optional[str]:
    """One line for a gradebook SQLite cannot use (locked by another process, damaged): which file, what
    happened, what to do; None for any other error."""
    import sqlite3

    try:
        from sqlalchemy.exc import DBAPIError
    except ImportError:  # pragma: no cover - nbgrader depends on SQLAlchemy
        DBAPIError = ()  # noqa: N806
    cause = exc.orig if DBAPIError and isinstance(exc, DBAPIError) else exc
    if not isinstance(cause, sqlite3.DatabaseError):
        return None
    path = os.path.join(course, "gradebook.db")
    text = str(cause)
    if "locked" in text:
        return (f"the gradebook {path} is locked by another process (formgrader, or another nbgrader or "
                f"sdpa-course command): let it finish or stop it, then run this again")
    if "malformed" in text or "not a database" in text:
        return (f"the gradebook {path} is damaged ({text}): restore it from a backup; or move it aside and run "
                f"`nbgrader generate_assignment` and `nbgrader autograde` again (grades given by hand are lost)")
    return f"the gradebook {path} cannot be used ({text})"


# -- autograde ---------------------------------------------------------------

def _autograde(args, course, extra):
    from .batch.run import Autograder

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
    if summary.disk_full:
        left = summary.total - graded - len(summary.skipped) - len(summary.failed)
        print(f"{PROG}: error: the disk is full ({summary.disk_full}); stopped: {graded} graded and saved, {left} "
              f"not graded — free space on the disk of {course} and run the same command again", file=sys.stderr)
        return 2
    if summary.interrupted:
        left = summary.total - graded - len(summary.skipped) - len(summary.failed)
        print(f"interrupted: {graded} graded and saved, {left} not graded — run the same command again to "
              f"continue", file=sys.stderr)
        return 130
    return 1 if summary.failed else 0


# -- export ------------------------------------------------------------------

def _export(args, course):
    from .export import export

    unknown = [e for e in args.editions if e not in EDITIONS]
    if unknown:
        raise CourseError(f"not an edition of this course: {', '.join(unknown)} (the editions: {', '.join(EDITIONS)})")
    path, students, notes = export(course, args.format, args.out, assignments=args.editions or tuple(EDITIONS))
    for note in notes:
        print(note)
    print(f"wrote {path}: {students} student{'s' * (students != 1)} ({args.format})")
    return 0


# -- check -------------------------------------------------------------------

def _check(args, course, extra, assignment):
    """The zygote starts first and warms up (seconds of CPU, in its own sandbox) while this process imports
    torch and nbgrader.  It has the default limits; a course configured otherwise gets a new one at its
    first runner (`forkserver.ForkServer.take`)."""
    from .sandbox.forkserver import ForkServer

    server = ForkServer() if ForkServer.usable() else None
    try:
        if server is not None:
            server.warm()
        from .batch.check import check_notebook

        return check_notebook(course, args.notebook, assignment, args.student, extra, pool=server)
    finally:
        if server is not None:
            server.close()


# -- report ------------------------------------------------------------------

def _report(args, course):
    from . import report

    built = report.build(course, args.assignment, out=args.out, language=args.language)
    data = built["data"]
    print(f"{len(data.students)} students; report: {built['html']}")
    print(f"per-student per-cell scores: {built['cells_csv']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
