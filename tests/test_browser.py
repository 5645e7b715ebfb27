"""What a student and an instructor see, driven in headless Chromium (issue 6).

One JupyterLab server runs for the whole module, rooted at a temporary copy of
the course.  The student works on a copy of the released notebook
(``student/sdpa/sdpa.ipynb``): runs it as released, then types the reference
answers into the answer cells through the page and runs it again.  The
instructor's side grades two sample submissions with the stock nbgrader
commands, opens the feedback page of the buggy one and the formgrader's
manual-grading view of a written answer.

Screenshots land in ``.artifacts/browser/`` (git-ignored), with
``timings.json`` saying how long each step took.
"""
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import catalogue
from autograder.demo import course
from autograder.sandbox.guest import procfs
from solutions import solution_notebook
from tests.support import a11y
from tests.support import browser as lab_ui
from tests.support.language import CJK

try:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # pragma: no cover - depends on the environment
    sync_playwright = None

ROOT = Path(__file__).resolve().parents[1]
RELEASE = lab_ui.RELEASE
ARTIFACTS = ROOT / ".artifacts" / "browser"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
STUDENT_NOTEBOOK = f"student/{course.ASSIGNMENT}/{course.ASSIGNMENT}.ipynb"
BUGGY, CORRECT = "bug-mask-inverted", "correct-reference"
HOSTILE = "attack-script-on-the-page"  # script in its outputs and in the markdown it writes
ENGLISH = "sdpa_en"  # the English edition: the buggy student is graded in it too
# Generous limits for a loaded 2-core machine; a normal run is much faster.
SERVER_START_S = 90
RUN_ALL_S = 240

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(sync_playwright is None, reason="playwright is not installed (pip install -e '.[browser]')"),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (run `make system-deps`)"),
]

TIMINGS = {}
AUDITS = {}  # page -> axe-core's serious and critical violations, written to axe.json


def _timed(name):
    return lab_ui.timed(name, TIMINGS)


def _shot(target, name, **kwargs):
    lab_ui.shot(target, name, ARTIFACTS, **kwargs)


# ---------------------------------------------------------------- the release


def _grade_cells():
    return [(i, c) for i, c in lab_ui.release_cells() if c.cell_type == "code" and lab_ui.meta(c).get("grade")]


def _visible_check_name(cell):
    found = re.search(r'with visible_check\("([^"]+)"\)', cell.source)
    return found and found.group(1)


# ------------------------------------------------------------------ processes


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _descendants(pid):
    """Pids of every live process below `pid` (from /proc)."""
    return procfs.descendants(pid)


def _stop(proc):
    """Stop the server, then anything it started that outlived it (kernels)."""
    below = _descendants(proc.pid)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # jupyter shuts its kernels down on SIGTERM
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    for pid in below:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module")
def course_dir(tmp_path_factory):
    """A temporary course (the repo's course files) plus the student's copy of the release."""
    root = course.make_course(tmp_path_factory.mktemp("browser") / "course")
    student = root / STUDENT_NOTEBOOK
    student.parent.mkdir(parents=True)
    shutil.copy2(RELEASE, student)
    return root


@pytest.fixture(scope="module")
def lab(course_dir):
    """JupyterLab on a free localhost port with a token, rooted at the course (formgrader needs that)."""
    home = course_dir.parent / "jupyter-home"
    settings = home / "settings"
    notification = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notification.parent.mkdir(parents=True)
    # No "get Jupyter news?" toast over the notebook, no update check (there is no network).
    notification.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    port, token = _free_port(), secrets.token_hex(16)
    env = course.nbgrader_env()  # the venv's bin first on PATH (nbgrader shells out to alembic)
    # Keep the user's Jupyter config, kernels, workspaces and IPython profile out of it.
    env.update(JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_DATA_DIR=str(home / "data"),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"), IPYTHONDIR=str(home / "ipython"),
               MPLBACKEND="module://matplotlib_inline.backend_inline")
    cmd = [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", "--port", str(port),
           f"--ServerApp.token={token}", f"--ServerApp.root_dir={course_dir}", "--ServerApp.ip=127.0.0.1",
           f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={home / 'workspaces'}"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log_path = course_dir.parent / "jupyterlab.log"
    started = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=course_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            assert proc.poll() is None, f"JupyterLab exited:\n{log_path.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"JupyterLab did not answer:\n{log_path.read_text()[-3000:]}"
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=5)
                break
            except OSError:
                time.sleep(0.5)
        TIMINGS["server start"] = round(time.perf_counter() - started, 1)
        yield {"base": f"http://127.0.0.1:{port}", "token": token, "log": log_path, "root": course_dir}
    finally:
        _stop(proc)


