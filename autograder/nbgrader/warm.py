"""What a process's first grading imports and builds on the trusted side, done ahead of it.

A grading process pays these once, on its first submission: torch's symbolic shapes (and sympy, through
the trusted reference's first ``torch.broadcast_shapes``), the course's check modules, the gradebook's
sqlite dialect, the message catalogs, nbformat's schema validator.  Doing them while the zygote still
warms up (on the other core) takes them off the way to the first result: `sdpa-course check` and stock
``nbgrader autograde`` call `before_first_grading` then, and ``sdpa-course autograde`` before it forks
its workers (``batch/worker.warm_parent``), which inherit them.  Only imports and caches of pure
functions: grading after this is the same as without it.
"""
from __future__ import annotations


def before_first_grading() -> None:
    """Import and build what the first grading in this process would otherwise do on its way."""
    import nbformat
    import sqlalchemy.dialects.sqlite  # noqa: F401 - the gradebook's first connection
    import torch  # noqa: F401

    # the trusted reference's first torch.broadcast_shapes imports it, and sympy with it
    import torch.fx.experimental.symbolic_shapes  # noqa: F401
    from nbgrader.converters import Autograde  # noqa: F401

    from .. import i18n
    from ..grading import assertions, check_api, feedback, hidden_checks, root_causes, shrink  # noqa: F401
    from . import pipelines

    pipelines()  # imports every step
    check_api.collect()  # imports the course's checks
    for locale in i18n.LOCALES.values():  # the message catalogs, read once (Babel parses the .po files)
        i18n.catalog(locale)
    try:  # builds nbformat's JSON-schema validator (and its format checkers) once
        nbformat.validate(nbformat.v4.new_notebook())
    except Exception:  # noqa: BLE001
        pass
