"""The check service on a real JupyterHub (issue 46): `make hub`'s hub starts it as its own Unix user.

In headless Chromium, student C (JupyterLab in Chinese) presses "Check my work" on ``sdpa`` with an inverted mask
and sees ``[mask-inverted]`` with its hint in the side panel; fixes the cell in the editor (unsaved) and presses
again: every part passes; the check after the hourly limit is refused, with the time of the next.  Student B
(English) does the first step on ``sdpa_en``.  Over the API: student A checks through their own Jupyter server
(what the button calls: the server forwards with its hub token); B, with B's own token, cannot read A's checks.
The service reads the course read-only and writes only its record, which the instructor can read.
Screenshots and figures (seconds from press to answer) go to ``.artifacts/hub-check-service/``.
"""
import json
import os
import re
import shutil
import stat
import time
import urllib.error
import urllib.parse
import urllib.request
from http.cookiejar import CookieJar
from pathlib import Path

import nbformat
import pytest

import catalogue
from autograder.demo import course, submissions
from hub import control
from tests.support import browser as lab_ui
from tests.support.hub import running_hub

try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # pragma: no cover - depends on the environment
    sync_playwright = None

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / ".artifacts" / "hub-check-service"
STUDENT_A, STUDENT_B, STUDENT_C = control.STUDENTS
PER_HOUR = 3
ANSWER_S = 240  # a loaded 2-core machine's bound; the figures say how long it took

pytestmark = [
    pytest.mark.hub,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the hub's users are local Unix users"),
    pytest.mark.skipif(not control.PROXY.exists(), reason="configurable-http-proxy missing (run `make hub-deps`)"),
    pytest.mark.skipif(not shutil.which("bwrap"), reason="no bubblewrap (run `make system-deps`)"),
]
TIMINGS = {}


@pytest.fixture(scope="module")
def hub():
    with running_hub("hub-check", ARTIFACTS, TIMINGS, before_start=control.Hub.release,
                     checks_per_hour=PER_HOUR) as started:
        yield started


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # a redirect (to the hub's login) is an answer, not a page to follow


class Session:
    """One person's browser-like session on the hub: logged in with their password, holding a token."""

    def __init__(self, hub, user):
        self.hub, self.user, self.jar = hub, user, CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self.opener.open(f"{hub.url}/hub/login", timeout=60).read()
        form = {"username": user, "password": hub.passwords()[user], "_xsrf": self._xsrf()}
        self.opener.open(urllib.request.Request(f"{hub.url}/hub/login?next=", method="POST",
                                                data=urllib.parse.urlencode(form).encode()), timeout=120).read()
        status, token = self.call("POST", f"/hub/api/users/{user}/tokens", {"note": "check service test"},
                                  cookie=True)
        assert status == 201, token
        self.token = token["token"]

    def _xsrf(self):
        return next(c.value for c in self.jar if c.name == "_xsrf")

    def call(self, method, path, body=None, cookie=False, token=None):
        headers = {"Content-Type": "application/json"}
        if cookie:
            headers["X-XSRFToken"] = self._xsrf()
        else:
            headers["Authorization"] = f"token {token or self.token}"
        request = urllib.request.Request(self.hub.url + path, method=method, headers=headers,
                                         data=None if body is None else json.dumps(body).encode())
        try:
            with (self.opener if cookie else urllib.request.build_opener(_NoRedirect)).open(request,
                                                                                           timeout=120) as reply:
                return reply.status, json.loads(reply.read() or b"{}")
        except urllib.error.HTTPError as exc:
            text = exc.read()
            try:
                return exc.code, json.loads(text)
            except ValueError:
                return exc.code, {"raw": text.decode(errors="replace")[:500]}


def _notebook(hub, sample_name, assignment):
    (sample,) = [s for s in catalogue.CATALOGUE if s.name == sample_name]
    return json.loads(nbformat.writes(submissions.build(sample, course.release_notebook(hub.course, assignment))))


def _server(session):
    """Start the user's own Jupyter server and wait until it answers (what logging in to JupyterLab does)."""
    status, body = session.call("POST", f"/hub/api/users/{session.user}/server")
    assert status in (201, 202, 400), body  # 400: already running
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        status, body = session.call("GET", f"/hub/api/users/{session.user}")
        if body.get("servers", {}).get("", {}).get("ready"):
            return
        time.sleep(1)
    raise AssertionError(f"{session.user}'s server did not start: {body}")


