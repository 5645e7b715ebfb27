"""The check service over HTTP, as JupyterHub runs it: identity from the hub only, each student reads only their
own checks, the hourly limit, a notebook graded with the final grading's engine.

The hub is a stand-in that answers the one question a service asks it (``GET /hub/api/user`` with a token,
``autograder/demo/check_service.py``); the service on a real hub is ``tests/test_hub_check_service.py``."""
import json
import re

import nbformat
import pytest

import catalogue
from autograder.demo import course, submissions
from autograder.demo.check_service import LocalService
from tests.support.grading import FAST_LIMITS

pytestmark = pytest.mark.slow
USERS = {"tok-alice": {"name": "alice"}, "tok-bob": {"name": "bob"},
         "tok-teacher": {"name": "teacher", "groups": ["instructors"]}}


@pytest.fixture(scope="module")
def service(released, tmp_path_factory):
    running = LocalService(released, USERS, tmp_path_factory.mktemp("service"),
                           ["--per-hour", "3", *[f"--nbgrader-arg={a}" for a in FAST_LIMITS]])
    running.released = released
    yield running
    running.close()


def _notebook(released, name):
    (sample,) = [s for s in catalogue.CATALOGUE if s.name == name]
    return json.loads(nbformat.writes(submissions.build(sample, course.release_notebook(released, "sdpa"))))


def test_a_student_checks_fixes_and_reads_only_their_own_record(service):
    buggy = _notebook(service.released, "bug-mask-inverted")
    status, reply = service.call("/check", "tok-alice", {"assignment": "sdpa", "notebook": buggy,
                                                                    "student": "bob"})  # a name in the body: ignored
    assert status == 202 and reply["place"] == 1, (status, reply, service.log_text())
    answer = service.answer("tok-alice", "sdpa")
    assert answer["state"] == "answered" and answer["codes"] == ["mask-inverted"] and not answer["passes"]
    fixed = _notebook(service.released, "correct-reference")
    assert service.call("/check", "tok-alice", {"assignment": "sdpa", "notebook": fixed})[0] == 202
    assert service.answer("tok-alice", "sdpa")["passes"]
    assert service.call("/check?assignment=sdpa", "tok-bob")[1] == {"state": "none"}
    assert service.call("/records/alice?assignment=sdpa", "tok-bob")[0] == 403
    status, mine = service.call("/records/alice?assignment=sdpa", "tok-alice")
    assert status == 200 and [c["codes"] for c in mine["checks"]] == [["mask-inverted"], []]
    status, seen = service.call("/records/alice?assignment=sdpa", "tok-teacher")
    assert status == 200 and len(seen["checks"]) == 2
    assert service.call("/records/bob?assignment=sdpa", "tok-teacher")[1]["checks"] == []


def test_the_check_past_the_hourly_limit_is_refused_with_the_next_time(service):
    fixed = _notebook(service.released, "correct-reference")
    replies = []
    for _ in range(4):
        replies.append(service.call("/check", "tok-bob", {"assignment": "sdpa", "notebook": fixed}))
        service.answer("tok-bob", "sdpa")
    assert [status for status, _ in replies] == [202, 202, 202, 429]
    # the limit is decided before the body is read: a refused student's body is never parsed
    assert service.call("/check?assignment=sdpa", "tok-bob", "not a notebook")[0] == 429
    # a refused press is not a check: the record holds the three that ran
    assert len(service.call("/records/bob?assignment=sdpa", "tok-bob")[1]["checks"]) == 3
    # in the assignment's language (sdpa: Chinese), with the time of the next allowed check
    assert "每小时最多检查 3 次" in replies[-1][1]["message"] and replies[-1][1]["next"]
    assert re.search(r"\d\d:\d\d UTC", replies[-1][1]["message"])


@pytest.mark.parametrize("token", [None, "forged"])
def test_no_hub_identity_no_check(service, token):
    status, _ = service.call("/check", token, {"assignment": "sdpa", "notebook": {}})
    assert status == 403


