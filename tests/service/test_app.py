"""The check service over HTTP, as JupyterHub runs it: identity from the hub only, each student reads only their
own checks, the hourly limit, a notebook graded with the final grading's engine.

The hub is a stand-in that answers the one question a service asks it (``GET /hub/api/user`` with a token);
the service on a real hub, behind JupyterLab's button, is still to be built (issue 46)."""
import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import nbformat
import pytest

import catalogue
from autograder.demo import course, submissions
from hub.control import free_port
from tests.support.grading import FAST_LIMITS

pytestmark = pytest.mark.slow
SCOPE = "access:services!service=sdpa-check"
USERS = {"tok-alice": {"name": "alice"}, "tok-bob": {"name": "bob"},
         "tok-teacher": {"name": "teacher", "groups": ["instructors"]}}


class FakeHub(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        token = self.headers.get("Authorization", "").removeprefix("token ").removeprefix("Bearer ")
        user = USERS.get(token)
        if self.path.rstrip("/").endswith("/hub/api/user") and user:
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


@pytest.fixture(scope="module")
def service(released, tmp_path_factory):
    hub = ThreadingHTTPServer(("127.0.0.1", free_port()), FakeHub)
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    port = free_port()
    env = dict(course.nbgrader_env(), JUPYTERHUB_API_TOKEN="service-token", JUPYTERHUB_SERVICE_NAME="sdpa-check",
               JUPYTERHUB_API_URL=f"http://127.0.0.1:{hub.server_address[1]}/hub/api",
               JUPYTERHUB_SERVICE_URL=f"http://127.0.0.1:{port}", JUPYTERHUB_SERVICE_PREFIX="/services/sdpa-check/",
               JUPYTERHUB_BASE_URL="/", JUPYTERHUB_CLIENT_ID="service-sdpa-check")
    folder = tmp_path_factory.mktemp("service")
    log = folder / "service.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "autograder.service", str(released), "--per-hour", "3",
                                 "--records", str(folder / "check_service.db"),
                                 *[f"--nbgrader-arg={a}" for a in FAST_LIMITS]], env=env, stderr=out)
    deadline = time.monotonic() + 180
    while "check service ready" not in log.read_text() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "check service ready" in log.read_text(), log.read_text()[-3000:]
    yield {"base": f"http://127.0.0.1:{port}/services/sdpa-check/api", "released": released, "log": log}
    proc.terminate()
    proc.wait(timeout=30)
    hub.shutdown()


def _call(url, token=None, body=None):
    request = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                     method="GET" if body is None else "POST",
                                     headers={"Authorization": f"token {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, json.loads(reply.read() or b"{}")
    except urllib.error.HTTPError as exc:
        text = exc.read()
        return exc.code, json.loads(text) if text.startswith(b"{") else {}


def _notebook(released, name):
    (sample,) = [s for s in catalogue.CATALOGUE if s.name == name]
    return json.loads(nbformat.writes(submissions.build(sample, course.release_notebook(released, "sdpa"))))


def _answer(service, token):
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status, reply = _call(f"{service['base']}/check?assignment=sdpa", token)
        if reply.get("state") not in ("waiting", "grading", None):
            return reply
        time.sleep(0.3)
    raise AssertionError("no answer within 120 s")


def test_a_student_checks_fixes_and_reads_only_their_own_record(service):
    buggy = _notebook(service["released"], "bug-mask-inverted")
    status, reply = _call(f"{service['base']}/check", "tok-alice", {"assignment": "sdpa", "notebook": buggy,
                                                                    "student": "bob"})  # a name in the body: ignored
    assert status == 202 and reply["place"] == 1, (status, reply, service["log"].read_text()[-3000:])
    answer = _answer(service, "tok-alice")
    assert answer["state"] == "answered" and answer["codes"] == ["mask-inverted"] and not answer["passes"]
    fixed = _notebook(service["released"], "correct-reference")
    assert _call(f"{service['base']}/check", "tok-alice", {"assignment": "sdpa", "notebook": fixed})[0] == 202
    assert _answer(service, "tok-alice")["passes"]
    assert _call(f"{service['base']}/check?assignment=sdpa", "tok-bob")[1] == {"state": "none"}
    assert _call(f"{service['base']}/records/alice?assignment=sdpa", "tok-bob")[0] == 403
    status, mine = _call(f"{service['base']}/records/alice?assignment=sdpa", "tok-alice")
    assert status == 200 and [c["codes"] for c in mine["checks"]] == [["mask-inverted"], []]
    status, seen = _call(f"{service['base']}/records/alice?assignment=sdpa", "tok-teacher")
    assert status == 200 and len(seen["checks"]) == 2
    assert _call(f"{service['base']}/records/bob?assignment=sdpa", "tok-teacher")[1]["checks"] == []


def test_the_check_past_the_hourly_limit_is_refused_with_the_next_time(service):
    fixed = _notebook(service["released"], "correct-reference")
    replies = []
    for _ in range(4):
        replies.append(_call(f"{service['base']}/check", "tok-bob", {"assignment": "sdpa", "notebook": fixed}))
        _answer(service, "tok-bob")
    assert [status for status, _ in replies] == [202, 202, 202, 429]
    # in the assignment's language (sdpa: Chinese), with the time of the next allowed check
    assert "每小时最多检查 3 次" in replies[-1][1]["message"] and replies[-1][1]["next"]
    assert re.search(r"\d\d:\d\d UTC", replies[-1][1]["message"])


@pytest.mark.parametrize("token", [None, "forged"])
def test_no_hub_identity_no_check(service, token):
    status, _ = _call(f"{service['base']}/check", token, {"assignment": "sdpa", "notebook": {}})
    assert status == 403