@pytest.fixture(scope="module", autouse=True)
def _write_timings():
    yield
    if TIMINGS:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / "timings.json").write_text(json.dumps(TIMINGS, indent=2, ensure_ascii=False) + "\n")
    if AUDITS:
        a11y.write(AUDITS, ARTIFACTS / "axe.json")


def _audit(page, name, include=(), exclude=()):
    """axe-core on the page: no serious or critical violation (what it found is kept in axe.json)."""
    if not a11y.available():
        pytest.skip(f"axe-core is not installed at {a11y.AXE} (run `make test-deps`)")
    found = a11y.audit(page, include, exclude)
    AUDITS[name] = found
    assert not found, f"{name}: axe-core finds serious or critical violations:\n{a11y.summary(found)}"


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def graded(course_dir):
    """generate_assignment, three submissions (buggy, correct, hostile), autograde, generate_feedback."""
    with _timed("grade 2 submissions (generate, autograde, feedback)"):
        course.nbgrader(course_dir, "generate_assignment", course.ASSIGNMENT, "--force")
        release = course.release_notebook(course_dir)
        by_name = {s.name: s for s in catalogue.CATALOGUE}
        for student in (BUGGY, CORRECT, HOSTILE):
            course.submit(course_dir, student, catalogue.build(by_name[student], release))
        course.nbgrader(course_dir, "autograde", course.ASSIGNMENT)
        course.nbgrader(course_dir, "generate_feedback", course.ASSIGNMENT)
    return course_dir


@pytest.fixture(scope="module")
def graded_english(graded):
    """The buggy submission graded in the English edition too (after the formgrader test, which lists sdpa)."""
    with _timed("grade the buggy submission in the English edition"):
        course.nbgrader(graded, "generate_assignment", ENGLISH, "--force")
        english = catalogue.build({s.name: s for s in catalogue.CATALOGUE}[BUGGY],
                                  course.release_notebook(graded, ENGLISH), solution_notebook(ENGLISH))
        course.submit(graded, BUGGY, english, ENGLISH)
        course.nbgrader(graded, "autograde", ENGLISH)
        course.nbgrader(graded, "generate_feedback", ENGLISH)
    return graded


# ------------------------------------------------------------------- notebook


