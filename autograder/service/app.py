"""The check service's HTTP API, a JupyterHub service authenticated through the hub (`HubOAuthenticated`):
identity comes only from the hub, never from the request's body.

``POST {prefix}api/check``            {"assignment", "notebook"}: queue the caller's notebook; 202 {"place"}, or
                                      403 (checks closed), 429 (too many this hour: "next" says when), 503 (full)
``GET  {prefix}api/check?assignment=`` the caller's latest answer, or their place while it waits
``GET  {prefix}api/records/{student}?assignment=``  a student's checks: the student themself or an instructor
``GET  {prefix}api/labels?assignment=``  the words of JupyterLab's button and panel, in the assignment's language

An instructor is a hub admin or a member of the hub group `instructor_group`; everyone else reads only their own.
A request without a hub identity gets 403, never a login redirect: the API is called with tokens.
"""
from __future__ import annotations

import json
import logging
import math
import os
import re
import time
from datetime import datetime, timezone
from typing import Any, Optional

from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler, HubOAuthenticated
from tornado import web

from .. import i18n
from ..i18n import _
from ..notebook.editions import EDITIONS, language_of
from ..notebook.submission import MAX_JSON_CONTAINERS, json_containers
from .answer import labels, too_large
from .checker import Checker
from .http_bounds import CHECK_BODY_SECONDS, MAX_SESSION_ID_CHARS, SESSION_COOKIE, bound_hub_caches
from .policy import MAX_CHECK_BYTES, RateLimit, Uploads, closed
from .records import Records

# The grader time a student's checks may take in any hour: a correct notebook's check takes about a second and
# a slow or looping one up to the time limits (tens of seconds); five minutes leave an honest student room.
GRADER_SECONDS_PER_HOUR = 300.0


class Settings:
    """The instructor's policies (`python -m autograder.service --help` sets them)."""

    def __init__(self, per_hour: int = 10, show_points: bool = False, allow_after_due: bool = False,
                 instructor_group: str = "instructors", due: Optional[dict[str, Optional[datetime]]] = None,
                 seconds_per_hour: Optional[float] = GRADER_SECONDS_PER_HOUR) -> None:
        self.per_hour, self.show_points, self.allow_after_due = per_hour, show_points, allow_after_due
        self.seconds_per_hour = seconds_per_hour
        self.instructor_group, self.due = instructor_group, dict(due or {})


