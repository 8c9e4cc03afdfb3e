"""The figures a node is qualified on, each with its unit and direction: what a gate
names (`gates`), what the `gate` check measures (`figures`), and what the reason codes
of a figure below (or above) its gate are.

A figure is measured per subject: per device for most, per pair of devices for `peer`,
per device and the host memory nearest it for `h2d`/`d2h`/`dma-bidir`, per node for
`allreduce`. A gate's `link` narrows `peer` and `links-up` to one kind of link.
"""

from __future__ import annotations

from dataclasses import dataclass

LINKS = ("xgmi", "nvlink", "pcie")


@dataclass(frozen=True)
class FigureKind:
    name: str
    unit: str
    higher_is_better: bool
    code: str  # the reason code of a figure on the wrong side of its gate
    what: str  # one line, for the docs and the report
    per: str = "device"  # device | pair | node
    timed: bool = True  # measured by running work (False: read from the system)
    linked: bool = False  # a gate names the kind of link (`link`)


def _gemm(dtype: str) -> FigureKind:
    return FigureKind(f"gemm-{dtype}", "TFLOP/s", True, "ACCEL_GEMM_BELOW_GATE",
                      f"a large square {dtype} GEMM's throughput")


# In the order a level measures them: what is read first, then what is timed from the
# least heat to the most, the power under load last.
KINDS: tuple[FigureKind, ...] = (
    FigureKind("memory-size", "GiB", True, "ACCEL_MEMORY_SIZE",
               "the memory a device reports (the host's on the CPU)", timed=False),
    FigureKind("pcie-gen", "generation", True, "ACCEL_PCIE_SPEED",
               "the PCIe generation a device's link trained at", timed=False),
    FigureKind("pcie-width", "lanes", True, "ACCEL_PCIE_WIDTH",
               "the PCIe width a device's link trained at", timed=False),
    FigureKind("links-up", "links", True, "ACCEL_LINK_DOWN",
               "a device's active XGMI or NVLink links", timed=False, linked=True),
    FigureKind("launch", "us", False, "ACCEL_LAUNCH_ABOVE_GATE",
               "the time to launch and finish an empty kernel (an operator on the CPU)"),
    FigureKind("memory-read", "GB/s", True, "ACCEL_MEMORY_BELOW_GATE",
               "device memory (HBM, GDDR; DRAM on the CPU) read bandwidth"),
    FigureKind("memory-write", "GB/s", True, "ACCEL_MEMORY_BELOW_GATE",
               "device memory write bandwidth"),
    FigureKind("memory-copy", "GB/s", True, "ACCEL_MEMORY_BELOW_GATE",
               "device memory copy bandwidth (bytes read plus bytes written)"),
    FigureKind("h2d", "GB/s", True, "ACCEL_HOST_LINK_BELOW_GATE",
               "host to device copy from pinned memory on the device's nearest NUMA node"),
    FigureKind("d2h", "GB/s", True, "ACCEL_HOST_LINK_BELOW_GATE",
               "device to host copy into pinned memory on the nearest NUMA node"),
    FigureKind("dma-bidir", "GB/s", True, "ACCEL_HOST_LINK_BELOW_GATE",
               "host to device and back at once, the two directions summed"),
    FigureKind("peer", "GB/s", True, "ACCEL_PEER_BELOW_GATE",
               "device to device copy, one pair at a time, per kind of link", per="pair",
               linked=True),
    FigureKind("allreduce", "GB/s", True, "ACCEL_ALLREDUCE_BELOW_GATE",
               "all-reduce bus bandwidth across the node's devices at a size", per="node"),
    *(_gemm(d) for d in ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")),
    FigureKind("train", "TFLOP/s", True, "ACCEL_TRAIN_BELOW_GATE",
               "a small transformer's training throughput in model FLOPs"),
    FigureKind("power", "W", True, "ACCEL_POWER_BELOW_GATE",
               "the board power a device sustains under a GEMM load"),
)
BY_NAME = {k.name: k for k in KINDS}
FIGURES = tuple(BY_NAME)


def kind(name: str) -> FigureKind:
    """The figure called `name` (KeyError for none)."""
    return BY_NAME[name]