@pytest.fixture(scope="module")
def notebook(lab, browser):
    """The student's notebook open in JupyterLab, kernel started and idle."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(60_000)
    with _timed("open notebook (page load + kernel start)"):
        page.goto(f"{lab['base']}/lab/tree/{STUDENT_NOTEBOOK}?token={lab['token']}")
        cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
        expect(cells).to_have_count(len(lab_ui.release_cells()), timeout=120_000)
        lab_ui.wait_kernel_idle(page, 120_000)
    yield page
    page.close()


# A code cell's input prompt, e.g. '[1]:', '[*]:', '[ ]:'.  A folded input (the checks' helpers) shows a
# placeholder in its place, whose prompt is always empty: it is left out.
PROMPT = ".jp-NotebookPanel .jp-Notebook .jp-CodeCell .jp-InputPrompt:not(.jp-Placeholder-prompt)"


def _prompts(page):
    """The input prompts of every code cell whose input is shown."""
    return page.evaluate("(selector) => Array.from(document.querySelectorAll(selector)).map(e => e.textContent.trim())",
                         PROMPT)


def _count(prompt):
    found = re.fullmatch(r"\[(\d+)\]:", prompt)
    return int(found.group(1)) if found else None


def _run_all(page, label):
    """Run > Run All Cells from the menu bar; wait until every code cell ran and the kernel is idle."""
    before = max((_count(p) or 0 for p in _prompts(page)), default=0)
    with _timed(label):
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        page.locator(".lm-Menu-item:has(.lm-Menu-itemLabel:text-is('Run All Cells'))").click()
        try:
            # Settled: kernel idle, nothing queued ([*]) and something ran.  Cells that Run All
            # skipped (after an error in a cell without the `raises-exception` tag) show [ ].
            page.wait_for_function(
                """([before, selector]) => {
                    const ps = Array.from(document.querySelectorAll(selector)).map(p => p.textContent);
                    const ind = document.querySelector('.jp-NotebookPanel .jp-Notebook-ExecutionIndicator');
                    return ind && ind.dataset.status === 'idle' && !ps.some(p => p.includes('*'))
                        && ps.some(p => Number((p.match(/\\d+/) || [0])[0]) > before);
                }""", arg=[before, PROMPT], timeout=RUN_ALL_S * 1000)
        except PlaywrightError:
            _shot(page, f"{label}-stalled")
            pytest.fail(f"Run All Cells did not finish within {RUN_ALL_S}s; prompts: {_prompts(page)}")
    prompts = _prompts(page)
    skipped = [i for i, p in enumerate(prompts) if (_count(p) or 0) <= before]
    if skipped:
        _shot(page, f"{label}-stopped")
        pytest.fail(f"Run All Cells stopped early: {len(skipped)} of {len(prompts)} code cells did not run "
                    f"(prompts: {prompts}). A cell that raises without the `raises-exception` tag stops "
                    "Run All there, so the student sees nothing below it.")


def _outputs(page):
    """Per DOM cell: [{mime, text}] of its outputs (textContent: also for cells scrolled out of view)."""
    return page.evaluate("""() => Array.from(document.querySelectorAll(
        '.jp-NotebookPanel .jp-Notebook .jp-Cell')).map(c => Array.from(
            c.querySelectorAll('.jp-OutputArea-output')).map(o => ({
                mime: o.dataset.mimeType || '', text: o.textContent})))""")


def _errors(outputs):
    """Texts of the outputs JupyterLab shows in red: tracebacks and anything written to stderr."""
    return [o["text"] for o in outputs if o["mime"] == "application/vnd.jupyter.stderr"]


def test_lesson_renders_and_stubs_fail_helpfully(notebook):
    page = notebook
    _shot(page, "01-notebook-opened")
    markdown = page.locator(".jp-NotebookPanel .jp-MarkdownCell .jp-RenderedMarkdown")
    # The formula cell: typeset math (JupyterLab uses MathJax 3), no TeX left as raw text.
    formula = next(i for i, c in lab_ui.release_cells() if lab_ui.grade_id(c) == "formula")
    math = lab_ui.cell(page, formula).locator("mjx-container")
    expect(math.first).to_be_visible()
    expect(page.locator(".jp-NotebookPanel mjx-merror")).to_have_count(0)
    raw_tex = page.evaluate("""() => Array.from(document.querySelectorAll(
        '.jp-NotebookPanel .jp-RenderedMarkdown')).map(e => e.textContent).filter(t => /\\$|\\\\frac|\\\\mathrm/.test(t))""")  # noqa: E501 - test data
    assert not raw_tex, f"TeX left unrendered in the lesson: {[t[:120] for t in raw_tex]}"
    _shot(lab_ui.cell(page, formula), "02-lesson-formula")
    # The Q/K/V table is a rendered HTML table with its header row.
    qkv = next(i for i, c in lab_ui.release_cells() if lab_ui.grade_id(c) == "qkv")
    table = lab_ui.cell(page, qkv).locator(".jp-RenderedMarkdown table")
    expect(table).to_be_visible()
    expect(table.locator("th").first).to_have_text(re.compile(r"\S"))
    assert markdown.locator("table").count() >= 3, "the lesson's markdown tables did not render"
    _shot(lab_ui.cell(page, qkv), "03-lesson-table")

    _run_all(page, "run all (as released)")
    outputs = _outputs(page)
    problems = []
    answers = {i for i, _ in lab_ui.answer_cells()}
    grades = {i for i, _ in _grade_cells()}
    for i, cell in lab_ui.release_cells():
        if cell.cell_type != "code":
            continue
        errors, name = _errors(outputs[i]), lab_ui.grade_id(cell)
        if i in answers and re.search(r"^raise NotImplementedError", cell.source, re.M):
            # A top-level stub (hand-calc, shapes, bug choice) raises when run.
            if not any("NotImplementedError" in e for e in errors):
                problems.append(f"stub cell {name} does not show NotImplementedError: {errors}")
        elif i in answers:
            # A function stub only defines the function: its check cell says it is not implemented yet.
            if errors:
                problems.append(f"function stub {name} shows an error when run: {[e[-300:] for e in errors]}")
        elif i in grades:
            helpful = [e for e in errors if "还没有实现" in e or "还没有填写" in e]
            if errors and not helpful:
                problems.append(f"grade cell {name} shows an unhelpful error: {[e[-300:] for e in errors]}")
            if _visible_check_name(cell) and not any("还没有实现" in e for e in errors):
                problems.append(f"grade cell {name} does not say the function is not implemented yet: {errors}")
        elif errors:
            problems.append(f"cell {name} shows an error: {[e[-300:] for e in errors]}")
    assert not problems, "\n".join(problems)

    # The helpful message is on screen, not only somewhere in the DOM.
    first_stub = min(i for i, c in lab_ui.answer_cells() if "\nraise NotImplementedError" in c.source)
    lab_ui.cell(page, first_stub).scroll_into_view_if_needed()
    expect(lab_ui.cell(page, first_stub).locator(".jp-OutputArea-output")).to_contain_text("NotImplementedError")
    _shot(lab_ui.cell(page, first_stub), "04-stub-not-implemented")
    check = next(i for i, c in _grade_cells() if lab_ui.grade_id(c) == "apply_mask-check")
    message = lab_ui.cell(page, check).locator(".jp-OutputArea-output", has_text="还没有实现")
    message.scroll_into_view_if_needed()
    expect(message).to_be_visible()
    expect(message).to_contain_text("apply_mask 还没有实现：请先完成上面定义它的单元格，再运行这个检查。")
    _shot(lab_ui.cell(page, check - 1), "05-stub-cell-before-check")
    _shot(lab_ui.cell(page, check), "05-check-not-implemented-message")
    heatmap = next(i for i, c in lab_ui.release_cells() if lab_ui.grade_id(c) == "heatmap")
    expect(lab_ui.cell(page, heatmap).locator(".jp-OutputArea-output")).to_contain_text("先完成上面的函数")


def test_reference_answers_pass_visible_checks_and_draw_heatmap(notebook):
    page = notebook
    answers = lab_ui.reference_answers()
    with _timed(f"type {len(lab_ui.answer_cells())} answers through the editor"):
        for i, cell in lab_ui.answer_cells():
            lab_ui.type_into(page, i, answers[lab_ui.grade_id(cell)])
    _run_all(page, "run all (reference answers)")
    outputs = _outputs(page)
    problems = []
    for i, cell in lab_ui.release_cells():
        if cell.cell_type != "code":
            continue
        errors, name = _errors(outputs[i]), lab_ui.grade_id(cell)
        if errors:
            problems.append(f"cell {name} shows an error: {[e[-400:] for e in errors]}")
        text = "".join(o["text"] for o in outputs[i])
        check = _visible_check_name(cell)
        if check and f"✓ {check} 通过了可见检查" not in text:
            problems.append(f"grade cell {name} does not show '✓ {check} 通过了可见检查': {text[-300:]!r}")
        elif lab_ui.meta(cell).get("grade") and "✓" not in text:
            problems.append(f"grade cell {name} shows no ✓ line: {text[-300:]!r}")
    assert not problems, "\n".join(problems)

    check = next(i for i, c in _grade_cells() if lab_ui.grade_id(c) == "apply_mask-check")
    passed = lab_ui.cell(page, check).locator(".jp-OutputArea-output", has_text="✓ apply_mask 通过了可见检查")
    passed.scroll_into_view_if_needed()
    expect(passed).to_be_visible()
    _shot(page, "06-solved-checks-pass")

    heatmap = next(i for i, c in lab_ui.release_cells() if lab_ui.grade_id(c) == "heatmap")
    image = lab_ui.cell(page, heatmap).locator(".jp-OutputArea-output img")
    expect(image).to_have_count(1)
    image.scroll_into_view_if_needed()
    expect(image).to_be_visible()
    size = image.evaluate("img => [img.complete, img.naturalWidth, img.naturalHeight]")
    assert size[0] and size[1] > 200 and size[2] > 200, f"heatmap image not loaded: {size}"
    _shot(lab_ui.cell(page, heatmap), "07-heatmap")

    # One typical mistake, the mask's polarity inverted in apply_mask: the composite's visible check names
    # the helper to fix first, with the misconception's code (and says nothing against the composite).
    from autograder.grading import honest

    mask = next(i for i, c in lab_ui.answer_cells() if lab_ui.grade_id(c) == "apply_mask")
    composite = next(i for i, c in _grade_cells() if lab_ui.grade_id(c) == "scaled_dot_product_attention-check")
    lab_ui.type_into(page, mask, honest.replacement("mask-inverted")["apply_mask"].strip("\n"))
    for index in (mask, composite):
        lab_ui.cell(page, index).click(position={"x": 40, "y": 5})  # its prompt selects it (the bar folds it)
        page.keyboard.press("Control+Enter")
        lab_ui.wait_kernel_idle(page, timeout=60_000)
    named = lab_ui.cell(page, composite).locator(".jp-OutputArea-output", has_text="[mask-inverted]")
    named.scroll_into_view_if_needed()
    expect(named).to_contain_text("apply_mask")
    _shot(lab_ui.cell(page, composite), "07b-inverted-mask-visible-check")
    page.set_viewport_size({"width": 1280, "height": 800})  # the page as a laptop shows it
    named.scroll_into_view_if_needed()
    _shot(page, "07b-inverted-mask-visible-check-page")
    page.set_viewport_size({"width": 1400, "height": 1000})


# ------------------------------------------------------------------ instructor


def test_feedback_page_shows_the_failed_check(graded, browser):
    html = course.feedback_html(graded, BUGGY)
    assert html.exists(), f"no feedback written for {BUGGY}"
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    try:
        with _timed("open feedback page"):
            page.goto(html.as_uri())
        feedback = page.locator(".sdpa-fb").filter(has=page.locator(".sum", has_text="apply_mask-check："))
        expect(feedback).to_have_count(1)
        feedback.scroll_into_view_if_needed()
        summary = feedback.locator(".sum")
        expect(summary).to_be_visible()
        expect(summary).to_have_text(re.compile(r"^apply_mask-check：\d+(\.\d+)? / 10 分（\d+ 项隐藏检查，\d+ 项未通过）$"))  # noqa: E501 - test data
        failed = feedback.locator("tr", has=page.locator(".bad", has_text="✗")).filter(has_text="[mask-inverted]")
        expect(failed.first).to_be_visible()
        expect(failed.first.locator(".code", has_text="[mask-inverted]")).to_be_visible()
        expect(failed.first).to_contain_text("提示：")
        expect(failed.first).to_contain_text("这个失败的例子已自动缩小")  # the shrunk example
        _shot(feedback, "08-feedback-failed-check")
        _shot(page, "08-feedback-viewport")
    finally:
        page.close()


def test_feedback_page_opens_with_the_score_and_the_root_cause(graded, browser):
    """A one-bug submission: the score and "先修这里" are on the first screen (1280x800), the cause is named
    once and links to the cell of the part to fix."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        page.goto(course.feedback_html(graded, BUGGY).as_uri())
        heading = page.locator("h1").first
        causes = page.locator(".sdpa-causes")
        expect(heading).to_contain_text("（得分：")
        expect(causes).to_have_count(1)
        expect(causes.locator("li")).to_have_count(1)
        expect(causes).to_contain_text("[mask-inverted]")
        for element in (heading, causes):
            box = element.bounding_box()
            assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 800, box
        link = causes.locator("a", has_text="apply_mask").first
        assert link.get_attribute("href") == "#apply_mask-check"
        assert page.locator("[id='apply_mask-check'], [name='apply_mask-check']").count() >= 1
        _shot(page, "09-feedback-top-root-cause")
    finally:
        page.close()


