"""``nbgrader collect`` through the course's SafeCollect (``autograder/nbgrader/safe_collect.py``), on an exchange
in a temporary folder, as the user running the tests (the owner checks between two users are
``tests/test_exchange_flow.py``'s, on the hub's Unix users).  What a student can put in the shared inbox is refused
one line at a time, and the rest of the class is collected."""
import getpass
import os
import shutil
import time
from datetime import datetime, timedelta, timezone

import pytest

from autograder.demo import course

ME = getpass.getuser()
FORMAT = "%Y-%m-%d %H:%M:%S.%f UTC"


@pytest.fixture
def exchange(released, tmp_path):
    root = tmp_path / "course"
    shutil.copytree(released, root)
    exchange = tmp_path / "exchange"
    course.nbgrader(root, "release_assignment", "sdpa", f"--Exchange.root={exchange}", "--course=sdpa-course")
    inbound = exchange / "sdpa-course" / "inbound"
    inbound.mkdir(parents=True, exist_ok=True)
    return root, exchange, inbound


def _submission(inbound, when, tag, notebook=b'{"cells": []}'):
    folder = inbound / f"{ME}+sdpa+{when.strftime(FORMAT)}+{tag}"
    folder.mkdir()
    (folder / "sdpa.ipynb").write_bytes(notebook)
    (folder / "timestamp.txt").write_text(when.strftime(FORMAT))
    return folder


def _collect(root, exchange, *extra):
    return course.nbgrader(root, "collect", "sdpa", f"--Exchange.root={exchange}", "--course=sdpa-course",
                           "--update", *extra, check=False)


def test_only_the_students_own_regular_files_are_collected(exchange, tmp_path):
    root, exchange, inbound = exchange
    secret = tmp_path / "instructor"
    secret.mkdir()
    (secret / "sdpa.ipynb").write_text("SOLUTION")
    now = datetime.now(timezone.utc)
    mine = _submission(inbound, now - timedelta(days=3), "backdated", b'{"mine": true}')  # named 3 days ago
    os.symlink(secret / "sdpa.ipynb", mine / "leak.html")
    os.symlink("/dev/zero", mine / "zero.bin")
    os.mkfifo(mine / "pipe")
    # later names that must lose to it: a link to the instructor's folder, a time in the future
    os.symlink(secret, inbound / f"{ME}+sdpa+{(now - timedelta(days=1)).strftime(FORMAT)}+link")
    _submission(inbound, now + timedelta(days=365), "future")
    # and names a student can plant by the thousand: none stops the class, none costs more than a listing
    for n in range(3000):
        (inbound / f"x{n}+sdpa+notadate").touch()
    (inbound / "y+sdpa+9999-12-31 23:59:59 -0100").touch()
    started = time.monotonic()
    proc = _collect(root, exchange)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert time.monotonic() - started < 60
    said = proc.stderr
    assert said.count("(its time cannot be read)") == 3001 and "is dated in the future" in said, said[-2000:]
    assert "+link is not a folder" in said and "leak.html (a link)" in said and "pipe (not a regular file)" in said
    got = root / "submitted" / ME / "sdpa"
    assert (got / "sdpa.ipynb").read_bytes() == b'{"mine": true}'
    assert sorted(p.name for p in got.iterdir()) == ["sdpa.ipynb", "timestamp.txt"]
    # the folder was made just now: its change time, not the name's, is the submission's time
    collected_at = datetime.strptime((got / "timestamp.txt").read_text(), FORMAT).replace(tzinfo=timezone.utc)
    assert abs(collected_at - now) < timedelta(minutes=2) and "collected as submitted then" in said
    # a newer submission of the student's replaces it (collect --update compares the two times)
    _submission(inbound, datetime.now(timezone.utc), "newer", b'{"newer": true}')
    again = _collect(root, exchange)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (got / "sdpa.ipynb").read_bytes() == b'{"newer": true}'


def test_a_submission_over_the_size_limit_is_not_read_to_its_end(exchange):
    """Found by a red-team pass: a sparse file of 3 GiB (4 KiB of the student's disk) was written out in full
    before stock's size check refused it."""
    root, exchange, inbound = exchange
    folder = _submission(inbound, datetime.now(timezone.utc) - timedelta(minutes=1), "sparse")
    with open(folder / "big.bin", "wb") as f:
        f.truncate(64 * 2**30)  # 64 GiB, none of it on disk
    started = time.monotonic()
    proc = _collect(root, exchange, "--CourseDirectory.max_dir_size=5000", "--CourseDirectory.max_file_size=100000")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "is larger than 5000 kB (max_dir_size)" in proc.stderr, proc.stderr[-2000:]
    assert time.monotonic() - started < 60 and not (root / "submitted" / ME / "sdpa" / "big.bin").exists()


