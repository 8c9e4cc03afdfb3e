"""The `health` family: is the node's hardware healthy and wired as it should be? Its
cases are checks: `accelbench health` (its own command) runs the node's health; `validate
--level 1` runs it alone, `--level 2` adds the copy matrix, and `--level 3` and 4 the stress."""

from accelbench.benchmarks.health import copy_matrix, declaration, stress
from accelbench.core.family import Family

FAMILY = Family(
    __package__, (declaration.BENCHMARK, copy_matrix.BENCHMARK, stress.BENCHMARK),
    summary="the node's health, its copy matrix and a stress",
    checks=True,
    levels={1: (declaration.BENCHMARK.name,),
            2: (declaration.BENCHMARK.name, copy_matrix.BENCHMARK.name),
            3: (declaration.BENCHMARK.name, copy_matrix.BENCHMARK.name,
                stress.BENCHMARK.name),
            4: (declaration.BENCHMARK.name, copy_matrix.BENCHMARK.name,
                stress.BENCHMARK.name)},
    commands=(f"{__package__}.command",))
