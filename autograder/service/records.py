"""The formative record: every check a student ran while working, in a SQLite file the service alone writes.

It lives beside the course's gradebook (``check_service/check_service.db`` in the course directory, which
students cannot write), so `sdpa-course report` can show "while working": per misconception how many students
met it and how many fixed it before submitting, and checks per student.  One row per check; nothing of the
notebook itself.  A check's row is written when it is admitted (outcome "waiting") and completed when it is
answered, so a service that stops mid-check still counts it against the student's hour when it restarts
(``interrupted``).  Its own directory, because SQLite writes a journal beside the file: on a hub the service runs
as its own user and may write there and nowhere else in the course (``hub/control.py``).
"""
from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import urllib.parse
from typing import Any, Optional, Union

DIRECTORY = "check_service"
FILENAME = "check_service.db"

SCHEMA = """
CREATE TABLE IF NOT EXISTS checks (
    id INTEGER PRIMARY KEY,
    student TEXT NOT NULL,
    assignment TEXT NOT NULL,
    at REAL NOT NULL,
    seconds REAL,
    outcome TEXT NOT NULL,          -- waiting | answered | failed | refused | interrupted
    passed_parts TEXT NOT NULL,     -- JSON list
    failed_parts TEXT NOT NULL,     -- JSON list
    codes TEXT NOT NULL             -- JSON list, in the order the answer named them
);
CREATE INDEX IF NOT EXISTS checks_by_student ON checks (assignment, student, at);
"""


def default_path(course: Union[str, os.PathLike]) -> str:
    """Where the service keeps its record in the course at `course` (``--records`` sets another)."""
    return os.path.join(course, DIRECTORY, FILENAME)


class Records:
    """Append and read checks; safe to share between the service's threads.  `read_only`: a reader (the class
    report) that never creates, changes or re-modes the service's file."""

    def __init__(self, path: Union[str, os.PathLike], read_only: bool = False) -> None:
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        if read_only:
            uri = "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=ro"
            self._db = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=10)
            return
        created = not os.path.exists(self.path)
        if created:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), mode=0o750, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=10)
        self._db.executescript(SCHEMA)
        with self._db:  # checks admitted by a service that stopped before answering them: counted, not waiting
            self._db.execute("UPDATE checks SET outcome = 'interrupted' WHERE outcome = 'waiting'")
        if created:  # the service's own file: the instructor's group reads it (the report), no one else
            os.chmod(self.path, 0o640)

    def add(self, student: str, assignment: str, outcome: str, answer: Optional[dict] = None,
            seconds: Optional[float] = None, at: Optional[float] = None) -> None:
        """One finished check, in a row of its own."""
        with self._lock, self._db:
            self._db.execute(
                "INSERT INTO checks (student, assignment, at, seconds, outcome, passed_parts, failed_parts, codes) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (student, assignment, time.time() if at is None else at, seconds, outcome, *_summary(answer)))

    def admitted(self, student: str, assignment: str) -> None:
        """A check of `student` entered the queue (and was counted): its row, before it is graded."""
        with self._lock, self._db:
            self._db.execute("INSERT INTO checks (student, assignment, at, outcome, passed_parts, failed_parts, "
                             "codes) VALUES (?, ?, ?, 'waiting', '[]', '[]', '[]')",
                             (student, assignment, time.time()))

    def answered(self, student: str, assignment: str, outcome: str, answer: Optional[dict] = None,
                 seconds: Optional[float] = None) -> None:
        """`student`'s admitted check came out as `outcome`: complete its row (a press that replaced a waiting
        one may name another assignment), or add one if it has none."""
        with self._lock, self._db:
            changed = self._db.execute(
                "UPDATE checks SET assignment = ?, seconds = ?, outcome = ?, passed_parts = ?, failed_parts = ?, "
                "codes = ? WHERE id = (SELECT max(id) FROM checks WHERE student = ? AND outcome = 'waiting')",
                (assignment, seconds, outcome, *_summary(answer), student)).rowcount
        if not changed:
            self.add(student, assignment, outcome, answer, seconds)

    def of(self, assignment: str, student: Optional[str] = None) -> list[dict[str, Any]]:
        """The checks of an assignment, oldest first; one student's only if `student` is given."""
        query = ("SELECT student, at, seconds, outcome, passed_parts, failed_parts, codes FROM checks "
                 "WHERE assignment = ?")
        args: list = [assignment]
        if student is not None:
            query += " AND student = ?"
            args.append(student)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY at, id", args).fetchall()
        return [{"student": s, "at": at, "seconds": sec, "outcome": o, "passed_parts": json.loads(p),
                 "failed_parts": json.loads(f), "codes": json.loads(c)} for s, at, sec, o, p, f, c in rows]

    def since(self, when: float) -> list[dict[str, Any]]:
        """Every assignment's checks made after `when` (epoch seconds): who, when, the grader's seconds."""
        with self._lock:
            rows = self._db.execute("SELECT student, at, seconds FROM checks WHERE at > ? ORDER BY at, id",
                                    (when,)).fetchall()
        return [{"student": s, "at": at, "seconds": sec} for s, at, sec in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _summary(answer: Optional[dict]) -> tuple[str, str, str]:
    """An answer's columns: the parts that passed, those that did not, the codes named (JSON lists)."""
    parts = (answer or {}).get("parts", [])
    return (json.dumps([p["part"] for p in parts if p["passes"]]),
            json.dumps([p["part"] for p in parts if not p["passes"]]), json.dumps((answer or {}).get("codes", [])))


def while_working(checks: list[dict], submitted_codes: dict[str, list[str]]) -> dict[str, Any]:
    """The report's "while working" figures: {code: {"met": students whose check named it, "fixed": of those,
    the students whose submission no longer has it}}, checks per student, and checks per part that failed.

    `submitted_codes`: {student: codes named by the final grading of their submission}; a student who met a
    code and has not submitted is counted as met, not fixed."""
    met: dict[str, set] = {}
    per_student: dict[str, int] = {}
    failing_parts: dict[str, int] = {}
    for check in checks:
        per_student[check["student"]] = per_student.get(check["student"], 0) + 1
        for code in check["codes"]:
            met.setdefault(code, set()).add(check["student"])
        for part in check["failed_parts"]:
            failing_parts[part] = failing_parts.get(part, 0) + 1
    codes = {code: {"met": len(students),
                    "fixed": sum(1 for s in students if s in submitted_codes and code not in submitted_codes[s])}
             for code, students in sorted(met.items(), key=lambda item: (-len(item[1]), item[0]))}
    return {"codes": codes, "checks_per_student": per_student, "failed_checks_per_part": failing_parts}