def _check(session, assignment, notebook, via):
    """Post a check and wait for its answer; (answer, seconds from the press to the answer)."""
    started = time.monotonic()
    status, body = session.call("POST", f"{via}?assignment={assignment}", {"assignment": assignment,
                                                                          "notebook": notebook})
    if status != 202:
        return status, body, time.monotonic() - started
    while time.monotonic() - started < ANSWER_S:
        status, body = session.call("GET", f"{via}?assignment={assignment}")
        if body.get("state") not in ("waiting", "grading"):
            return status, body, time.monotonic() - started
        time.sleep(0.25)
    raise AssertionError(f"no answer within {ANSWER_S} s: {body}")


def test_students_check_their_work_through_the_hub(hub):
    a, b = Session(hub, STUDENT_A), Session(hub, STUDENT_B)
    service = f"/services/{control.CHECK_SERVICE}/api"
    own_server = f"/user/{STUDENT_A}/sdpa-check/api/check"
    _server(a)

    # the service started as its own user, and is warm once it answers
    deadline = time.monotonic() + 300
    while a.call("GET", f"{service}/check?assignment=sdpa_en")[0] != 200:
        assert time.monotonic() < deadline, hub.log_tail()
        time.sleep(1)
    owners = {os.stat(f"/proc/{pid}").st_uid for pid in control.user_processes((control.CHECKER,))}
    assert owners == {control.uid(control.CHECKER)}, "the check service does not run as its own user"

    # A, through their own server (JupyterLab's button): the inverted mask is named, with its hint
    status, buggy, seconds = _check(a, "sdpa_en", _notebook(hub, "bug-mask-inverted", "sdpa_en"), own_server)
    TIMINGS["inverted mask: press to answer (s)"] = round(seconds, 2)
    assert status == 200 and buggy["state"] == "answered", buggy
    assert buggy["codes"] == ["mask-inverted"] and not buggy["passes"], buggy
    mistake = next(m for p in buggy["parts"] for m in p.get("mistakes", []) if m["code"] == "mask-inverted")
    assert mistake.get("hint"), mistake
    status, fixed, seconds = _check(a, "sdpa_en", _notebook(hub, "correct-reference", "sdpa_en"), own_server)
    TIMINGS["fixed: press to answer (s)"] = round(seconds, 2)
    assert fixed["state"] == "answered" and fixed["passes"] and all(p["passes"] for p in fixed["parts"]), fixed

    # B reads only B's own checks, with B's own token
    assert b.call("GET", f"{service}/records/{STUDENT_A}?assignment=sdpa_en")[0] == 403
    status, own = b.call("GET", f"{service}/records/{STUDENT_B}?assignment=sdpa_en")
    assert status == 200 and {c["student"] for c in own["checks"]} <= {STUDENT_B}
    status, mine = a.call("GET", f"{service}/records/{STUDENT_A}?assignment=sdpa_en")
    assert [c["codes"] for c in mine["checks"]] == [["mask-inverted"], []]
    # a token without the service's scope gets nothing; no token gets nothing
    status, scoped = a.call("POST", f"/hub/api/users/{STUDENT_A}/tokens", {"scopes": ["read:users:name!user"]},
                            cookie=True)
    assert status == 201, scoped
    assert a.call("GET", f"{service}/check?assignment=sdpa_en", token=scoped["token"])[0] == 403
    assert a.call("GET", f"{service}/check?assignment=sdpa_en", token="not-a-token")[0] == 403  # no login redirect

    # the check after the hourly limit (PER_HOUR) is refused, with when the next is allowed
    status, last, _ = _check(a, "sdpa_en", _notebook(hub, "correct-reference", "sdpa_en"), own_server)
    assert status == 200, last
    status, refused, _ = _check(a, "sdpa_en", _notebook(hub, "correct-reference", "sdpa_en"), own_server)
    assert status == 429 and re.search(r"next is allowed at \d\d:\d\d UTC", refused["message"]), refused
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d", refused["next"]), refused

    # the record: the service's own file, which the instructor reads and the students cannot
    record = hub.check_records
    info = os.stat(record)
    assert info.st_uid == control.uid(control.CHECKER) and stat.S_IMODE(info.st_mode) == 0o640
    read = ("from autograder.service.records import Records\nimport sys, json\n"
            "print(json.dumps([c['codes'] for c in Records(sys.argv[1], read_only=True).of('sdpa_en')]))")
    shown = hub.run_as(control.INSTRUCTOR, control.VENV_BIN / "python", "-c", read, record, cwd=control.ROOT)
    assert json.loads(shown.stdout)[:2] == [["mask-inverted"], []]
    probe = hub.run_as(STUDENT_B, control.bin_dir(STUDENT_B) / "python", "-c", f"open({str(record)!r}, 'rb')",
                       check=False)
    assert probe.returncode != 0 and "PermissionError" in probe.stderr


