"""The demo course: sample submissions a class produces, graded end to end by ``sdpa-course demo``."""
