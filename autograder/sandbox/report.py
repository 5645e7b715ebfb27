"""What one submission's run leaves for the record, apart from its outputs.

``nbgrader/trusted_scoring.py`` writes it into ``<notebook>.grading.json``
(the sandbox, the limit events, the seconds, the retries) and
``nbgrader/calibration.py`` derives each cell's and function's limit from
the reference solution's times.  A `StudentSession` fills it in; they read
it through the session (``session.events``...).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from .launcher import SandboxStatus


@dataclass
class SessionReport:
    status: SandboxStatus  # the sandbox the runners ran in (`launcher.probe`)
    started: float = field(default_factory=time.monotonic)  # the submission's budget runs from here
    events: list = field(default_factory=list)  # limit reports, shown to instructor and student
    restarts: int = 0  # runners restarted after a failure that was charged (bounded by `Budget.max_restarts`)
    retries: int = 0  # limit overruns given a second try on a fresh runner
    charged_without_retry: int = 0  # overruns charged at once: the runner had a core to itself (load_evidence)
    reused: int = 0  # cells whose outputs came from the reference
    cell_seconds: dict = field(default_factory=dict)  # position -> wall seconds of its run
    call_seconds: dict = field(default_factory=dict)  # function -> wall seconds of its longest call

    def elapsed(self) -> float:
        return round(time.monotonic() - self.started, 3)


class Reported:
    """A `SessionReport` field, read and written as an attribute of the session that holds it in `report`."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, session, owner=None):
        return self if session is None else getattr(session.report, self.name)

    def __set__(self, session, value) -> None:
        setattr(session.report, self.name, value)
