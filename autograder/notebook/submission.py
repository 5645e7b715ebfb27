"""The rules a submission meets before it is graded: the same for stock ``nbgrader autograde`` and ``sdpa-course``.

A submission is the folder ``submitted/<student>/<assignment>/``.  Its files
are counted as both commands read them (regular files, links and the course's
ignore patterns left out), and a folder over `MAX_SUBMISSION_BYTES` is refused
before any of it is graded, with what to do: a notebook this large holds
outputs, not answers.  A notebook's name that is a folder is refused too.  Stock applies the rule in its first step
(``nbgrader/restore.py``), ``sdpa-course`` before it sends the files to a worker.
"""
from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Iterator
from typing import Union

MAX_SUBMISSION_BYTES = 64 * 2**20


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


def check_folder(top: Union[str, os.PathLike], ignore: Iterable[str], where: str) -> None:
    """A notebook name that is a folder is refused; then `check_size` of the files under `top`, counted as
    `files` lists them."""
    for entry in sorted(os.scandir(top), key=lambda e: e.name):
        if entry.name.endswith(".ipynb") and entry.is_dir(follow_symlinks=False):
            raise SubmissionRefused(
                f"{os.path.join(where, entry.name)} is a folder, not a notebook: put the student's notebook file "
                f"there in its place, and grade again")
    check_size(sum(os.path.getsize(path) for _rel, path in files(top, ignore)), where)
