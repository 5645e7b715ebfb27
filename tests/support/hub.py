"""A JupyterHub of the course for one test module (``test_hub_browser.py``, ``test_hub_check_service.py``):
its own state, exchange, port and course copy, the course users' fetched work cleared before and after.

Skips while a ``make hub`` instance runs (it has the same Unix users); on the way out, whatever happened, the
hub is stopped, its log and the module's timings are left in `artifacts`, and no process may outlive it.
"""
import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from hub import control
from tests.support.browser import timed


@contextlib.contextmanager
def running_hub(name, artifacts, timings, before_start=None, **options):
    """Yield a started `control.Hub` (options: `check_service`, `checks_per_hour`); `before_start(hub)` runs
    once the users and the course exist (generate and release, for example)."""
    if control.Hub().pid():
        pytest.skip("a `make hub` instance is running with these users; `make hub-stop` first")
    shutil.rmtree(artifacts, ignore_errors=True)  # no screenshots left from an earlier run
    base = Path(tempfile.mkdtemp(prefix=f"sdpa-{name}-", dir="/tmp"))
    os.chmod(base, 0o755)
    hub = control.Hub(state=base / "state", exchange=base / "exchange", port=control.free_port(),
                      course_name=f"sdpa-course-{name}", **options)
    try:
        with timed("hub: set up users, exchange, course; start", timings):
            hub.setup(fresh_course=True)
            hub.reset_student_work()
            if before_start is not None:
                before_start(hub)
            hub.start()
        yield hub
    finally:
        still = hub.stop()
        artifacts.mkdir(parents=True, exist_ok=True)
        (artifacts / "jupyterhub.log").write_text(hub.log_tail(40000))
        (artifacts / "timings.json").write_text(json.dumps(timings, indent=2, ensure_ascii=False) + "\n")
        shutil.rmtree(hub.course, ignore_errors=True)
        hub.reset_student_work()
        shutil.rmtree(base, ignore_errors=True)
        assert not still, f"processes left running after the hub stopped: {still}"
