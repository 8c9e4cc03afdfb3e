"""What `tally` adds to a run's report."""

from __future__ import annotations

from collections.abc import Sequence

from accelbench.core.measurement import Measurement
from accelbench.core.units import format_value
from accelbench.core.view import RESULTS, Bars, BarSeries, Section, Table


def sections(measurements: Sequence[Measurement]) -> list[Section]:
    ok = [m for m in measurements if m.ok and m.primary is not None]
    if not ok:
        return []
    rows = [(str(m.case.param_dict["n"]), str(m.details.get("primes", "-")),
             format_value(m.primary.value, m.primary.unit)) for m in ok if m.primary]
    table = Table("Tally: primes per range", ("Below", "Primes", "Speed"), rows,
                  numeric=frozenset({0, 1, 2}))
    share = Bars("Tally: share of primes", [row[0] for row in rows],
                 [BarSeries("primes", [int(row[1]) / int(row[0]) for row in rows])],
                 ylabel="share of the numbers")
    speed = Bars("Tally: numbers sieved per second", [row[0] for row in rows],
                 [BarSeries("speed", [m.primary.value for m in ok if m.primary])],
                 ylabel="item/s")
    return [Section("tally", "Tally", (table,), "Primes below each n, and how fast.",
                    charts=(share,)),
            Section(RESULTS, "Results", charts=(speed,))]