# ------------------------------------------------------------------ in JupyterLab

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
EDITION = {STUDENT_C: "sdpa", STUDENT_B: "sdpa_en"}


def test_a_student_reads_none_of_the_hubs_own_files(hub):
    """Found by a red-team pass: the hub's database and log (every user, server and token prefix) were readable
    in the state directory, which students traverse for their Jupyter config."""
    private = [hub.settings_file, hub.log, hub.state / "jupyterhub.sqlite", hub.check_records]
    code = ("import sys\nfor p in sys.argv[1:]:\n    try:\n        open(p, 'rb').read(1)\n        print('read', p)\n"
            "    except OSError as e:\n        print(type(e).__name__, p)\n")
    said = hub.run_as(STUDENT_B, control.bin_dir(STUDENT_B) / "python", "-c", code, *map(str, private)).stdout
    assert said.splitlines() == [f"PermissionError {p}" for p in private], said
    config = hub.run_as(STUDENT_B, control.bin_dir(STUDENT_B) / "python", "-c", code,
                        str(hub.state / "jupyter" / "student" / "nbgrader_config.py")).stdout
    assert config.startswith("read "), config  # what a student's server needs stays readable


def _place_notebook(user, sample_name, assignment):
    """The student's working copy, as if fetched and written: the released notebook with the sample's answers."""
    (sample,) = [s for s in catalogue.CATALOGUE if s.name == sample_name]
    folder = control.home(user) / assignment
    folder.mkdir(exist_ok=True)
    path = folder / f"{assignment}.ipynb"
    nbformat.write(submissions.build(sample, nbformat.read(str(lab_ui.release(assignment)), as_version=4)), str(path))
    shutil.chown(folder, user, user)
    shutil.chown(path, user, user)


def _open(browser, hub, user, assignment):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(ANSWER_S * 1000)
    page = context.new_page()
    page.goto(f"{hub.url}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", hub.passwords()[user])
    page.click("#login_submit")
    page.wait_for_url(re.compile(rf"/user/{user}/lab"))
    page.goto(f"{hub.url}/user/{user}/lab/tree/{assignment}/{assignment}.ipynb")
    cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
    expect(cells).to_have_count(len(lab_ui.release_cells(assignment)))
    return page


def _press(page, name):
    """Press the toolbar's "Check my work"; the panel once it shows an answer or a refusal, and the seconds."""
    panel = page.locator("#sdpa-check-results")
    started = time.monotonic()
    page.locator(".sdpa-check-button button, button.sdpa-check-button").first.click()
    try:
        expect(panel.locator(".sdpa-check-summary, .sdpa-check-error")).to_be_visible()
    except AssertionError:
        lab_ui.shot(page, f"failed-{name}", ARTIFACTS)
        raise
    TIMINGS[f"{name}: press to answer in the panel (s)"] = round(time.monotonic() - started, 2)
    lab_ui.shot(page, name, ARTIFACTS)
    return panel


