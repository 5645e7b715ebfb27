"""SandboxedExecute: the runner it leaves for TrustedScoring never outlives the notebook."""
import copy
import gc
import time

from nbformat.v4 import new_code_cell, new_notebook

from autograder.nbgrader import SandboxedExecute
from autograder.nbgrader.state import EXECUTION, RUNNER_SOURCE, Shared
from autograder.sandbox.guest import procfs


def _run(resources):
    nb = new_notebook(cells=[new_code_cell("x = 41 + 1")])
    SandboxedExecute(cell_timeout=60).preprocess(nb, resources)
    return nb


def _gone(pid, seconds=10):
    deadline = time.monotonic() + seconds
    while procfs.state(pid) not in ("", "Z") and time.monotonic() < deadline:
        time.sleep(0.05)
    return procfs.state(pid) in ("", "Z")


def test_runner_is_closed_when_the_resources_go_even_without_trusted_scoring():
    resources = {"nbgrader": {"student": "s", "assignment": "a", "notebook": "n"}}
    nb = _run(resources)
    state = Shared.get(resources, EXECUTION)
    assert nb.cells[0].execution_count == 1 and state.session.get("x") == 42
    pid = state.session._pid or state.session.proc.pid
    assert procfs.state(pid) not in ("", "Z")
    del state, resources
    gc.collect()
    assert _gone(pid)


def test_resources_can_be_deep_copied_as_nbconvert_does():
    """Live handles are shared by copies: one runner per notebook, one source per worker."""

    class Source:
        taken = 0

        def take(self, limits, require_isolation):
            Source.taken += 1
            return None  # the session starts its own runner

    source = Source()
    resources = {"nbgrader": {"student": "s", "assignment": "a", "notebook": "n"}, RUNNER_SOURCE: Shared(source)}
    copied = copy.deepcopy(resources)
    assert Shared.get(copied, RUNNER_SOURCE) is source
    _run(copied)
    assert Source.taken == 1
    state = Shared.get(copied, EXECUTION)
    assert Shared.get(copy.deepcopy(copied), EXECUTION) is state
    state.close()


def test_runner_sources_started_before_the_course_is_read_have_the_courses_default_settings():
    """A zygote started early (``configure``, ``sdpa-course check``/``autograde``) is kept only if its settings
    are those the course's sessions ask for: a default that differs starts a second zygote at the first
    student (seconds of warm-up, serial)."""
    import inspect

    from autograder.sandbox import forkserver, pool, session
    from autograder.sandbox.launcher import Limits

    course = SandboxedExecute()
    assert (course.limits(), course.require_isolation) == (Limits(), True)
    for starter in (forkserver.ForkServer, pool.RunnerPool, session.StudentSession):
        assert inspect.signature(starter).parameters["require_isolation"].default is course.require_isolation
