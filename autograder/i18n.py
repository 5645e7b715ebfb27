"""Student-facing messages in the assignment's language, from gettext catalogs that Babel manages.

The course's source language is Chinese (the source lesson is), so a message id is the Chinese text:
the `zh_CN` catalog starts as the ids themselves (a wording fix goes there, not into the code) and
the `en` catalog translates them.  Catalogs live in
``autograder/locale/<locale>/LC_MESSAGES/sdpa.po`` and are refreshed from the code with
``make messages`` (``pybabel extract`` / ``update``).  ``tests/test_messages.py`` fails when a message
id lacks a translation or the catalogs lag behind the code.

The language is a context variable: the trusted process sets it once per graded notebook
(`using`), from the assignment's edition, and every message built inside reads it.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Iterator
from pathlib import Path

DOMAIN = "sdpa"
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
# edition language (``notebook.editions.EDITIONS``) -> catalog locale; the source language needs none
LOCALES = {"zh": "zh_CN", "en": "en"}
SOURCE_LANGUAGE = "zh"

_language = contextvars.ContextVar("sdpa_language", default=SOURCE_LANGUAGE)


def language() -> str:
    return _language.get()


@contextlib.contextmanager
def using(lang: str) -> Iterator[None]:
    """Build messages in `lang` ("zh" or "en") inside this block."""
    if lang not in LOCALES:
        raise ValueError(f"no messages for language {lang!r}; known: {', '.join(LOCALES)}")
    token = _language.set(lang)
    try:
        yield
    finally:
        _language.reset(token)


def gettext(message: str) -> str:
    """`message` (a Chinese message id) in the current language; the id itself where no translation is."""
    return catalog(LOCALES[language()]).get(message) or message


def ngettext(singular: str, plural: str, n: int) -> str:
    """The form of a message for `n` things in the current language (``{n} hidden check`` / ``checks``):
    the catalog's plural rule picks it; the source language (Chinese) has one form."""
    forms, rule = plurals(LOCALES[language()])
    chosen = forms.get((singular, plural))
    if not chosen:
        return singular if n == 1 else plural
    return chosen[min(rule(n), len(chosen) - 1)] or (singular if n == 1 else plural)


def html_lang(lang: str = "") -> str:
    """The BCP 47 tag of `lang` (default: the current language) for a page's ``<html lang>``: zh -> zh-CN."""
    return LOCALES[lang or language()].replace("_", "-")


def N_(message: str) -> str:  # noqa: N802 - gettext's name for a marker that translates later
    """Mark a message kept as data (the misconception registry) for extraction; `gettext` it where shown."""
    return message


_ = gettext


@functools.lru_cache(maxsize=None)
def _read(locale: str):
    """One locale's catalog as Babel reads it (once per process)."""
    from babel.messages.pofile import read_po

    path = LOCALE_DIR / locale / "LC_MESSAGES" / f"{DOMAIN}.po"
    with path.open("rb") as handle:
        return read_po(handle, locale=locale)


@functools.lru_cache(maxsize=None)
def catalog(locale: str) -> dict:
    """{message id: translation} of one locale's catalog (fuzzy and empty entries left out)."""
    return {m.id: m.string for m in _read(locale) if m.id and m.string and not m.fuzzy and isinstance(m.id, str)}


@functools.lru_cache(maxsize=None)
def plurals(locale: str) -> tuple[dict, object]:
    """({(singular, plural): forms} of one locale's catalog, its plural rule: n -> index of the form)."""
    import gettext as stdlib_gettext

    entries = _read(locale)
    forms = {tuple(m.id): tuple(m.string) for m in entries if isinstance(m.id, (tuple, list)) and not m.fuzzy}
    return forms, stdlib_gettext.c2py(entries.plural_expr)
