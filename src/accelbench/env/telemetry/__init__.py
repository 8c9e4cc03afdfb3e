"""Device and host telemetry beside each benchmark case: power, energy, clocks, throttling.

`open_sources` finds what can be read for a device (NVML, amdsmi, the amd-smi CLI, the
host's RAPL, clocks and load), `TelemetrySampler` samples them in a thread into a
`Series`, and `summarize` turns the Series' timed window into an `Energy` summary. The
vendor bindings are imported only when a source is opened.
"""

from accelbench.core.energy import ENERGY_DISAGREEMENT, Energy, summarize
from accelbench.core.telemetry import (
    CPU_ENERGY_J,
    CPU_FREQ_MHZ,
    ENERGY_J,
    GFX_CLOCK_MHZ,
    LOAD1,
    MEM_CLOCK_MHZ,
    MEM_USED_B,
    POWER_W,
    SERIES_FORMAT,
    STEAL_PCT,
    TEMP_C,
    THROTTLE,
    UTIL_PCT,
    Series,
)
from accelbench.env.telemetry.sampler import TelemetrySampler
from accelbench.env.telemetry.sources import SOURCE_NAMES, Source, open_sources, vendor_index

__all__ = [
    "CPU_ENERGY_J",
    "CPU_FREQ_MHZ",
    "ENERGY_DISAGREEMENT",
    "ENERGY_J",
    "GFX_CLOCK_MHZ",
    "LOAD1",
    "MEM_CLOCK_MHZ",
    "MEM_USED_B",
    "POWER_W",
    "SERIES_FORMAT",
    "SOURCE_NAMES",
    "STEAL_PCT",
    "TEMP_C",
    "THROTTLE",
    "UTIL_PCT",
    "Energy",
    "Series",
    "Source",
    "TelemetrySampler",
    "open_sources",
    "summarize",
    "vendor_index",
]
