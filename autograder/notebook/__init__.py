"""Plain notebook metadata: what a cell is to this course. Below both the grading engine and the nbgrader steps."""
