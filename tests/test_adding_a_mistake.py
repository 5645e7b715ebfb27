"""The guide proves itself: a new misconception added by `docs/contributing/extending.md`'s steps, on a copy of
the course, is named, charged in its home part only through stock nbgrader, and told apart from every other; a
new one the checks cannot tell apart from an older one fails with a message that says so.

The code the test adds is the guide's own: its snippets are read from the page.
"""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

from autograder.demo import course
from autograder.demo.submissions import Sample
from tests.support.grading import FAST_LIMITS, grading_report
from tools import messages

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "contributing" / "extending.md"
NEW = "scale-by-key-count"
# Dividing by 2·sqrt(d_k) is dividing by d_k where d_k = 4 (the hand case): the checks cannot tell it from
# scale-by-dk there.
CLASHING = "scale-by-two-root-dk"
ENGLISH = {"缩放用的是 Key 的个数 S（scores 的最后一维），而不是参数 d_k。":
           "The scaling uses the number of keys S (the scores' last dimension) instead of the d_k argument.",
           "用参数 d_k：scores / math.sqrt(d_k)。": "Use the d_k argument: scores / math.sqrt(d_k).",
           "分数除以了 2·sqrt(d_k)。": "The scores are divided by 2·sqrt(d_k).",
           "只除以 sqrt(d_k)。": "Divide by sqrt(d_k) only."}


def _guide_snippets() -> list[str]:
    """The python blocks of the guide's section on adding a misconception, unindented."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text[text.index("## Adding a misconception"):text.index("## Messages and their translations")]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return ["\n".join(line[3:] if line.startswith("   ") else line for line in block.splitlines()) + "\n"
            for block in blocks]


def _declare(module: Path, mistake: str, variant: str, code: str) -> None:
    """Steps 1 and 2 of the guide in `module` (course/scale_scores.py): the mistake, its model, its code in
    `models`."""
    text = module.read_text(encoding="utf-8")
    for anchor in ('    return {"scale-missing": [lambda: scores],', '                   models=("scale-missing",',
                   "\nMISTAKES = (\n"):
        assert text.count(anchor) == 1, f"{module.name} no longer has {anchor!r}: update this test and the guide"
    text = text.replace('    return {"scale-missing": [lambda: scores],',
                        '    return {"scale-missing": [lambda: scores], ' + variant.strip())
    models = '                   models=("scale-missing",'
    text = text.replace(models, f'{models} "{code}",')
    # (inside the parentheses a line may start anywhere; the honest source must keep its own indentation)
    text = text.replace("\nMISTAKES = (\n", "\nMISTAKES = (\n" + mistake.strip("\n") + "\n")
    module.write_text(text, encoding="utf-8")


def _translate(root: Path) -> None:
    """Step 3: `make messages` in the copy, then the English of the new ids."""
    run = subprocess.run([sys.executable, "-m", "tools.messages"], cwd=root, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    po = root / "autograder" / "locale" / "en" / "LC_MESSAGES" / "sdpa.po"
    with po.open("rb") as handle:
        catalog = read_po(handle, locale="en")
    for message in catalog:
        if message.id and not message.string:
            assert message.id in ENGLISH, f"an id this test did not add arrived untranslated: {message.id!r}"
            message.string = ENGLISH[message.id]
    po.write_bytes(messages._text(catalog))  # written as `make messages` writes it


def _stands(root: Path, code: str) -> subprocess.CompletedProcess:
    """Step 4: `python -m catalogue mistake CODE` in the copy."""
    return subprocess.run([sys.executable, "-m", "catalogue", "mistake", code], cwd=root, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    root = course.make_course(tmp_path_factory.mktemp("adding") / "course")
    shutil.copytree(ROOT / "catalogue", root / "catalogue", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "babel.cfg", root / "babel.cfg")  # where `make messages` looks for message ids
    return root


def test_the_guide_shows_a_declaration_and_a_model():
    mistake, variant = _guide_snippets()
    assert f'Mistake("{NEW}"' in mistake and "honest=Honest(" in mistake
    assert variant.strip().startswith(f'"{NEW}":')


def test_a_mistake_added_by_the_guide_is_named_and_charged_in_its_home_part_only(copy):
    mistake, variant = _guide_snippets()
    _declare(copy / "course" / "scale_scores.py", mistake, variant, NEW)
    _translate(copy)
    stands = _stands(copy, NEW)
    assert stands.returncode == 0, stands.stdout + stands.stderr
    source = re.search(r'"""\n(def scale_scores.*?)"""', mistake, flags=re.S)[1]
    sample = Sample(f"bug-{NEW}", "bug", "partial", {"scale_scores": "\n" + source}, codes=(NEW,))
    grades, _seconds, autograde, _feedback = course.grade_samples(copy, [sample], *FAST_LIMITS)
    cells = grades.get(sample.name)
    assert cells, autograde.stderr[-3000:]
    lost = {cell for cell, (score, top) in cells.items() if score is None or score < top}
    assert lost == {"scale_scores-check"}, lost
    report = grading_report(copy, sample.name)
    named = {code for cell in report["cells"] for check in cell["checks"] for code in check["codes"]}
    assert named == {NEW}, named
    assert f"[{NEW}]" in course.feedback_html(copy, sample.name).read_text(encoding="utf-8")


def test_a_mistake_the_checks_cannot_tell_from_an_older_one_fails_with_a_message_that_says_so(copy):
    mistake = f'''Mistake("{CLASHING}", N_("分数除以了 2·sqrt(d_k)。"), N_("只除以 sqrt(d_k)。"),
        composite_credit=True, honest=Honest("scale_scores", """
def scale_scores(scores, d_k):
    return scores / (2 * math.sqrt(d_k))
""")),'''
    _declare(copy / "course" / "scale_scores.py", mistake,
             f'"{CLASHING}": [lambda: scores / (2 * math.sqrt(d_k))],', CLASHING)
    _translate(copy)
    stands = _stands(copy, CLASHING)
    assert stands.returncode == 1, stands.stdout + stands.stderr
    assert "also diagnosed as 'scale-by-dk'" in stands.stdout and "cannot tell them apart" in stands.stdout, \
        stands.stdout
