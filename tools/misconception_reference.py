"""Write the table of misconception codes (``docs/design/misconceptions.md``) from the course's declarations.

Each code with the part where it lives, whether a composite that fails only
because of it keeps its points, and its explanation as an English-speaking
student reads it (the English catalog), so the page cannot drift from the course.
``tests/test_docs.py`` fails when the page is stale.

    python -m tools.misconception_reference          # write the table
    python -m tools.misconception_reference --check  # exit 1 when it is stale
"""
from __future__ import annotations

import sys
from pathlib import Path

from autograder.grading.misconceptions import CATALOGUE
from autograder.i18n import gettext, using

from . import generated_page

PAGE = Path(__file__).resolve().parents[1] / "docs" / "design" / "misconceptions.md"
BEGIN = "<!-- the codes: written by `python -m tools.misconception_reference` -->"
END = "<!-- end of the codes -->"


def table() -> str:
    rows = ["| code | where it lives | charged once | the mistake |", "|---|---|---|---|"]
    with using("en"):
        for m in CATALOGUE.values():
            explanation = gettext(m.explanation).replace("|", "\\|")
            rows.append(f"| `{m.code}` | `{m.home}` | {'yes' if m.composite_credit else ''} | {explanation} |")
    return "\n".join(rows)


def render(page: str) -> str:
    """`page` with the text between the markers replaced by the current table."""
    start, end = page.index(BEGIN) + len(BEGIN), page.index(END)
    return f"{page[:start]}\n{table()}\n{page[end:]}"


def main(argv=None) -> int:
    return generated_page.main("tools.misconception_reference", __doc__, PAGE, render(PAGE.read_text(encoding="utf-8")),
                               argv)


if __name__ == "__main__":
    sys.exit(main())
