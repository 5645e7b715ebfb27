"""The command line of a docs page written from the code: write it, or (``--check``) say that it is stale.

Used by ``tools.settings_reference`` and ``tools.misconception_reference``; ``tests/test_docs.py`` runs the
checks.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(module: str, doc: str, page: Path, fresh: str, argv=None) -> int:
    """Write `fresh` to `page`, or with ``--check`` exit 1 (writing nothing) when the page differs from it."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 when the page is stale, writing nothing")
    args = parser.parse_args(argv)
    if args.check:
        if not page.exists() or page.read_text(encoding="utf-8") != fresh:
            print(f"{page.relative_to(ROOT)} is stale: run `python -m {module}`", file=sys.stderr)
            return 1
        return 0
    page.write_text(fresh, encoding="utf-8")
    return 0
