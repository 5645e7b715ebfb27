"""Check my work, the part that runs in each student's own Jupyter server: a server extension that forwards
``{base_url}sdpa-check/api/check`` and ``{base_url}sdpa-check/api/labels`` to the course's check service with the
server's hub token, so the hub, not the request, says who is asking.  The JupyterLab button and panel
(``lib/index.js``) are installed with it.

This package is all of the course a student's environment holds: no checks, no answers, no words of the grader
(the labels come from the service too).  JupyterLab talks to its own server (same origin, the server's XSRF
check); the server adds ``Authorization: token $JUPYTERHUB_API_TOKEN``, whose owner is the server's user and whose
scopes (``Spawner.server_token_scopes``) include access to the service and nothing more.
"""
from __future__ import annotations

import json
import os
from urllib.parse import quote

from jupyter_server.base.handlers import APIHandler
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

URL_ENV = "SDPA_CHECK_URL"  # the service's address inside the hub (the hub's config sets it)
TIMEOUT_SECONDS = 30
# The largest check the service accepts (its own cap, ``autograder/service/policy.py: MAX_CHECK_BYTES``, which it
# enforces itself; a test keeps the two equal), outputs left out: a larger notebook is refused here, before it
# leaves the server.
MAX_CHECK_BYTES = 2 * 2**20


class ForwardHandler(APIHandler):
    def _target(self, path: str) -> str:
        base = os.environ.get(URL_ENV, "")
        if not base or not os.environ.get("JUPYTERHUB_API_TOKEN"):
            raise web.HTTPError(503, "this server is not started by a JupyterHub with the check service")
        return base.rstrip("/") + "/" + path

    async def forward(self, method: str, path: str, body: bytes | None = None) -> None:
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

    def assignment(self) -> str:
        return quote(self.get_argument("assignment", ""))


class CheckHandler(ForwardHandler):
    @web.authenticated
    async def post(self) -> None:
        if len(self.request.body) > MAX_CHECK_BYTES:
            self.set_status(413)  # the panel says it in the notebook's language (`too_large` in the labels)
            return self.finish(json.dumps({"too_large_mib": MAX_CHECK_BYTES // 2**20}))
        await self.forward("POST", f"api/check?assignment={self.assignment()}", self.request.body)

    @web.authenticated
    async def get(self) -> None:
        await self.forward("GET", f"api/check?assignment={self.assignment()}")


class LabelsHandler(ForwardHandler):
    @web.authenticated
    async def get(self) -> None:
        await self.forward("GET", f"api/labels?assignment={self.assignment()}")


def _jupyter_server_extension_points() -> list[dict]:
    return [{"module": __name__}]


def _load_jupyter_server_extension(serverapp) -> None:
    base = serverapp.web_app.settings["base_url"].rstrip("/")
    serverapp.web_app.add_handlers(".*$", [(base + "/sdpa-check/api/check", CheckHandler),
                                           (base + "/sdpa-check/api/labels", LabelsHandler)])
