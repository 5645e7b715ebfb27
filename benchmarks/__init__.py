"""Measurements of the grading engine, one command each: ``python -m benchmarks <command>`` from the repository root.

Each command's module says what it measures and why; ``python -m benchmarks <command> --help`` lists its flags.
The figures themselves belong in the documentation, not here.
"""
