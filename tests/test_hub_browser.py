"""The whole semester on a real JupyterHub, in headless Chromium (issue 14).

A JupyterHub (hub/control.py, as ``make hub`` starts it, with its own state, exchange, port and
course copy) serves the instructor and two students, each a separate Unix user:

1. the instructor logs in; formgrader generates and releases both editions, ``sdpa`` (Chinese)
   and ``sdpa_en`` (English);
2. student A, whose JupyterLab is in Chinese (the zh-CN language pack), fetches ``sdpa`` from the
   Assignments tab, opens it, types the reference answers through the editor, saves, validates
   and submits;
3. student B, in an English JupyterLab, does the same with ``sdpa_en`` and an ``apply_mask``
   that inverts the mask;
4. student B tries to read A's work and the instructor's course: through the file browser /
   contents API, through the hub (A's server URL) and through the kernel;
5. the instructor collects both editions, autogrades each submission from formgrader, grades the
   two written answers, generates and releases feedback;
6. student A fetches feedback and sees every automatic point; student B sees ``[mask-inverted]``
   with its English hint, on a page with no Chinese;
7. A's feedback page, saved to disk, is opened in a Chromium without network: math renders.

Screenshots go to ``.artifacts/hub-browser/`` with ``timings.json`` (seconds per step).
Needs root (Unix users) and Chromium; skips with the reason otherwise.  Resets the
``sdpa-student-*`` users' fetched work, and skips while a ``make hub`` instance is running.
"""
import os
import re
from pathlib import Path

import nbformat
import pytest

import catalogue as samples
from hub import control
from hub.control import INSTRUCTOR
from solutions import solution_notebook
from tests.support import browser as lab_ui
from tests.support import feedback_page, points
from tests.support.hub import running_hub
from tests.support.language import CJK

try:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # pragma: no cover - depends on the environment
    sync_playwright = None

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / ".artifacts" / "hub-browser"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
STUDENT_A, STUDENT_B = control.STUDENTS[:2]
# who works which edition, and the JupyterLab File menu's label in their language
EDITION = {STUDENT_A: "sdpa", STUDENT_B: "sdpa_en"}
FILE_MENU = {"zh_CN": "文件", "en": "File"}
BUGGY = "bug-mask-inverted"
MANUAL = {STUDENT_A: "2.5", STUDENT_B: "1"}
AUTOMATIC_CELLS, AUTOMATIC_POINTS = len(points.part_points()), points.AUTOMATIC


# Bounds for a loaded 2-core machine; a normal run is much faster.
PAGE_S = 120
ACTION_S = 300

pytestmark = [
    pytest.mark.browser,
    pytest.mark.hub,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the hub's users (sdpa-instructor, sdpa-student-a/b) "
                       "are local Unix users, which only root can create and spawn servers for"),
    pytest.mark.skipif(sync_playwright is None, reason="playwright is not installed (pip install -e '.[browser]')"),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (run `make system-deps`)"),
    pytest.mark.skipif(not control.PROXY.exists(), reason="configurable-http-proxy missing (run `make hub-deps`)"),
]

TIMINGS = {}


def _timed(name):
    return lab_ui.timed(name, TIMINGS)


def _shot(target, name, **kwargs):
    lab_ui.shot(target, name, ARTIFACTS, **kwargs)


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def hub():
    """A running hub with a fresh course; stopped (with every server and kernel) even on failure."""
    with running_hub("hub-browser", ARTIFACTS, TIMINGS, check_service=False) as started:
        yield started


@pytest.fixture(scope="module")
def browser():
    expect.set_options(timeout=PAGE_S * 1000)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def shots_on_failure(browser, request):
    """On failure, a screenshot of every open page (``failed-<n>.png``)."""
    failed_before = request.session.testsfailed
    yield
    if request.session.testsfailed > failed_before:
        pages = [p for c in browser.contexts for p in c.pages]
        for n, page in enumerate(pages):
            try:
                _shot(page, f"failed-{n}")
            except PlaywrightError:
                pass


# ------------------------------------------------------------------ helpers


