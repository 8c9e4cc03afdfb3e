"""The benchmark registry: every family accelbench knows, listed explicitly.

A family is one package (core.family): its `family` module declares its benchmarks,
whether they are checks, its validate levels, suites, commands and batch jobs; adding
one is its package and one line here. Importing this module imports only the
declarations; torch is imported inside each benchmark's measure function, in the worker
that runs it.
"""

from __future__ import annotations

from accelbench.benchmarks.collectives.family import FAMILY as COLLECTIVES
from accelbench.benchmarks.health.family import FAMILY as HEALTH
from accelbench.benchmarks.isolate.family import FAMILY as ISOLATE
from accelbench.benchmarks.llm.family import FAMILY as LLM
from accelbench.benchmarks.micro.family import FAMILY as MICRO
from accelbench.benchmarks.models.family import FAMILY as MODELS
from accelbench.benchmarks.qualify.family import FAMILY as QUALIFY
from accelbench.benchmarks.scale.family import FAMILY as SCALE
from accelbench.benchmarks.serving.family import FAMILY as SERVING
from accelbench.benchmarks.validation.family import FAMILY as VALIDATION
from accelbench.core.registry import Registry

REGISTRY = Registry.of([
    MICRO,
    COLLECTIVES,
    ISOLATE,
    MODELS,
    # Training at scale: FSDP2, tensor and pipeline parallelism, a 2-D mesh.
    SCALE,
    SERVING,
    # LLM serving engines under load: TTFT, TPOT, ITL, goodput at an SLO.
    LLM,
    # Validation checks (`accelbench validate`): pass, fail or skip, with the error found.
    VALIDATION,
    # Node health (`accelbench health`, `validate --level`): readings judged by rules.
    HEALTH,
    # Qualification (`accelbench qualify`, `validate --level`): the node's figures
    # against the gates of its GPU model.
    QUALIFY,
], locator=f"{__name__}:REGISTRY")

__all__ = ["REGISTRY"]
