"""The course's editions: one lesson, one nbgrader assignment per language.

Every edition has the same cells, grade ids, points and hidden checks; only
the language of the lesson differs (the lessons are ``lesson/sdpa.<language>.md``).
Grading draws its random inputs from the course's name, not the edition's,
so the same code gets the same tensors, and the same score, in every edition.
"""
from __future__ import annotations

from pathlib import PurePath
from typing import Optional

COURSE = "sdpa"
# assignment name -> language of its lesson; the first is the default assignment of the commands
EDITIONS = {"sdpa": "zh", "sdpa_en": "en"}


def language_of(assignment: Optional[str]) -> str:
    """The language an assignment's feedback is written in: its edition's, else the course's own."""
    return EDITIONS.get(assignment, EDITIONS[COURSE])


def lesson_file(assignment: str) -> str:
    """The lesson's path, relative to the course root."""
    return f"lesson/{COURSE}.{EDITIONS[assignment]}.md"


def seed_assignment(assignment: str) -> str:
    """The assignment name that grading seeds are drawn from: the course's for every edition."""
    return COURSE if assignment in EDITIONS else assignment


def edition_of(notebook: str) -> Optional[str]:
    """The edition a notebook file is named after (``.../sdpa_en.ipynb`` -> ``sdpa_en``), or None."""
    stem = PurePath(notebook).stem
    return stem if stem in EDITIONS else None
