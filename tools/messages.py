"""Refresh the grader's message catalogs from the code (``make messages``).

Babel extracts every ``_()`` / ``N_()`` message id of ``autograder/`` and ``course/`` (``babel.cfg``), and this
script the hidden checks' titles (their docstrings' first lines), into
``autograder/locale/sdpa.pot`` and updates each locale's ``sdpa.po`` from it: new ids arrive
untranslated, ids no longer in the code are dropped.  The Chinese catalog starts each new id as
itself (the ids are the Chinese source text); the English one needs a translator, and
``tests/test_messages.py`` fails until every id has one.

    python -m tools.messages          # refresh the catalogs
    python -m tools.messages --check  # exit 1, listing what is stale, without writing
"""
from __future__ import annotations

import argparse
import ast
import copy
import io
import sys
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po, write_po

from autograder.i18n import DOMAIN, LOCALE_DIR, LOCALES, SOURCE_LANGUAGE

ROOT = Path(__file__).resolve().parents[1]

TEMPLATE = LOCALE_DIR / f"{DOMAIN}.pot"
CHECKS = ROOT / "course" / "checks"
HEADER = "Messages of the sdpa course's grader: check titles, failures, misconceptions, feedback pages."


def extracted() -> Catalog:
    """Every message id in the code, as Babel extracts it (``babel.cfg`` says where)."""
    template = Catalog(project="sdpa-course", header_comment=f"# {HEADER}", fuzzy=False)
    method_map, options_map = _mapping()
    for _filename, _lineno, message, comments, _context in extract_from_dir(
            str(ROOT), method_map, options_map, keywords={"_": None, "N_": None, "ngettext": (1, 2)}):
        template.add(message, auto_comments=comments)
    for title in check_titles():
        template.add(title, auto_comments=["a hidden check's title: the first line of its docstring"])
    return template


def check_titles() -> list[str]:
    """The hidden checks' titles, which Babel does not extract: the first line of each check's docstring,
    as ``hidden_checks`` reads it from the function."""
    titles = []
    for path in sorted(CHECKS.glob("test_*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                doc = ast.get_docstring(node, clean=False)
                if doc and doc.strip():
                    titles.append(doc.strip().splitlines()[0])
    return titles


def _mapping():
    from babel.messages.frontend import parse_mapping_cfg

    with (ROOT / "babel.cfg").open() as handle:
        return parse_mapping_cfg(handle)


def updated(template: Catalog, locale: str) -> Catalog:
    """`locale`'s catalog brought in line with `template` (translations kept where the id is unchanged)."""
    path = _po(locale)
    if path.exists():
        with path.open("rb") as handle:
            catalog = read_po(handle, locale=locale)
    else:
        catalog = Catalog(locale=locale, project="sdpa-course", header_comment=f"# {HEADER}", fuzzy=False)
    catalog.update(copy.deepcopy(template), no_fuzzy_matching=True)  # update shares the template's messages
    catalog.obsolete.clear()
    if LOCALES[SOURCE_LANGUAGE] == locale:
        for message in catalog:
            if message.id and not any(message.string if message.pluralizable else [message.string]):
                # Chinese has one form: the singular id
                message.string = (message.id[0],) if message.pluralizable else message.id
    return catalog


def _po(locale: str) -> Path:
    return LOCALE_DIR / locale / "LC_MESSAGES" / f"{DOMAIN}.po"


def _text(catalog: Catalog) -> bytes:
    out = io.BytesIO()
    write_po(out, catalog, width=100, omit_header=False, sort_output=True, ignore_obsolete=True,
             include_previous=False, include_lineno=False)
    return out.getvalue()


def stale() -> list[Path]:
    """The catalog files that `refresh` would change."""
    template = extracted()
    files = {TEMPLATE: _text(template)} | {_po(loc): _text(updated(template, loc)) for loc in LOCALES.values()}
    return [path for path, text in files.items() if not path.exists() or _strip_dates(path.read_bytes())
            != _strip_dates(text)]


def refresh() -> None:
    template = extracted()
    TEMPLATE.parent.mkdir(parents=True, exist_ok=True)
    TEMPLATE.write_bytes(_text(template))
    for locale in LOCALES.values():
        path = _po(locale)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_text(updated(template, locale)))


def _strip_dates(text: bytes) -> bytes:
    """The catalogs without their creation and revision dates, which change on every run."""
    return b"\n".join(line for line in text.splitlines() if not line.startswith((b'"POT-Creation-Date',
                                                                                    b'"PO-Revision-Date')))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="list stale catalogs and exit 1, writing nothing")
    args = parser.parse_args(argv)
    if args.check:
        paths = stale()
        for path in paths:
            print(f"stale: {path.relative_to(ROOT)} (run `make messages`)")
        return 1 if paths else 0
    refresh()
    return 0


if __name__ == "__main__":
    sys.exit(main())
