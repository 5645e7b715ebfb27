"""Hidden checks, diagnosis against the misconception registry, and feedback; never runs student code itself."""