def test_a_notebook_rewritten_after_its_submission_is_dated_when_it_was_rewritten(exchange):
    """Found by a red-team pass: a notebook rewritten in place in the student's inbox folder after the due date
    changed the file, not the folder, and was collected with the on-time name's time (no late penalty).  The
    latest change time of anything collected dates the submission; an untouched one keeps its name's time."""
    root, exchange, inbound = exchange
    named = datetime.now(timezone.utc)
    folder = _submission(inbound, named, "rewritten", b'{"on time": true}')
    time.sleep(2.5)
    with open(folder / "sdpa.ipynb", "r+b") as f:  # the same file: its folder does not change
        f.truncate(0)
        f.write(b'{"after the due date": true}')
    rewritten = datetime.fromtimestamp(os.stat(folder / "sdpa.ipynb").st_ctime, timezone.utc)
    proc = _collect(root, exchange, "--SafeCollect.clock_skew_seconds=1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = root / "submitted" / ME / "sdpa"
    collected_at = datetime.strptime((got / "timestamp.txt").read_text(), FORMAT).replace(tzinfo=timezone.utc)
    assert abs(collected_at - rewritten) < timedelta(seconds=0.01), (collected_at, rewritten, named)
    assert "but sdpa.ipynb last changed at" in proc.stderr, proc.stderr[-2000:]
    # one nobody touched after it was made keeps the time in its name
    honest = datetime.now(timezone.utc)
    _submission(inbound, honest, "honest", b'{"honest": true}')
    again = _collect(root, exchange, "--SafeCollect.clock_skew_seconds=1")
    assert again.returncode == 0, again.stderr[-3000:]
    assert (got / "sdpa.ipynb").read_bytes() == b'{"honest": true}'
    assert (got / "timestamp.txt").read_text() == honest.strftime(FORMAT)


def test_a_file_changed_while_collect_reads_it_dates_the_submission(tmp_path, monkeypatch):
    """Found by a red-team pass: a 30 MB notebook rewritten while collect copied it was collected with the change
    time collect had read before the copy.  The change time is read again once the file is read to its end."""
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory

    from autograder.nbgrader import safe_collect

    named = datetime.now(timezone.utc) - timedelta(minutes=10)
    folder = tmp_path / f"{ME}+sdpa+{named.strftime(FORMAT)}+race"
    folder.mkdir()
    (folder / "sdpa.ipynb").write_bytes(b"on time " * 1000)
    old = time.time() - 600  # utime changes the file's change time (to now), whatever times it sets
    collect = safe_collect.SafeCollect(coursedir=CourseDirectory(), authenticator=Authenticator(),
                                       clock_skew_seconds=1)
    collect.src_records = [{"username": ME, "filename": folder.name, "timestamp": named.replace(tzinfo=None)}]
    real_read, first = os.read, []

    def read_and_rewrite(fd, size):
        chunk = real_read(fd, size)
        if not first and chunk.startswith(b"on time"):
            first.append(True)
            time.sleep(1.5)
            os.utime(folder / "sdpa.ipynb", (old, old))  # a change while it is read: its change time moves
        return chunk

    monkeypatch.setattr(safe_collect.os, "read", read_and_rewrite)
    before = os.stat(folder / "sdpa.ipynb").st_ctime
    collect._copy_own_files(str(folder), str(tmp_path / "copy"))
    after = os.stat(folder / "sdpa.ipynb").st_ctime
    dated = datetime.strptime((tmp_path / "copy" / "timestamp.txt").read_text(), FORMAT).replace(tzinfo=timezone.utc)
    assert first and after > before + 1
    assert abs(dated - datetime.fromtimestamp(after, timezone.utc)) < timedelta(seconds=0.01), (dated, before, after)


def test_a_long_time_in_a_planted_name_is_refused_without_parsing_it(monkeypatch):
    """A name's time longer than any timestamp format writes never reaches dateutil (milliseconds a name)."""
    from types import SimpleNamespace

    from autograder.nbgrader import safe_collect

    parsed = []
    monkeypatch.setattr(safe_collect, "parse_utc", lambda text: parsed.append(text) or datetime(2026, 1, 1))
    collect = safe_collect.SafeCollect.__new__(safe_collect.SafeCollect)
    errors = []
    monkeypatch.setattr(safe_collect.SafeCollect, "log", SimpleNamespace(error=lambda *a: errors.append(a)),
                        raising=False)
    monkeypatch.setattr(safe_collect.SafeCollect, "coursedir",
                        SimpleNamespace(assignment_id="sdpa", student_id=""), raising=False)
    collect.inbound_path = "/nonexistent-inbox"
    long_time = "2026-01-01 " + "0" * (safe_collect.MAX_TIME_CHARS - 10)
    assert collect._record(f"{ME}+sdpa+{long_time}+x") is None
    assert parsed == [] and "cannot be read" in errors[0][0]
    ordinary = datetime(2026, 1, 1).strftime(FORMAT)
    collect._record(f"{ME}+sdpa+{ordinary}+x")  # refused later (no such folder), but its time was read
    assert parsed == [ordinary]
