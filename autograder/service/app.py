"""The check service's HTTP API, a JupyterHub service authenticated through the hub (`HubOAuthenticated`):
identity comes only from the hub, never from the request's body.

``POST {prefix}api/check``            {"assignment", "notebook"}: queue the caller's notebook; 202 {"place"}, or
                                      403 (checks closed), 429 (too many this hour: "next" says when), 503 (full)
``GET  {prefix}api/check?assignment=`` the caller's latest answer, or their place while it waits
``GET  {prefix}api/records/{student}?assignment=``  a student's checks: the student themself or an instructor

An instructor is a hub admin or a member of the hub group `instructor_group`; everyone else reads only their own.
"""
from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from typing import Any, Optional

from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
from tornado import web

from ..notebook.submission import MAX_SUBMISSION_BYTES
from .checker import Checker
from .policy import RateLimit, closed
from .records import Records


class Settings:
    """The instructor's policies (`python -m autograder.service --help` sets them)."""

    def __init__(self, per_hour: int = 10, show_points: bool = False, allow_after_due: bool = False,
                 instructor_group: str = "instructors", due: Optional[dict[str, Optional[datetime]]] = None) -> None:
        self.per_hour, self.show_points, self.allow_after_due = per_hour, show_points, allow_after_due
        self.instructor_group, self.due = instructor_group, dict(due or {})


class _Handler(HubOAuthenticated, web.RequestHandler):
    def initialize(self, checker: Checker, records: Records, limit: RateLimit, settings: Settings) -> None:
        self.checker, self.records, self.limit, self.policy = checker, records, limit, settings

    def reply(self, status: int, body: dict[str, Any]) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(body, ensure_ascii=False))

    @property
    def student(self) -> str:
        return self.current_user["name"]

    def is_instructor(self) -> bool:
        user = self.current_user
        return bool(user.get("admin")) or self.policy.instructor_group in (user.get("groups") or [])

    def assignment(self, value: Any) -> str:
        if not isinstance(value, str) or value not in self.checker.graders:
            raise web.HTTPError(400, f"assignment must be one of {', '.join(self.checker.graders)}")
        return value


class CheckHandler(_Handler):
    @web.authenticated
    def post(self) -> None:
        try:
            body = json.loads(self.request.body)
        except ValueError:
            return self.reply(400, {"message": "the request is not JSON"})
        if not isinstance(body, dict) or not isinstance(body.get("notebook"), dict):
            return self.reply(400, {"message": "send {\"assignment\": ..., \"notebook\": <the notebook's JSON>}"})
        assignment = self.assignment(body.get("assignment"))
        if closed(self.policy.due.get(assignment), self.policy.allow_after_due):
            return self.reply(403, {"message": "checks are closed: the assignment is past its due date"})
        notebook = json.dumps(body["notebook"], ensure_ascii=False).encode("utf-8")
        waiting = self.checker.queue.place(self.student) is not None  # a second press while waiting costs nothing
        if not waiting:
            later = self.limit.take(self.student)
            if later is not None:
                at = datetime.fromtimestamp(later, timezone.utc).isoformat(timespec="seconds")
                self.records.add(self.student, assignment, "refused")
                return self.reply(429, {"message": f"{self.limit.per_hour} checks an hour: the next is allowed at "
                                                   f"{at}", "next": at})
        place = self.checker.queue.put(self.student, (assignment, notebook, self.policy.show_points, self._done))
        if place is None:
            if not waiting:
                self.limit.give_back(self.student)  # a check that never ran does not count
            return self.reply(503, {"message": "the checker is busy: try again in a minute"})
        self.reply(202, {"state": "waiting", "place": place})

    def _done(self, student: str, assignment: str, reply: dict) -> None:
        answer = reply if reply.get("state") == "answered" else None
        self.records.add(student, assignment, reply.get("state", "failed"), answer, reply.get("seconds"))

    @web.authenticated
    def get(self) -> None:
        assignment = self.assignment(self.get_argument("assignment", None))
        place = self.checker.queue.place(self.student)
        if place is not None:
            return self.reply(200, {"state": "waiting", "place": place})
        self.reply(200, self.checker.results.get((self.student, assignment), {"state": "none"}))


class RecordsHandler(_Handler):
    @web.authenticated
    def get(self, student: str) -> None:
        if student != self.student and not self.is_instructor():
            return self.reply(403, {"message": "you can read only your own checks"})
        assignment = self.assignment(self.get_argument("assignment", None))
        self.reply(200, {"student": student, "checks": self.records.of(assignment, student)})


def make_app(prefix: str, checker: Checker, records: Records, settings: Settings) -> web.Application:
    """The tornado application under the service's URL prefix (``JUPYTERHUB_SERVICE_PREFIX``)."""
    prefix = "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"
    shared = {"checker": checker, "records": records, "limit": RateLimit(settings.per_hour), "settings": settings}
    return web.Application([
        (prefix + "oauth_callback", HubOAuthCallbackHandler),
        (prefix + "api/check", CheckHandler, shared),
        (prefix + r"api/records/([^/]+)", RecordsHandler, shared),
    ], cookie_secret=os.urandom(32))


# A notebook as large as a submission may be, in its JSON request: the cap is the HTTP server's, before any read.
MAX_REQUEST_BYTES = MAX_SUBMISSION_BYTES + 2**20
