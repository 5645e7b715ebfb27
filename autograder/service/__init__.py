"""The check service: a student's notebook graded while they work, with the final grading's engine and words.

A JupyterHub service (``make hub`` starts it) keeps a warm grader and answers "Check my work" from JupyterLab:
`answer` turns a grading record into what the student reads, `policy` decides who may check and when.
"""
