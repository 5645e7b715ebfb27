"""axe-core (from npm, pinned in ``tests/support/axe/package.json``) run on a page in Chromium.

`audit` injects axe into the page and returns the violations of impact "serious" or "critical", each
with the rule, its help text and the first few elements it found, so a failing test says what to fix.
"""
import json
from pathlib import Path

AXE = Path(__file__).resolve().parent / "axe" / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING = ("serious", "critical")
# WCAG 2.1 A and AA, as the course's pages promise; best practices (landmarks, region) are reported too
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]


def available() -> bool:
    return AXE.exists()


def audit(page, include=(), exclude=()) -> list[dict]:
    """The serious and critical violations on `page`: within the CSS selectors `include` (all of it if none),
    leaving out what `exclude` selects."""
    if not page.evaluate("typeof axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    context = None
    if include or exclude:
        context = {"include": [[s] for s in include] or [["html"]], "exclude": [[s] for s in exclude]}
    result = page.evaluate(
        """([context, tags]) => axe.run(context || document, {runOnly: {type: 'tag', values: tags},
                                                             resultTypes: ['violations']})""",
        [context, TAGS])
    return [{"rule": v["id"], "impact": v["impact"], "help": v["help"],
             "nodes": [n["target"] for n in v["nodes"][:5]], "count": len(v["nodes"])}
            for v in result["violations"] if v["impact"] in BLOCKING]


def summary(violations: list[dict]) -> str:
    """One line per violation, for an assertion message."""
    return "\n".join(json.dumps(v, ensure_ascii=False) for v in violations) or "none"


def write(results: dict, path: Path) -> None:
    """The audits of a test module, {page: violations}, saved for the closing note (.artifacts/)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
