"""`checksum`: a family that lives in the tests only, to show that a family with checks, a
validate level, a suite, a command and a Slurm job is one package and one registry line.

Its one benchmark checks the host's hashlib on a published test vector, then times
hashing a buffer: a check (pass, fail or skip) that also measures.
"""