def _login(browser, hub, user):
    """A new browser context logged in as `user`, on their JupyterLab (server spawned)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(PAGE_S * 1000)
    page = context.new_page()
    page.goto(f"{hub.url}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", hub.passwords()[user])
    page.click("#login_submit")
    page.wait_for_url(re.compile(rf"/user/{user}/lab"), timeout=ACTION_S * 1000)
    expect(page.locator("#jp-main-dock-panel")).to_be_visible()
    expect(page.locator(".jp-DirListing-content")).to_be_visible()
    return page


def _assignment_row(page, assignment):
    """The formgrader table row of `assignment` (its whole name: sdpa is a prefix of sdpa_en)."""
    name = re.compile(rf"^\s*{re.escape(assignment)}\s*$")
    return page.locator("table tbody tr", has=page.locator("td.name", has_text=name))


def _list_item(page, listing, assignment):
    """An entry of the Assignments tab's `listing` (released/fetched/submitted) named exactly `assignment`."""
    name = page.locator(".item_name", has_text=re.compile(rf"^\s*{re.escape(assignment)}\s*$"))
    return page.locator(f"#{listing} .list_item", has=name)


def _user_url(hub, user):
    return f"{hub.url}/user/{user}"


def _lab_menu(page, menu, item):
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(rf"^{menu}$")).click()
    page.locator(f".lm-Menu-item:has(.lm-Menu-itemLabel:text-is('{item}'))").click()


def _formgrader_action(page, row, cell_class, shot):
    """Click a formgrader button in `row`, wait for its success dialog, screenshot, close it."""
    row.locator(f"td.{cell_class} a").click()
    modal = page.locator("#success-modal, #error-modal").last
    expect(modal).to_be_visible(timeout=ACTION_S * 1000)
    _shot(page, shot)
    if modal.get_attribute("id") == "error-modal":
        pytest.fail(f"formgrader {cell_class} failed: {modal.inner_text()[:3000]}")
    modal.locator("button.close, .modal-footer button").first.click()
    expect(modal).to_be_hidden()


def _assignment_list(page):
    """Open Nbgrader > Assignment List and wait for the released list to load."""
    _lab_menu(page, "Nbgrader", "Assignment List")
    panel = page.locator("#released_assignments_list").locator("xpath=ancestor::div[contains(@class,'lm-Widget')][1]")
    expect(page.locator("#released_assignments_list")).to_be_visible()
    return panel


def _answers(sample_name, assignment):
    """grade_id -> the text a student types: the reference, with the sample's replacements."""

    answers = lab_ui.reference_answers(assignment)
    sample = next(s for s in samples.CATALOGUE if s.name == sample_name)
    answers.update({k: v.strip("\n") for k, v in sample.replace.items()})
    return answers


def _written_answers(assignment):
    """grade_id -> the solution notebook's written answers (markdown answer cells)."""

    solution = nbformat.read(str(solution_notebook(assignment)), as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in solution.cells
            if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("solution")}


def _type_markdown(page, index, text):
    """Open a markdown answer cell's editor (double-click), replace its text, render it."""

    cell = lab_ui.cell(page, index)
    cell.scroll_into_view_if_needed()
    cell.locator(".jp-MarkdownOutput").dblclick()
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(text)
    typed = "\n".join(cell.locator(".cm-content .cm-line").all_text_contents()).replace("\u200b", "")
    assert typed == text, f"markdown cell {index} holds other text than what was typed"
    page.keyboard.press("Control+Enter")  # render in place
    expect(cell.locator(".jp-MarkdownOutput")).to_contain_text(text[:8])


