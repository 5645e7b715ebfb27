"""Shared fixtures: one real nbgrader run over the whole sample catalogue.

Grading every sample costs a few seconds each, so the course is built,
released, graded and given feedback once per test session; the tests then
read the gradebook, the feedback HTML and our grading reports.
"""
import collections
import sys

import pytest

import catalogue
from autograder.demo import course
from autograder.notebook.editions import EDITIONS
from tests.support.grading import FAST_LIMITS


@pytest.fixture(scope="session")
def released(tmp_path_factory):
    """A copy of the course after `nbgrader generate_assignment` of every edition (seconds; nothing graded)."""
    root = course.make_course(tmp_path_factory.mktemp("released"))
    for assignment in EDITIONS:
        course.nbgrader(root, "generate_assignment", assignment, "--force")
    return root


@pytest.fixture(scope="session")
def graded_course(tmp_path_factory):
    """The catalogue graded by stock nbgrader, as two courses of half the samples each, graded at the
    same time: stock grades one student after another on one core, and the other core would idle.

    `root_of(student)` is the course that holds a student; `roots` lists both."""
    from concurrent.futures import ThreadPoolExecutor

    halves = [catalogue.CATALOGUE[0::2], catalogue.CATALOGUE[1::2]]
    roots = [course.make_course(tmp_path_factory.mktemp(f"course{i}")) for i in range(len(halves))]
    with ThreadPoolExecutor(len(halves)) as pool:
        done = list(pool.map(lambda job: course.grade_samples(job[0], job[1], *FAST_LIMITS), zip(roots, halves)))
    where = {sample.name: root for root, half in zip(roots, halves) for sample in half}
    grades = {student: cells for result in done for student, cells in result[0].items()}
    return {"roots": roots, "root_of": where.__getitem__, "grades": grades,
            "seconds": [result[1] for result in done], "autograde": [result[2] for result in done],
            "feedback": [result[3] for result in done]}


# A pytest-xdist worker runs in execnet's `__main__`, which has no `__spec__`: multiprocessing's spawn and forkserver
# start methods read it to prepare a child (what `sdpa-course autograde` and dask do), and failed with
# AttributeError. `None` is what `python -c` has.
@pytest.fixture(autouse=True)
def _main_has_a_spec():
    main = sys.modules["__main__"]
    if not hasattr(main, "__spec__"):
        main.__spec__ = None

# `make test` runs on two pytest-xdist workers with `--dist loadfile`: a file's tests stay on one worker, so its
# module-scoped fixtures (a JupyterLab server, a graded class) are built once. The scheduler below also keeps
# together the files that share more than a module: those that read the stock catalogue, so `graded_course` is
# graded once, and those that create the course's Unix users and start a hub, so they never run at the same time.
# (A scheduler, not `xdist_group` marks: pytest 9.2's node ids no longer carry the group, pytest-xdist#1386.)
SHARED_WORKER = {
    "test_editions.py": "stock-catalogue", "test_pipeline.py": "stock-catalogue",
    "test_hub_browser.py": "unix-users", "test_exchange_flow.py": "unix-users",
    "test_hub_check_service.py": "unix-users",
}


def pytest_collection_modifyitems(config, items):
    """Long work first, short work last (`make test` passes `--no-loadscope-reorder`, so xdist hands out scopes
    in this order): the stock catalogue, then the hub, then the files with slow or browser tests, then the rest,
    most tests first (xdist's own guess), so that no long file starts last and runs as a tail with the other
    worker idle."""
    first = {"stock-catalogue": 0, "unix-users": 1}
    heavy = {item.path for item in items if item.get_closest_marker("slow") or item.get_closest_marker("browser")}
    count = collections.Counter(item.path for item in items)
    items.sort(key=lambda item: (first.get(SHARED_WORKER.get(item.path.name), 2), item.path not in heavy,
                                 -count[item.path]))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ByFileAndSharedFixtures(LoadFileScheduling):
        def _split_scope(self, nodeid):
            path = nodeid.split("::", 1)[0]
            return SHARED_WORKER.get(path.rsplit("/", 1)[-1], path)

    return ByFileAndSharedFixtures(config, log)
