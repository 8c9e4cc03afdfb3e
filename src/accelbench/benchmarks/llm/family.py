"""The `llm` family: LLM serving engines under load (`serve-llm`), with TTFT, TPOT, ITL,
end-to-end latency, goodput at an SLO and sweeps to the SLO's knee; its `serving` suite
holds the GPU cases."""

from accelbench.benchmarks.llm import declaration
from accelbench.core.family import Family

FAMILY = Family(__package__, (declaration.BENCHMARK,),
                summary="LLM serving under load: TTFT, TPOT, ITL and goodput at an SLO")
