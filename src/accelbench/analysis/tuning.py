"""How two measurements' GEMM and convolution tuning differ, in short phrases.

Each stored measurement carries the tuning it ran under (``details["tuning"]``, written by
``env.tuning``): TunableOp's switches and results table, the BLAS back end, hipBLASLt and
rocBLAS override files, MIOpen's find mode and user database. Two runs of one stack tuned
differently can differ by tens of percent, so `compare`, `ab` and `history` say so beside
a case. A record without tuning details (stored before they were kept) differs from
nothing: it compares as it always did.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["short_digest", "tuning_differences", "tuning_of"]

_LIBRARIES = (("hipblaslt", "hipBLASLt"), ("rocblas", "rocBLAS"))


def short_digest(digest: object) -> str:
    """The first six hex digits of a digest and an ellipsis; "none" without one."""
    text = str(digest or "")
    return f"{text[:6]}…" if text else "none"


def tuning_of(details: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The tuning a measurement's details record, or None (older records)."""
    if not isinstance(details, Mapping):
        return None
    tuning = details.get("tuning")
    return tuning if isinstance(tuning, Mapping) else None


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _on(flag: object) -> str:
    return "on" if flag else "off"


def _only(name: str, a: bool, b: bool, sides: tuple[str, str]) -> str | None:
    """ "NAME in B only" where exactly one side has it."""
    if a == b:
        return None
    return f"{name} in {sides[0] if a else sides[1]} only"


def _tunableop(a: Mapping[str, Any], b: Mapping[str, Any], sides: tuple[str, str]
               ) -> list[str]:
    if not (a.get("applies") and b.get("applies")):
        return []
    out: list[str] = []
    on_a, on_b = bool(a.get("enabled")), bool(b.get("enabled"))
    if on_a != on_b:
        return [f"TunableOp on in {sides[0] if on_a else sides[1]} only"]
    if not on_a:
        return []
    if (phrase := _only("TunableOp tuning on", bool(a.get("tuning")),
                        bool(b.get("tuning")), sides)) is not None:
        out.append(phrase)
    had_a, had_b = bool(a.get("file_existed")), bool(b.get("file_existed"))
    if had_a != had_b:
        out.append(f"TunableOp table present in {sides[0] if had_a else sides[1]} only")
    elif had_a and a.get("sha256") != b.get("sha256"):
        out.append(f"TunableOp table differs ({short_digest(a.get('sha256'))} → "
                   f"{short_digest(b.get('sha256'))})")
    match_a, match_b = a.get("validators_match"), b.get("validators_match")
    if match_a is False and match_b is not False:
        out.append(f"validators do not match this stack in {sides[0]}")
    elif match_b is False and match_a is not False:
        out.append(f"validators do not match this stack in {sides[1]}")
    untuned_a = _map(a.get("untuned")).get("count")
    untuned_b = _map(b.get("untuned")).get("count")
    if isinstance(untuned_a, int) and isinstance(untuned_b, int) and untuned_a != untuned_b:
        out.append(f"GEMM shapes run untuned {untuned_a} → {untuned_b}")
    return out


def _library(label: str, a: Mapping[str, Any], b: Mapping[str, Any], sides: tuple[str, str]
             ) -> list[str]:
    files_a, files_b = _map(a.get("files")), _map(b.get("files"))
    out = []
    for name in sorted(set(files_a) | set(files_b)):
        fa, fb = _map(files_a.get(name)), _map(files_b.get(name))
        if not fa or not fb:
            out.append(f"{label} {name} file in {sides[0] if fa else sides[1]} only")
        elif fa.get("sha256") != fb.get("sha256"):
            out.append(f"{label} {name} file differs ({short_digest(fa.get('sha256'))} → "
                       f"{short_digest(fb.get('sha256'))})")
    vars_a, vars_b = _map(a.get("variables")), _map(b.get("variables"))
    changed = sorted(n for n in set(vars_a) | set(vars_b)
                     if n not in files_a and n not in files_b and vars_a.get(n) != vars_b.get(n))
    if changed:
        out.append(f"{label} settings differ ({', '.join(changed)})")
    return out


def _miopen(a: Mapping[str, Any], b: Mapping[str, Any], sides: tuple[str, str]) -> list[str]:
    if not a or not b:
        return []
    out = []
    mode_a, mode_b = a.get("find_mode", "default"), b.get("find_mode", "default")
    if mode_a != mode_b:
        out.append(f"MIOpen find mode {mode_a} → {mode_b}")
    if (phrase := _only("MIOpen user database filled beforehand",
                        bool(a.get("user_db_existed")),
                        bool(b.get("user_db_existed")), sides)) is not None:
        out.append(phrase)
    search_a, search_b = a.get("exhaustive_search"), b.get("exhaustive_search")
    if isinstance(search_a, bool) and isinstance(search_b, bool) and search_a != search_b:
        out.append(f"MIOpen exhaustive search {_on(search_a)} → {_on(search_b)}")
    return out


def tuning_differences(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None,
                       sides: tuple[str, str] = ("A", "B")) -> list[str]:
    """What differs between the tuning A and B ran under, A → B; empty where either side
    has no tuning recorded or nothing that selects kernels differs. `sides` names A and B
    in the phrases ("TunableOp on in B only")."""
    if not isinstance(a, Mapping) or not isinstance(b, Mapping):
        return []
    out: list[str] = []
    blas_a, blas_b = a.get("blas"), b.get("blas")
    if blas_a and blas_b and blas_a != blas_b:
        out.append(f"BLAS {blas_a} → {blas_b}")
    out.extend(_tunableop(_map(a.get("tunableop")), _map(b.get("tunableop")), sides))
    for key, label in _LIBRARIES:
        out.extend(_library(label, _map(a.get(key)), _map(b.get(key)), sides))
    out.extend(_miopen(_map(a.get("miopen")), _map(b.get("miopen")), sides))
    bench_a, bench_b = a.get("cudnn_benchmark"), b.get("cudnn_benchmark")
    if isinstance(bench_a, bool) and isinstance(bench_b, bool) and bench_a != bench_b:
        out.append(f"cuDNN benchmark mode {_on(bench_a)} → {_on(bench_b)}")
    return out
