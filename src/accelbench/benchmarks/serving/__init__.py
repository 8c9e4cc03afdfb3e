"""Serving scenarios under MLPerf LoadGen (the `mlcommons-loadgen` package).

`scenarios` reads a case's settings (no LoadGen, no torch: declarations import it);
`loadgen` runs one LoadGen test and reads its detail log; `sut` is the system under test
that LoadGen's callbacks drive (an engine of `infer-engine` behind a queue); `search`
finds the Server scenario's highest QPS within the latency bound; `bench` declares the
`serve` benchmark.
"""
