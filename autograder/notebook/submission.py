"""The rules a submission meets before it is graded: the same for stock ``nbgrader autograde`` and ``sdpa-course``.

A submission is the folder ``submitted/<student>/<assignment>/``.  Its files
are counted as both commands read them (regular files, links and the course's
ignore patterns left out), and a folder over `MAX_SUBMISSION_BYTES` is refused
before any of it is graded, with what to do: a notebook this large holds
outputs, not answers.  A notebook's name that is a folder is refused too, and so is a notebook whose JSON holds
more than `MAX_JSON_CONTAINERS` objects and arrays: every grading step copies the notebook, and 16 MiB of empty
objects in its metadata held a grading at 9 GiB for 80 s (64 MiB would have needed four times that).  A cell's tags
must be at most `MAX_CELL_TAGS` strings: nbformat's validation compares tags pairwise when they mix types (40,000
mixed tags in one cell held a check's grader for 10 minutes).  Stock applies
the notebook rules before nbconvert reads a notebook (``nbgrader/submission_exporter.py``) and the folder's size in
its first step (``nbgrader/restore.py``); ``sdpa-course`` applies all of them before it sends the files to a worker.
"""
from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Iterable, Iterator
from typing import Optional, Union

MAX_SUBMISSION_BYTES = 64 * 2**20
# A released notebook holds under 500 JSON objects and arrays; outputs add a few per cell (their text and images
# are strings).
MAX_JSON_CONTAINERS = 100_000
# Tags in one cell's metadata (JupyterLab's own tags are a handful; the release uses none).
MAX_CELL_TAGS = 100
# A JSON string, or an unterminated one up to the end: every match attempt that starts succeeds, so the scan is
# linear (a pattern that could fail at the end was retried from every quote: quadratic; a red-team body of a
# quote and 40,000 escaped quotes took 18 s).
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)


class SubmissionRefused(Exception):
    """A submission that breaks a rule; its message says which, and what to do."""


def files(top: Union[str, os.PathLike], ignore: Iterable[str] = ()) -> Iterator[tuple[str, str]]:
    """(path relative to `top`, path) of each regular file under `top`, in a stable order, skipping names that
    match `ignore` (folders too) and symbolic links."""
    patterns = tuple(ignore)
    for dirname, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if not _ignored(d, patterns))
        for name in sorted(filenames):
            path = os.path.join(dirname, name)
            if _ignored(name, patterns) or os.path.islink(path) or not os.path.isfile(path):
                continue
            yield os.path.relpath(path, top), path


def _ignored(name: str, patterns: tuple) -> bool:
    return any(fnmatch.fnmatch(name, p) for p in patterns)


def check_size(size: int, where: str) -> None:
    """Refuse a submission of `size` bytes over the limit; `where` is its folder, as the instructor sees it."""
    if size > MAX_SUBMISSION_BYTES:
        raise SubmissionRefused(
            f"the submission in {where} is {size / 2**20:.0f} MiB, over the {MAX_SUBMISSION_BYTES // 2**20} MiB a "
            f"submission may hold: a notebook this large holds outputs, not answers. Clear its outputs (JupyterLab: "
            f"Edit > Clear Outputs of All Cells, then save), put it back in {where}, and grade again")


def json_containers(data: bytes) -> int:
    """The JSON objects and arrays in `data` (an upper bound where it is not valid JSON), counted without parsing
    it: the brackets left once every string is taken out."""
    outside = _JSON_STRING.sub(b"", data)
    return outside.count(b"{") + outside.count(b"[")


def check_notebook(path: Union[str, os.PathLike], where: str) -> None:
    """The rules for one notebook file, before anything reads it as a notebook: not a folder, within the size,
    within `MAX_JSON_CONTAINERS`.  `where` names it as the instructor sees it."""
    if os.path.isdir(path):
        raise SubmissionRefused(f"{where} is a folder, not a notebook: put the student's notebook file there in its "
                                f"place, and grade again")
    check_size(os.path.getsize(path), os.path.dirname(where) or where)
    with open(path, "rb") as f:
        data = f.read()
    count = json_containers(data)
    if count > MAX_JSON_CONTAINERS:
        raise SubmissionRefused(
            f"{where} holds {count:,} JSON objects and arrays, over the {MAX_JSON_CONTAINERS:,} a notebook may hold "
            f"(the released one has under 500): something filled its metadata or outputs. Open it in JupyterLab, "
            f"clear its outputs (Edit > Clear Outputs of All Cells), remove the added metadata (Property Inspector), "
            f"save, put it back in {os.path.dirname(where) or where}, and grade again")
    try:
        notebook = json.loads(data)  # bounded now: at most MAX_JSON_CONTAINERS objects and arrays
    except (ValueError, RecursionError):
        return  # not JSON: the grading's first step says so, as for any notebook it cannot read
    cell = cell_with_bad_tags(notebook)
    if cell is not None:
        raise SubmissionRefused(
            f"cell {cell} of {where} has tags that are not a list of at most {MAX_CELL_TAGS} strings: remove them "
            f"(JupyterLab: Property Inspector > Cell Tags), save, put the notebook back in "
            f"{os.path.dirname(where) or where}, and grade again")


def cell_with_bad_tags(notebook: object) -> Optional[int]:
    """The number (from 1) of the first cell whose metadata's tags are not a list of at most `MAX_CELL_TAGS`
    strings, or None.  Cells of nbformat 3 (under "worksheets") are read too: nbformat upgrades them."""
    if not isinstance(notebook, dict):
        return None
    cells = notebook.get("cells") if isinstance(notebook.get("cells"), list) else [
        cell for sheet in notebook.get("worksheets") or [] if isinstance(sheet, dict)
        for cell in (sheet.get("cells") if isinstance(sheet.get("cells"), list) else [])]
    for number, cell in enumerate(cells, 1):
        metadata = cell.get("metadata") if isinstance(cell, dict) else None
        tags = metadata.get("tags") if isinstance(metadata, dict) else None
        if tags is not None and (not isinstance(tags, list) or len(tags) > MAX_CELL_TAGS
                                 or not all(isinstance(tag, str) for tag in tags)):
            return number
    return None


def check_folder(top: Union[str, os.PathLike], ignore: Iterable[str], where: str) -> None:
    """`check_notebook` for each notebook in `top` (a name that is a folder too); then `check_size` of the files
    under `top`, counted as `files` lists them."""
    for entry in sorted(os.scandir(top), key=lambda e: e.name):
        if entry.name.endswith(".ipynb") and not entry.is_symlink():
            check_notebook(entry.path, os.path.join(where, entry.name))
    check_size(sum(os.path.getsize(path) for _rel, path in files(top, ignore)), where)