def _solve_and_submit(browser, hub, user, sample_name, prefix):
    """Log in, fetch, open, type answers, save, validate, submit. Returns the page (notebook open)."""

    assignment = EDITION[user]
    with _timed(f"{prefix}: log in (server spawn)"):
        page = _login(browser, hub, user)
    # JupyterLab speaks the student's language (the hub's per-user translation setting).
    file_menu = FILE_MENU[control.LAB_LOCALES[user]]
    expect(page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(rf"^{file_menu}$"))).to_be_visible()
    _shot(page, f"{prefix}-1-lab")
    with _timed(f"{prefix}: fetch from the Assignments tab"):
        _assignment_list(page)
        released = _list_item(page, "released_assignments_list", assignment)
        expect(released).to_be_visible()
        _shot(page, f"{prefix}-2-assignment-list-released")
        released.locator("button", has_text="Fetch").click()
        fetched = _list_item(page, "fetched_assignments_list", assignment).first
        expect(fetched).to_be_visible(timeout=ACTION_S * 1000)
    with _timed(f"{prefix}: open the notebook"):
        fetched.locator("a", has_text=assignment).first.click()  # expands the assignment: its notebooks
        page.locator("#fetched_assignments_list a", has_text=re.compile(rf"^{assignment}$")).last.click()
        cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
        expect(cells).to_have_count(len(lab_ui.release_cells(assignment)), timeout=PAGE_S * 1000)
        lab_ui.wait_kernel_idle(page, PAGE_S * 1000)
    _shot(page, f"{prefix}-3-notebook-open")
    answers = _answers(sample_name, assignment)
    with _timed(f"{prefix}: type 12 code + 2 written answers through the editor, save"):
        for i, cell in lab_ui.answer_cells(assignment):
            lab_ui.type_into(page, i, answers[lab_ui.grade_id(cell)])
        written = _written_answers(assignment)
        for i, cell in lab_ui.release_cells(assignment):
            if cell.cell_type == "markdown" and lab_ui.grade_id(cell) in written:
                _type_markdown(page, i, written[lab_ui.grade_id(cell)])
        page.keyboard.press("Control+s")
        expect(page.locator(".lm-TabBar-tab.jp-mod-current.jp-mod-dirty")).to_have_count(0, timeout=60_000)
    _shot(page, f"{prefix}-4-answers-typed")
    # The file on disk is the student's, written by their own server (not by this test).
    saved = control.home(user) / assignment / f"{assignment}.ipynb"
    assert os.stat(saved).st_uid == control.uid(user)
    assert answers["apply_mask"].splitlines()[-1].strip() in saved.read_text(encoding="utf-8")
    with _timed(f"{prefix}: validate"):
        _assignment_list(page)
        validate = page.locator("#fetched_assignments_list button", has_text=re.compile("^Validat"))
        validate.first.click()
        expect(validate.first).to_have_text("Validate", timeout=ACTION_S * 1000)
        dialog = page.locator(".jp-Dialog")
        expect(dialog).to_be_visible()
        _shot(page, f"{prefix}-5-validated")
        verdict = dialog.inner_text()
        dialog.locator(".jp-mod-accept").click()  # "Ok", in either language
    with _timed(f"{prefix}: submit"):
        page.locator("#fetched_assignments_list button", has_text="Submit").first.click()
        submitted = _list_item(page, "submitted_assignments_list", assignment)
        expect(submitted.first).to_be_visible(timeout=ACTION_S * 1000)
    _shot(page, f"{prefix}-6-submitted")
    return page, verdict


# -------------------------------------------------------------------- the test


