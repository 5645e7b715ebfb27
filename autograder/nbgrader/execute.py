"""`SandboxedExecute`: nbgrader's Execute step, with the code run in a sandboxed runner.

No kernel starts in the course directory: the notebook's code cells run in
a runner process under bubblewrap (``autograder/sandbox``), and the session
stays open for `TrustedScoring`, which calls the student's functions in it.
"""
from __future__ import annotations

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Float, Integer

from ..sandbox.launcher import Limits
from ..sandbox.session import Budget, CellRunError, StudentSession
from .cells import CellError, grade_id, is_answer_cell, nbgrader_meta, without_hidden_tests
from .state import EXECUTION, RUNNER_SOURCE, ExecutionState, Shared


class SandboxedExecute(NbGraderPreprocessor):
    """Execute the code cells in the sandboxed runner instead of a kernel."""

    cell_timeout = Float(30.0, help="Seconds one cell may run.").tag(config=True)
    display_cell_timeout = Float(5.0, help="Seconds a provided cell that only shows output (visible checks, "
                                           "plots, demos) may run; it never scores.").tag(config=True)
    call_timeout = Float(10.0, help="Seconds one call of a student function may run.").tag(config=True)
    total_seconds = Float(240.0, help="Time budget of one submission (cells and checks).").tag(config=True)
    memory_mb = Integer(6144, help="Address-space limit of the runner, MiB.").tag(config=True)
    require_isolation = Bool(False, help="Refuse to grade where no sandbox is available.").tag(config=True)

    def limits(self) -> Limits:
        return Limits(memory_bytes=self.memory_mb * 2**20)

    def budget(self) -> Budget:
        return Budget(cell_timeout=self.cell_timeout, display_cell_timeout=self.display_cell_timeout,
                      call_timeout=self.call_timeout, total_seconds=self.total_seconds)

    def preprocess(self, nb: nbformat.NotebookNode, resources: dict) -> tuple[nbformat.NotebookNode, dict]:
        positions = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
        sources = [without_hidden_tests(nb.cells[i].source) for i in positions]
        session = StudentSession(sources, display_cells=display_cells(nb, positions), budget=self.budget(),
                                 limits=self.limits(), require_isolation=self.require_isolation,
                                 runner_source=Shared.get(resources, RUNNER_SOURCE))
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


def display_cells(nb: nbformat.NotebookNode, positions: list[int]) -> list[int]:
    """Positions of provided code cells after the first answer: they only show output.

    The setup cells before the first answer (imports) keep the long timeout.
    """
    first_answer = next((i for i in positions if is_answer_cell(nb.cells[i])), len(nb.cells))
    return [pos for pos, index in enumerate(positions)
            if index > first_answer and nbgrader_meta(nb.cells[index]).get("locked")
            and not is_answer_cell(nb.cells[index])]
