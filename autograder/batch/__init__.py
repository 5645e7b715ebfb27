"""Grading a whole class: ``sdpa-course autograde`` (``run.py`` is the entry point)."""