def test_semester_on_jupyterhub(hub, browser, shots_on_failure):
    editions = sorted(set(EDITION.values()))
    outbound = hub.exchange / control.COURSE_ID / "outbound"
    # 1. Instructor: formgrader generates and releases both editions.
    with _timed("instructor: log in (server spawn)"):
        teacher = _login(browser, hub, INSTRUCTOR)
    formgrader = f"{_user_url(hub, INSTRUCTOR)}/formgrader"
    with _timed("instructor: formgrader generate + release both editions"):
        teacher.goto(f"{formgrader}/manage_assignments")
        _shot(teacher, "01-formgrader-manage-assignments")
        for assignment in editions:
            row = _assignment_row(teacher, assignment)
            expect(row).to_have_count(1)
            _formgrader_action(teacher, row, "assign", f"02-formgrader-generated-{assignment}")
            _formgrader_action(teacher, row, "release", f"03-formgrader-released-{assignment}")
            expect(row.locator("td.status")).to_contain_text("released")
            assert (outbound / assignment / f"{assignment}.ipynb").exists()

    # 2-3. Two students, one per edition.
    page_a, verdict_a = _solve_and_submit(browser, hub, STUDENT_A, "correct-reference", "10-student-a")
    assert "Success! Your notebook passes all the tests." in verdict_a, verdict_a[:2000]
    page_b, verdict_b = _solve_and_submit(browser, hub, STUDENT_B, BUGGY, "20-student-b")
    assert "Success!" not in verdict_b, "validation should fail on the inverted mask"

    # 4. Student B cannot reach A's work or the course.
    with _timed("student B: isolation checks (files, hub, kernel)"):
        _isolation_checks(hub, page_b)
    page_a.context.close()

    # 5. Instructor: collect, autograde, manual grades, feedback.
    with _timed("instructor: collect both editions"):
        teacher.goto(f"{formgrader}/manage_assignments")
        for assignment in editions:
            _formgrader_action(teacher, _assignment_row(teacher, assignment), "collect",
                               f"30-formgrader-collected-{assignment}")
        teacher.reload()
        for assignment in editions:
            expect(_assignment_row(teacher, assignment).locator("td.num-submissions")).to_have_text("1")
    with _timed("instructor: autograde 2 submissions from formgrader"):
        for student, assignment in EDITION.items():
            teacher.goto(f"{formgrader}/manage_submissions/{assignment}")
            srow = teacher.locator("table tbody tr", has=teacher.locator("td.student-id", has_text=student))
            expect(srow).to_have_count(1)
            _formgrader_action(teacher, srow, "autograde", f"31-formgrader-autograded-{student}")
            teacher.reload()
            expect(teacher.locator("table tbody td.status", has_text="needs manual grading")).to_have_count(1)
            _shot(teacher, f"32-formgrader-submissions-{assignment}")
    for student, assignment in EDITION.items():
        report = hub.course / "autograded" / student / assignment / f"{assignment}.grading.json"
        assert report.exists(), f"trusted scoring did not run for {student} (no {report.name})"
    with _timed("instructor: grade 2 x 2 written answers"):
        _manual_grades(teacher, formgrader)
    with _timed("instructor: generate + release feedback of both editions"):
        teacher.goto(f"{formgrader}/manage_assignments")
        for assignment in editions:
            row = _assignment_row(teacher, assignment)
            _formgrader_action(teacher, row, "generate-feedback", f"35-formgrader-feedback-generated-{assignment}")
            _formgrader_action(teacher, row, "release-feedback", f"36-formgrader-feedback-released-{assignment}")

    # 6. Students fetch feedback.
    page_a = _login(browser, hub, STUDENT_A)
    html_a = _fetch_feedback(hub, page_a, STUDENT_A, "40-student-a")
    entries = _toc_scores(page_a)
    auto = [e for e in entries if e[1] == "automatic checks"]
    assert len(auto) == AUTOMATIC_CELLS and sum(top for *_, top in auto) == AUTOMATIC_POINTS, entries
    assert all(score == top for _, _, score, top in auto), f"student A lost automatic points: {auto}"
    assert [e[2] for e in entries if e[1] == "written response"] == [2.5, 2.5]
    _fetch_feedback(hub, page_b, STUDENT_B, "50-student-b")
    hint = page_b.locator("tr", has=page_b.locator(".code", has_text="[mask-inverted]")).first
    hint.scroll_into_view_if_needed()
    expect(hint).to_be_visible()
    expect(hint).to_contain_text("Hint:")
    _shot(page_b, "51-student-b-feedback-mask-inverted")
    apply_mask = [e for e in _toc_scores(page_b) if e[0].startswith("apply_mask")]
    assert apply_mask and apply_mask[0][2] < apply_mask[0][3], apply_mask
    text_b = page_b.locator("body").inner_text()
    assert not CJK.search(text_b), f"Chinese on the English feedback page: {CJK.findall(text_b)[:20]}"
    # the grader's own words: a code in its feedback markup (the notebook's code may spell any code)
    assert '<span class="code">[mask-inverted]</span>' not in html_a

    # 7. The feedback page on its own, with no network.
    with _timed("feedback page offline"):
        _offline_feedback(browser, html_a)


