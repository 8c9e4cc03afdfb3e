"""LLM serving under load (the `llm` family): a serving engine, started here or reached by
URL, driven by a load generator in its own process, and judged by TTFT, TPOT, ITL,
end-to-end latency and goodput at an SLO.

`records` holds what one streamed request left (timestamps and token counts, never its
text); `workload` plans the requests (lengths, random tokens, arrivals); `client` is the
load generator's process; `metrics` turns records into figures with intervals; `engines`
starts, reaches and checks the engines; `declaration` declares the `serve-llm` benchmark.
"""
