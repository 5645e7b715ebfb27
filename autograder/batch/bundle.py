"""What a grading worker needs to grade this course anywhere, and file trees as plain data.

A bundle is the course's config, source and release plus a consistent
snapshot of the gradebook, so a worker (a local process, or a dask worker
on another machine) grades in a private course directory and never opens
the real one -- except, on the course's own host, the directory where the
course keeps its reference timings (``nbgrader/calibration_file.py``), which
the workers share.  Submissions and results travel as {relative path: (bytes, mode)}.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Union

from ..notebook.submission import files
from .coursedir import sqlite_path, step_dir

if TYPE_CHECKING:
    from nbgrader.apps.autogradeapp import AutogradeApp


def read_tree(top: Union[str, os.PathLike], ignore: Iterable[str] = ()) -> dict[str, tuple[bytes, int]]:
    """{relative path: (bytes, mode)} of the files under `top` (``notebook.submission.files``)."""
    out = {}
    for rel, path in files(top, ignore):
        with open(path, "rb") as f:
            out[rel] = (f.read(), os.stat(path).st_mode & 0o777)
    return out


def write_tree(top: Union[str, os.PathLike], files: Mapping[str, tuple[bytes, int]]) -> None:
    """Write a `read_tree` mapping under `top`; paths that would leave `top` are refused."""
    for rel, (data, mode) in files.items():
        parts = Path(rel).parts
        if os.path.isabs(rel) or ".." in parts or not parts:
            raise ValueError(f"refusing to write outside {top}: {rel!r}")
        path = os.path.join(top, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, mode or 0o644)


def snapshot_gradebook(db_path: Union[str, os.PathLike]) -> bytes:
    """A consistent copy of the sqlite gradebook, as bytes (sqlite's backup API)."""
    with tempfile.TemporaryDirectory(prefix="sdpa-gb-") as tmp:
        copy = os.path.join(tmp, "gradebook.db")
        src = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        dst = sqlite3.connect(copy)
        try:
            src.backup(dst)
        finally:
            dst.close()
            src.close()
        return Path(copy).read_bytes()


def make_bundle(app: AutogradeApp, assignment: str, nbgrader_args: Iterable[str] = ()) -> dict:
    """What a worker needs to grade this course anywhere: config, source, release, gradebook."""
    coursedir = app.coursedir
    root = coursedir.root
    files = {}
    config = os.path.join(root, "nbgrader_config.py")
    if os.path.exists(config):
        files["nbgrader_config.py"] = (Path(config).read_bytes(), 0o644)
    for step in (coursedir.source_directory, coursedir.release_directory):
        top = step_dir(coursedir, step, ".", assignment)
        for rel, item in read_tree(top, coursedir.ignore).items():
            files[os.path.relpath(os.path.join(top, rel), root)] = item
    gradebook = snapshot_gradebook(sqlite_path(coursedir.db_url))
    digest = hashlib.sha256(gradebook)
    for rel in sorted(files):
        digest.update(rel.encode() + files[rel][0])
    digest.update(json.dumps(list(nbgrader_args)).encode())
    return {"assignment": assignment, "files": files, "gradebook": gradebook, "nbgrader_args": list(nbgrader_args),
            "token": digest.hexdigest()[:16], "calibration": calibration_place(app)}


def calibration_place(app: AutogradeApp) -> dict:
    """Where this course keeps its reference timings, and on which host: workers on that host share them
    (``nbgrader/calibration_file.py``); a worker elsewhere measures in its private copy."""
    import socket

    from ..nbgrader import SandboxedExecute
    from ..nbgrader.calibration_file import default_directory

    directory = SandboxedExecute(parent=app).calibration_directory or default_directory(app)
    return {"directory": os.path.abspath(os.path.join(app.coursedir.root, directory)), "host": socket.gethostname()}

