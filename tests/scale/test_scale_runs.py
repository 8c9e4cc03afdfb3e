"""Every parallel form trained for real on Gloo ranks of this CPU, through `accelbench run`'s
session: loss parity checked, figures and the memory plan stored, what cannot run skipped
with its reason, and a case that cannot fit refused before anything is built."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from accelbench.benchmarks import REGISTRY
from accelbench.core.request import RunRequest
from accelbench.runner.plan import validate
from accelbench.runner.session import run_session
from accelbench.store import Store
from accelbench.store.records import StoredRun

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

FAST = {"max_time": 0.2, "warmup_time": 0.0, "processes": 1}
TINY = {"seq": ("16",), "batch": ("4",), "steps_per_window": ("1",), "parity_steps": ("2",),
        "profile_steps": ("1",)}


def _run(store_path: Path, benches: tuple[str, ...], overrides: Mapping[str, tuple[str, ...]],
         ranks: int, oversubscribe: bool = False) -> StoredRun:
    request = RunRequest(benches=benches, overrides={**TINY, **overrides}, device="cpu",
                      timing=FAST, nproc_per_node=ranks, oversubscribe=oversubscribe)
    with Store.open(store_path) as store:
        outcome = run_session(validate(request, REGISTRY), store)
        return store.load_run(outcome.run_id)


def test_every_form_on_two_ranks_matches_one_device_and_is_timed(store_path) -> None:
    stored = _run(store_path, ("train-fsdp", "train-tp", "train-pp", "train-2d"),
                  {"model": ("llama-tiny", "gpt2-tiny"), "accumulate": ("2",),
                   "sequence_parallel": ("yes",), "checkpoint": ("yes",),
                   "microbatches": ("2",)}, ranks=2)
    by_case = {(m.case.benchmark, m.case.param_dict["model"]): m for m in stored.measurements}
    for bench, model in (("train-tp", "gpt2-tiny"), ("train-2d", "gpt2-tiny")):
        skipped = by_case[(bench, model)]
        assert skipped.status == "skipped" and "c_attn" in (skipped.reason or "")
    ran = {key: m for key, m in by_case.items() if m.status != "skipped"}
    assert set(ran) == {("train-fsdp", "llama-tiny"), ("train-fsdp", "gpt2-tiny"),
                        ("train-tp", "llama-tiny"), ("train-pp", "llama-tiny"),
                        ("train-pp", "gpt2-tiny"), ("train-2d", "llama-tiny")}
    for (bench, _), m in ran.items():
        assert m.status == "ok", (bench, m.reason)
        details = m.details
        check = details["parity"]
        assert check["steps"] == 2 and check["worst_relative_difference"] <= check["tolerance"]
        assert check["losses"][1] < check["losses"][0]  # the steps trained
        assert details["world_size"] == 2 and len(details["rank_step_s"]) == 2
        assert details["rank_nodes"][0] == details["rank_nodes"][1]
        assert all(s > 0 for s in details["rank_solo_s"])
        assert details["memory_estimate"]["total"] > 0
        tokens, per_device = m.figure("tokens"), m.figure("tokens_per_device")
        assert tokens is not None and per_device is not None
        assert per_device.value == pytest.approx(tokens.value / 2)
        exposed = m.figure("exposed_comm")
        assert exposed is not None and 0 <= exposed.value <= 100
    fsdp = ran[("train-fsdp", "llama-tiny")].details
    assert fsdp["parallel"] == {"form": "fsdp", "dp": 2, "tp": 1, "pp": 1, "accumulate": 2}
    assert fsdp["global_batch"] == 2 * 4 * 2 and fsdp["scaling"] == "weak"
    assert ran[("train-2d", "llama-tiny")].details["parallel"]["tp"] == 2
    assert ran[("train-pp", "gpt2-tiny")].details["parallel"]["schedule"] == "1f1b"
    # The run's report: a row per case that ran, each with its parity check.
    from accelbench.benchmarks.scale.view import sections

    [section] = sections(stored.measurements)
    rows = section.tables[0].rows
    assert len(rows) == 6 and all(" <= " in row[-1] for row in rows)


def test_a_two_by_two_mesh_and_an_interleaved_pipeline_on_four_ranks(store_path) -> None:
    stored = _run(store_path, ("train-2d", "train-pp"),
                  {"model": ("llama-tiny",), "config": ("layers=8,kv_heads=4",),
                   "schedule": ("interleaved-1f1b",), "microbatches": ("4",),
                   "dtype": ("bf16",)}, ranks=4, oversubscribe=True)
    by_bench = {m.case.benchmark: m for m in stored.measurements}
    mesh, pipe = by_bench["train-2d"], by_bench["train-pp"]
    assert mesh.status == "ok", mesh.reason
    assert pipe.status == "ok", pipe.reason
    assert mesh.details["parallel"] == {"form": "fsdp+tp", "dp": 2, "tp": 2, "pp": 1,
                                        "accumulate": 1}
    assert pipe.details["parallel"]["schedule"] == "interleaved-1f1b"
    for m in (mesh, pipe):
        assert m.details["parity"]["tolerance"] == 2e-2  # bf16's
        assert len(m.details["rank_peak_memory"]) == 4


def test_a_case_that_cannot_fit_is_refused_in_one_line_before_anything_is_built(
    store_path,
) -> None:
    stored = _run(store_path, ("train-fsdp",),
                  {"model": ("llama-7b",), "batch": ("256",), "seq": ("2048",)}, ranks=2)
    [m] = stored.measurements
    assert m.status == "skipped"
    assert m.reason is not None and m.reason.startswith("does not fit: needs about")
    assert "\n" not in m.reason and "per rank" in m.reason and "usable on cpu" in m.reason
    assert m.samples == ()
