"""Trusted grading engine for the scaled dot-product attention course.

Subpackages, by layer from the bottom (``.importlinter`` enforces the order;
the code map is in docs/contributing): ``sandbox`` (running student code;
``sandbox/guest`` is all that is mounted inside) and ``notebook`` (what a
cell is to this course), ``grading`` (hidden checks, diagnosis, feedback),
``nbgrader`` (the configured pipeline steps), ``batch`` (parallel
``sdpa-course autograde``), then the commands: ``report``, ``demo``, ``cli``.
Importing this package imports nothing heavy (no torch, no nbgrader).
"""

__all__ = ["__version__"]
__version__ = "0.1.0"
