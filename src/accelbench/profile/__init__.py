"""Profiling with the PyTorch profiler (Kineto): capture a trace of any benchmark, and
read it for the user.

- capture.py, context.py, case.py: run a case's operation under the profiler with a
  wait/warm-up/active schedule and write a TensorBoard/Perfetto trace (needs torch);
- trace.py, categories.py, intervals.py, operators.py, launches.py, analysis.py: read a
  trace and say where the time went (pure Python, no torch; report/profile.py writes
  it for people);
- session.py: `accelbench profile` from request to stored run, in this process
  or on every rank of a torchrun job;
- diff.py, explain.py, sides.py, explain_session.py: `accelbench explain`, a case of two
  runs profiled again under each run's stack, the two sides' profiles aligned (no torch)
  and the findings stored; report/explain_tables.py writes them for people.
"""
