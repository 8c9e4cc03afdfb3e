"""One `accelbench explain`: the case of two stored runs profiled again under each run's
stack, in balanced order (A B, B A, ...), the profiles aligned, the findings stored.

Checks that need no profile come first (the runs, the case, each side's PyTorch), so a
mistake costs seconds and leaves the store as it was."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from accelbench.core.names import RUN_COMPLETE
from accelbench.errors import UserError
from accelbench.profile.sides import SIDES, Profiled, Side

if TYPE_CHECKING:
    from accelbench.core.measurement import Measurement
    from accelbench.store import Store, StoredRun
    from accelbench.store.location import StoreLocation

# A profile's deadline: a stuck stack makes its side fail, never the command hang.
DEFAULT_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class ExplainRequest:
    """What to explain and how: two runs (or one side of an A/B), a case, each side's
    interpreter and variables given over its run's stack, and the profiles to take."""

    run_a: str
    run_b: str | None = None  # None: run_a is a side of an A/B, whose other side is B
    case: str | None = None  # a case's key or label text; None: the largest slowdown
    python: Mapping[str, str | None] = field(default_factory=dict)
    env: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    rounds: int = 3  # profiles of each side
    steps: int = 5
    warmup: int = 2
    wait: int = 1
    timeout_s: float = DEFAULT_TIMEOUT_S


@dataclass(frozen=True)
class Explained:
    id: int
    findings: dict[str, Any]
    folder: Path
    chosen: str  # how the case was chosen: "given" or why


class Listener(Protocol):
    """What `explain` says while it works (the command line prints it on stderr)."""

    def chose(self, label: str, why: str) -> None: ...

    def profiling(self, side: str, number: int, total: int) -> None: ...


class _Silent:
    def chose(self, label: str, why: str) -> None:
        pass

    def profiling(self, side: str, number: int, total: int) -> None:
        pass


