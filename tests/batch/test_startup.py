"""Start-up of the grading commands: no import that costs seconds without serving grading.

Every grading process (``sdpa-course``, stock ``nbgrader autograde``, formgrader's server) imports
nbformat, and through it jsonschema. jsonschema 4.25+ also imports rfc3987-syntax, which builds
its IRI parsers at import: about 2.2 s of CPU per process on a 2-core machine, more than a whole
correct submission's checks. pyproject.toml keeps jsonschema below 4.25; this test fails if an
environment brings the slow import back.
"""
import subprocess
import sys

import pytest

# module -> why it must not be imported by a grading process
SLOW = {"rfc3987_syntax": "jsonschema>=4.25's iri format checker: ~35 Earley parsers built at import"}


def test_grading_processes_do_not_import_the_slow_iri_parsers():
    code = ("import sys, nbformat, nbgrader.apps, jupyter_events.validators, autograder.cli, autograder.batch.run\n"
            f"print(' '.join(m for m in {sorted(SLOW)!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    loaded = out.stdout.split()
    assert not loaded, "; ".join(f"{m} is imported ({SLOW[m]}): pin jsonschema<4.25 (pyproject.toml)" for m in loaded)


def test_the_collector_paused_for_the_imports_is_on_again_however_the_block_ends():
    import gc

    import pytest

    from autograder.batch.worker import collector_paused

    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(KeyError), collector_paused():
        raise KeyError("x")
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # off before, off after: the block does not turn it on
    finally:
        gc.enable()


def test_workers_inherit_what_a_first_grading_would_import():
    """`warm_parent` imports before the fork what the first student's checks would import in every worker."""
    code = ("import sys\nfrom autograder.batch.worker import warm_parent\nwarm_parent()\n"
            "wanted = ['sympy', 'torch.fx.experimental.symbolic_shapes', 'sqlalchemy.dialects.sqlite',\n"
            "          'course.checks.test_device_dtype', 'autograder.grading.shrink']\n"
            "print(' '.join(m for m in wanted if m not in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == []


# Reads nbgrader_config.py's `configure(c)` as the command in argv would, and tells when the zygote started.
CONFIGURE_AS = """
import sys
sys.argv = {argv!r}
from traitlets.config import Config
from autograder.sandbox import shared_zygote
started = []
shared_zygote.start_early = lambda: started.append("torch" in sys.modules)
from autograder.nbgrader import configure
configure(Config())
print("started" if started else "not started", "after torch" if any(started) else "before torch")
"""


@pytest.mark.parametrize("argv, expected", [
    (["/venv/bin/nbgrader", "autograde", "sdpa"], "started before torch"),
    (["/venv/lib/python3.11/site-packages/nbgrader/__main__.py", "autograde", "sdpa"], "started before torch"),
    (["/venv/bin/nbgrader", "generate_assignment", "sdpa"], "not started before torch"),
    (["/venv/bin/jupyter-server"], "not started before torch"),
])
def test_stock_autograde_starts_its_zygote_before_importing_torch(argv, expected):
    """`nbgrader autograde`'s zygote warms up (seconds of CPU, on the other core) while the configuration
    imports torch and the checks; no other command that reads the configuration starts one."""
    out = subprocess.run([sys.executable, "-c", CONFIGURE_AS.format(argv=argv)], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == expected
