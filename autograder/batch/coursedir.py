"""The course directory as ``nbgrader autograde`` sees it: config, paths, submissions to grade.

Everything here reads the course through nbgrader's own `AutogradeApp` and
`CourseDirectory`, so ``sdpa-course`` finds exactly the files and options
that the stock command would.
"""
from __future__ import annotations

import glob
import os
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Union

from ..grading import record

if TYPE_CHECKING:
    from nbgrader.apps.autogradeapp import AutogradeApp
    from nbgrader.coursedir import CourseDirectory

ASSIGNMENT = "sdpa"


class CourseError(Exception):
    """A problem with the course or the command line: shown as one line, no traceback."""


def load_app(root: Union[str, os.PathLike], args: Sequence[str] = (), require_config: bool = True) -> AutogradeApp:
    """An `AutogradeApp` configured as ``nbgrader autograde ARGS`` run in `root` would be."""
    # jsonschema (imported by nbformat) builds its optional "iri" format checker at import when
    # rfc3987_syntax is installed: 38 lark grammars, about a second of CPU on `sdpa-course`'s start-up.
    # Nothing here checks formats (nbformat validates without them), so it is left out.
    sys.modules.setdefault("rfc3987_syntax", None)
    from nbgrader.apps.autogradeapp import AutogradeApp

    if not os.path.isdir(root):
        raise CourseError(f"course directory {root} does not exist — pass --course DIR")
    if require_config and not os.path.exists(os.path.join(root, "nbgrader_config.py")):
        raise CourseError(f"{root} is not an nbgrader course directory (no nbgrader_config.py) "
                          f"— run in the course root or pass --course DIR")

    old = os.getcwd()
    os.chdir(root)
    try:
        app = AutogradeApp()
        # nbgrader logs a config file that fails to run and goes on with its defaults (another release
        # directory, no sandbox): grading a course without its own config must stop here, saying why
        app.raise_config_file_errors = True
        app.initialize(list(args))
    except SystemExit:
        raise CourseError(f"nbgrader rejected the options {' '.join(args) or '(none)'} or the config in {root} "
                          f"— check them with `nbgrader autograde --help-all`") from None
    except Exception as exc:  # noqa: BLE001 - whatever the config file raised
        raise CourseError(f"a config file of the course in {root} failed to run ({type(exc).__name__}: {exc}) — "
                          "nbgrader would have graded with its defaults; fix nbgrader_config.py (or the file on "
                          "the Jupyter config path that raised) and run again") from None
    finally:
        os.chdir(old)
    return app


def step_dir(coursedir: CourseDirectory, step: str, student: str, assignment: str) -> str:
    """The normalised path of `step` (submitted, autograded, ...) for one student and assignment."""
    return os.path.normpath(coursedir.format_path(step, student, assignment))


def autograded_top(coursedir: CourseDirectory) -> str:
    """The autograded step's own directory (all students): home of the course lock and the import staging."""
    return step_dir(coursedir, coursedir.autograded_directory, ".", ".")


def sqlite_path(db_url: str) -> str:
    """The file of an sqlite gradebook URL; other databases are refused with a one-line error."""
    if not db_url.startswith("sqlite:///"):
        raise CourseError(f"the gradebook is {db_url!r}, but sdpa-course needs an sqlite gradebook "
                          f"— use `nbgrader autograde` for other databases")
    return db_url[len("sqlite:///"):]


def check_course(app: AutogradeApp, assignment: str) -> str:
    """One-line errors for a course that cannot be graded yet; returns the gradebook path."""
    coursedir = app.coursedir
    root = coursedir.root
    if not os.path.exists(os.path.join(root, "nbgrader_config.py")):
        raise CourseError(f"{root} is not an nbgrader course directory (no nbgrader_config.py) "
                          f"— run in the course root or pass --course DIR")
    db = sqlite_path(coursedir.db_url)
    release = step_dir(coursedir, coursedir.release_directory, ".", assignment)
    source = step_dir(coursedir, coursedir.source_directory, ".", assignment)
    hint = f"run `nbgrader generate_assignment {assignment}` (or `make release`) first"
    if not os.path.isdir(source):
        raise CourseError(f"no assignment {assignment!r} in {source} — check the name, or {hint}")
    if not os.path.exists(db):
        raise CourseError(f"no gradebook at {db} — {hint}")
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            raise CourseError(f"assignment {assignment!r} is not in {db} — {hint}") from None
    if not glob.glob(os.path.join(release, "*.ipynb")):
        raise CourseError(f"no released notebook in {release} — {hint}")
    return db


def find_submissions(coursedir: CourseDirectory, assignment: str) -> dict[str, str]:
    """{student: submission directory} for submitted/<student>/<assignment>/ holding a notebook."""
    pattern = step_dir(coursedir, coursedir.submitted_directory, "*", glob.escape(assignment))
    regexp = coursedir.format_path(coursedir.submitted_directory, "(?P<student_id>[^/]+)", re.escape(assignment),
                                   escape=True)
    exclude = set(filter(None, (coursedir.student_id_exclude or "").split(",")))
    found = {}
    for path in sorted(glob.glob(pattern)):
        match = re.fullmatch(regexp, os.path.normpath(path))
        if match and match.group("student_id") not in exclude and glob.glob(os.path.join(glob.escape(path),
                                                                                           "*.ipynb")):
            found[match.group("student_id")] = path
    return found


def needs_grading(coursedir: CourseDirectory, assignment: str, student: str, force: bool) -> bool:
    """nbgrader's rule: not autograded yet, --force, or a newer timestamp.txt; and a folder an interrupted
    run left unfinished (``record.unfinished``)."""
    dest = step_dir(coursedir, coursedir.autograded_directory, student, assignment)
    src = step_dir(coursedir, coursedir.submitted_directory, student, assignment)
    if force or not os.path.exists(dest) or record.unfinished(dest, src):
        return True
    new = coursedir.get_existing_timestamp(step_dir(coursedir, coursedir.submitted_directory, student, assignment))
    old = coursedir.get_existing_timestamp(dest)
    return new is not None and old is not None and new > old

