"""The reference solution: `sdpa.py` (the code) and the solution notebook built from it."""
from pathlib import Path

SOLUTION_NOTEBOOK = Path(__file__).resolve().with_name("sdpa_solution.ipynb")


def solution_notebook(assignment: str = "sdpa") -> Path:
    """The solution notebook of an edition (``make notebooks`` writes one per edition)."""
    return Path(__file__).resolve().with_name(f"{assignment}_solution.ipynb")
