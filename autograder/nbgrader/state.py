"""What `SandboxedExecute` hands to `TrustedScoring` for one notebook, and how long it lives.

Both travel in nbconvert's per-notebook ``resources`` dict: nbgrader gives
its steps no other channel.  The runner a session holds is closed by
`TrustedScoring`, and, whatever the pipeline, when the notebook's resources
are dropped (or the process exits): `ExecutionState` owns it.
"""
import weakref

EXECUTION = "sdpa_execution"  # resources key of the notebook's `ExecutionState`
RUNNER_SOURCE = "sdpa_runner_source"  # resources key of a `sandbox.runners.RunnerSource`, set by batch workers


class ExecutionState:
    """A notebook's sandboxed session and the notebook index of each code cell it ran."""

    def __init__(self, session, positions):
        self.session = session
        self.positions = positions  # session cell position -> notebook cell index
        self._close = weakref.finalize(self, session.close)

    def close(self):
        """End the runner now (idempotent)."""
        self._close()
