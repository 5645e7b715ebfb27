"""``python -m autograder.service COURSE``: the check service, as JupyterHub starts it (``make hub``).

JupyterHub passes the service's address and credentials in the environment (``JUPYTERHUB_SERVICE_URL``,
``JUPYTERHUB_SERVICE_PREFIX``, ``JUPYTERHUB_API_TOKEN``, ``JUPYTERHUB_API_URL``); the options are the
instructor's policies.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from urllib.parse import urlparse

from ..notebook.editions import EDITIONS
from .app import GRADER_SECONDS_PER_HOUR, Settings, make_app
from .checker import CHECK_SECONDS, Checker
from .http_bounds import BODY_SECONDS, IDLE_CONNECTION_SECONDS, MAX_REQUEST_BYTES, BoundedHTTPServer, most_connections
from .records import DIRECTORY, FILENAME, Records, default_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.service", description=__doc__.splitlines()[0])
    parser.add_argument("course", help="the nbgrader course directory (holds the hidden checks; never the students')")
    parser.add_argument("--assignment", action="append", help="an assignment to check (default: every edition)")
    parser.add_argument("--per-hour", type=int, default=10, help="checks a student may run in any hour")
    parser.add_argument("--grader-seconds-per-hour", type=float, default=GRADER_SECONDS_PER_HOUR,
                        help="grader time a student's checks may take in any hour (default %(default)g)")
    parser.add_argument("--check-seconds", type=float, default=CHECK_SECONDS,
                        help="wall-clock seconds one check may take before its grading stops (default %(default)g)")
    parser.add_argument("--show-points", action="store_true", help="show each part's points in the answer")
    parser.add_argument("--allow-after-due", action="store_true", help="keep checks open past the due date")
    parser.add_argument("--instructor-group", default="instructors", help="hub group whose members read all records")
    parser.add_argument("--records", help=f"the formative record (default: COURSE/{DIRECTORY}/{FILENAME})")
    parser.add_argument("--nbgrader-arg", action="append", default=[], help="passed to the course's grader")
    args = parser.parse_args(argv)
    assignments = args.assignment or list(EDITIONS)
    checker = Checker(args.course, assignments, args.nbgrader_arg, say=lambda line: print(line, file=sys.stderr),
                      check_seconds=args.check_seconds)
    settings = Settings(args.per_hour, args.show_points, args.allow_after_due, args.instructor_group,
                        due=_due_dates(checker, assignments), seconds_per_hour=args.grader_seconds_per_hour)
    records = Records(args.records or default_path(args.course))
    url = urlparse(os.environ.get("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:10101"))
    checker.start()

    async def serve():
        app = make_app(os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/"), checker, records, settings)
        server = BoundedHTTPServer(app, max_body_size=MAX_REQUEST_BYTES, body_timeout=BODY_SECONDS,
                                   idle_connection_timeout=IDLE_CONNECTION_SECONDS, most_connections=most_connections())
        server.listen(url.port or 80, url.hostname or "127.0.0.1")
        print(f"check service ready on {url.geturl()} for {', '.join(assignments)}", file=sys.stderr, flush=True)
        await asyncio.Event().wait()

    logging.basicConfig(level=logging.INFO, format="[check service %(asctime)s] %(message)s")
    try:
        asyncio.run(serve())
    finally:
        checker.close()
        records.close()
    return 0


def _due_dates(checker, assignments):
    """Each assignment's due date from nbgrader's gradebook (None where none is set)."""
    from nbgrader.api import Gradebook, MissingEntry

    app = checker.course_app
    due = {}
    with Gradebook(app.coursedir.db_url, app.coursedir.course_id) as gb:
        for assignment in assignments:
            try:
                due[assignment] = gb.find_assignment(assignment).duedate
            except MissingEntry:
                due[assignment] = None
    return due


if __name__ == "__main__":
    sys.exit(main())
