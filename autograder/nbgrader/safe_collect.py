"""``c.ExchangeFactory.collect``: ``nbgrader collect`` that takes from the exchange only what its student made.

nbgrader's exchange inbox is writable by every student.  Stock collect copies each submission with
``shutil.copytree``, which follows symbolic links, and only warns when a submission's folder belongs to another
user than the student it names.  A red-team pass on the course's hub used both: a student's submission held links
to the instructor's files (the solutions, the hidden checks, the gradebook), which collect copied into the course
and ``release_feedback`` later handed back; a link to ``/dev/zero`` filled the disk; and a folder named for
another student, with a later timestamp, replaced that student's real submission.

Here a submission counts only if its folder is a real folder owned by the student it names, with a time that is
not in the future; it is copied without following links (first into a private staging folder, where the links
are dropped, so a student changing the folder while it is copied gains nothing), then stock's copy (ignore
patterns, size limits, group sharing) takes it from there.
"""
from __future__ import annotations

import os
import shutil
import stat
import tempfile
from datetime import datetime, timedelta, timezone

from nbgrader.exchange.default.collect import ExchangeCollect

try:
    import pwd
except ImportError:  # Windows: nbgrader's exchange does not run there
    pwd = None

CLOCK_SKEW = timedelta(minutes=5)


def _special_files(folder, names):
    """copytree's `ignore`: everything that is neither a folder, a regular file nor a link."""
    skipped = []
    for name in names:
        try:
            mode = os.lstat(os.path.join(folder, name)).st_mode
        except OSError:
            skipped.append(name)
            continue
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            skipped.append(name)
    return skipped


class SafeCollect(ExchangeCollect):
    def init_src(self):
        super().init_src()
        kept = []
        for record in self.src_records:
            refused = self._refused(record)
            if refused is None:
                kept.append(record)
                continue
            self.log.error("Not collected: %s", refused)
            # the student's own latest submission that passes, if any (stock chose among all of them)
            kept += self._latest_trusted(record["username"])
        self.src_records = kept

    def _latest_trusted(self, student):
        pattern = f"{student}+{self.coursedir.assignment_id}+"
        mine = [self._path_to_record(os.path.join(self.inbound_path, name)) for name in os.listdir(self.inbound_path)
                if name.startswith(pattern)]
        trusted = sorted((r for r in mine if r["username"] == student and self._refused(r) is None),
                         key=lambda r: r["timestamp"], reverse=True)
        if trusted and self.duedate is not None and self.before_duedate:
            on_time = [r for r in trusted if r["timestamp"] <= self.duedate]
            trusted = on_time or trusted
        return trusted[:1]

    def _refused(self, record):
        """Why `record` is not collected (None if it is)."""
        path = os.path.join(self.inbound_path, record["filename"])
        try:
            info = os.lstat(path)
        except OSError as exc:
            return f"{path}: {exc.strerror}"
        if not stat.S_ISDIR(info.st_mode):
            return f"{path} is not a folder"
        if pwd is not None:
            try:
                owner = pwd.getpwuid(info.st_uid).pw_name
            except KeyError:
                owner = f"uid {info.st_uid}"
            if owner != record["username"]:
                return f"{path} names {record['username']} but belongs to {owner}"
        when = record["timestamp"]
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        if when > datetime.now(timezone.utc) + CLOCK_SKEW:
            return f"{path} is dated in the future ({record['timestamp']})"
        return None

    def do_copy(self, src, dest, log=None):
        staging = tempfile.mkdtemp(prefix="sdpa-collect-")
        try:
            private = os.path.join(staging, "submission")
            try:  # links copied as links, never followed; no pipes or devices (reading one could block or never end)
                shutil.copytree(src, private, symlinks=True, ignore=_special_files)
            except shutil.Error as exc:  # a file changed into something else while it was copied: left out
                self.log.error("Not collected from %s: %s", src, exc)
            for folder, folders, files in os.walk(private):
                for name in folders + files:
                    path = os.path.join(folder, name)
                    if os.path.islink(path):
                        os.unlink(path)
                        self.log.error("Not collected: %s is a link (%s)", os.path.relpath(path, private),
                                       os.path.join(src, os.path.relpath(path, private)))
            super().do_copy(private, dest, log)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
