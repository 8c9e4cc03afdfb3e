"""Suites are data: TOML files naming benchmarks, parameter grids and timing budgets."""
