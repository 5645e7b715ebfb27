"""``c.ExchangeFactory.collect``: ``nbgrader collect`` that takes from the exchange only what its student made.

nbgrader's exchange inbox is writable by every student.  Stock collect copies each submission by path with
``shutil.copytree``, which follows symbolic links, only warns when a folder belongs to another user than the
student it names, trusts the time in the folder's name, and stops for the whole class at one name it cannot
parse.  Red-team passes on the course's hub used all of it: links carried the instructor's solutions, hidden
checks and gradebook out as released feedback; a link to ``/dev/zero`` filled the disk; a folder named for another
student replaced that student's submission; a link swapped in while collect copied the folder got the instructor's
source notebook graded as the student's; a backdated name escaped the late penalty, and so did a notebook
rewritten in place after the due date (the file changes, its folder does not).

Here the inbox is listed once.  A submission counts only if its name parses, its folder is a real folder owned by
the student it names, and its time is not in the future.  It is copied through open file descriptors, never by
path: the folder and every entry are opened without following links (``O_NOFOLLOW``) and checked on the open
descriptor (owner, type), so swapping a link in while collect runs gains nothing; only the student's own regular
files are read, within nbgrader's size limits (``max_file_size``, ``max_dir_size``), into a private staging folder,
from which stock's copy (ignore patterns, group sharing) takes over.  A name dated more than `clock_skew_seconds`
before the submission last changed (the latest change time of its folder and of everything collected from it,
which a student cannot set back) gets that change time as its submission time.  Each refusal is one "Not
collected" line; the other students are collected.
"""
from __future__ import annotations

import errno
import fnmatch
import os
import shutil
import stat
import tempfile
from datetime import datetime, timedelta, timezone

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.utils import check_mode, parse_utc
from traitlets import Float

try:
    import pwd
except ImportError:  # Windows: nbgrader's exchange does not run there
    pwd = None

MAX_DEPTH = 16  # folders inside a submission
MAX_ENTRIES = 10_000  # files and folders in one submission
TIME_FORMAT = "%Y-%m-%d %H:%M:%S.%f UTC"  # nbgrader's, in timestamp.txt
# The time in a submission's name: nbgrader writes 30 characters.  Anyone can plant names in the inbox, and
# dateutil took up to 2.75 ms on a name's 250 (red team: 20,000 planted names, 18.5 s of collect).
MAX_TIME_CHARS = 64


class NotCollected(Exception):
    """A submission, or a file in it, that collect leaves in the inbox; the message says why."""


def _utc(when: datetime) -> datetime:
    return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)


