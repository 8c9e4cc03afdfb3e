"""`tally`: a family that lives in the tests only, to show that a family is one folder.

It counts the primes below n with a sieve in plain Python (no torch), and its view adds a
"Tally" section of its own (a table and a chart) and a chart to the run's Results.
"""
