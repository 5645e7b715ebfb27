"""The grader's message catalogs: in step with the code, complete, and English where English is asked for."""
import string
import sys
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

from autograder import i18n
from autograder.demo.submissions import BUGS
from autograder.grading import feedback, root_causes
from autograder.grading.misconceptions import CATALOGUE
from catalogue.charge_once import parts
from tests.support.grading import grade_in_process
from tests.support.language import CJK

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import messages  # noqa: E402


def _entries(locale):
    with messages._po(locale).open("rb") as handle:
        return [m for m in read_po(handle, locale=locale) if m.id]


def _fields(text):
    return sorted(name for _, name, _, _ in string.Formatter().parse(text) if name is not None)


def test_the_catalogs_hold_every_message_of_the_code_and_no_other():
    assert messages.stale() == [], "run `make messages`"


def test_no_message_is_written_inside_an_f_string():
    """The extractor (Babel, on Python 3.11) reads an f-string as one token: a message written inside one
    never reaches the catalogs and shows untranslated (the English report's "无")."""
    import ast

    found = []
    root = Path(__file__).resolve().parents[1]
    for path in [*(root / "autograder").rglob("*.py"), *(root / "course").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.JoinedStr):
                found += [f"{path.name}:{call.lineno}" for call in ast.walk(node)
                          if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                          and call.func.id in ("_", "N_", "ngettext") and call.args
                          and isinstance(call.args[0], ast.Constant)]
    assert found == []


@pytest.mark.parametrize("locale", sorted(i18n.LOCALES.values()))
def test_every_message_has_a_translation_with_the_same_fields(locale):
    entries = _entries(locale)
    assert entries
    for message in entries:
        assert all(_forms(message.string)) and not message.fuzzy, f"{locale}: no translation of {message.id!r}"
        for form in _forms(message.string):  # every plural form has the id's fields
            assert _fields(form) == _fields(_forms(message.id)[0]), (locale, message.id, message.string)


def _forms(text):
    """A message's forms: one for a plain message, one per plural form for an `ngettext` one."""
    return list(text) if isinstance(text, (tuple, list)) else [text]


def test_english_translations_hold_no_chinese():
    for message in _entries("en"):
        assert not any(CJK.search(form) for form in _forms(message.string)), message.string


def test_plural_forms_follow_each_language():
    """`ngettext`: "1 hidden check", "2 hidden checks"; Chinese has one form."""
    with i18n.using("en"):
        assert [i18n.ngettext("{n} 项隐藏检查", "{n} 项隐藏检查", n).format(n=n) for n in (1, 2)] == [
            "1 hidden check", "2 hidden checks"]
    with i18n.using("zh"):
        assert i18n.ngettext("{n} 项隐藏检查", "{n} 项隐藏检查", 2).format(n=2) == "2 项隐藏检查"


def test_the_chinese_edition_shows_the_source_text():
    with i18n.using("zh"):
        assert i18n.gettext("全部通过") == "全部通过"


def test_an_unknown_language_is_refused():
    with pytest.raises(ValueError, match="no messages for language"), i18n.using("fr"):
        pass


def test_the_root_cause_summary_is_english_in_the_english_edition():
    causes = [{"code": code, "home": entry.home, "also": ["scaled_dot_product_attention", "device_dtype"],
               "lost": ["scaled_dot_product_attention"]} for code, entry in CATALOGUE.items()]
    labels = {c["home"]: c["home"] for c in causes}
    with i18n.using("en"):
        text = root_causes.render_text(causes, labels)
        html = root_causes.render_html(causes, labels)
    assert "Fix these first" in text and "It is also why" in html and "It also affects" in html
    assert not CJK.search(text) and not CJK.search(html)
    with i18n.using("zh"):
        assert "先修这里" in root_causes.render_text(causes, labels)


def test_the_feedback_of_every_one_bug_sample_is_english_in_the_english_edition():
    """Check titles, failures, examples and hints: every word the grader writes goes through the catalogs."""
    order = parts()
    with i18n.using("en"):
        for sample in BUGS:
            if sample.append or sample.edit is not None:
                continue
            results = grade_in_process(sample.replace, sample.name)
            text = root_causes.render_text(root_causes.root_causes(results, order), {})
            for part, result in results.items():
                text += feedback.render_text(part, result, result.max_points, result.points)
            assert not CJK.search(text), (sample.name, [line for line in text.splitlines() if CJK.search(line)])
