"""Which node a rank runs on, and the interconnect settings it runs with.

A node's name is what the batch scheduler calls it (Slurm's SLURMD_NODENAME) or else
the host name. The interconnect settings are the environment variables through which
RCCL/NCCL, Gloo and ROCm's runtime choose and tune the transport: they decide which
network a collective crosses, so they are kept with every multi-node result.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from accelbench.env.fingerprint import host_name

# Variables named exactly, then every variable that starts with one of the prefixes.
INTERCONNECT_NAMES = (
    "GLOO_SOCKET_IFNAME",
    "TP_SOCKET_IFNAME",
    "MASTER_ADDR",
    "MASTER_PORT",
)
INTERCONNECT_PREFIXES = (
    "NCCL_",  # NCCL, and RCCL on ROCm: NCCL_IB_*, NCCL_SOCKET_IFNAME, NCCL_NET, ...
    "RCCL_",
    "HSA_",  # ROCm's runtime: HSA_FORCE_FINE_GRAIN_PCIE, HSA_ENABLE_SDMA, ...
    "UCX_",
    "FI_",  # libfabric (AWS EFA, Slingshot CXI)
)
# Values never kept: they carry credentials.
_SECRET_MARKERS = ("PASSWORD", "TOKEN", "SECRET", "KEY")


def node_name(environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    return host_name(env.get("SLURMD_NODENAME") or None)


def interconnect_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The transport settings in effect, by name, sorted."""
    env = os.environ if environ is None else environ
    kept = {
        k: v for k, v in env.items()
        if (k in INTERCONNECT_NAMES or k.startswith(INTERCONNECT_PREFIXES))
        and not any(marker in k for marker in _SECRET_MARKERS)
    }
    return dict(sorted(kept.items()))
