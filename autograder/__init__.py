"""Trusted grading engine for the scaled dot-product attention course.

Kept import-light on purpose: nothing here imports torch or pytest, so the
notebook hook (`autograder.hook`) stays cheap and safe to load anywhere.
"""

__all__ = ["__version__"]
__version__ = "0.1.0"