@pytest.mark.browser
@pytest.mark.skipif(sync_playwright is None, reason="playwright is not installed (pip install -e '.[browser]')")
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (run `make system-deps`)")
def test_check_my_work_in_jupyterlab_in_both_languages(hub):
    for user, assignment in EDITION.items():
        _place_notebook(user, "bug-mask-inverted", assignment)
    expect.set_options(timeout=ANSWER_S * 1000)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            # C, in Chinese: the mistake, named, with its hint
            page = _open(chromium, hub, STUDENT_C, "sdpa")
            expect(page.locator(".sdpa-check-button")).to_contain_text("检查我的作业")
            panel = _press(page, "zh-1-mask-inverted")
            expect(panel.locator(".sdpa-check-code")).to_have_text("[mask-inverted]")
            expect(panel.locator(".sdpa-check-hint").first).to_contain_text("提示")
            expect(panel.locator(".sdpa-check-fail")).to_have_count(1)
            # fixed in the editor, not saved: the check reads what the editor holds
            (index, _cell), = [(i, c) for i, c in lab_ui.answer_cells("sdpa") if lab_ui.grade_id(c) == "apply_mask"]
            lab_ui.type_into(page, index, lab_ui.reference_answers("sdpa")["apply_mask"])
            expect(page.locator(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty")).to_have_count(1)
            panel = _press(page, "zh-2-fixed-unsaved")
            expect(panel.locator(".sdpa-check-summary")).to_have_text("每一部分都通过了。")
            expect(panel.locator(".sdpa-check-fail")).to_have_count(0)
            _press(page, "zh-3-third-check")
            panel = _press(page, "zh-4-over-the-hourly-limit")
            expect(panel.locator(".sdpa-check-error")).to_contain_text(str(PER_HOUR))
            page.context.close()
            # B, in English
            page = _open(chromium, hub, STUDENT_B, "sdpa_en")
            expect(page.locator(".sdpa-check-button")).to_contain_text("Check my work")
            panel = _press(page, "en-1-mask-inverted")
            expect(panel.locator(".sdpa-check-code")).to_have_text("[mask-inverted]")
            expect(panel.locator(".sdpa-check-hint").first).to_contain_text("Hint")
            assert not re.search(r"[\u4e00-\u9fff]", panel.inner_text()), "Chinese in the English panel"
            page.context.close()
        finally:
            chromium.close()


@pytest.mark.browser
@pytest.mark.skipif(sync_playwright is None, reason="playwright is not installed (pip install -e '.[browser]')")
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (run `make system-deps`)")
def test_the_class_report_shows_what_students_met_while_working(hub):
    """After the checks above, C submits the fixed notebook (the copy in submitted/ stands for nbgrader's
    collect, which tests/test_exchange_flow.py runs), the instructor grades it and writes the report: its
    "While working" section counts C as having met [mask-inverted] and fixed it before submitting."""
    folder = hub.course / "submitted" / STUDENT_C / "sdpa"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(control.home(STUDENT_C) / "sdpa" / "sdpa.ipynb", folder / "sdpa.ipynb")
    (sample,) = [s for s in catalogue.CATALOGUE if s.name == "correct-reference"]
    nbformat.write(submissions.build(sample, nbformat.read(str(lab_ui.release("sdpa")), as_version=4)),
                   str(folder / "sdpa.ipynb"))
    for path in (hub.course / "submitted", *(hub.course / "submitted").rglob("*")):
        shutil.chown(path, control.INSTRUCTOR, control.INSTRUCTOR)
    cli = control.VENV_BIN / "sdpa-course"
    hub.run_as(control.INSTRUCTOR, cli, "autograde", "sdpa", "--student", STUDENT_C, cwd=hub.course)
    out = hub.course / "reports-check-test"
    hub.run_as(control.INSTRUCTOR, cli, "report", "sdpa", "--out", out, cwd=hub.course)
    page_html = (out / "sdpa" / "report.html").read_text(encoding="utf-8")
    # the while-working row of [mask-inverted]: met by 1 student in a check, fixed by 1 before submitting
    row = re.search(r"<td><code>mask-inverted</code></td><td class=n>(\d+)</td><td class=n>(\d+)</td>", page_html)
    assert row and row.groups() == ("1", "1"), page_html[-3000:]
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = chromium.new_page(viewport={"width": 1200, "height": 900})
            page.goto((out / "sdpa" / "report.html").as_uri())
            heading = page.locator("h2", has_text="做题时的检查")
            heading.scroll_into_view_if_needed()
            lab_ui.shot(page, "report-while-working", ARTIFACTS)
        finally:
            chromium.close()