def test_formgrader_shows_written_answer_for_manual_grading(graded, lab, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        with _timed("formgrader: list and open a submission"):
            response = page.goto(f"{lab['base']}/formgrader?token={lab['token']}")
            if response is None or response.status == 404:
                pytest.skip(f"formgrader is not served by this JupyterLab/nbgrader (GET /formgrader: "
                            f"{response and response.status}); server log: {lab['log']}")
            api = page.request.get(f"{lab['base']}/formgrader/api/submitted_notebooks/"
                                   f"{course.ASSIGNMENT}/{course.ASSIGNMENT}")
            assert api.ok, f"formgrader API: {api.status} {api.text()[:300]}"
            by_student = {s["student"]: s for s in api.json()}
            assert set(by_student) == {BUGGY, CORRECT, HOSTILE}
            assert by_student[BUGGY]["needs_manual_grade"], "written answers should wait for a manual grade"
            # Manual Grading > sdpa > sdpa > the buggy student's submission, as an instructor clicks it.
            page.goto(f"{lab['base']}/formgrader/gradebook/{course.ASSIGNMENT}/{course.ASSIGNMENT}")
            page.locator(f'a[href$="/formgrader/submissions/{by_student[BUGGY]["id"]}"]').first.click()
            score = page.locator("input.score#written-a1")
            expect(score).to_be_visible()
        panel = page.locator(".nbgrader_cell", has=score)
        expect(panel).to_contain_text("Student's answer")
        expect(panel.locator(".panel-body")).to_contain_text("交叉注意力")
        expect(panel).to_contain_text("/ 2.5")
        expect(page.locator("textarea#written-a1-comment")).to_be_visible()
        panel.scroll_into_view_if_needed()
        _shot(panel, "09-formgrader-written-a1")
        # Give it a manual grade: the formgrader saves it to the gradebook on `change`.
        page.wait_for_load_state("networkidle")
        grades_url = f"{lab['base']}/formgrader/api/grades?submission_id={by_student[BUGGY]['id']}"
        lab_ui.enter_manual_grade(page, score, grades_url, "written-a1", 2)
    finally:
        page.close()


def test_student_markup_does_nothing_in_the_instructors_browser(graded, lab, browser):
    """The hostile submission's feedback page and formgrader view, in Chromium: no payload ran, the page
    fetched nothing from outside, no link leads to javascript: or data:, and no element of the student's
    took the id of a grade cell."""
    from catalogue.attacks import PWNED

    formgrader = f"{lab['base']}/formgrader"
    api = browser.new_page().request.get(f"{formgrader}/api/submitted_notebooks/{course.ASSIGNMENT}/"
                                          f"{course.ASSIGNMENT}?token={lab['token']}")
    if not api.ok:
        pytest.skip(f"formgrader is not served by this JupyterLab/nbgrader: {api.status}")
    hostile = next(s for s in api.json() if s["student"] == HOSTILE)
    for url in (course.feedback_html(graded, HOSTILE).as_uri(),
                f"{formgrader}/submissions/{hostile['id']}?token={lab['token']}"):
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        fetched = []
        page.on("request", lambda request, seen=fetched: seen.append(request.url))
        page.on("dialog", lambda dialog, seen=fetched: seen.append(f"dialog {dialog.message}"))
        try:
            page.goto(url)
            page.wait_for_load_state("networkidle")
            for element in page.locator("details").all():  # <details ontoggle=...> fires when opened
                element.evaluate("d => { d.open = true; }")
            page.mouse.move(10, 10)
            page.mouse.wheel(0, 4000)
            page.wait_for_timeout(300)
            assert page.evaluate(f"typeof window.{PWNED}") == "undefined", url
            assert not [f for f in fetched if PWNED in f], fetched
            schemes = page.evaluate("[...document.querySelectorAll('a[href], area[href], form[action]')]"
                                    ".map(a => new URL(a.href || a.action, location.href).protocol)")
            assert not {"javascript:", "data:"} & set(schemes), schemes
            owner = page.evaluate("document.getElementById('apply_mask-check')?.closest('.text_cell, "
                                  ".jp-MarkdownCell') ? 'student' : 'page'")
            assert owner == "page", url
            # page classes from the student's raw cell, tags or notebook language: a fixed overlay
            assert page.locator(".modal-backdrop").count() == 0, url
            assert page.evaluate("[...document.querySelectorAll('.highlight')]"
                                 ".filter(e => getComputedStyle(e).position === 'fixed').length") == 0, url
        finally:
            page.close()


def test_feedback_pages_pass_axe_in_both_editions(graded_english, browser):
    """The one-bug feedback page in Chinese and in English: <html lang> of its edition, no serious or critical
    axe-core violation; the English page says nothing in Chinese."""
    for assignment, lang in ((course.ASSIGNMENT, "zh-CN"), (ENGLISH, "en")):
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        try:
            page.goto(course.feedback_html(graded_english, BUGGY, assignment).as_uri())
            assert page.evaluate("document.documentElement.lang") == lang
            _audit(page, f"feedback page ({assignment})")
            if assignment == ENGLISH:
                expect(page.locator("h1").first).to_contain_text("(Score: ")
                expect(page.locator(".sdpa-causes")).to_contain_text("Fix these first")
                text = page.locator("body").inner_text()
                assert not CJK.search(text), CJK.findall(text)[:20]
            _shot(page, f"10-feedback-{assignment}-top")
            # The lesson's markdown tables keep their layout: ruled cells, not run-together text.
            table = page.locator(".text_cell_render table").nth(1)
            table.scroll_into_view_if_needed()
            assert table.locator("td").first.evaluate("td => getComputedStyle(td).borderTopStyle") == "solid"
            _shot(table, f"10-feedback-{assignment}-table")
        finally:
            page.close()


def test_class_reports_pass_axe_in_both_languages(graded_english, browser):
    from autograder import report

    for assignment, lang in ((course.ASSIGNMENT, "zh-CN"), (ENGLISH, "en")):
        built = report.build(str(graded_english), assignment)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        try:
            page.goto(Path(built["html"]).as_uri())
            assert page.evaluate("document.documentElement.lang") == lang
            for image in page.locator("img").all():
                assert image.evaluate("img => img.complete && img.naturalWidth > 200"), image.get_attribute("src")
            _audit(page, f"class report ({assignment})")
            _shot(page, f"11-report-{assignment}", full_page=True)
        finally:
            page.close()


# What the course authors in a notebook as JupyterLab shows it: the rendered lesson and the cells' outputs.
# JupyterLab's own controls (toolbars, the code editor, the heading-collapse button it puts in a markdown
# cell) are the application's, not the course's: audited too, kept in axe.json, not asserted.
COURSE_CONTENT = (".jp-NotebookPanel .jp-MarkdownCell .jp-RenderedMarkdown", ".jp-NotebookPanel .jp-OutputArea")
LAB_CONTROLS = (".jp-collapseHeadingButton",)


def test_released_notebooks_pass_axe_in_jupyterlab(lab, browser):
    """Each edition's released notebook in JupyterLab, as a student opens it and runs it with the stubs: its
    lesson and outputs have no serious or critical axe-core violation; the English one says nothing in Chinese."""
    for assignment in (course.ASSIGNMENT, ENGLISH):
        relative = f"as-released/{assignment}/{assignment}.ipynb"
        target = Path(lab["root"]) / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(lab_ui.release(assignment), target)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(60_000)
        try:
            # A workspace of its own: only this notebook open (not the ones the other tests left open).
            page.goto(f"{lab['base']}/lab/workspaces/audit-{assignment}/tree/{relative}?token={lab['token']}")
            cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
            expect(cells).to_have_count(len(lab_ui.release_cells(assignment)), timeout=120_000)
            lab_ui.wait_kernel_idle(page, 120_000)
            _run_all(page, f"run the released {assignment} with its stubs")
            expect(page.locator(".jp-NotebookPanel mjx-container").first).to_be_visible()
            AUDITS[f"JupyterLab with {assignment} open (the application's controls; not asserted)"] = a11y.audit(page)
            _audit(page, f"released notebook in JupyterLab ({assignment})", COURSE_CONTENT, LAB_CONTROLS)
            if assignment == ENGLISH:
                text = page.locator(".jp-NotebookPanel .jp-Notebook").inner_text()
                assert not CJK.search(text), CJK.findall(text)[:20]
                _shot(page, "12-notebook-english")
        finally:
            page.close()


def test_english_visible_check_names_the_helper_to_fix(lab, browser):
    """The English edition with every answer filled in and one typical mistake (apply_mask's polarity
    inverted), run top to bottom in JupyterLab: the composite's visible check names apply_mask and
    [mask-inverted] in English, and the page has no serious axe-core finding."""
    import nbformat

    from autograder.grading import honest

    released = nbformat.read(str(lab_ui.release(ENGLISH)), as_version=4)
    answers = {**lab_ui.reference_answers(ENGLISH),
               "apply_mask": honest.replacement("mask-inverted")["apply_mask"].strip("\n")}
    for cell in released.cells:
        if cell.cell_type == "code" and lab_ui.meta(cell).get("solution"):
            cell.source = answers[lab_ui.grade_id(cell)]
    relative = f"inverted-mask/{ENGLISH}/{ENGLISH}.ipynb"
    target = Path(lab["root"]) / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(released, str(target))
    composite = next(i for i, c in lab_ui.release_cells(ENGLISH)
                     if lab_ui.grade_id(c) == "scaled_dot_product_attention-check")
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.set_default_timeout(60_000)
    try:
        page.goto(f"{lab['base']}/lab/workspaces/inverted-{ENGLISH}/tree/{relative}?token={lab['token']}")
        expect(page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")).to_have_count(
            len(released.cells), timeout=120_000)
        lab_ui.wait_kernel_idle(page, 120_000)
        _run_all(page, f"run {ENGLISH} with an inverted mask")
        named = lab_ui.cell(page, composite).locator(".jp-OutputArea-output", has_text="[mask-inverted]")
        named.scroll_into_view_if_needed()
        expect(named).to_contain_text("apply_mask")
        text = named.text_content()
        assert "scaled_dot_product_attention uses it" in text and not CJK.search(text), text
        _audit(page, f"English notebook with an inverted mask ({ENGLISH})", COURSE_CONTENT, LAB_CONTROLS)
        _shot(page, "07c-inverted-mask-visible-check-english")
    finally:
        page.close()
