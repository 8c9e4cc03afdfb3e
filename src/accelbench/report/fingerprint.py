"""A fingerprint as (label, text) rows, for `accelbench env`, `show --env` and the reports.

The keys, labels and kinds are declared in `env.metadata`; this module only writes them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from accelbench.core.units import format_bytes, format_plain
from accelbench.env.metadata import BYTES, CLUSTER, COUNTED, GPUS, KEYS, LIBRARY, MetadataKey


def format_library(value: Any) -> str:
    """{"name": "MIOpen", "version": "3.2.0"} -> "MIOpen 3.2.0"."""
    if not isinstance(value, Mapping):
        return format_plain(value)
    return " ".join(str(value[k]) for k in ("name", "version") if value.get(k))


def format_counted(value: Any) -> str:
    """["MI300X", "MI300X"] -> "2 x MI300X": device lists are mostly one name repeated."""
    if not isinstance(value, (list, tuple)):
        return format_plain(value)
    counts = Counter(str(v) for v in value)
    return ", ".join(name if n == 1 else f"{n} x {name}" for name, n in counts.items())


def format_entry(meta: MetadataKey, value: Any) -> str:
    """The text of one value as its key's kind says; "" for an absent value (no row)."""
    if value is None:
        return ""
    if meta.kind == BYTES:
        return format_bytes(value, decimals=1)
    if meta.kind == COUNTED:
        return format_counted(value)
    if meta.kind == LIBRARY:
        return format_library(value)
    return format_plain(value)


def _absent(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, (list, tuple, dict)) and not value)


def rows(fingerprint: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, text) pairs for a fingerprint dict, in display order, absent values skipped.

    A mapping key declared with `expand` (packages, environment) gives one row per entry.
    """
    result: list[tuple[str, str]] = []
    for meta in KEYS:
        value = meta.get(fingerprint)
        if _absent(value):
            continue
        if meta.kind == CLUSTER and isinstance(value, Mapping):
            result.extend(cluster_rows(meta.label, value))
            continue
        if meta.kind == GPUS and isinstance(value, list):
            result.extend(gpu_rows(meta.label, value))
            continue
        if meta.expand and isinstance(value, Mapping):
            # An empty value is kept here: CUDA_VISIBLE_DEVICES="" hides every GPU.
            result.extend(
                (str(name), format_entry(meta, item) or '""')
                for name, item in value.items()
                if item is not None
            )
            continue
        text = format_entry(meta, value)
        if text:
            result.append((meta.label, text))
    return result


def gpu_rows(label: str, gpus: list[Any]) -> list[tuple[str, str]]:
    """One row per visible device: which physical GPU it is ("GPU 0": "serial
    1654923001001, UUID GPU-..., 0000:18:00.0, NVIDIA H100 80GB HBM3")."""
    out = []
    for gpu in gpus:
        if not isinstance(gpu, Mapping):
            continue
        parts = [f"{name} {gpu[key]}" for name, key in (("serial", "serial"), ("UUID", "uuid"))
                 if gpu.get(key)]
        parts += [str(gpu[key]) for key in ("bus_id", "product") if gpu.get(key)]
        out.append((f"{label} {format_plain(gpu.get('index'))}",
                    ", ".join(parts) or "identity not readable"))
    return out


def cluster_rows(label: str, cluster: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The nodes of a job with their ranks, the interconnect settings they share, and each
    node's settings that differ from the others'."""
    from accelbench.env.cluster import Cluster, shared_settings

    nodes = Cluster.from_dict(cluster).nodes
    listed = ", ".join(f"{n.name} ({_ranks(n.ranks)})" for n in nodes)
    out = [(label, f"{len(nodes)}: {listed}")]
    common, differing = shared_settings(nodes)
    if common:
        out.append(("Interconnect" if len(nodes) == 1 else "Interconnect (every node)",
                    _settings(common)))
    for node, own in zip(nodes, differing, strict=True):
        if own:
            out.append((f"Interconnect ({node.name})", _settings(own)))
    return out


def _ranks(ranks: tuple[int, ...]) -> str:
    if not ranks:
        return "no ranks"
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if list(ranks) == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return "ranks " + ", ".join(map(str, ranks))


def _settings(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())


def flatten(d: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Every leaf of a fingerprint of a shape the metadata keys do not know."""
    if not isinstance(d, dict):
        return [(prefix, str(d))]
    out: list[tuple[str, str]] = []
    for k, v in d.items():
        out += flatten(v, f"{prefix}.{k}" if prefix else str(k))
    return out
