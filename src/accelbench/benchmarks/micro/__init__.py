"""Micro-benchmarks: one primitive each (matrix multiply, memory traffic, kernel launch)."""
