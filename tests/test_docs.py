"""The docs (README.md, docs/) stay true to the code: codes, points, code map, paths and links."""
import json
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
SOURCE = ROOT / "source" / "sdpa" / "sdpa.ipynb"
PACKAGE = ROOT / "autograder"
COURSE = ROOT / "course"
CHECKS = COURSE / "checks"
MISCONCEPTIONS_PAGE = DOCS / "design" / "misconceptions.md"
POINTS_PAGE = DOCS / "instructor" / "grading.md"
CODE_MAP_PAGE = DOCS / "contributing" / "code-map.md"
README_MAX_LINES = 150

PAGES = sorted(DOCS.rglob("*.md"))
MARKDOWN = [README, *PAGES]
# Top-level entries of the repository whose paths the docs may name in backticks.
REPO_DIRS = ("autograder", "assignments", "benchmarks", "catalogue", "course", "docs", "hub", "solutions", "source",
             "tests", "tools", ".ci")
REPO_FILES = (".importlinter", "Makefile", "README.md", "mkdocs.yml", "nbgrader_config.py", "pyproject.toml")
# Named in the docs, made by a command rather than committed.
GENERATED = ("hub/node_modules",)
CODE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _table_rows(text: str, header: str) -> list[list[str]]:
    """The body rows of the first markdown table whose header row starts with `header`, as cells."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines)
                  if line.startswith("|") and line.strip("| ").startswith(header)), None)
    assert start is not None, f"no table with a header starting {header!r}"
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _unquote(cell: str) -> str:
    return cell.strip().strip("`").strip()


def test_misconception_codes_are_the_registry():
    """docs/design/misconceptions.md lists every code once, as `python -m tools.misconception_reference` writes it
    from the course's declarations."""
    from autograder.grading.misconceptions import CATALOGUE
    from tools import misconception_reference

    text = MISCONCEPTIONS_PAGE.read_text()
    listed = [_unquote(row[0]) for row in _table_rows(text, "code")]
    duplicates = sorted({code for code in listed if listed.count(code) > 1})
    assert not duplicates, f"listed twice in {MISCONCEPTIONS_PAGE.name}: {duplicates}"
    registry = {m.code for m in CATALOGUE.values()}
    missing, unknown = sorted(registry - set(listed)), sorted(set(listed) - registry)
    assert not missing and not unknown, (
        f"{MISCONCEPTIONS_PAGE.relative_to(ROOT)} is out of date: add {missing}, remove {unknown}")
    assert misconception_reference.render(text) == text, (
        f"{MISCONCEPTIONS_PAGE.relative_to(ROOT)} is stale: run `python -m tools.misconception_reference`")


def _notebook_points() -> dict[str, float]:
    """{grade_id: points} of every graded cell of the source notebook, read from its JSON."""
    cells = json.loads(SOURCE.read_text())["cells"]
    meta = [cell.get("metadata", {}).get("nbgrader", {}) for cell in cells]
    return {m["grade_id"]: float(m["points"]) for m in meta if m.get("grade") and "points" in m}


def _manual_ids() -> set[str]:
    cells = json.loads(SOURCE.read_text())["cells"]
    meta = [cell.get("metadata", {}).get("nbgrader", {}) for cell in cells]
    return {m["grade_id"] for m in meta if m.get("grade") and m.get("solution")}


def test_points_table_is_the_source_notebook():
    text = POINTS_PAGE.read_text()
    listed = {}
    for row in _table_rows(text, "grade_id"):
        grade_id = _unquote(row[0])
        assert grade_id not in listed, f"{grade_id} listed twice"
        listed[grade_id] = float(row[-1])
    notebook = _notebook_points()
    differ = {k: (listed.get(k), notebook.get(k)) for k in sorted(set(listed) | set(notebook))
              if listed.get(k) != notebook.get(k)}
    assert not differ, (f"the points table of {POINTS_PAGE.relative_to(ROOT)} differs from the source notebook "
                        f"(`make notebooks` writes it), "
                        f"grade_id: (docs, notebook): {differ}")
    total = re.search(r"Total: ([\d.]+) points, ([\d.]+) of them automatic", text)
    assert total, "the points page states no total"
    automatic = sum(p for g, p in notebook.items() if g not in _manual_ids())
    assert (float(total[1]), float(total[2])) == (sum(notebook.values()), automatic)


