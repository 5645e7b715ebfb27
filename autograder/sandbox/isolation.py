"""Whether student code may run here: in the sandbox, or where the instructor has accepted running without it.

Secure by default: where bubblewrap cannot start (not installed, or a
container without user namespaces), every path that would run a student's
code refuses before it runs any, with one line that names bubblewrap's own
message and what to do.  `c.SandboxedExecute.allow_unisolated = True` is the
one way to grade anyway; then every command's output, the class report and
each feedback page say that the code ran without isolation.
"""
from __future__ import annotations

from typing import Callable, Optional

from . import kernel_tripwires, launcher

OPTION = "c.SandboxedExecute.allow_unisolated = True"
REFUSED = "refusing to run student code"
GUIDE = "docs/instructor/containers.md"


class IsolationRefused(launcher.SandboxUnavailableError):
    """The sandbox cannot start here and the instructor has not accepted grading without it."""


def refusal(status: launcher.SandboxStatus) -> str:
    """The one line every path prints when it refuses."""
    return (f"{REFUSED}: the sandbox cannot start ({status.reason}). Make bubblewrap work "
            f"(user namespaces; in a container, the settings in {GUIDE}), or accept grading without "
            f"isolation with `{OPTION}` in nbgrader_config.py")


def banner(status: launcher.SandboxStatus) -> str:
    """The line that marks grading without isolation, for the instructor's outputs."""
    return (f"GRADED WITHOUT ISOLATION: student code runs with no filesystem or network sandbox "
            f"({status.reason}; allowed by {OPTION})")


def require(allow_unisolated: bool, say: Optional[Callable[[str], None]] = None) -> launcher.SandboxStatus:
    """The sandbox's status; raises `IsolationRefused` where it cannot start and that is not allowed, and
    hands the `banner` to `say` where it is."""
    try:  # every runner loads it, isolated or not; built here once, before any student's code runs
        kernel_tripwires.ensure_built(say)
    except kernel_tripwires.BuildError as exc:
        raise IsolationRefused(f"{REFUSED}: {exc}") from None
    status = launcher.probe()
    if not status.isolated:
        if not allow_unisolated:
            raise IsolationRefused(refusal(status))
        if say is not None:
            say(banner(status))
    return status
