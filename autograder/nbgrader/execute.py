"""`SandboxedExecute`: nbgrader's Execute step, with the code run in a sandboxed runner.

No kernel starts in the course directory: the notebook's code cells run in
a runner process under bubblewrap (``autograder/sandbox``), and the session
stays open for `TrustedScoring`, which calls the student's functions in it.
"""
from __future__ import annotations

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Float, Integer, Unicode

from ..grading import code_review
from ..i18n import using
from ..notebook.cells import CellError, code_cells, display_cells, grade_id
from ..notebook.editions import language_of
from ..sandbox import isolation, shared_zygote
from ..sandbox.launcher import Limits
from ..sandbox.session import Budget, CellRunError, StudentSession
from . import calibration, calibration_file
from .restore import course_notebook
from .state import EXECUTION, RUNNER_SOURCE, ExecutionState, Shared


class SandboxedExecute(NbGraderPreprocessor):
    """Execute the code cells in the sandboxed runner instead of a kernel."""

    cell_timeout = Float(30.0, help="Most seconds one cell may run (setup cells always get this).").tag(config=True)
    display_cell_timeout = Float(5.0, help="Most seconds a provided cell that only shows output (visible checks, "
                                           "plots, demos) may run; it never scores.").tag(config=True)
    call_timeout = Float(10.0, help="Most seconds one call of a student function may run.").tag(config=True)
    limits_from_reference = Bool(True, help=(
        "Time the source notebook (the solution) and its hidden checks once per grading process, and give each "
        "cell and each checked function `time_multiple` x the reference's time, at least `time_floor` and at "
        "most the timeouts above. An overrun is retried once on a fresh runner before it is charged (unless the runner "
        "used at least 90% of the time as CPU: it had a core, and load did not slow it). False: the "
        "timeouts above apply as they are.")).tag(config=True)
    time_multiple = Float(20.0, help=(
        "Student code may take this many times the reference solution's time on this machine. A correct "
        "answer written plainly (Python loops over a batch, extra copies) stays well inside 20x; an idle or "
        "loaded machine changes both times alike, and the retry absorbs a load spike.")).tag(config=True)
    time_floor = Float(2.0, help=(
        "Fewest seconds a function call's derived limit gets: the reference's calls take "
        "milliseconds, where scheduling noise and a forked runner's first page faults dominate.")).tag(config=True)
    cell_time_floor = Float(10.0, help=(
        "Fewest seconds a cell's derived limit gets. Higher than `time_floor`: a correct answer cell may also "
        "try its function out (a loop of examples, %timeit), and a cell that runs out loses every function it "
        "defines.")).tag(config=True)
    reuse_reference_outputs = Bool(True, help=(
        "When a submission's code cells before its first answer are exactly the source notebook's, run them "
        "without drawing their figures and show the outputs the reference run showed, provided the text they "
        "printed is the reference's (they run before any student code, so they compute the same). Needs "
        "`limits_from_reference`: the reference run that times the cells also records them.")).tag(config=True)
    total_seconds = Float(240.0, help="Time budget of one submission (cells and checks).").tag(config=True)
    memory_mb = Integer(6144, help="Address-space limit of the runner, MiB.").tag(config=True)
    allow_unisolated = Bool(False, help=(
        "Grade where the sandbox (bubblewrap) cannot start, running student code with no filesystem or network "
        "isolation. Off: every grading path refuses there, with one line that says why and what to do "
        "(docs/instructor/containers.md). On: every command's output, the class report and each feedback page "
        "say that the code ran without isolation.")).tag(config=True)
    warm_zygote = Bool(True, help=(
        "Where no runner source is handed in (stock `nbgrader autograde`, formgrader's Autograde button, "
        "`sdpa-course check`), fork every runner from one warm zygote kept for the whole grading process, as "
        "`sdpa-course autograde` does: the same runners, with the same clean-start checks between students. "
        "A fresh runner per submission remains the fallback where no zygote can start, and the log says so. "
        "False: a fresh runner for every submission.")).tag(config=True)
    zygote_idle_seconds = Float(600.0, help=(
        "A process's warm zygote (see `warm_zygote`) is stopped after this many seconds without a runner "
        "handed out, so a long-lived Jupyter server does not hold one forever; the next Autograde starts a "
        "new one. 0: keep it until the process exits.")).tag(config=True)
    calibration_directory = Unicode("", help=(
        "Where the reference solution's timings are kept (one JSON file per assignment and notebook, with "
        "what they were measured on) and reused by every later grading process: measured again when the "
        "machine, the course (source notebook, hidden checks, runner) or torch changes, or with "
        "`recalibrate`. Empty: `.sdpa-calibration` in the course directory.")).tag(config=True)
    recalibrate = Bool(False, help=(
        "Measure the reference solution again in this process (once) and replace the kept timings, "
        "even when they match this machine, course and torch.")).tag(config=True)

    @property
    def require_isolation(self) -> bool:
        return not self.allow_unisolated

    def limits(self) -> Limits:
        return Limits(memory_bytes=self.memory_mb * 2**20)

    def budget(self) -> Budget:
        """The fixed limits (the ceilings of the derived ones)."""
        return Budget(cell_timeout=self.cell_timeout, display_cell_timeout=self.display_cell_timeout,
                      call_timeout=self.call_timeout, total_seconds=self.total_seconds,
                      multiple=self.time_multiple, floor=self.time_floor, cell_floor=self.cell_time_floor)

    def reference(self, resources: dict) -> calibration.ReferenceTimes | None:
        """This process's run of the source notebook (made on first use); None if limits stay fixed."""
        if not self.limits_from_reference:
            return None
        try:
            source = course_notebook(self, resources, "source_directory")
        except FileNotFoundError as exc:  # RestoreNotebookStructure refuses to grade without it anyway
            self.log.warning("time limits stay fixed: %s", str(exc))  # not exc: its traceback pins resources
            return None
        runners = self.runner_source(resources)
        info = resources["nbgrader"]
        store = calibration_file.Store(self.calibration_directory or calibration_file.default_directory(self),
                                       info["assignment"], info["notebook"], self.log)
        return calibration.reference_times(source, lambda cells, shown, roles: StudentSession(
            cells, display_cells=shown, provided_cells=roles[0], demo_cells=roles[1], budget=self.budget(),
            limits=self.limits(),
            require_isolation=self.require_isolation, runner_source=runners), store=store, again=self.recalibrate)

    def runner_source(self, resources: dict):
        """The runner source handed in (a batch worker's), else this process's warm zygote (or None:
        fresh runners)."""
        given = Shared.get(resources, RUNNER_SOURCE)
        if given is not None:
            return given
        _one_torch_thread()
        if not self.warm_zygote:
            return None
        return shared_zygote.process_runners(self.limits(), self.require_isolation, self.log,
                                             self.zygote_idle_seconds)

    def preprocess(self, nb: nbformat.NotebookNode, resources: dict) -> tuple[nbformat.NotebookNode, dict]:
        # What the run writes into the notebook (limits hit, cells skipped) in its edition's language.
        with using(language_of(resources.get("nbgrader", {}).get("assignment"))):
            return self._preprocess(nb, resources)

    def _preprocess(self, nb: nbformat.NotebookNode, resources: dict) -> tuple[nbformat.NotebookNode, dict]:
        # Before any student code (formgrader's button: stock autograde has refused already, in `configure`).
        # Allowed, each unisolated runner's launch says so (``launcher.sandboxed_popen``).
        isolation.require(self.allow_unisolated)
        positions, sources = code_cells(nb)
        display = display_cells(nb, positions)
        reference, budget, known = self.reference(resources), self.budget(), {}
        if reference is not None:
            budget = calibration.limits(reference, nb, positions, set(display), budget)
            if self.reuse_reference_outputs:
                known = calibration.known_outputs(reference, nb, positions, sources)
        provided, demonstrating = code_review.cell_roles(nb, positions, sources)
        session = StudentSession(sources, display_cells=display, budget=budget, known_outputs=known,
                                 provided_cells=provided, demo_cells=demonstrating,
                                 limits=self.limits(), require_isolation=self.require_isolation,
                                 runner_source=self.runner_source(resources))
        state = ExecutionState(session, positions)
        resources[EXECUTION] = Shared(state)
        try:
            outputs = session.run_notebook()
        except CellRunError as exc:
            state.close()
            index = positions[exc.position]
            raise CellError(index, grade_id(nb.cells[index]), str(exc), type(self).__name__) from exc
        except BaseException:
            state.close()
            raise
        for pos, index in enumerate(positions):
            cell = nb.cells[index]
            cell.outputs = [nbformat.from_dict(o) for o in outputs.get(pos, [])]  # sanitised and capped by the session
            cell.execution_count = pos + 1
        return nb, resources


def _one_torch_thread() -> None:
    """The hidden checks' tensors are tiny and the runner needs the other core: a second intra-op thread in
    this process would only spin (``python -m benchmarks torch-threads``).  `sdpa-course` workers set the
    same (``batch/worker.py``), so every command computes the checks alike."""
    import torch

    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)
