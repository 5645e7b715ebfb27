"""Hidden checks, one module per graded part (never released; ``autograder.grading.check_api`` says what a check declares)."""
