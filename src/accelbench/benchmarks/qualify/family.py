"""The `qualify` family: does this node do what its GPU model should? Its `gate` checks
measure the node's figures and judge them against per-model gates shipped as data
(`gates.yaml`, sources in docs/gates.md) or a site's file. `validate --level N` runs the
figures gated at that level or below; `accelbench qualify` adds the scheduler's
prologue and epilogue modes and writes a site file from a scan of the node (`--init`)."""

from accelbench.benchmarks.qualify import declaration
from accelbench.core.family import Family

_GATE = (declaration.BENCHMARK.name,)

FAMILY = Family(
    __package__, (declaration.BENCHMARK,),
    summary="the node's figures against the gates of its GPU model",
    checks=True,
    levels={level: _GATE for level in declaration.LEVELS},
    commands=(f"{__package__}.command",))
