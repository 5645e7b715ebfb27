"""Trusted grading engine for the scaled dot-product attention course.

Subpackages, by layer (see "Code map" in the README):
``nbgrader`` (the configured pipeline steps), ``sandbox`` (running student
code; ``sandbox/guest`` is all that is mounted inside), ``grading`` (hidden
checks, diagnosis, feedback), ``batch`` (parallel ``sdpa-course autograde``),
``demo`` (the demo course); ``cli`` and ``report`` are the commands.
Importing this package imports nothing heavy (no torch, no nbgrader).
"""

__all__ = ["__version__"]
__version__ = "0.1.0"
