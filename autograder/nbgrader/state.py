"""What `SandboxedExecute` hands to `TrustedScoring` for one notebook, and how long it lives.

Both travel in nbconvert's per-notebook ``resources`` dict: nbgrader gives
its steps no other channel.  The runner a session holds is closed by
`TrustedScoring`, and, whatever the pipeline, when the notebook's resources
are dropped (or the process exits): `ExecutionState` owns it.
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from ..sandbox.session import StudentSession

EXECUTION = "sdpa_execution"  # resources key of the notebook's `Shared` `ExecutionState`
RUNNER_SOURCE = "sdpa_runner_source"  # resources key of a `Shared` `sandbox.runners.RunnerSource` (batch workers)


class Shared:
    """A live object (a runner source, a session) carried in nbconvert resources.

    nbconvert deep-copies resources between exporters; a copy of a process
    handle is meaningless, so every copy shares the one object.
    """

    def __init__(self, value: Any) -> None:
        self.value = value

    def __deepcopy__(self, memo: dict) -> Shared:
        return self

    @staticmethod
    def get(resources: dict, key: str) -> Optional[Any]:
        """The object under `key`, or None."""
        shared = resources.get(key)
        return shared.value if isinstance(shared, Shared) else None


class ExecutionState:
    """A notebook's sandboxed session and the notebook index of each code cell it ran."""

    def __init__(self, session: StudentSession, positions: list[int]) -> None:
        self.session = session
        self.positions = positions  # session cell position -> notebook cell index
        self._close = weakref.finalize(self, session.close)

    def close(self) -> None:
        """End the runner now (idempotent)."""
        self._close()
