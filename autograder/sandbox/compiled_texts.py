"""What a student's runners compiled at run time, as their audit hook reported it (``guest/source_report.py``).

Kept on the trusted side for the grade (``code_review.runtime_notes``): each distinct text once, and
whether anything arrived that cannot be read (code loaded without text, a text cut short, more than the
caps keep).  The runner is an adversary, so the caps are kept here, and a report of an unknown kind, or
one this side had to drop, counts as unreadable.
"""
from __future__ import annotations

import hashlib
import re
from typing import Sequence

MAX_TEXTS = 4096  # distinct texts kept per submission
MAX_TOTAL_BYTES = 32 * 2**20
MAX_TEXT_BYTES = 256 * 1024
MAX_LONG_TEXTS = 256  # distinct long texts kept, by file name and digest


class CompiledTexts:
    """Distinct source texts, in arrival order, the request each arrived in, and the unreadable reports."""

    def __init__(self) -> None:
        # digest -> text: a str as it was compiled, or bytes as they came (the audit event hands a str over as UTF-8
        # bytes too): the trusted reading decides how Python read them (``code_review.readings``)
        self.texts: dict[bytes, "str | bytes"] = {}
        self.where: dict[bytes, tuple] = {}  # digest -> the request it arrived in: ("cell", position) or ("call", fn)
        self.filenames: dict[bytes, str] = {}  # digest -> the file name it was compiled under, as the runner said
        self.request: tuple = ()  # the request in flight, set by the session
        self.long: list[tuple[str, str, tuple]] = []  # (file name, sha256, request) of each text too long to send
        self.opaque: list[tuple[str, tuple]] = []  # what could not be read, in words, and where (first few)
        self.unreadable = 0  # reports that could not be read
        self._bytes = 0

    def add(self, kind: object, blobs: Sequence[bytes], filename: object = None, sha256: object = None) -> None:
        data = blobs[0] if len(blobs) == 1 and isinstance(blobs[0], bytes) else None
        if kind in ("source", "source-bytes") and data is not None and len(data) <= MAX_TEXT_BYTES:
            digest = hashlib.blake2b(kind.encode() + b"\0" + data, digest_size=16).digest()
            if digest in self.texts:
                return
            text = _decoded(data) if kind == "source" else data
            if text is None:
                self._unreadable("a text compiled at run time in an encoding the grader cannot read")
            elif len(self.texts) < MAX_TEXTS and self._bytes + len(data) <= MAX_TOTAL_BYTES:
                self.texts[digest] = text
                self.where[digest] = self.request
                if isinstance(filename, str):
                    self.filenames[digest] = filename[:4096]
                self._bytes += len(data)
            else:
                self._unreadable("too many texts compiled at run time")
            return
        if kind == "cut":  # a long text, by its digest: the grader compares it with the file it names
            long = (filename, sha256, self.request)
            if isinstance(filename, str) and isinstance(sha256, str) and re.fullmatch(r"[0-9a-f]{64}", sha256) \
                    and len(self.long) < MAX_LONG_TEXTS:
                if not any(seen[:2] == long[:2] for seen in self.long):
                    self.long.append((filename[:4096], sha256, self.request))
                return
            self._unreadable("a text compiled at run time longer than the grader reads")
            return
        what = data[:200].decode("utf-8", "replace") if kind == "opaque" and data is not None else "a malformed report"
        self._unreadable(what)

    def _unreadable(self, what: str) -> None:
        self.unreadable += 1
        if len(self.opaque) < 8 and (what, self.request) not in self.opaque:
            self.opaque.append((what, self.request))


def _decoded(data: bytes) -> "str | None":
    """A str's text, sent as UTF-8 (with the surrogates a str may carry): Python compiled its characters,
    whatever coding cookie they spell."""
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None
