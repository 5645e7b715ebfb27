"""A Jupyter server extension in each user's own server: ``{base_url}sdpa-check/api/check`` forwards a check to
the check service with the server's hub token, so the hub, not the request, says who is asking; and
``{base_url}sdpa-check/api/labels`` gives JupyterLab's button and panel their words (``labextension/``).

JupyterLab's "Check my work" talks to its own server (same origin, the server's XSRF check); the server adds
``Authorization: token $JUPYTERHUB_API_TOKEN``, whose owner is the server's user and whose scopes
(``Spawner.server_token_scopes``, ``hub/jupyterhub_config.py``) include access to the service and nothing more.
A body larger than the service accepts is refused here, before it leaves the server.
"""
from __future__ import annotations

import json
import os
from urllib.parse import quote

from jupyter_server.base.handlers import APIHandler
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from .. import i18n
from ..i18n import _
from ..notebook.editions import EDITIONS, language_of
from .policy import MAX_CHECK_BYTES

URL_ENV = "SDPA_CHECK_URL"  # the service's address inside the hub (hub/jupyterhub_config.py sets it)
TIMEOUT_SECONDS = 30


class ForwardHandler(APIHandler):
    def _target(self, path: str) -> str:
        base = os.environ.get(URL_ENV, "")
        token = os.environ.get("JUPYTERHUB_API_TOKEN", "")
        if not base or not token:
            raise web.HTTPError(503, "this server is not started by a JupyterHub with the check service")
        return base.rstrip("/") + "/" + path

    async def _forward(self, method: str, path: str, body: bytes | None = None) -> None:
        request = HTTPRequest(self._target(path), method=method, body=body, request_timeout=TIMEOUT_SECONDS,
                              headers={"Authorization": f"token {os.environ['JUPYTERHUB_API_TOKEN']}",
                                       "Content-Type": "application/json"}, follow_redirects=False)
        try:
            response = await AsyncHTTPClient().fetch(request, raise_error=False)
        except OSError as exc:
            self.set_status(503)
            return self.finish(json.dumps({"message": f"the check service cannot be reached ({exc})"}))
        self.set_status(response.code if response.code != 599 else 503)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        if response.code == 599 or not (response.body or b"").startswith(b"{"):
            return self.finish(json.dumps({"message": "the check service did not answer; try again in a minute"}))
        self.finish(response.body)

    @web.authenticated
    async def post(self) -> None:
        assignment = self.get_argument("assignment", "")
        if len(self.request.body) > MAX_CHECK_BYTES:
            with i18n.using(language_of(assignment)):
                said = _("这份笔记本超过了检查允许的 {limit} MiB："
                         "清除输出（编辑 > 清除所有单元格的输出），再检查一次。").format(limit=MAX_CHECK_BYTES // 2**20)
            raise web.HTTPError(413, said)
        await self._forward("POST", f"api/check?assignment={quote(assignment)}", self.request.body)

    @web.authenticated
    async def get(self) -> None:
        await self._forward("GET", f"api/check?assignment={quote(self.get_argument('assignment', ''))}")


def labels(assignment: str) -> dict[str, str]:
    """The words of JupyterLab's button and panel, in the assignment's language (the answer's own words come
    from the service, in the same language)."""
    with i18n.using(language_of(assignment)):
        return {"language": language_of(assignment), "button": _("检查我的作业"),
                "tooltip": _("用评分时的隐藏检查检查这份笔记本（包括还没保存的修改）；不计分"),
                "title": _("检查结果"), "passes": _("通过"), "needs_work": _("需要修改"),
                "held": _("等待老师复核"), "all_pass": _("每一部分都通过了。"),
                "some_fail": _("有 {count} 个部分需要修改。"), "waiting": _("排队中：前面还有 {place} 份"),
                "grading": _("正在检查……"), "example": _("最小的失败例子"), "hint": _("提示"),
                "no_answer": _("检查服务没有回答，请稍后再试。"), "seconds": _("用时 {seconds} 秒"),
                "points": _("{points} / {max_points} 分")}


class LabelsHandler(APIHandler):
    @web.authenticated
    def get(self) -> None:
        assignment = self.get_argument("assignment", "")
        if assignment not in EDITIONS:
            raise web.HTTPError(404, "not one of the course's notebooks")
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(json.dumps(labels(assignment), ensure_ascii=False))


def _jupyter_server_extension_points() -> list[dict]:
    return [{"module": __name__}]


def _load_jupyter_server_extension(serverapp) -> None:
    base = serverapp.web_app.settings["base_url"]
    serverapp.web_app.add_handlers(".*$", [(base.rstrip("/") + "/sdpa-check/api/check", ForwardHandler),
                                           (base.rstrip("/") + "/sdpa-check/api/labels", LabelsHandler)])
