"""The plans of the training-at-scale forms, the pipeline's split, the parity rule, and
suites that ask for a scaling series of rank counts."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from accelbench.benchmarks import REGISTRY
from accelbench.benchmarks.models import zoo
from accelbench.benchmarks.scale import declaration, forms, parallel, parity, stages
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseFailed, CaseSkipped
from accelbench.core.request import RunRequest
from accelbench.runner.plan import ValidRequest, expand, parse_suite, validate

BASE = {"batch": 4, "global_batch": 0, "checkpoint": False}
BENCHMARKS = {"fsdp": declaration.FSDP, "tp": declaration.TP, "pp": declaration.PP,
              "fsdp+tp": declaration.MESH_2D}


def _plan(form: str, world: int, **params: object) -> forms.Plan:
    bench = BENCHMARKS[form]
    assert bench.typed is not None
    return forms.plan(form, bench.typed(**bench.resolve({**BASE, **params})), world)


def test_each_form_uses_every_rank_its_own_way() -> None:
    fsdp = _plan("fsdp", 4, accumulate=2)
    assert (fsdp.layout.dp, fsdp.layout.tp, fsdp.layout.pp, fsdp.layout.fsdp) == (4, 1, 1, True)
    assert fsdp.global_batch == 4 * 4 * 2 and fsdp.scaling == "weak"
    tp = _plan("tp", 4)
    assert (tp.layout.dp, tp.layout.tp, tp.layout.fsdp, tp.global_batch) == (1, 4, False, 4)
    pp = _plan("pp", 2, schedule="interleaved-1f1b", microbatches=4)
    assert (pp.layout.pp, pp.layout.stages_per_rank, pp.layout.microbatches) == (2, 2, 4)
    mesh = _plan("fsdp+tp", 4, tp=2)
    assert (mesh.layout.dp, mesh.layout.tp, mesh.layout.fsdp) == (2, 2, True)
    assert mesh.to_dict() == {"form": "fsdp+tp", "dp": 2, "tp": 2, "pp": 1, "accumulate": 1}


def test_strong_scaling_splits_a_fixed_global_batch_and_refuses_what_does_not_divide() -> None:
    two, four = _plan("fsdp", 2, global_batch=16), _plan("fsdp", 4, global_batch=16)
    assert (two.batch, four.batch, two.global_batch, four.global_batch) == (8, 4, 16, 16)
    assert two.scaling == "strong"
    with pytest.raises(CaseSkipped, match="does not split into 3 data-parallel ranks"):
        _plan("fsdp", 3, global_batch=16)
    with pytest.raises(CaseSkipped, match="multiple of 2 ranks, not 3"):
        _plan("fsdp+tp", 3, tp=2)
    with pytest.raises(CaseSkipped, match="does not split into 3 microbatches"):
        _plan("pp", 2, microbatches=3)


def test_a_pipeline_shares_the_blocks_out_evenly_earlier_stages_larger() -> None:
    assert stages.split(8, 4) == [(0, 2), (2, 4), (4, 6), (6, 8)]
    assert stages.split(5, 2) == [(0, 3), (3, 5)]
    with pytest.raises(ValueError, match="3 pipeline stages need at least 3 blocks"):
        stages.split(2, 3)
    assert stages.stage_ranks(1, 4, "1f1b") == [1]
    assert stages.stage_ranks(1, 4, "interleaved-1f1b") == [1, 5]


def test_tensor_parallelism_needs_split_heads_and_refuses_gpt2() -> None:
    llama = dict(zoo.get_spec("llama-tiny").shape)  # heads 4, kv_heads 2
    assert parallel.tp_problem("llama", llama, 2) is None
    problem = parallel.tp_problem("llama", llama, 4)
    assert problem is not None and "kv_heads divisible by 4 (it is 2)" in problem
    gpt2 = parallel.tp_problem("gpt2", dict(zoo.get_spec("gpt2-tiny").shape), 2)
    assert gpt2 is not None and "c_attn" in gpt2
    assert parallel.tp_problem("gpt2", {}, 1) is None


def test_parity_passes_within_the_tolerance_and_fails_past_it() -> None:
    ref = parity.Reference((4.0, 3.9, 3.8), solo_seconds=0.1, layers=2)
    details = parity.check([4.0, 3.9 * (1 + 5e-5), 3.8], ref, "fp32")
    assert details["worst_relative_difference"] == pytest.approx(5e-5, rel=1e-6)
    assert details["tolerance"] == parity.TOLERANCE["fp32"]
    with pytest.raises(CaseFailed, match=r"step 2 loss 3.9039 vs single-device 3.9 "
                                         r"\(relative difference 1.00e-03 > 0.0001\)"):
        parity.check([4.0, 3.9039, 3.8], ref, "fp32")
    parity.check([4.0, 3.9039, 3.8], ref, "bf16")  # within bf16's
    with pytest.raises(CaseFailed, match="not finite"):
        parity.check([float("nan"), 3.9, 3.8], ref, "bf16")


def test_every_form_is_registered_as_a_distributed_benchmark_of_its_family() -> None:
    names = ("train-fsdp", "train-tp", "train-pp", "train-2d")
    for name in names:
        bench = REGISTRY.get(name)
        assert (bench.family, bench.distributed) == ("scale", True)
        model = bench.param("model")
        assert model is not None and model.choices is not None
        assert {zoo.get_spec(m).arch for m in model.choices} == {"llama", "gpt2"}
    assert REGISTRY.get("train-fsdp").param("reshard") is not None
    assert REGISTRY.get("train-tp").param("reshard") is None
    assert REGISTRY.get("train-pp").param("schedule") is not None


CPU = DeviceInfo(type="cpu", index=None, name="cpu", platform="cpu")


def _suite_request(suite_text: Mapping[str, Any], **request: Any) -> ValidRequest:
    valid = validate(RunRequest(**request), REGISTRY)
    return dataclasses.replace(valid, suite=parse_suite("series", suite_text))


def test_a_suite_entry_with_a_list_of_ranks_runs_its_cases_at_each_fewest_first() -> None:
    suite = {"cases": [
        {"bench": "train-fsdp", "ranks": [4, 1, 2], "grid": {"model": ["llama-tiny",
                                                                        "gpt2-tiny"]}},
        {"bench": "gemm", "ranks": [1, 2], "grid": {"shape": ["64"]}},
    ]}
    planned = expand(_suite_request(suite), CPU)
    series = [(p.case.param_dict["model"], p.ranks) for p in planned
              if p.benchmark.name == "train-fsdp"]
    assert series == [("llama-tiny", 1), ("gpt2-tiny", 1), ("llama-tiny", 2),
                      ("gpt2-tiny", 2), ("llama-tiny", 4), ("gpt2-tiny", 4)]
    assert [p.ranks for p in planned if p.benchmark.name == "gemm"] == [1]
    given = expand(_suite_request(suite, nproc_per_node=2), CPU)
    assert {p.ranks for p in given if p.benchmark.name == "train-fsdp"} == {2}


@pytest.mark.parametrize("ranks", [[1, 0], ["all"], [True], 0])
def test_a_bad_rank_count_in_a_suite_is_refused(ranks: object) -> None:
    with pytest.raises(ValueError, match="ranks must be a positive number, 'devices', or a list"):
        parse_suite("bad", {"cases": [{"bench": "train-fsdp", "ranks": ranks}]})


def test_the_published_gpu_figures_name_their_source_and_a_valid_configuration() -> None:
    from pathlib import Path

    from accelbench.benchmarks.scale import sizing

    path = Path(__file__).parents[1] / "gpu" / "scale_expectations.toml"
    entries = tomllib.loads(path.read_text())["expected"]
    assert entries
    for entry in entries:
        assert entry["url"].startswith("https://") and len(entry["source"]) > 40
        for low, high in (entry["tokens_per_device"], entry["mfu_percent"]):
            assert 0 < low < high
        spec = zoo.get_spec(entry["model"], entry["config"])
        assert entry["seq"] <= spec.shape["max_positions"]
        # Llama 3.1 8B's published size, from the shape the entry gives.
        assert sizing.parameter_count(spec) == pytest.approx(8.03e9, rel=0.01)


def test_a_form_whose_api_this_pytorch_lacks_is_skipped_with_the_release_it_needs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import types

    fake_torch = types.ModuleType("torch")
    fake_torch.__version__ = "2.3.1"  # type: ignore[attr-defined]
    monkeypatch.setitem(parallel.NEEDS, "fsdp", ("json", "fully_shard", "2.6"))
    with pytest.raises(CaseSkipped, match=r"json.fully_shard is not in PyTorch 2.3.1: it "
                                          r"needs PyTorch 2.6 or later"):
        parallel.require(fake_torch, "mesh", "fsdp")
    monkeypatch.setitem(parallel.NEEDS, "pp", ("no_such_module_here", "PipelineStage", "2.5"))
    with pytest.raises(CaseSkipped, match=r"needs PyTorch 2\.5"):
        parallel.require(fake_torch, "pp")
    monkeypatch.setitem(parallel.NEEDS, "tp", ("json", "dumps", "2.5"))
    parallel.require(fake_torch, "tp")  # present: nothing raised
