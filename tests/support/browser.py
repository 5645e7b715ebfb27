"""JupyterLab in headless Chromium: helpers of the browser tests (``test_browser.py``, ``test_hub_browser.py``).

The released notebook as the page shows it (DOM cell i is notebook cell i), typing into a cell's editor,
waiting for the kernel, and recording how long each step took and what the page looked like.
"""
import time
from pathlib import Path

import nbformat

import catalogue
from autograder.demo import course
from solutions import solution_notebook

try:
    from playwright.sync_api import expect
except ImportError:  # pragma: no cover - depends on the environment; the tests that need it skip
    expect = None

ROOT = Path(__file__).resolve().parents[2]


def release(assignment=course.ASSIGNMENT):
    """The released (student) notebook of an edition, as `make release` writes it."""
    return ROOT / "assignments" / assignment / f"{assignment}.ipynb"


RELEASE = release()


class timed:
    """Record how long a step took in `timings` (a dict the test module writes to timings.json at the end)."""

    def __init__(self, name, timings):
        self.name, self.timings = name, timings

    def __enter__(self):
        self.started = time.perf_counter()

    def __exit__(self, *exc):
        self.timings[self.name] = round(time.perf_counter() - self.started, 1)
        return False


def shot(target, name, directory, **kwargs):
    """Screenshot a page or element into `directory`/<name>.png."""
    directory.mkdir(parents=True, exist_ok=True)
    target.screenshot(path=str(directory / f"{name}.png"), **kwargs)


# ---------------------------------------------------------------- the release


def release_cells(assignment=course.ASSIGNMENT):
    """[(index, cell)] of the released notebook; DOM cell i is notebook cell i."""
    return list(enumerate(nbformat.read(str(release(assignment)), as_version=4).cells))


def meta(cell):
    return cell.metadata.get("nbgrader", {})


def grade_id(cell):
    return meta(cell).get("grade_id")


def answer_cells(assignment=course.ASSIGNMENT):
    return [(i, c) for i, c in release_cells(assignment) if c.cell_type == "code" and meta(c).get("solution")]


def reference_answers(assignment=course.ASSIGNMENT):
    """grade_id -> the solved answer cell, as the catalogue fills it in (solution markers stripped)."""
    solution = nbformat.read(str(solution_notebook(assignment)), as_version=4)
    return {meta(c)["grade_id"]: catalogue.MARKER.sub("", c.source).rstrip("\n") for c in solution.cells
            if meta(c).get("solution") and c.cell_type == "code"}


# ------------------------------------------------------------------- the page


def cell(page, index):
    return page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").nth(index)


def wait_kernel_idle(page, timeout):
    page.wait_for_function(
        """() => {
            const ind = document.querySelector('.jp-NotebookPanel .jp-Notebook-ExecutionIndicator');
            const name = document.querySelector('.jp-NotebookPanel .jp-KernelName');
            return ind && ind.dataset.status === 'idle' && name && /Python/.test(name.textContent);
        }""", timeout=timeout)


def enter_manual_grade(page, box, grades_url, name, score, attempts=3, wait_s=20):
    """Type a manual score into formgrader's `box` until the gradebook (`grades_url`) holds it.

    formgrader saves a score on `change`; a change that lands while formgrade.js is still wiring
    its models is lost, so the score is typed again, at most `attempts` times.
    """
    for _attempt in range(attempts):
        box.fill("")
        box.fill(str(score))
        box.press("Tab")
        deadline = time.monotonic() + wait_s
        while True:
            saved = {g["name"]: g["manual_score"] for g in page.request.get(grades_url).json()}
            if saved[name] == float(score):
                return
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)
    raise AssertionError(f"manual grade {name} = {score} was not saved after {attempts} tries: {saved}")


def type_into(page, index, text):
    """Click into the cell's editor, select all, and insert `text` as typed/pasted input."""
    target = cell(page, index)
    target.scroll_into_view_if_needed()
    target.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(text)
    lines = target.locator(".cm-content .cm-line")
    expect(lines).to_have_count(len(text.split("\n")))
    typed = "\n".join(lines.all_text_contents())
    assert typed.replace("\u200b", "") == text, f"cell {index} holds other text than what was typed"
    page.keyboard.press("Escape")  # back to command mode, as after editing
