"""Write the grading settings reference (``docs/instructor/settings.md``) from the traits' own help texts.

As nbgrader's ``autogen_config`` does for its options: every configurable trait of the course's nbgrader
steps, its type, default and help, so the page cannot drift from the code.  ``tests/test_docs.py`` fails
when the page is stale.

    python -m tools.settings_reference          # write the page
    python -m tools.settings_reference --check  # exit 1 when it is stale
"""
from __future__ import annotations

import sys
from pathlib import Path

from autograder.nbgrader.execute import SandboxedExecute
from autograder.nbgrader.trusted_scoring import TrustedScoring

from . import generated_page

PAGE = Path(__file__).resolve().parents[1] / "docs" / "instructor" / "settings.md"
CLASSES = (SandboxedExecute, TrustedScoring)
INTRO = """# Grading settings

Every setting of the course's grading steps, written from their help texts by
`python -m tools.settings_reference` (a test fails when this page is stale). Set them in
`nbgrader_config.py`, e.g. `c.SandboxedExecute.cell_timeout = 30` (`allow_unisolated` before
`configure(c)`), or for one command on its command line, e.g.
`nbgrader autograde sdpa --SandboxedExecute.cell_timeout=30` or
`sdpa-course autograde sdpa --SandboxedExecute.cell_timeout=30`.
"""


def render() -> str:
    parts = [INTRO]
    for cls in CLASSES:
        parts.append(f"## {cls.__name__}\n\n{(cls.__doc__ or '').strip().splitlines()[0]}\n")
        for name, trait in sorted(cls.class_traits(config=True).items()):
            if trait.this_class is not cls and name not in cls.__dict__:
                continue  # nbgrader's own traits of the base class
            default = trait.default_value
            parts.append(f"### `c.{cls.__name__}.{name}`\n\n{type(trait).__name__}, default `{default!r}`.\n\n"
                         f"{' '.join(trait.help.split())}\n")
    return "\n".join(parts)


def main(argv=None) -> int:
    return generated_page.main("tools.settings_reference", __doc__, PAGE, render(), argv)


if __name__ == "__main__":
    sys.exit(main())
