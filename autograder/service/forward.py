"""A Jupyter server extension in each user's own server: ``{base_url}sdpa-check/api/check`` forwards a check to
the check service with the server's hub token, so the hub, not the request, says who is asking.

JupyterLab's "Check my work" talks to its own server (same origin, the server's XSRF check); the server adds
``Authorization: token $JUPYTERHUB_API_TOKEN``, whose owner is the server's user and whose scopes
(``Spawner.server_token_scopes``, ``hub/jupyterhub_config.py``) include access to the service and nothing more.
A body larger than the service accepts is refused here, before it leaves the server.
"""
from __future__ import annotations

import json
import os

from jupyter_server.base.handlers import APIHandler
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from ..notebook.submission import MAX_SUBMISSION_BYTES

URL_ENV = "SDPA_CHECK_URL"  # the service's address inside the hub (hub/jupyterhub_config.py sets it)
MAX_BODY_BYTES = MAX_SUBMISSION_BYTES + 2**20
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
        if len(self.request.body) > MAX_BODY_BYTES:
            raise web.HTTPError(413, f"the notebook is over {MAX_SUBMISSION_BYTES // 2**20} MiB")
        await self._forward("POST", "api/check", self.request.body)

    @web.authenticated
    async def get(self) -> None:
        assignment = self.get_argument("assignment", "")
        from urllib.parse import quote

        await self._forward("GET", f"api/check?assignment={quote(assignment)}")


def _jupyter_server_extension_points() -> list[dict]:
    return [{"module": __name__}]


def _load_jupyter_server_extension(serverapp) -> None:
    base = serverapp.web_app.settings["base_url"]
    serverapp.web_app.add_handlers(".*$", [(base.rstrip("/") + "/sdpa-check/api/check", ForwardHandler)])