def _modules() -> set[str]:
    """Every module of the engine and the course the code map must name: each .py but the engine's
    __init__.py files; the checks as a whole."""
    return {p.relative_to(ROOT).as_posix() for p in [*PACKAGE.rglob("*.py"), *COURSE.rglob("*.py")]
            if (p.name != "__init__.py" or p.parent == COURSE) and CHECKS not in p.parents
            and "__pycache__" not in p.parts}


def test_code_map_names_every_module():
    named = {_unquote(token).rstrip("/") for token in CODE.findall(CODE_MAP_PAGE.read_text())}
    missing = sorted(_modules() - named)
    assert not missing, f"{CODE_MAP_PAGE.relative_to(ROOT)} does not name: {missing}"
    assert CHECKS.relative_to(ROOT).as_posix() in named, "the code map does not name the checks directory"


def _repo_paths(text: str) -> list[str]:
    """Backticked tokens that name a path of this repository (placeholders and globs left out)."""
    paths = []
    for token in CODE.findall(text):
        token = token.strip()
        if any(c in token for c in "<>*{} ") or "://" in token:
            continue
        head = token.split("/", 1)[0]
        if (head in REPO_DIRS and "/" in token) or token in REPO_FILES:
            paths.append(token)
    return paths


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_path_named_exists(page):
    missing = [p for p in _repo_paths(page.read_text())
               if not (ROOT / p).exists() and not p.rstrip("/").startswith(GENERATED)]
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_readme_is_short():
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines, at most {README_MAX_LINES}: move detail to docs/"


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page):
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    broken = []
    for target in LINK.findall(text):
        parts = urlsplit(target)
        if parts.scheme or parts.netloc or not parts.path:
            continue  # a URL, or an anchor on the same page
        if not (page.parent / unquote(parts.path)).exists():
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)} links to files that do not exist: {broken}"


def test_every_page_is_in_the_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    listed = set(re.findall(r":\s*([\w/.-]+\.md)\s*$", nav, flags=re.M))
    pages = {p.relative_to(DOCS).as_posix() for p in PAGES}
    assert listed == pages, f"mkdocs.yml nav: missing {sorted(pages - listed)}, unknown {sorted(listed - pages)}"


def test_settings_page_is_every_trait_from_its_help_text():
    """docs/instructor/settings.md is what `python -m tools.settings_reference` writes: every configurable trait
    of the grading steps, with its default and help (as nbgrader's autogen_config does)."""
    import subprocess
    import sys

    from autograder.nbgrader.execute import SandboxedExecute
    from autograder.nbgrader.trusted_scoring import TrustedScoring

    page = (DOCS / "instructor" / "settings.md").read_text(encoding="utf-8")
    for cls in (SandboxedExecute, TrustedScoring):
        for name in cls.class_own_traits(config=True):
            assert f"`c.{cls.__name__}.{name}`" in page, f"settings.md does not list {cls.__name__}.{name}"
    stale = subprocess.run([sys.executable, "-m", "tools.settings_reference", "--check"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert stale.returncode == 0, stale.stderr


def test_charge_once_table_is_what_the_checks_give():
    """docs/design/charging.md's table of points lost, strict and charged once, is what the hidden checks give now
    (a check added or reweighted changes it; `python -m catalogue charge-once --write-doc` rewrites it)."""
    import subprocess
    import sys

    stale = subprocess.run([sys.executable, "-m", "catalogue", "charge-once", "--check-doc"], cwd=ROOT,
                           capture_output=True, text=True, timeout=900)
    assert stale.returncode == 0, stale.stderr[-2000:]
