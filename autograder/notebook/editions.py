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


# Notebook metadata key the course writes into every edition's notebooks: {"edition": assignment}.
METADATA_KEY = "sdpa_course"


def declared_edition(metadata) -> Optional[str]:
    """The edition a notebook's own metadata names (what the course released it as), or None."""
    declared = metadata.get(METADATA_KEY) if hasattr(metadata, "get") else None
    edition = declared.get("edition") if hasattr(declared, "get") else None
    return edition if isinstance(edition, str) and edition in EDITIONS else None


def misplaced(metadata, assignment: Optional[str], filename: str) -> Optional[str]:
    """What to do with a notebook graded as `assignment` whose metadata names another edition (an English
    notebook renamed and put in the Chinese folder, say); None when it is where it belongs, or says nothing."""
    declared = declared_edition(metadata)
    if declared is None or assignment not in EDITIONS or declared == assignment:
        return None
    return (f"{filename} is the {declared} edition's notebook (its metadata says so), submitted as {assignment}: "
            f"{move_to(declared, f'{declared}.ipynb')}")


def move_to(edition: str, target: str) -> str:
    """The instruction for a notebook of `edition` found in another edition's folder (`target`: where in the
    student's folder of that edition it goes)."""
    return f"move it to submitted/<student>/{edition}/{target} and grade it as {edition}"


def edition_of(notebook: str) -> Optional[str]:
    """The edition a notebook file is named after (``.../sdpa_en.ipynb`` -> ``sdpa_en``), or None."""
    stem = PurePath(notebook).stem
    return stem if stem in EDITIONS else None