def _isolation_checks(hub, page):
    base = _user_url(hub, STUDENT_B)
    work_a, work_b = EDITION[STUDENT_A], EDITION[STUDENT_B]
    # The file browser's API: no way out of B's home.
    for path in (f"../{STUDENT_A}", f"../{INSTRUCTOR}/{hub.course_name}", f"..%2F{STUDENT_A}%2F{work_a}"):
        response = page.request.get(f"{base}/api/contents/{path}")
        assert response.status in (403, 404), f"contents {path}: {response.status} {response.text()[:200]}"
    page.goto(f"{base}/lab/tree/..%2F{STUDENT_A}")  # the file browser, pointed at A's home
    refusal = page.locator(".jp-Dialog", has_text="Cannot open")
    expect(refusal).to_be_visible()
    expect(refusal).to_contain_text(f"../{STUDENT_A}")
    _shot(page, "25-student-b-file-browser-cannot-leave-home")
    refusal.locator("button", has_text="Close").click()
    expect(page.locator(".jp-FileBrowser .jp-BreadCrumbs")).not_to_contain_text(STUDENT_A)  # still in B's home
    # The hub: A's server is not B's to use.
    for url in (f"{_user_url(hub, STUDENT_A)}/api/contents/{work_a}",
                f"{_user_url(hub, INSTRUCTOR)}/api/contents/{hub.course_name}"):
        response = page.request.get(url)
        assert response.status in (403, 404) and work_a + ".ipynb" not in response.text(), \
            f"{url}: {response.status} {response.text()[:300]}"
    response = page.goto(f"{_user_url(hub, STUDENT_A)}/lab")
    _shot(page, "26-student-b-opens-student-a-server")
    assert response.status == 403, f"B opening A's server: {response.status} {page.url}"
    expect(page.locator("#jp-main-dock-panel")).to_have_count(0)
    # The kernel: B's own code, run in B's notebook.
    page.goto(f"{base}/lab/tree/{work_b}/{work_b}.ipynb")

    cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
    expect(cells).to_have_count(len(lab_ui.release_cells(work_b)))
    lab_ui.wait_kernel_idle(page, PAGE_S * 1000)
    targets = [control.home(STUDENT_A) / work_a / f"{work_a}.ipynb", hub.course,
               hub.course / "gradebook.db", hub.exchange / control.COURSE_ID / "inbound",
               control.home(STUDENT_B) / work_b]
    probe = ("import os\nfor p in %r:\n    try:\n        os.listdir(p) if os.path.isdir(p) else open(p, 'rb').read(1)\n"
             "        print('READ', p)\n    except OSError as e:\n        print('DENIED', type(e).__name__, p)\n"
             % [str(t) for t in targets])
    last = cells.count() - 1
    cells.nth(last).click()
    page.keyboard.press("Escape")
    page.keyboard.press("b")  # a new cell below, as a student adds one
    expect(cells).to_have_count(last + 2)
    lab_ui.type_into(page, last + 1, probe)
    page.keyboard.press("Shift+Enter")
    output = cells.nth(last + 1).locator(".jp-OutputArea-output")
    expect(output.first).to_contain_text(str(control.home(STUDENT_B) / work_b), timeout=PAGE_S * 1000)
    text = output.first.inner_text()
    cells.nth(last + 1).scroll_into_view_if_needed()
    _shot(page, "27-student-b-kernel-cannot-read")
    for target in targets[:-1]:
        assert f"DENIED PermissionError {target}" in text, text
    assert f"READ {targets[-1]}" in text, text  # the probe itself works: B reads B's own work