class _Handler(HubOAuthenticated, web.RequestHandler):
    def initialize(self, checker: Checker, records: Records, limit: RateLimit, settings: Settings,
                   uploads: Uploads) -> None:
        self.checker, self.records, self.limit, self.policy, self.uploads = checker, records, limit, settings, uploads

    async def prepare(self) -> None:
        """Ask the hub who sends the request without blocking the service: JupyterHub's `get_current_user` asks
        synchronously, and one slow answer (or a stream of made-up tokens, each a round trip) held every other
        request.  The answer is kept on the request, where `current_user` finds it.  JupyterHub caches each
        answer under the request's session cookie as sent: a cookie longer than any session id is refused
        (red team: 60 KB cookies, each kept five minutes)."""
        if len(self.get_cookie(SESSION_COOKIE) or "") > MAX_SESSION_ID_CHARS:
            raise web.HTTPError(400, f"the {SESSION_COOKIE} cookie is longer than a session id")
        await self.hub_auth.get_user(self, sync=False)

    def get_login_url(self) -> str:
        """An API has no login page: a request without a hub identity is refused (403), not sent to the hub's
        login, which would keep its URL (up to 64 KB, the requester's) for ten minutes in JupyterHub's OAuth
        state, once per request, from anyone."""
        raise web.HTTPError(403, "this needs a JupyterHub token with access to this service")

    def reply(self, status: int, body: dict[str, Any]) -> None:
        """A JSON answer; its message in the language of the assignment asked about (the course's, if none)."""
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(body, ensure_ascii=False))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Errors as JSON too (JupyterLab's panel shows `message`), never tornado's HTML page."""
        error = kwargs.get("exc_info", (None, None))[1]
        message = getattr(error, "log_message", None) or self._reason
        self.reply(status_code, {"message": message})

    def speaking(self, assignment: Any):
        """Build messages in the language of `assignment`'s edition (the course's own if it is not one)."""
        known = isinstance(assignment, str) and assignment in EDITIONS
        return i18n.using(language_of(assignment if known else None))

    @property
    def student(self) -> str:
        return self.current_user["name"]

    def is_instructor(self) -> bool:
        user = self.current_user
        return bool(user.get("admin")) or self.policy.instructor_group in (user.get("groups") or [])

    def assignment(self, value: Any) -> str:
        if not isinstance(value, str) or value not in self.checker.bundles:
            with self.speaking(value):
                raise web.HTTPError(400, _("这里能检查的作业是：{assignments}").format(
                    assignments=", ".join(self.checker.bundles)))
        return value


@web.stream_request_body
class CheckHandler(_Handler):
    """A check's body is read only once the hub has said who sends it, the hourly limits allow one more, the
    student has no check being graded and no other body arriving: an unauthenticated or refused request costs
    the service no body (red-team passes: eight unauthenticated 59 MiB bodies held half a GiB; 48 connections of
    one student, each a byte short of its end, held a GiB).  Only this handler takes a body larger than
    `MAX_OTHER_BYTES`, and only once all that is settled."""

    _arriving: Optional[str] = None

    async def prepare(self) -> None:
        self._body = bytearray()
        await super().prepare()
        if self.request.method != "POST":
            return
        if self.current_user is None:
            raise web.HTTPError(403, "a check needs a JupyterHub token with access to this service")
        # The hourly limits are asked here and counted when the check enters the queue.  The refusal's language
        # comes from `?assignment=` (the forwarder passes it on).
        student = self.student
        later = self.limit.take(student, count=False)
        if later is not None:  # even to replace a waiting check: a student past the hour sends nothing (a red-team
            return self._refuse(later)  # student whose check waited opened 5,955 uploads in 25 s, each recorded)
        with self.speaking(self.get_argument("assignment", None)):
            if self.checker.grading_for(student):  # its grader time is charged when it ends: one at a time
                return self._still_grading()
            announced = self.request.headers.get("Content-Length", "0")
            if not re.fullmatch(r"[0-9]{1,9}", announced) or int(announced) > MAX_CHECK_BYTES:  # "²" isdigit()
                return self.reply(413, {"message": too_large().format(limit=MAX_CHECK_BYTES // 2**20)})
            busy = self.uploads.start(student)
            if busy == "student":
                return self.reply(429, {"message": _("你已经有一份笔记本正在发送：等它发送完再检查。")})
            if busy == "full":
                return self.reply(503, {"message": _("检查服务正忙，请一分钟后再试。")})
        self._arriving = student
        self.request.connection.set_max_body_size(MAX_CHECK_BYTES)
        self.request.connection.set_body_timeout(CHECK_BODY_SECONDS)

    def _arrived(self) -> None:
        if self._arriving is not None:
            self.uploads.end(self._arriving)
            self._arriving = None

    def on_finish(self) -> None:
        self._arrived()

    def on_connection_close(self) -> None:
        if self._arriving is not None:  # a body that never arrived whole (closed, or past its time) counts as a
            student = self._arriving   # check, whatever the limits say by now: a slot held for nothing may not
            self._arrived()            # be free
            self.limit.count(student)
            assignment = self.get_argument("assignment", "")
            self.records.add(student, assignment if assignment in self.checker.bundles else "", "unfinished")
        super().on_connection_close()

    def data_received(self, chunk: bytes) -> None:
        self._body += chunk  # at most MAX_CHECK_BYTES: the connection's cap, set in prepare

    @web.authenticated
    def post(self) -> None:
        self._arrived()
        raw = bytes(self._body)
        try:  # UTF-8 only: json.loads would take UTF-16 too, whose bytes the count cannot read (a red-team body
            text = raw.decode("utf-8")  # counted 1 container and built 523,505)
        except UnicodeDecodeError:
            text = None
        count = json_containers(raw) if text is not None else 0
        if count > MAX_JSON_CONTAINERS:
            with self.speaking(self.get_argument("assignment", None)):
                said = _("这份笔记本的结构太复杂，没法检查（{count} 个 JSON 对象和数组，最多 {limit} 个）："
                         "删掉多余的内容再检查。").format(count=count, limit=MAX_JSON_CONTAINERS)
            raise web.HTTPError(400, said)
        try:
            if text is None:
                raise ValueError("not UTF-8")
            body = json.loads(text)
            assignment = body.get("assignment") if isinstance(body, dict) else None
            if not isinstance(body["notebook"], dict):
                raise ValueError("not a notebook")
            notebook = json.dumps(body["notebook"], ensure_ascii=False).encode("utf-8")
        except (ValueError, RecursionError, UnicodeError, KeyError, TypeError):
            with self.speaking(None):
                said = _("请求应当是 JSON：{{\"assignment\": ..., \"notebook\": 笔记本的 JSON}}").format()
            raise web.HTTPError(400, said) from None
        assignment = self.assignment(assignment)
        with self.speaking(assignment):
            if closed(self.policy.due.get(assignment), self.policy.allow_after_due):
                raise web.HTTPError(403, _("已过截止时间，检查已经关闭。"))
            job = (assignment, notebook, self.policy.show_points, self._done)
            # a second press while one waits replaces it and costs nothing; a new check counts
            place = self.checker.queue.put(self.student, job, admit=lambda: self._admit(assignment))
            if place is None:
                raise web.HTTPError(503, _("检查服务正忙，请一分钟后再试。"))
        if place == self.checker.queue.IN_PROGRESS:
            with self.speaking(assignment):
                return self._still_grading()
        if place == self.checker.queue.REFUSED:
            return self._refuse(self.limit.take(self.student, count=False) or time.time() + 60)
        self.reply(202, {"state": "waiting", "place": place})

    def _admit(self, assignment: str) -> bool:
        """Count a new check against the student's hour, and write its row before it waits: a service that
        stops before answering it still counts it when it starts again."""
        if self.limit.take(self.student) is not None:
            return False
        try:
            self.records.admitted(self.student, assignment)
        except Exception:  # noqa: BLE001 - a record that cannot be written must not stop the checks
            logging.getLogger(__name__).exception("the check of %s was not recorded", self.student)
        return True

    def _still_grading(self) -> None:
        """409: the student's last check is being graded (speak in the assignment's language around it)."""
        self.reply(409, {"message": _("你的上一次检查还在评分中：等它的结果出来再检查。")})

    def _refuse(self, later: float) -> None:
        """429, saying when the next check is allowed (`later`, epoch seconds)."""
        when = datetime.fromtimestamp(later, timezone.utc)
        minutes = max(1, math.ceil((later - time.time()) / 60))
        used = self.limit.grader_seconds(self.student)
        with self.speaking(self.get_argument("assignment", None)):
            if self.limit.seconds_per_hour is not None and used >= self.limit.seconds_per_hour:
                message = _("这一小时里你的检查已经用了 {used:.0f} 秒评分时间（每小时最多 {limit:g} 秒）："
                            "下一次可以在 {time} UTC（约 {minutes} 分钟后）检查。").format(
                    used=used, limit=self.limit.seconds_per_hour, time=when.strftime("%H:%M"), minutes=minutes)
            else:
                message = _("每小时最多检查 {per_hour} 次：下一次可以在 {time} UTC"
                            "（约 {minutes} 分钟后）检查。").format(per_hour=self.limit.per_hour,
                                                             time=when.strftime("%H:%M"), minutes=minutes)
        self.reply(429, {"message": message, "next": when.isoformat(timespec="seconds")})

    def _done(self, student: str, assignment: str, reply: dict) -> None:
        """Count the check's grader time against the student's hour, and keep it in the record (a press refused
        by the hourly limit is not a check: no row)."""
        self.limit.charge(student, reply.get("seconds") or 0.0)
        answer = reply if reply.get("state") == "answered" else None
        self.records.answered(student, assignment, reply.get("state", "failed"), answer, reply.get("seconds"))

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
        assignment = self.assignment(self.get_argument("assignment", None))
        if student != self.student and not self.is_instructor():
            with self.speaking(assignment):
                return self.reply(403, {"message": _("你只能查看自己的检查记录。")})
        # with the bodies that never arrived and named no assignment: they counted against the same hour
        checks = sorted(self.records.of(assignment, student) + self.records.of("", student), key=lambda c: c["at"])
        self.reply(200, {"student": student, "checks": checks})


class LabelsHandler(_Handler):
    @web.authenticated
    def get(self) -> None:
        self.reply(200, labels(self.assignment(self.get_argument("assignment", None))))


def hourly_limit(settings: Settings, records: Records) -> RateLimit:
    """The hourly limits, with the checks of the last hour in `records` already counted: restarting the service
    gives no student a fresh hour."""
    limit = RateLimit(settings.per_hour, settings.seconds_per_hour)
    limit.seed((check["student"], check["at"], check["seconds"]) for check in records.since(time.time() - 3600))
    return limit


def make_app(prefix: str, checker: Checker, records: Records, settings: Settings) -> web.Application:
    """The tornado application under the service's URL prefix (``JUPYTERHUB_SERVICE_PREFIX``)."""
    prefix = "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"
    bound_hub_caches(HubOAuth.instance())
    shared = {"checker": checker, "records": records, "limit": hourly_limit(settings, records), "settings": settings,
              "uploads": Uploads()}
    return web.Application([
        (prefix + "oauth_callback", HubOAuthCallbackHandler),
        (prefix + "api/check", CheckHandler, shared),
        (prefix + r"api/records/([^/]+)", RecordsHandler, shared),
        (prefix + "api/labels", LabelsHandler, shared),
    ], cookie_secret=os.urandom(32))
