"""Hidden checks, one pytest module per graded part (never released)."""