def _manual_grades(page, formgrader):
    """Each student's two written answers, graded in formgrader's Manual Grading view."""
    for student, score in MANUAL.items():
        assignment = EDITION[student]
        api = page.request.get(f"{formgrader}/api/submitted_notebooks/{assignment}/{assignment}")
        assert api.ok, f"formgrader API: {api.status} {api.text()[:300]}"
        by_student = {s["student"]: s for s in api.json()}
        assert set(by_student) == {student}, by_student
        page.goto(f"{formgrader}/gradebook/{assignment}/{assignment}")
        page.locator(f'a[href$="/formgrader/submissions/{by_student[student]["id"]}"]').first.click()
        page.wait_for_load_state("networkidle")  # formgrade.js binds its save handlers after load
        grades_url = f"{formgrader}/api/grades?submission_id={by_student[student]['id']}"
        for name in ("written-a1", "written-a2"):
            box = page.locator(f"input.score#{name}")
            expect(box).to_be_visible()
            lab_ui.enter_manual_grade(page, box, grades_url, name, score)
        _shot(page, f"33-formgrader-manual-grade-{student}")


def _fetch_feedback(hub, page, user, prefix):
    """Assignments tab > Fetch Feedback, then open the fetched page. Returns its HTML."""
    assignment = EDITION[user]
    with _timed(f"{prefix}: fetch feedback and open it"):
        _assignment_list(page)
        row = _list_item(page, "submitted_assignments_list", assignment).first
        row.locator("button", has_text="Fetch Feedback").click()
        view = page.locator("#submitted_assignments_list a", has_text="view feedback").first
        expect(view).to_be_visible(timeout=ACTION_S * 1000)
        _shot(page, f"{prefix}-1-feedback-fetched")
        view.click()  # the file browser goes to the feedback folder
        item = page.locator(".jp-DirListing-item", has_text=f"{assignment}.html")
        expect(item).to_be_visible()
        pages = sorted((control.home(user) / assignment / "feedback").glob(f"*/{assignment}.html"))
        assert len(pages) == 1, f"{user} has feedback pages {pages}"
        relative = pages[0].relative_to(control.home(user))
        # The file browser now shows the folder the page was fetched into.
        expect(page.locator(".jp-FileBrowser .jp-BreadCrumbs")).to_contain_text(pages[0].parent.name)
        page.goto(f"{_user_url(hub, user)}/files/{relative}")
        expect(page.locator("#toc")).to_be_visible()
    _shot(page, f"{prefix}-2-feedback-page")
    return page.content()


def _toc_scores(page):
    """[(label, kind, score, max)] of the feedback page's summary, as the page shows it."""
    rows = page.locator("#toc li").all_inner_texts()
    found = [re.fullmatch(r"(.+?) " + feedback_page.ENTRY, r.strip()) for r in rows]
    assert all(found), f"unexpected summary entries: {rows}"
    return [(m.group(1), feedback_page.kind(m.group(2)), float(m.group(3)), float(m.group(4))) for m in found]


def _offline_feedback(browser, html):
    """Save the page to disk and open it in a context with the network off: math must render."""
    path = ARTIFACTS / "student-a-feedback.html"
    path.write_text(html, encoding="utf-8")
    context = browser.new_context(offline=True, viewport={"width": 1200, "height": 900})
    requested = []

    def only_files(route):
        requested.append(route.request.url)
        route.continue_() if route.request.url.startswith("file:") else route.abort()
    context.route("**/*", only_files)
    try:
        page = context.new_page()
        page.goto(path.as_uri())
        formula = page.locator('math[display="block"]').first
        formula.scroll_into_view_if_needed()
        expect(formula).to_be_visible()
        box = formula.bounding_box()
        assert box and box["height"] > 25 and box["width"] > 150, f"the formula did not lay out: {box}"
        raw = page.evaluate("""() => Array.from(document.querySelectorAll('.text_cell_render'))
            .map(e => e.textContent).filter(t => /\\$\\$|\\\\frac|\\\\mathrm/.test(t)).length""")
        assert raw == 0, "TeX left as text on the offline feedback page"
        _shot(page, "60-feedback-offline-formula")
        summary = page.locator("#toc")
        expect(summary).to_contain_text("apply_mask — ")
        _shot(summary, "61-feedback-offline-summary")
        assert [u for u in requested if not u.startswith("file:")] == [], requested
    finally:
        context.close()