@pytest.mark.parametrize("body", [{"assignment": ["sdpa"], "notebook": {}}, {"assignment": "sdpa"},
                                  {"assignment": "sdpa", "notebook": "\ud800"}, "[" * 100_000])
def test_a_malformed_request_is_answered_400_in_json_and_costs_no_check(service, body):
    """Found by a red-team pass: these gave 500 (a list as the assignment, nesting deeper than the parser,
    a lone surrogate)."""
    raw = body if isinstance(body, str) else json.dumps(body)
    status, reply = service.call_raw("/check", "tok-teacher", raw.encode("utf-8", "surrogatepass"))
    assert status == 400 and reply.get("message"), reply
    assert "{{" not in reply["message"]


@pytest.mark.parametrize("token", [None, "forged"])
def test_a_body_is_not_read_before_the_hub_says_who_sends_it(service, token):
    """Found by a red-team pass: the whole body was buffered before authentication. Headers announcing 15 MiB
    and ten bytes sent: the answer (403) comes at once, without waiting for the rest."""
    import socket
    import time
    from urllib.parse import urlparse

    url = urlparse(service.base + "/check")
    started = time.monotonic()
    with socket.create_connection((url.hostname, url.port), timeout=20) as conn:
        headers = [f"POST {url.path} HTTP/1.1", f"Host: {url.hostname}", f"Content-Length: {15 * 2**20}",
                   "Content-Type: application/json", *([f"Authorization: token {token}"] if token else [])]
        conn.sendall(("\r\n".join(headers) + "\r\n\r\n").encode() + b'{"notebook"')
        status_line = conn.recv(200).split(b"\r\n", 1)[0]
    assert status_line.split()[1] == b"403", status_line
    assert time.monotonic() - started < 15


def test_the_panel_words_come_from_the_service_in_the_notebook_language(service):
    """The students' environment holds none of the course's words: the button and panel ask the service."""
    status, chinese = service.call("/labels?assignment=sdpa", "tok-alice")
    assert status == 200 and chinese["language"] == "zh" and chinese["button"] == "检查我的作业"
    status, english = service.call("/labels?assignment=sdpa_en", "tok-alice")
    assert status == 200 and english["language"] == "en" and english["button"] == "Check my work"
    assert set(chinese) == set(english) and "{limit}" in english["too_large"]
    assert service.call("/labels?assignment=sdpa", None)[0] != 200  # no hub identity: the hub's login, not the words
    assert service.call("/labels?assignment=other", "tok-alice")[0] == 400


def test_each_user_server_refuses_what_the_service_would_refuse():
    """The forwarder (installed in the students' environment, without the grader) caps a check at the size the
    service accepts."""
    import sdpa_check_my_work

    from autograder.service.policy import MAX_CHECK_BYTES

    assert sdpa_check_my_work.MAX_CHECK_BYTES == MAX_CHECK_BYTES


def test_a_student_whose_checks_hold_the_grader_waits_for_the_hour(released, tmp_path):
    """Grader time is limited per student, not only the count of checks: one check of about a second against a
    budget of half a second, and the next press is refused, saying why and when."""
    running = LocalService(released, USERS, tmp_path, ["--per-hour", "10", "--grader-seconds-per-hour", "0.5",
                                                       *[f"--nbgrader-arg={a}" for a in FAST_LIMITS]])
    try:
        fixed = _notebook(released, "correct-reference")
        assert running.call("/check", "tok-alice", {"assignment": "sdpa", "notebook": fixed})[0] == 202
        assert running.answer("tok-alice", "sdpa")["passes"]
        status, refused = running.call("/check?assignment=sdpa", "tok-alice", {"assignment": "sdpa", "notebook": fixed})
        assert status == 429 and "秒评分时间（每小时最多 0.5 秒）" in refused["message"], refused
        assert re.search(r"\d\d:\d\d UTC", refused["message"]), refused
        assert running.call("/check", "tok-bob", {"assignment": "sdpa", "notebook": fixed})[0] == 202
    finally:
        running.close()
