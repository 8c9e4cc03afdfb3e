"""Running cases: planning from suites, a supervised worker process, the run session."""
