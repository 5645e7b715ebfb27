"""The check service on loopback, without a JupyterHub: a stand-in hub that answers the one question the
service asks it (``GET /hub/api/user`` with a token), and the service started against it.

For the service's API tests and `python -m benchmarks check-service`; on a real hub, `make hub` starts it
(``hub/control.py``).  Tokens are ``{token: user model}``; the stand-in grants each the service's scope, and
answers for a model with ``hub_answers_after_s`` only after that many seconds.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Optional

from . import course

SERVICE = "sdpa-check"
SCOPE = f"access:services!service={SERVICE}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stand_in_hub(tokens: Mapping[str, dict]) -> ThreadingHTTPServer:
    """A loopback server answering ``GET /hub/api/user`` for `tokens`, 403 for any other token; serving."""

    class Hub(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            token = self.headers.get("Authorization", "").removeprefix("token ").removeprefix("Bearer ")
            user = dict(tokens.get(token) or {})
            time.sleep(user.pop("hub_answers_after_s", 0))  # a hub slow to answer for this token
            if self.path.split("?")[0].rstrip("/").endswith("/hub/api/user") and user:
                body = json.dumps({"kind": "user", "admin": False, "groups": [], "scopes": [SCOPE], **user}).encode()
                self.send_response(200)
            else:
                body = b'{"status": 403, "message": "no such token"}'
                self.send_response(403)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class LocalService:
    """``python -m autograder.service COURSE`` against a stand-in hub; `base` is its API's URL."""

    def __init__(self, course_root: os.PathLike, tokens: Mapping[str, dict], folder: os.PathLike,
                 options: Iterable[str] = (), ready_s: float = 180) -> None:
        self.hub = stand_in_hub(tokens)
        self.log = Path(folder) / "service.log"
        command = [sys.executable, "-m", "autograder.service", str(course_root),
                   "--records", str(Path(folder) / "check_service.db"), *options]
        for _attempt in range(3):  # the free port is bound only once the graders are loaded: another may take it
            self._start(command, free_port(), ready_s)
            if self.proc.poll() is None or "Address already in use" not in self.log_text():
                break
        if self.proc.poll() is not None:
            raise RuntimeError(f"the check service exited ({self.proc.returncode}):\n{self.log_text()}")

    def _start(self, command: list[str], port: int, ready_s: float) -> None:
        env = dict(course.nbgrader_env(), JUPYTERHUB_API_TOKEN="service-token", JUPYTERHUB_SERVICE_NAME=SERVICE,
                   JUPYTERHUB_API_URL=f"http://127.0.0.1:{self.hub.server_address[1]}/hub/api",
                   JUPYTERHUB_SERVICE_URL=f"http://127.0.0.1:{port}",
                   JUPYTERHUB_SERVICE_PREFIX=f"/services/{SERVICE}/", JUPYTERHUB_BASE_URL="/",
                   JUPYTERHUB_CLIENT_ID=f"service-{SERVICE}")
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(command, env=env, stderr=out)
        self.base = f"http://127.0.0.1:{port}/services/{SERVICE}/api"
        deadline = time.monotonic() + ready_s
        while "check service ready" not in self.log_text() and self.proc.poll() is None:
            if time.monotonic() > deadline:
                self.close()
                raise TimeoutError(f"the check service did not start within {ready_s:g} s:\n{self.log_text()}")
            time.sleep(0.2)

    def wait_for(self, text: str, within_s: float = 180) -> float:
        """Seconds until `text` appears in the service's log."""
        started = time.monotonic()
        while text not in self.log.read_text(errors="replace"):
            if time.monotonic() - started > within_s or self.proc.poll() is not None:
                raise TimeoutError(f"{text!r} not in the service's log within {within_s:g} s:\n{self.log_text()}")
            time.sleep(0.1)
        return time.monotonic() - started

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def call(self, path: str, token: Optional[str] = None, body: Any = None, timeout: float = 60):
        """(HTTP status, JSON body) of GET `path` (or POST `body`) as the owner of `token`."""
        request = urllib.request.Request(self.base + path, data=None if body is None else json.dumps(body).encode(),
                                         method="GET" if body is None else "POST",
                                         headers={"Authorization": f"token {token}"} if token else {})
        return self._open(request, timeout)

    def call_raw(self, path: str, token: Optional[str], data: bytes, timeout: float = 60):
        """(HTTP status, JSON body) of POST `data`, sent as it is."""
        request = urllib.request.Request(self.base + path, data=data, method="POST",
                                         headers={"Authorization": f"token {token}"} if token else {})
        return self._open(request, timeout)

    def _open(self, request, timeout):
        try:
            with urllib.request.urlopen(request, timeout=timeout) as reply:
                return reply.status, json.loads(reply.read() or b"{}")
        except urllib.error.HTTPError as exc:
            text = exc.read()
            return exc.code, json.loads(text) if text.startswith(b"{") else {}

    def answer(self, token: str, assignment: str, within_s: float = 120, poll_s: float = 0.1) -> dict:
        """The owner's answer once it is no longer waiting or grading."""
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            _status, reply = self.call(f"/check?assignment={assignment}", token)
            if reply.get("state") not in ("waiting", "grading", None):
                return reply
            time.sleep(poll_s)
        raise TimeoutError(f"no answer within {within_s:g} s")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.hub.shutdown()