def explain(request: ExplainRequest, store: Store, location: StoreLocation,
            listener: Listener | None = None,
            profile: Callable[[Side, Path, StoreLocation, Path, float], Profiled] | None = None
            ) -> Explained:
    """Explain one case of two runs; `profile` runs one side's profile (tests give a
    fake; the default is `profile.sides.run_profile`)."""
    from accelbench.profile import sides as side_mod
    from accelbench.profile.diff import diff, step_table
    from accelbench.profile.explain import findings as make_findings
    from accelbench.profile.trace import TraceError, load

    listener = listener or _Silent()
    run_a, run_b, ab_id = _runs(store, request)
    measurement_a, measurement_b, chosen = pick_case(run_a, run_b, request.case)
    listener.chose(measurement_a.case.label, chosen)
    python, env = request.python, request.env
    found: dict[str, Side] = {}
    for name, run, m in (("a", run_a, measurement_a), ("b", run_b, measurement_b)):
        stack, inherit = side_mod.stack_of(run, name, python.get(name), env.get(name, ()))
        found[name] = Side(name, run, m, stack, inherit)
    for name in SIDES:
        side_mod.check_stack(found[name], f"--{name}")

    folder = (location.files_dir / "explain"
              / f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    requests: dict[str, Path] = {}
    repro: dict[str, dict[str, str]] = {}
    for name in SIDES:
        side = found[name]
        profile_request = side_mod.profile_request(side.measurement, side.run, request.steps,
                                                   request.warmup, request.wait)
        run_request = side_mod.run_request(profile_request, side.run)
        requests[name] = _write(folder / f"{name}.profile.json", profile_request.to_dict())
        run_file = _write(folder / f"{name}.run.json", run_request.to_dict())
        repro[name] = {"run": side_mod.repro_line(side, run_file, "run"),
                       "profile": side_mod.repro_line(side, requests[name], "profile"),
                       "stack": side.stack.describe()}

    run_profile = profile or side_mod.run_profile
    tables: dict[str, list[Any]] = {"a": [], "b": []}
    profile_runs: dict[str, list[str]] = {"a": [], "b": []}
    for number in range(request.rounds):
        order = SIDES if number % 2 == 0 else tuple(reversed(SIDES))
        for name in order:
            listener.profiling(name, number + 1, request.rounds)
            profiled = run_profile(found[name], requests[name], location, folder,
                                   request.timeout_s)
            profile_runs[name].append(profiled.run_id)
            if not profiled.traces or profiled.status != RUN_COMPLETE:
                problem = "; ".join(profiled.problems) or "it wrote no trace"
                raise UserError(f"the profile of side {name.upper()} (run "
                                f"{profiled.run_id}) failed: {problem}", exit_code=1)
            try:
                tables[name].append(step_table(load(profiled.traces[0])))
            except TraceError as e:
                raise UserError(f"side {name.upper()}: {e}", exit_code=1) from None

    aligned = diff(tables["a"], tables["b"])
    out = make_findings(
        case_key=measurement_a.case.key, label=measurement_a.case.label,
        benchmark=measurement_a.case.benchmark,
        runs={"a": run_a.record.id, "b": run_b.record.id},
        measurements={"a": measurement_a, "b": measurement_b},
        fingerprints={"a": run_a.fingerprint, "b": run_b.fingerprint},
        diff=aligned, repro=repro, profile_runs=profile_runs, ab=ab_id,
        tuning=_tuning(measurement_a, measurement_b))
    for name, m in (("a", measurement_a), ("b", measurement_b)):
        out["gemm"][name]["backend"] = _gemm_backend(m)
    out["chosen"] = chosen
    out["folder"] = str(folder)
    _write(folder / "findings.json", out)
    stored = store.add_explanation(run_a.record.id, run_b.record.id,
                                   case_key=measurement_a.case.key,
                                   label=measurement_a.case.label, findings=out)
    return Explained(stored, out, folder, chosen)


def _runs(store: Store, request: ExplainRequest) -> tuple[StoredRun, StoredRun, str | None]:
    if request.run_b is None:
        from accelbench.analysis.ab import find_ab

        pair = find_ab(store, request.run_a)
        return pair.a, pair.b, pair.id
    run_a, run_b = store.load_run(request.run_a), store.load_run(request.run_b)
    if run_a.record.id == run_b.record.id:
        raise UserError(f"explain compares two runs, but both are {run_a.record.id}")
    return run_a, run_b, None


def pick_case(a: StoredRun, b: StoredRun, wanted: str | None
              ) -> tuple[Measurement, Measurement, str]:
    """The case to explain, measured (ok) in both runs: the one `wanted` names (its key,
    or text of its label), else the one B measured worst against A; with how it was
    chosen."""
    by_key = {m.case.key: m for m in b.measurements if m.ok}
    both = [(m, by_key[m.case.key]) for m in a.measurements if m.ok and m.case.key in by_key]
    if not both:
        raise UserError(f"runs {a.record.id} and {b.record.id} have no case measured in "
                        "both (explain needs one that both measured)")
    if wanted is not None:
        exact = [p for p in both if p[0].case.key == wanted or p[0].case.label == wanted]
        matches = exact or [p for p in both if wanted in p[0].case.label]
        if not matches:
            shown = ", ".join(p[0].case.label for p in both[:5])
            raise UserError(f"--case {wanted!r} names no case measured in both runs "
                            f"(they have: {shown}{', ...' if len(both) > 5 else ''})")
        if len(matches) > 1:
            shown = ", ".join(p[0].case.label for p in matches[:5])
            raise UserError(f"--case {wanted!r} matches {len(matches)} cases ({shown}): "
                            "give more of the label, or the case's key")
        return matches[0][0], matches[0][1], "given"
    if len(both) == 1:
        return both[0][0], both[0][1], "the one case of both runs"
    worst = max(both, key=_worse_by)
    return worst[0], worst[1], "B's largest slowdown against A"


def _worse_by(pair: tuple[Measurement, Measurement]) -> float:
    """How much worse B is than A on the case's headline figure (a factor; > 1 worse)."""
    fa, fb = pair[0].primary, pair[1].primary
    if fa is None or fb is None or fa.name != fb.name or fa.value <= 0 or fb.value <= 0:
        return 0.0
    return fa.value / fb.value if fa.higher_is_better else fb.value / fa.value


def _tuning(a: Measurement, b: Measurement) -> list[str]:
    from accelbench.analysis.tuning import tuning_differences, tuning_of

    return list(tuning_differences(tuning_of(a.details), tuning_of(b.details)))


def _gemm_backend(m: Measurement) -> str | None:
    """The library a side's GEMMs went to, as its case recorded it (env.tuning): the
    BLAS, and TunableOp where it was on (its table then picks the solution)."""
    from accelbench.analysis.tuning import tuning_of

    tuning = tuning_of(m.details)
    if tuning is None:
        return None
    blas = tuning.get("blas")
    shown = str(blas) if isinstance(blas, str) else None
    tunable = tuning.get("tunableop")
    if isinstance(tunable, Mapping) and tunable.get("applies") and tunable.get("enabled"):
        shown = f"{shown or 'BLAS'} through TunableOp"
    return shown


def _write(path: Path, data: Mapping[str, Any]) -> Path:
    from accelbench.core.strict_json import dumps

    path.write_text(dumps(data, indent=2) + "\n")
    return path

