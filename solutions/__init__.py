"""The reference solution: `sdpa.py` (the code) and the solution notebook built from it."""
from pathlib import Path

SOLUTION_NOTEBOOK = Path(__file__).resolve().with_name("sdpa_solution.ipynb")
