"""The engines a load is sent to: model folders made here (`model_dir`), engines started
as processes that cannot outlive accelbench (`server`), transformers' continuous batching
in this process (`inprocess`), an endpoint by URL and the context that starts any of them
(`endpoint`), and the check that an engine computes what eager PyTorch does (`canary`).

Importing this package imports neither torch nor transformers.
"""

from accelbench.benchmarks.llm.engines.endpoint import ENGINES, Endpoint, probe, started

__all__ = ["ENGINES", "Endpoint", "probe", "started"]
