"""Answers from stored results: compare runs, chart generations, find change points in a
case's history, diagnose a fleet against a baseline.

Everything here is a pure function of stored records (`StoredRun`, `Measurement`): no
torch, no device, so it runs on a laptop that holds only the results.
"""