class SafeCollect(ExchangeCollect):
    clock_skew_seconds = Float(60.0, config=True, help=(
        "How far a submission's time (from the student's clock, in its name) may be from the exchange's clock: "
        "a name dated later than now by more is refused, and one dated earlier than the submission's last change "
        "by more gets that change's time.  nbgrader submit writes its files within seconds of the name's time."))

    @property
    def clock_skew(self) -> timedelta:
        return timedelta(seconds=self.clock_skew_seconds)

    def init_src(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        if not check_mode(self.inbound_path, read=True, execute=True):
            self.fail(f"You don't have read permissions for the directory: {self.inbound_path}")
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                self.duedate = gb.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                self.duedate = None
        by_student: dict[str, list[dict]] = {}
        for name in sorted(os.listdir(self.inbound_path)):  # once: refusals cost nothing more
            record = self._record(name)
            if record is not None:
                by_student.setdefault(record["username"], []).append(record)
        self.src_records = [self._choose(records) for _student, records in sorted(by_student.items())]

    def _record(self, name):
        """The submission `name` stands for (nbgrader's ``student+assignment+time[+random]``), or None: another
        assignment or student than asked for, or refused (one line)."""
        parts = name.rsplit("+", 3)
        if len(parts) < 3 or parts[1] != self.coursedir.assignment_id:
            return None
        student = parts[0]
        if self.coursedir.student_id and not fnmatch.fnmatchcase(student, self.coursedir.student_id):
            return None
        path = os.path.join(self.inbound_path, name)
        try:
            if len(parts[2]) > MAX_TIME_CHARS:  # dateutil takes milliseconds on a long one: never that per name
                raise ValueError(parts[2])
            when = _utc(parse_utc(parts[2]))
        except (ValueError, OverflowError, TypeError):
            self.log.error("Not collected: %s (its time cannot be read)", path)
            return None
        if when > datetime.now(timezone.utc) + self.clock_skew:
            self.log.error("Not collected: %s is dated in the future", path)
            return None
        try:
            info = os.lstat(path)
        except OSError as exc:
            self.log.error("Not collected: %s (%s)", path, exc.strerror)
            return None
        if not stat.S_ISDIR(info.st_mode):
            self.log.error("Not collected: %s is not a folder", path)
            return None
        owner = _owner(info.st_uid)
        if pwd is not None and owner != student:
            self.log.error("Not collected: %s names %s but belongs to %s", path, student, owner)
            return None
        # naive UTC, as nbgrader's own records and timestamps (collect compares them)
        return {"username": student, "filename": name, "timestamp": when.replace(tzinfo=None)}

    def _choose(self, records):
        """The submission stock would take: the latest, or the latest before the due date when asked."""
        latest = sorted(records, key=lambda r: r["timestamp"], reverse=True)
        if self.duedate is not None and self.before_duedate:
            on_time = [r for r in latest if r["timestamp"] <= _utc(self.duedate).replace(tzinfo=None)]
            return (on_time or latest)[0]
        return latest[0]

    def do_copy(self, src, dest, log=None):
        staging = tempfile.mkdtemp(prefix="sdpa-collect-")
        try:
            private = os.path.join(staging, "submission")
            try:
                self._copy_own_files(src, private)
            except NotCollected as exc:
                self.log.error("Not collected: %s %s", src, exc)
                return
            super().do_copy(private, dest, log)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _copy_own_files(self, src, dest):
        """Copy the student's regular files under the folder `src` into `dest` through descriptors opened
        without following links; write the trusted submission time into ``timestamp.txt``."""
        name = os.path.basename(src)
        record = next(r for r in self.src_records if r["filename"] == name)  # chosen, and checked, in init_src
        uid = _uid(record["username"])
        try:
            top = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError as exc:
            raise NotCollected(f"({'a link' if exc.errno == errno.ELOOP else exc.strerror})") from None
        try:
            info = os.fstat(top)
            if uid is not None and info.st_uid != uid:
                raise NotCollected(f"belongs to {_owner(info.st_uid)}, not {record['username']}")
            budget = {"bytes": 1000 * self.coursedir.max_dir_size, "entries": MAX_ENTRIES,
                      "changed": (info.st_ctime, "its folder")}
            self._copy_folder(top, dest, uid, budget, "", 0)
            _note_change(budget, top, "its folder")  # once more, now that it is copied: a change made meanwhile
        finally:
            os.close(top)
        when = _utc(record["timestamp"])
        changed, what = datetime.fromtimestamp(budget["changed"][0], timezone.utc), budget["changed"][1]
        if when < changed - self.clock_skew:
            self.log.warning("%s is dated %s but %s last changed at %s: collected as submitted then", src, when,
                             what, changed)
            when = changed
        with open(os.path.join(dest, "timestamp.txt"), "w", encoding="utf-8") as f:
            f.write(when.strftime(TIME_FORMAT))

    def _copy_folder(self, folder_fd, dest, uid, budget, where, depth):
        if depth > MAX_DEPTH:
            raise NotCollected(f"has folders more than {MAX_DEPTH} deep")
        os.makedirs(dest, exist_ok=True)
        for name in sorted(os.listdir(folder_fd)):
            budget["entries"] -= 1
            if budget["entries"] < 0:
                raise NotCollected(f"holds more than {MAX_ENTRIES} files and folders")
            shown = os.path.join(where, name)
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder_fd)
            except OSError as exc:
                self.log.error("Not collected: %s (%s)", shown, "a link" if exc.errno == errno.ELOOP else exc.strerror)
                continue
            try:
                info = _note_change(budget, fd, shown)
                if uid is not None and info.st_uid != uid:
                    self.log.error("Not collected: %s (belongs to %s)", shown, _owner(info.st_uid))
                elif stat.S_ISDIR(info.st_mode):
                    self._copy_folder(fd, os.path.join(dest, name), uid, budget, shown, depth + 1)
                    _note_change(budget, fd, shown)
                elif stat.S_ISREG(info.st_mode):
                    self._copy_file(fd, os.path.join(dest, name), budget, shown)
                else:
                    self.log.error("Not collected: %s (not a regular file)", shown)
            finally:
                os.close(fd)

    def _copy_file(self, fd, dest, budget, shown):
        most = 1000 * self.coursedir.max_file_size
        copied = 0
        with open(dest, "wb") as out:
            while True:
                chunk = os.read(fd, 1 << 20)
                if not chunk:  # read to its end: a change made while it was read shows now (red team: a
                    _note_change(budget, fd, shown)  # 30 MB notebook rewritten mid-copy kept the old time)
                    return
                copied += len(chunk)
                budget["bytes"] -= len(chunk)
                if budget["bytes"] < 0:
                    raise NotCollected(f"is larger than {self.coursedir.max_dir_size} kB (max_dir_size)")
                if copied > most:
                    break
                out.write(chunk)
        os.unlink(dest)
        self.log.error("Not collected: %s (larger than %s kB, max_file_size)", shown, self.coursedir.max_file_size)


def _note_change(budget: dict, fd: int, shown: str) -> os.stat_result:
    """fstat `fd`, keeping its change time in `budget["changed"]` if it is the latest yet (a student cannot set a
    change time back); returns the stat."""
    info = os.fstat(fd)
    if info.st_ctime > budget["changed"][0]:
        budget["changed"] = (info.st_ctime, shown)
    return info


def _owner(uid: int) -> str:
    if pwd is None:
        return f"uid {uid}"
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _uid(user: str):
    if pwd is None:
        return None
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None
