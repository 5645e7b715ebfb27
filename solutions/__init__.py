"""Reference solutions of the attention course (instructor-only; never released)."""
