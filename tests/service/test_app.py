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
USERS = {"tok-alice": {"name": "alice"}, "tok-bob": {"name": "bob"}, "tok-carol": {"name": "carol"},
         "tok-dave": {"name": "dave"}, "tok-erin": {"name": "erin"}, "tok-frank": {"name": "frank"},
         "tok-slow": {"name": "slow", "hub_answers_after_s": 3},
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


def _send_partly(service, path, token, length, sent=b'{"notebook"', admitted=False):
    """A connection that announces `length` bytes and sends `sent` only; returns the open socket.  `admitted`:
    first wait for the service's "100 Continue" (it has admitted the body), so that what the test does next
    cannot overtake it."""
    import socket
    from urllib.parse import urlparse

    url = urlparse(service.base + path)
    conn = socket.create_connection((url.hostname, url.port), timeout=20)
    headers = [f"POST {url.path}?{url.query} HTTP/1.1", f"Host: {url.hostname}", f"Content-Length: {length}",
               "Content-Type: application/json", *([f"Authorization: token {token}"] if token else []),
               *(["Expect: 100-continue"] if admitted else [])]
    conn.sendall(("\r\n".join(headers) + "\r\n\r\n").encode())
    if admitted:
        reply = b""
        while b"\r\n\r\n" not in reply:
            reply += conn.recv(200) or b"closed"
            assert reply.startswith(b"HTTP/1.1 100") or len(reply) < 12, reply
    conn.sendall(sent)
    return conn


def test_only_a_check_takes_a_large_body(service):
    """Found by a red-team pass: every other path (the labels, the records, the hub's callback, an unknown one)
    buffered a 16 MiB body before answering, without a token.  They take 16 KiB now."""
    import time

    for path in ("/labels?assignment=sdpa", "/records/alice?assignment=sdpa", "/nowhere"):
        started = time.monotonic()
        with _send_partly(service, path, None, 2**20) as conn:
            answer = conn.recv(200)
        assert answer == b"" or answer.split()[1] in (b"400", b"413"), (path, answer)  # refused, or closed at once
        assert time.monotonic() - started < 10, path


def test_a_student_sends_one_body_at_a_time(service):
    """Found by a red-team pass: 48 connections of one student, each a byte short of its end, held a GiB."""
    first = _send_partly(service, "/check?assignment=sdpa_en", "tok-carol", 200_000, admitted=True)
    try:
        status, said = service.call("/check?assignment=sdpa_en", "tok-carol", {"assignment": "sdpa_en", "notebook": {}})
        assert status == 429 and "already on its way" in said["message"], said
        fixed = _notebook(service.released, "correct-reference")
        assert service.call("/check", "tok-dave", {"assignment": "sdpa", "notebook": fixed})[0] == 202  # others go on
    finally:
        first.close()
    service.answer("tok-dave", "sdpa")
    for _ in range(50):  # once the first connection is gone, carol may send again
        status, _reply = service.call("/check?assignment=sdpa_en", "tok-carol",
                                      {"assignment": "sdpa_en", "notebook": {}})
        if status != 429:
            break
    assert status == 202, status
    service.answer("tok-carol", "sdpa_en")


def test_what_the_hub_client_keeps_per_request_is_bounded(service):
    """Found by a red-team pass: JupyterHub's client keeps each answer under the request's session cookie as
    sent (60 KB cookies, each five minutes) and, for a request without identity, its URL in the OAuth state of
    a login redirect (ten minutes).  The API refuses a cookie longer than a session id, answers 403 without a
    login redirect, and its caches hold at most `MAX_CACHED_IDENTITIES` answers."""
    import urllib.request

    from autograder.service.http_bounds import MAX_SESSION_ID_CHARS

    long_url = "/labels?assignment=sdpa&pad=" + "x" * 20_000
    request = urllib.request.Request(service.base + long_url)
    status, said = service._open(request, 30)
    assert status == 403 and "JupyterHub token" in said["message"], (status, said)
    request = urllib.request.Request(service.base + "/labels?assignment=sdpa", headers={
        "Authorization": "token tok-alice", "Cookie": "jupyterhub-session-id=" + "s" * (MAX_SESSION_ID_CHARS + 1)})
    status, said = service._open(request, 30)
    assert status == 400 and "session id" in said["message"], (status, said)
    request = urllib.request.Request(service.base + "/labels?assignment=sdpa", headers={
        "Authorization": "token tok-alice", "Cookie": "jupyterhub-session-id=" + "0123456789abcdef" * 2})
    assert service._open(request, 30)[0] == 200  # a session id as JupyterHub makes them


def test_the_hub_clients_cache_keeps_the_newest_answers_up_to_its_bound():
    from jupyterhub.services.auth import HubOAuth

    from autograder.service.http_bounds import MAX_CACHED_IDENTITIES, BoundedExpiringDict, bound_hub_caches

    cache = BoundedExpiringDict(300, 3)
    for n in range(10):
        cache[f"token:{n}"] = {"name": n}
    assert len(cache) == 3 and "token:9" in cache and "token:6" not in cache
    auth = HubOAuth(api_token="x", api_url="http://127.0.0.1:1/hub/api")
    bound_hub_caches(auth)
    assert isinstance(auth.cache, BoundedExpiringDict) and auth.cache.most == MAX_CACHED_IDENTITIES
    assert auth.cache.max_age == auth.cache_max_age


def test_a_content_length_python_reads_as_a_digit_but_not_as_a_number_is_refused(service):
    """Found by a red-team pass: "²" is a digit to str.isdigit but not to int: the service answered 500."""
    import socket
    from urllib.parse import urlparse

    url = urlparse(service.base + "/check?assignment=sdpa")
    with socket.create_connection((url.hostname, url.port), timeout=20) as conn:
        conn.sendall(f"POST {url.path}?{url.query} HTTP/1.1\r\nHost: x\r\nAuthorization: token tok-teacher\r\n"
                     .encode() + b"Content-Length: \xb2\r\n\r\n")
        status_line = conn.recv(200).split(b"\r\n", 1)[0]
    assert status_line.split()[1] in (b"400", b"413"), status_line


def test_a_hub_slow_to_answer_for_one_token_holds_no_one_else(service):
    """The service asks the hub who sends each new token; asked synchronously (JupyterHub's `get_current_user`),
    one slow answer held every other request for as long, and tokens nobody has seen cost a hub round trip each:
    anyone could hold the service with made-up tokens.  The question is asked without blocking (`prepare`)."""
    import threading
    import time

    slow = threading.Thread(target=service.call, args=("/labels?assignment=sdpa", "tok-slow"))
    slow.start()
    time.sleep(0.5)
    started = time.monotonic()
    status, _reply = service.call("/labels?assignment=sdpa", "tok-alice")
    took = time.monotonic() - started
    slow.join()
    assert status == 200 and took < 1.5, took


def test_a_body_that_never_arrives_frees_its_slot_and_counts_as_a_check(service):
    """Found by a red-team pass: a body a byte short of its end held one of the service's upload slots for the
    minute of the server's body timeout, uncharged, so eight students could keep everyone else waiting.  A
    check's body now has `CHECK_BODY_SECONDS`, and one that does not arrive counts against the hour."""
    import time

    from autograder.service.http_bounds import CHECK_BODY_SECONDS

    started = time.monotonic()
    with _send_partly(service, "/check?assignment=sdpa", "tok-frank", 200_000, admitted=True) as conn:
        conn.settimeout(CHECK_BODY_SECONDS + 20)
        while conn.recv(4096):  # the service gives up on the body and closes the connection
            pass
    assert time.monotonic() - started < CHECK_BODY_SECONDS + 10
    _send_partly(service, "/check?assignment=sdpa", "tok-frank", 200_000, admitted=True).close()  # abandoned
    deadline = time.monotonic() + 30
    while len(service.call("/records/frank?assignment=sdpa", "tok-frank")[1]["checks"]) < 2:
        assert time.monotonic() < deadline, service.log_text()
        time.sleep(0.1)
    fixed = _notebook(service.released, "correct-reference")
    assert service.call("/check", "tok-frank", {"assignment": "sdpa", "notebook": fixed})[0] == 202
    assert service.answer("tok-frank", "sdpa")["passes"]
    status, said = service.call("/check?assignment=sdpa", "tok-frank", {"assignment": "sdpa", "notebook": fixed})
    assert status == 429 and "每小时最多检查 3 次" in said["message"], said
    outcomes = [c["outcome"] for c in service.call("/records/frank?assignment=sdpa", "tok-frank")[1]["checks"]]
    assert outcomes == ["unfinished", "unfinished", "answered"], outcomes


def test_a_check_waits_for_the_last_one_to_be_graded_and_charged(service):
    """Found by a red-team pass: a check pressed while the last one was being graded was admitted before that
    one's grader time was counted, so a student could take the hour's budget plus two checks."""
    import time

    slow = _notebook(service.released, "correct-reference")
    slow["cells"].append(nbformat.v4.new_code_cell("import time\ntime.sleep(3)"))
    assert service.call("/check", "tok-erin", {"assignment": "sdpa", "notebook": slow})[0] == 202
    deadline = time.monotonic() + 60
    while service.call("/check?assignment=sdpa", "tok-erin")[1].get("state") != "grading":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    status, said = service.call("/check?assignment=sdpa", "tok-erin", {"assignment": "sdpa", "notebook": slow})
    assert status == 409 and "还在评分中" in said["message"], said
    assert service.answer("tok-erin", "sdpa")["state"] == "answered"


def test_a_notebook_too_complex_or_too_large_is_refused_before_it_is_parsed(service):
    nested = {"assignment": "sdpa_en", "notebook": {"cells": [], "metadata": {"junk": [[]] * 120_000}}}
    status, said = service.call("/check?assignment=sdpa_en", "tok-teacher", nested)
    assert status == 400 and "too complex to check" in said["message"], said
    # in UTF-16 the byte-level count read one container where a parser of UTF-16 builds 120,000 (red team)
    shifted = {"assignment": "sdpa_en", "notebook": {"cells": [], "metadata": {"a": "∀", "junk": [[]] * 120_000}}}
    utf16 = json.dumps(shifted, ensure_ascii=False).encode("utf-16-le")
    status, said = service.call_raw("/check?assignment=sdpa_en", "tok-teacher", utf16[:2 * 2**20 - 2])
    assert status == 400 and "JSON" in said["message"], said
    # decided on the announced length, before the body is read (a client still sending it may meet a closed
    # connection instead of the answer: the test reads the answer without sending the body)
    with _send_partly(service, "/check?assignment=sdpa_en", "tok-teacher", 2 * 2**20 + 1, sent=b"") as conn:
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = conn.recv(4096)
            if not chunk:
                break
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split()[1] == b"413" and "over the 2 MiB a check accepts" in json.loads(body)["message"], answer


def test_a_restart_keeps_each_students_hour(tmp_path):
    """Found by a red-team pass: the hourly limits lived in memory only; the record holds the checks."""
    import time

    from autograder.service.app import Settings, hourly_limit
    from autograder.service.records import Records

    records = Records(tmp_path / "record.db")
    for minutes in (100, 50, 20, 5):
        records.add("alice", "sdpa", "answered", seconds=40.0, at=time.time() - 60 * minutes)
    limit = hourly_limit(Settings(per_hour=3), records)
    assert limit.take("alice", count=False) is not None and limit.take("bob", count=False) is None
    roomy = hourly_limit(Settings(per_hour=10, seconds_per_hour=100), records)
    assert roomy.grader_seconds("alice") == 120 and roomy.take("alice", count=False) is not None
    # a check admitted and not yet answered when the service stopped still counts when it starts again
    records.admitted("bob", "sdpa")
    records.close()
    reopened = Records(tmp_path / "record.db")
    assert [c["outcome"] for c in reopened.of("sdpa", "bob")] == ["interrupted"]
    assert hourly_limit(Settings(per_hour=1), reopened).take("bob", count=False) is not None
    reopened.close()


def test_connections_beyond_the_bound_are_closed_at_once_and_the_others_served():
    """Found by a red-team pass: one student's terminal held 19,341 of the service's 20,000 descriptors with
    idle connections; grading needs some.  Past `most_connections` a new connection is closed at once."""
    import asyncio
    import socket
    import threading

    from tornado import web
    from tornado.netutil import bind_sockets

    from autograder.service.http_bounds import BoundedHTTPServer, most_connections

    class Hello(web.RequestHandler):
        def get(self):
            self.write("hello")

    started, ports = threading.Event(), []

    def serve():
        async def main():
            server = BoundedHTTPServer(web.Application([("/", Hello)]), most_connections=3)
            sock, = bind_sockets(0, "127.0.0.1")
            server.add_sockets([sock])
            ports.append(sock.getsockname()[1])
            started.set()
            await asyncio.sleep(30)
        asyncio.run(main())

    threading.Thread(target=serve, daemon=True).start()
    assert started.wait(10)
    held = [socket.create_connection(("127.0.0.1", ports[0]), timeout=5) for _ in range(3)]
    extra = socket.create_connection(("127.0.0.1", ports[0]), timeout=5)
    assert extra.recv(100) == b""  # closed by the service without a word
    held[0].sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert held[0].recv(1000).endswith(b"hello")  # those within the bound are served
    for conn in [*held, extra]:
        conn.close()
    assert most_connections() >= 64


def test_a_check_past_its_wall_clock_is_stopped_the_service_answering_meanwhile(released, tmp_path):
    """Grading runs in a process of its own: a check that takes longer than `--check-seconds`, whatever takes the
    time, is stopped and told why in its language; the service answers other requests all along, and the next
    check gets a fresh grader."""
    import time

    running = LocalService(released, USERS, tmp_path, ["--per-hour", "10", "--check-seconds", "4",
                                                       *[f"--nbgrader-arg={a}" for a in FAST_LIMITS]])
    try:
        slow = _notebook(released, "correct-reference")
        for _ in range(6):  # the sandbox stops each after a few seconds (an added cell's time floor)
            slow["cells"].append(nbformat.v4.new_code_cell("while True:\n    pass"))
        assert running.call("/check", "tok-alice", {"assignment": "sdpa", "notebook": slow})[0] == 202
        while running.call("/check?assignment=sdpa", "tok-alice")[1].get("state") != "grading":
            time.sleep(0.05)
        asked = time.monotonic()
        assert running.call("/labels?assignment=sdpa", "tok-bob")[0] == 200
        assert time.monotonic() - asked < 1.0
        stopped = running.answer("tok-alice", "sdpa")
        assert stopped["state"] == "refused" and "用了 4 秒还没评完" in stopped["message"], stopped
        assert 4 <= stopped["seconds"] < 8, stopped  # charged as grader time: the wall clock, not the sandbox's
        fixed = _notebook(released, "correct-reference")
        assert running.call("/check", "tok-bob", {"assignment": "sdpa", "notebook": fixed})[0] == 202
        assert running.answer("tok-bob", "sdpa", within_s=180)["passes"]
        assert "stopped its grading process after" in running.log.read_text(errors="replace")
    finally:
        running.close()


def test_a_student_past_the_hour_sends_nothing_even_while_a_check_waits(released, tmp_path):
    """Found by a red-team pass: a student at the limit whose check waited could open uploads (to replace it)
    and leave them unfinished, thousands a minute, each recorded and counted (the record then took minutes to
    read at the next start), and hold an upload slot each time."""
    import time

    running = LocalService(released, USERS, tmp_path,
                           ["--per-hour", "1", *[f"--nbgrader-arg={a}" for a in FAST_LIMITS]])
    try:
        slow = _notebook(released, "correct-reference")
        slow["cells"].append(nbformat.v4.new_code_cell("import time\ntime.sleep(4)"))
        assert running.call("/check", "tok-carol", {"assignment": "sdpa", "notebook": slow})[0] == 202
        while running.call("/check?assignment=sdpa", "tok-carol")[1].get("state") != "grading":
            time.sleep(0.05)
        fixed = _notebook(released, "correct-reference")
        status, waiting = running.call("/check", "tok-alice", {"assignment": "sdpa", "notebook": fixed})
        assert status == 202 and waiting["place"] == 1, waiting  # counted: alice's one check this hour
        conn = _send_partly(running, "/check?assignment=sdpa", "tok-alice", 200_000)
        try:
            said = conn.recv(4096)
        finally:
            conn.close()
        assert said.startswith(b"HTTP/1.1 429"), said[:200]
        assert running.answer("tok-alice", "sdpa")["passes"]  # the waiting check is graded all the same
        assert [c["outcome"] for c in running.call("/records/alice?assignment=sdpa", "tok-alice")[1]["checks"]] \
            == ["answered"]
    finally:
        running.close()
