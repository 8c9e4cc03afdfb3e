"""Choosing runs and cases by what a person can type.

A run reference is, in this order:
  - "latest" (or "last"), a run id, or a unique prefix of one;
  - FIELD=GLOB[,FIELD=GLOB...] with FIELD one of gen (generation key), host, device,
    suite, status, id: every run that matches all of them;
  - a glob (or the exact text) of a generation key, case-insensitive, such as
    "*MI250X*" or "AMD Instinct MI250X | ROCm 5.3 | PyTorch 1.12.1": every run of it.

A case pattern is "BENCH [NAME=GLOB ...]": a glob on the benchmark name, then globs on
any of its parameters, in any order; parameters not named are free. "*" is every case.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from accelbench.core.case import Case
from accelbench.core.measurement import Measurement
from accelbench.core.names import STATUS_SKIPPED
from accelbench.core.untrusted import short
from accelbench.errors import UserError
from accelbench.store import RunRecord, Store, StoredRun

RUN_FIELDS = {
    "gen": "generation_key",
    "generation": "generation_key",
    "host": "host",
    "device": "device",
    "suite": "suite",
    "status": "status",
    "id": "id",
}


@dataclass(frozen=True)
class RunGroup:
    """The runs one reference selected, pooled as one side of a comparison."""

    ref: str
    runs: tuple[StoredRun, ...]  # oldest first

    @property
    def label(self) -> str:
        if len(self.runs) == 1:
            return self.runs[0].record.id
        return f"{self.ref} ({len(self.runs)} runs)"

    @property
    def generation_keys(self) -> list[str]:
        return list(dict.fromkeys(r.record.generation_key for r in self.runs))

    @property
    def latest(self) -> StoredRun:
        return self.runs[-1]


def matching_records(
    records: Sequence[RunRecord], ref: str, store_path: object = ""
) -> list[RunRecord]:
    """The runs `ref` selects among `records` (newest first), newest first."""
    ref = ref.strip()
    if not ref:
        raise UserError("empty run reference")
    if ref in ("latest", "last"):
        if not records:
            raise UserError(f"no runs in result store {store_path}")
        return [records[0]]
    exact = [r for r in records if r.id == ref]
    if exact:
        return exact
    prefixed = [r for r in records if r.id.startswith(ref)]
    if len(prefixed) == 1:
        return prefixed
    if len(prefixed) > 1:
        shown = ", ".join(r.id for r in prefixed[:5]) + (", ..." if len(prefixed) > 5 else "")
        raise UserError(f"run {ref!r} is ambiguous: it matches {len(prefixed)} runs ({shown})")
    if "=" in ref:  # generation keys never hold "="
        return [r for r in records if _record_matches(r, _parse_filter(ref))]
    pattern = ref.lower()
    by_generation = [r for r in records if fnmatch.fnmatchcase(r.generation_key.lower(), pattern)]
    if by_generation:
        return by_generation
    raise UserError(f"no run or stack matches {ref!r} in result store {store_path}")


def _parse_filter(ref: str) -> list[tuple[str, str]]:
    pairs = []
    for part in ref.split(","):
        name, sep, glob = part.partition("=")
        name = name.strip().lower()
        if not sep or name not in RUN_FIELDS:
            raise UserError(
                f"bad run filter {part.strip()!r}: use FIELD=GLOB with FIELD one of "
                f"{', '.join(sorted(RUN_FIELDS))}"
            )
        pairs.append((RUN_FIELDS[name], glob.strip().lower()))
    return pairs


def _record_matches(record: RunRecord, pairs: list[tuple[str, str]]) -> bool:
    return all(
        fnmatch.fnmatchcase(str(getattr(record, field) or "").lower(), glob)
        for field, glob in pairs
    )


def select_group(store: Store, ref: str) -> RunGroup:
    """Load the runs one reference selects; a filter that selects nothing is an error."""
    records = matching_records(store.list_runs(), ref, store.name)
    if not records:
        raise UserError(f"no run matches {ref!r} in result store {store.name}")
    runs = [store.load_run(r.id) for r in reversed(records)]
    return RunGroup(ref, tuple(runs))


def select_runs(store: Store, refs: Sequence[str]) -> list[StoredRun]:
    """Every run any of `refs` selects (no reference: every run), oldest first, once each."""
    ordered = sorted(_chosen_records(store, refs), key=lambda r: (r.started_at, r.id))
    return [store.load_run(r.id) for r in ordered]


def _chosen_records(store: Store, refs: Sequence[str]) -> list[RunRecord]:
    """The records of the runs any of `refs` selects (no reference: every run), once
    each; a reference that selects nothing is an error."""
    records = store.list_runs()
    if not refs:
        return records
    chosen: dict[str, RunRecord] = {}
    for ref in refs:
        found = matching_records(records, ref, store.name)
        if not found:
            raise UserError(f"no run matches {ref!r} in result store {store.name}")
        chosen.update((r.id, r) for r in found)
    return list(chosen.values())


def select_node_runs(store: Store, refs: Sequence[str]) -> list[StoredRun]:
    """The newest run of each node (host and device) among those `refs` selects, in host
    order, as `baseline.node_runs` picks them, reading only those runs from the store."""
    newest: dict[tuple[str, str], RunRecord] = {}
    for record in sorted(_chosen_records(store, refs), key=lambda r: (r.started_at, r.id)):
        newest[(record.host, record.device)] = record
    return [store.load_run(newest[k].id) for k in sorted(newest)]


def select_case_runs(store: Store, wanted: CasePattern | str) -> list[StoredRun]:
    """The runs holding a case `wanted` (a case key or a pattern) selects, oldest first,
    each with only those measurements and without its fingerprint: what a question about
    some cases (`history`) reads, instead of every run whole."""
    if isinstance(wanted, str):
        pairs = store.measurements_for_case(wanted)
    else:
        keys = [m.case.key for m in store.case_examples() if wanted.matches(m.case)]
        pairs = store.measurements_for_cases(keys)
    grouped: dict[str, tuple[RunRecord, list[Measurement]]] = {}
    for record, m in pairs:
        grouped.setdefault(record.id, (record, []))[1].append(m)
    return [StoredRun(record, {}, tuple(ms)) for record, ms in grouped.values()]


def exclude_contended(runs: Sequence[StoredRun]) -> list[StoredRun]:
    """The runs with each figure measured on a busy host set aside: such a measurement
    stays, as not measured, with what made the host busy as its reason, so a comparison
    says why a case is missing instead of quietly losing it."""
    return _set_aside(runs, lambda m: m.contended, lambda m: "excluded, measured on a "
                      f"busy host: {'; '.join(m.contention) or 'contended'}")


def exclude_throttled(runs: Sequence[StoredRun]) -> list[StoredRun]:
    """The runs with each figure measured while the device throttled set aside, as
    `exclude_contended` does: the measurement stays, as not measured, with what throttled
    the device (a throttle reason, a sagging clock) as its reason."""
    return _set_aside(runs, lambda m: m.throttled, lambda m: "excluded, measured while the "
                      f"device throttled: {'; '.join(m.throttle_reasons) or 'throttled'}")


def _set_aside(runs: Sequence[StoredRun], test: Callable[[Measurement], bool],
               reason: Callable[[Measurement], str]) -> list[StoredRun]:
    out = []
    for run in runs:
        measurements = tuple(
            dataclasses.replace(m, status=STATUS_SKIPPED, reason=reason(m))
            if m.ok and test(m) else m
            for m in run.measurements)
        out.append(dataclasses.replace(run, measurements=measurements))
    return out


# -- cases -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CasePattern:
    benchmark: str
    params: tuple[tuple[str, str], ...]
    text: str

    def matches(self, case: Case) -> bool:
        if not fnmatch.fnmatchcase(case.benchmark.lower(), self.benchmark):
            return False
        values = {k.lower(): _param_texts(v) for k, v in case.params}
        return all(
            name in values and any(fnmatch.fnmatchcase(v, glob) for v in values[name])
            for name, glob in self.params
        )


def parse_case_pattern(text: str) -> CasePattern:
    """"gemm dtype=bf16 shape=4096" -> a pattern; raises UserError when malformed."""
    tokens = text.split()
    if not tokens:
        raise UserError("empty case pattern")
    if "=" in tokens[0]:
        tokens.insert(0, "*")
    params = []
    for token in tokens[1:]:
        name, sep, glob = token.partition("=")
        if not sep or not name:
            raise UserError(
                f"bad case pattern {short(text)}: after the benchmark name give NAME=GLOB, "
                f"got {short(token)}"
            )
        params.append((name.lower(), glob.lower()))
    return CasePattern(tokens[0].lower(), tuple(params), text)


def _param_texts(value: object) -> tuple[str, ...]:
    """The spellings a parameter value can be matched by (labels write booleans yes/no)."""
    if isinstance(value, bool):
        return ("true", "yes") if value else ("false", "no")
    return (str(value).lower(),)
