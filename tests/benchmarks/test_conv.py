"""The convolution benchmark, run for real on the CPU; its layer sets and ROCm recording."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
import torch

from accelbench.benchmarks import REGISTRY
from accelbench.benchmarks.micro import conv
from accelbench.benchmarks.micro.conv_shapes import (
    NAMED_LAYERS,
    NETWORKS,
    ConvLayer,
    layer_names,
    parse_layer,
)
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseFailed, CaseResult, CaseSkipped, Measurement
from accelbench.core.request import RunRequest
from accelbench.core.timing import PerfCounterClock, TimingPolicy
from accelbench.errors import UserError
from accelbench.runner.plan import expand, validate

BENCH = conv.BENCHMARK
RunCase = Callable[..., tuple[CaseResult, Measurement]]
CPU = DeviceInfo(type="cpu", index=None, platform="cpu", name="cpu")
SMALL = "8:12x12:16:3x3:1:1"  # 8 -> 16 channels, 3x3, pad 1 on a 12x12 input
SMALL_FLOP = 2 * 16 * 12 * 12 * 8 * 9  # per image

MI300X = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI300X", "gfx942", 192 * 2**30)
H100 = DeviceInfo("cuda", 0, "cuda", "NVIDIA H100 80GB HBM3", "sm_90", 80 * 2**30)
V100 = DeviceInfo("cuda", 0, "cuda", "Tesla V100-SXM2-32GB", "sm_70", 32 * 2**30)


# --- real runs on the CPU ---------------------------------------------------------------


@pytest.mark.parametrize("direction", conv.DIRECTIONS)
@pytest.mark.parametrize("dtype", conv.CONV_DTYPES)
def test_every_direction_and_dtype_runs_checked(
    ctx: CaseContext, run_case: RunCase, direction: str, dtype: str
) -> None:
    result, measurement = run_case(BENCH, ctx, layer=SMALL, batch=3, direction=direction,
                                   dtype=dtype)
    details = result.details
    assert details["flop_per_call"] == 3 * SMALL_FLOP
    assert details["flop_formula"] == conv.FLOP_FORMULA
    assert details["check_rel_error_small"] <= conv.TOLERANCE[dtype]
    if direction == "bwd-weight":
        assert "check_rel_error_full" not in details  # the weight gradient sums every image
    else:
        assert details["check_rel_error_full"] <= conv.TOLERANCE[dtype]
    throughput = measurement.figure("throughput")
    assert throughput is not None and measurement.stats is not None
    assert throughput.unit == "FLOP/s" and throughput.peak is None
    assert throughput.value == pytest.approx(3 * SMALL_FLOP / measurement.stats.median,
                                             rel=1e-9)
    first = measurement.figure("first_call_time")
    assert first is not None
    assert first.unit == "s" and first.value > 0 and not first.higher_is_better
    assert measurement.figure("search_time") is None  # search is off by default
    assert details["conv_library"] == "oneDNN (mkldnn)"
    assert "has no effect" in details["algorithm_selection"]


@pytest.mark.parametrize("direction", conv.DIRECTIONS)
def test_channels_last_keeps_its_layout(
    ctx: CaseContext, run_case: RunCase, direction: str
) -> None:
    result, _ = run_case(BENCH, ctx, layer=SMALL, batch=2, direction=direction,
                         layout="channels-last")
    assert result.details["layout"] == "channels-last"
    assert result.details["output_memory_format"] == "channels-last"


def test_search_reports_its_time_apart_and_restores_the_flags(
    ctx: CaseContext, run_case: RunCase
) -> None:
    cudnn = torch.backends.cudnn
    # torch.backends.cudnn declares no type for its per-op `conv` precision.
    before = (cudnn.benchmark, cudnn.conv.fp32_precision, cudnn.allow_tf32)  # type: ignore[attr-defined]
    result, measurement = run_case(BENCH, ctx, layer=SMALL, batch=2, search=True)
    assert (cudnn.benchmark, cudnn.conv.fp32_precision, cudnn.allow_tf32) == before  # type: ignore[attr-defined]
    flags = result.details["flags"]
    assert flags["cudnn.benchmark"] is True  # in force while the case ran
    assert flags["cudnn.conv.fp32_precision"] == "ieee"  # fp32 means fp32, not TF32
    assert result.details["tf32_in_effect"] is False
    assert result.details["conv_fp32_precision"] == "ieee"
    search = measurement.figure("search_time")
    first = measurement.figure("first_call_time")
    assert search is not None and not search.higher_is_better
    assert first is not None and measurement.stats is not None
    assert search.value == pytest.approx(max(first.value - measurement.stats.median, 0.0))
    assert result.details["search_time_s"] == search.value
    assert [f.name for f in measurement.figures][:2] == ["throughput", "time"]


def test_flags_are_restored_when_the_case_fails(
    ctx: CaseContext, run_case: RunCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = torch.backends.cudnn.benchmark
    monkeypatch.setattr(conv, "relative_error", lambda *a, **k: 1.0)
    with pytest.raises(CaseFailed):
        run_case(BENCH, ctx, layer=SMALL, batch=1, search=not before)
    assert torch.backends.cudnn.benchmark == before


def test_a_named_resnet_layer_as_the_quick_suite_runs_it(
    ctx: CaseContext, run_case: RunCase
) -> None:
    result, measurement = run_case(BENCH, ctx, layer="resnet50.layer1.0.conv2", batch=1)
    assert result.details["problem"] == "3x3/1 64->64 @56x56 -> 56x56, pad 1"
    assert result.details["occurs_in_network"] == 3
    assert result.details["flop_per_call"] == 2 * 64 * 56 * 56 * 64 * 9
    throughput = measurement.figure("throughput")
    assert throughput is not None and throughput.value > 0


@pytest.mark.parametrize(
    ("layer", "direction", "layout"),
    [
        ("8:4x10x10:8:3x3x3:1x2x2:1", "fwd", "nchw"),  # 3-D, per-dimension stride
        ("8:4x10x10:8:3:1:1", "bwd-weight", "channels-last"),  # 3-D channels-last
        ("16:10x10:16:3x3:2:1:16", "bwd-data", "channels-last"),  # depthwise, strided
        ("16:10x10:32:3x3:1:2:4:2", "fwd", "nchw"),  # grouped and dilated
    ],
)
def test_3d_grouped_depthwise_and_dilated_problems(
    ctx: CaseContext, run_case: RunCase, layer: str, direction: str, layout: str
) -> None:
    result, _ = run_case(BENCH, ctx, layer=layer, batch=3, direction=direction, layout=layout)
    shape = parse_layer(layer)
    assert result.details["flop_per_call"] == shape.flop(3)
    assert result.details["dims"] == shape.dims
    assert result.details["op"].startswith(
        f"torch.nn.functional.conv{shape.dims}d" if direction == "fwd" else "torch.ops.aten"
    )


def test_a_wrong_but_fast_convolution_does_not_score(
    ctx: CaseContext, run_case: RunCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = torch.nn.functional.conv2d

    def wrong(*args: Any) -> torch.Tensor:
        return real(*args) * 1.01

    monkeypatch.setattr(torch.nn.functional, "conv2d", wrong)
    with pytest.raises(CaseFailed, match=r"wrong result: relative error .* for fp32"):
        run_case(BENCH, ctx, layer=SMALL, batch=1)


def test_bf16_on_an_old_gpu_is_skipped_with_a_reason_before_touching_it(run_case: RunCase) -> None:
    ctx = CaseContext(V100, PerfCounterClock(), TimingPolicy())
    with pytest.raises(CaseSkipped, match=r"bf16 needs compute capability 8\.0"):
        run_case(BENCH, ctx, dtype="bf16")


def test_a_case_larger_than_the_device_is_skipped_before_allocating(run_case: RunCase) -> None:
    small_gpu = dataclasses.replace(H100, memory_bytes=2**30)
    ctx = CaseContext(small_gpu, PerfCounterClock(), TimingPolicy())
    with pytest.raises(CaseSkipped, match=r"needs about .* GiB .* the device has 1.0 GiB"):
        run_case(BENCH, ctx, layer="vgg16.features.2", batch=256)


# --- the MIOpen / cuDNN recording, with faked devices ------------------------------------

ROCM_ENV = {
    "MIOPEN_FIND_MODE": "FAST",
    "MIOPEN_FIND_ENFORCE": "SEARCH",
    "MIOPEN_USER_DB_PATH": "/scratch/miopen-db",
    "MIOPEN_DEBUG_CONV_WINOGRAD": "0",
    "MIOPEN_LOG_LEVEL": "3",
    "MIOPEN_API_TOKEN": "hidden",  # a credential-like name is never recorded
    "HIPBLASLT_LOG_LEVEL": "1",  # not a MIOpen setting
}
FLAGS = {"cudnn.enabled": True, "cudnn.benchmark": True, "cudnn.deterministic": False,
         "cudnn.conv.fp32_precision": "ieee", "mkldnn.enabled": True, "miopen.immediate": False}


def test_rocm_records_the_miopen_settings_in_force() -> None:
    out = conv.library_settings(MI300X, FLAGS, ROCM_ENV)
    assert out["conv_library"] == "MIOpen"
    assert out["miopen_env"] == {
        "MIOPEN_DEBUG_CONV_WINOGRAD": "0",
        "MIOPEN_FIND_ENFORCE": "SEARCH",
        "MIOPEN_FIND_MODE": "FAST",
        "MIOPEN_LOG_LEVEL": "3",
        "MIOPEN_USER_DB_PATH": "/scratch/miopen-db",
    }
    assert out["miopen_find_mode"] == "FAST"
    assert out["miopen_find_enforce"] == "SEARCH"
    assert out["miopen_user_db_path"] == "/scratch/miopen-db"
    assert out["flags"]["miopen.immediate"] is False
    assert "exhaustive search" in out["algorithm_selection"]


def test_rocm_without_settings_says_miopen_defaults_apply() -> None:
    out = conv.library_settings(MI300X, {**FLAGS, "cudnn.benchmark": False}, {})
    assert out["miopen_env"] == {}
    assert out["miopen_find_mode"].startswith("unset")
    assert out["miopen_user_db_path"].startswith("unset")
    assert "without exhaustive search" in out["algorithm_selection"]
    immediate = conv.library_settings(MI300X, {**FLAGS, "miopen.immediate": True}, {})
    assert "immediate mode" in immediate["algorithm_selection"]


def test_cuda_records_cudnn_and_no_miopen_settings() -> None:
    out = conv.library_settings(H100, FLAGS, ROCM_ENV)
    assert out["conv_library"] == "cuDNN"
    assert not any(key.startswith("miopen") for key in out)
    assert "miopen.immediate" not in out["flags"]
    assert out["algorithm_selection"].startswith("cuDNN benchmark")
    off = conv.library_settings(H100, {**FLAGS, "cudnn.benchmark": False}, {})
    assert off["algorithm_selection"] == "cuDNN heuristics, no search"


def test_a_rocm_result_carries_the_miopen_settings(
    run_case: RunCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole path on a device described as ROCm (computing on the CPU underneath)."""
    for name, value in ROCM_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("accelbench.core.peaks.lookup", lambda device: None)
    monkeypatch.setattr(conv, "_PROBLEMS_SEEN", set())
    rocm_labelled = dataclasses.replace(MI300X, type="cpu", index=None)
    ctx = CaseContext(rocm_labelled, PerfCounterClock(), TimingPolicy(max_time=0.2,
                                                                    warmup_time=0.01))
    result, measurement = run_case(BENCH, ctx, layer=SMALL, batch=1, dtype="bf16",
                                   search=True)
    assert result.details["conv_library"] == "MIOpen"
    assert result.details["miopen_find_mode"] == "FAST"
    assert "MIOPEN_API_TOKEN" not in result.details["miopen_env"]
    assert result.details["flags"]["cudnn.benchmark"] is True
    assert measurement.figure("search_time") is not None
    assert result.details["algorithm_cache"] == "cold"
    # The user's FAST find mode is kept, and the result says what it means for a search.
    assert result.warnings == (conv.search_warning(MI300X, True, ROCM_ENV),)
    assert "MIOPEN_FIND_MODE=FAST may answer from" in result.warnings[0]

    # The same problem again in this process: PyTorch's cache, not the search flag, decides.
    again, measurement = run_case(BENCH, ctx, layer=SMALL, batch=1, dtype="bf16",
                                  search=False)
    assert again.details["algorithm_cache"] == "warm"
    assert "per-process cache" in again.warnings[0]
    assert any("per-process cache" in w for w in measurement.warnings)


def test_the_algorithm_cache_note_is_for_gpus_and_repeated_problems() -> None:
    seen: set[tuple[object, ...]] = set()
    assert conv.algorithm_cache_note(CPU, ("a",), seen) is None and not seen
    assert conv.algorithm_cache_note(H100, ("a",), seen) is None
    assert conv.algorithm_cache_note(MI300X, ("b",), seen) is None
    h100_note = conv.algorithm_cache_note(H100, ("a",), seen)
    assert h100_note is not None and "per-process cache" in h100_note
    mi300x_note = conv.algorithm_cache_note(MI300X, ("b",), seen)
    assert mi300x_note is not None and "per-process cache" in mi300x_note


# --- layers: names, grammar, FLOP counts -------------------------------------------------


def test_resnet50_set_is_complete_and_counts_its_flops() -> None:
    resnet = NETWORKS["resnet50"]
    assert len(resnet) == 23
    assert sum(layer.occurs for layer in resnet.values()) == 53
    # The well-known ~4.1 GMAC of ResNet-50 at 224x224 (4.09 GMAC with the classifier).
    macs = sum(layer.flop(1) * layer.occurs for layer in resnet.values()) / 2
    assert macs == 4_087_136_256
    conv1 = NAMED_LAYERS["resnet50.conv1"]
    assert conv1.output_size == (112, 112)
    assert conv1.flop(1) == 2 * 64 * 112 * 112 * 3 * 7 * 7


@pytest.mark.slow
def test_named_layers_match_torchvision() -> None:
    """Every named layer is the module of that name in the torchvision model, with the
    input size the network feeds it, and `occurs` counts the convolutions sharing it."""
    models = pytest.importorskip("torchvision.models")
    video = pytest.importorskip("torchvision.models.video")
    builders = {
        "resnet50": (models.resnet50, (1, 3, 224, 224)),
        "vgg16": (models.vgg16, (1, 3, 224, 224)),
        "densenet121": (models.densenet121, (1, 3, 224, 224)),
        "mobilenet_v2": (models.mobilenet_v2, (1, 3, 224, 224)),
        "resnext50_32x4d": (models.resnext50_32x4d, (1, 3, 224, 224)),
        "r3d_18": (video.r3d_18, (1, 3, 16, 112, 112)),
    }
    assert set(builders) == set(NETWORKS)
    for network, (build, input_shape) in builders.items():
        seen = _torchvision_convs(build, input_shape)
        for module, layer in NETWORKS[network].items():
            problem, names = seen[module]
            assert dataclasses.replace(layer, occurs=1) == problem, f"{network}.{module}"
            assert layer.occurs == len(names), f"{network}.{module}"
        if network in ("resnet50", "vgg16"):  # complete sets: every distinct problem
            distinct = {p for p, _ in seen.values()}
            assert {dataclasses.replace(x, occurs=1) for x in NETWORKS[network].values()} \
                == distinct


def _torchvision_convs(
    build: Callable[[], torch.nn.Module], input_shape: tuple[int, ...]
) -> dict[str, tuple[ConvLayer, list[str]]]:
    """module name -> (its problem, the names of all modules with the same problem),
    for the first module of each distinct problem; traced on the meta device."""
    with torch.device("meta"):
        model = build()
    found: dict[ConvLayer, list[str]] = {}

    def hook(name: str) -> Callable[..., None]:
        def record(module: torch.nn.Conv2d | torch.nn.Conv3d, inputs: tuple[torch.Tensor, ...],
                   output: torch.Tensor) -> None:
            assert isinstance(module.padding, tuple)  # torchvision pads by numbers
            layer = ConvLayer(module.in_channels, tuple(inputs[0].shape[2:]),
                              module.out_channels, module.kernel_size, module.stride,
                              module.padding, module.groups, module.dilation)
            found.setdefault(layer, []).append(name)
        return record

    for name, module in model.named_modules():
        if isinstance(module, (torch.nn.Conv2d, torch.nn.Conv3d)):
            module.register_forward_hook(hook(name))
    model(torch.empty(*input_shape, device="meta"))
    return {names[0]: (layer, names) for layer, names in found.items()}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("64:56x56:64:3x3:1:1", ConvLayer(64, (56, 56), 64, (3, 3), (1, 1), (1, 1))),
        ("3:224x224:64:7x7:2:3", NAMED_LAYERS["resnet50.conv1"]),
        ("64:56x56:256:1x1", ConvLayer(64, (56, 56), 256, (1, 1), (1, 1), (0, 0))),
        ("32:112x112:32:3x3:1:1:32", NAMED_LAYERS["mobilenet_v2.features.1.conv.0.0"]),
        ("3:16x112x112:64:3x7x7:1x2x2:1x3x3", NAMED_LAYERS["r3d_18.stem.0"]),
        ("8:20x30:8:3x5:1x2:1x2:2:2x1",
         ConvLayer(8, (20, 30), 8, (3, 5), (1, 2), (1, 2), 2, (2, 1))),
    ],
)
def test_layer_grammar(text: str, expected: ConvLayer) -> None:
    assert dataclasses.replace(parse_layer(text), occurs=1) == dataclasses.replace(
        expected, occurs=1
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("resnet50.layer1.0.conv9", r"did you mean resnet50\.layer1\.0\.conv[123]"),
        ("resnet-50", "not a convolution layer"),
        ("ResNet50.Layer1.0.Conv2", r"did you mean resnet50\.layer1\.0\.conv2\?"),
        ("64:56x56:64", "4 to 8 ':'-separated fields"),
        ("64:56:64:3x3", "must be HxW or DxHxW"),
        ("64:56x56:64:3x3x3", "has 3 dimensions, the input 2"),
        ("64:56x56:64:3x3:0", "at least 1"),
        ("64:56x56:60:3x3:1:1:8", "groups .8. must divide"),
        ("64:4x4:64:7x7", "kernel does not fit"),
        ("64:56x56:64:3x3:1:-1", "is not an integer"),
    ],
)
def test_bad_layers_are_refused_with_a_clear_message(text: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        BENCH.resolve({"layer": text})
    with pytest.raises(UserError, match=r"C:HxW:K:RxS"):  # and the accepted forms
        BENCH.resolve({"layer": text})


def test_describe_says_what_a_layer_is() -> None:
    assert NAMED_LAYERS["resnet50.layer2.0.conv2"].describe() == (
        "3x3/2 128->128 @56x56 -> 28x28, pad 1"
    )
    assert NAMED_LAYERS["mobilenet_v2.features.2.conv.1.0"].describe().endswith("depthwise")
    assert "groups 32" in NAMED_LAYERS["resnext50_32x4d.layer1.0.conv2"].describe()
    assert NAMED_LAYERS["r3d_18.stem.0"].describe() == (
        "3x7x7/1x2x2 3->64 @16x112x112 -> 16x56x56, pad 1x3x3"
    )


def test_memory_estimate_counts_the_largest_direction() -> None:
    layer = NAMED_LAYERS["resnet50.layer1.0.conv2"]
    image = 64 * 56 * 56
    weights = 64 * 64 * 9
    assert conv.tensor_bytes(layer, 8, 2) == 2 * (2 * 8 * image + 8 * image + 2 * weights)


# --- registry and suites ---------------------------------------------------------------


def test_declared_and_listed_with_its_parameters() -> None:
    described = REGISTRY.get("conv").describe()
    params = {p["name"]: p for p in described["params"]}
    assert set(params) == {"layer", "batch", "direction", "dtype", "layout", "search"}
    assert params["direction"]["choices"] == ["fwd", "bwd-data", "bwd-weight"]
    assert params["layout"]["choices"] == ["nchw", "channels-last"]
    assert described["dtypes"] == ["fp32", "fp16", "bf16"]


def test_suites_hold_the_layer_sets() -> None:
    cpu = expand(validate(RunRequest(suite="quick"), REGISTRY), CPU)
    quick_cpu = [c for c in cpu if c.benchmark.name == "conv"]
    assert 1 <= len(quick_cpu) <= 3
    assert all(c.params["batch"] <= 4 for c in quick_cpu)
    gpu = expand(validate(RunRequest(suite="quick"), REGISTRY), MI300X)
    quick_gpu = [c for c in gpu if c.benchmark.name == "conv"]
    assert {c.params["search"] for c in quick_gpu} == {True, False}
    standard = expand(validate(RunRequest(suite="standard"), REGISTRY), MI300X)
    layers = {c.params["layer"] for c in standard if c.benchmark.name == "conv"}
    assert set(layer_names("resnet50")) <= layers
    for network in NETWORKS:
        assert layers & set(layer_names(network)), network
    cases = [c for c in standard if c.benchmark.name == "conv"]
    assert {c.params["direction"] for c in cases} == set(conv.DIRECTIONS)
    assert {c.params["layout"] for c in cases} == set(conv.LAYOUTS)
    assert {"fp16", "bf16"} <= {c.params["dtype"] for c in cases}


# --- MIOpen's on-disk databases ----------------------------------------------------------

def test_rocm_conv_workers_start_with_empty_miopen_databases() -> None:
    env = conv.miopen_worker_env({"search": True}, MI300X)
    assert env.fresh_dirs == ("MIOPEN_CUSTOM_CACHE_DIR", "MIOPEN_USER_DB_PATH")
    assert conv.miopen_worker_env({"search": False}, MI300X).fresh_dirs == env.fresh_dirs
    assert not conv.miopen_worker_env({"search": True}, H100)
    # A database the user names is theirs: the worker keeps it.
    assert not env.for_user({"MIOPEN_USER_DB_PATH": "/db", "MIOPEN_CUSTOM_CACHE_DIR": "/c"}
                            ).fresh_dirs


def test_the_state_of_each_miopen_database_is_recorded(tmp_path) -> None:
    db, cache = tmp_path / "db", tmp_path / "cache"
    db.mkdir()
    cache.mkdir()
    environ = {"MIOPEN_USER_DB_PATH": str(db), "MIOPEN_CUSTOM_CACHE_DIR": str(cache),
               "ACCELBENCH_FRESH_DIRS": "MIOPEN_CUSTOM_CACHE_DIR,MIOPEN_USER_DB_PATH"}
    assert conv.miopen_databases(environ) == {
        "MIOPEN_USER_DB_PATH": "cold: a fresh empty folder",
        "MIOPEN_CUSTOM_CACHE_DIR": "cold: a fresh empty folder",
    }
    (db / "gfx942_304.HIP.3_2_0.ufdb.txt").write_text("entry\n")
    state = conv.miopen_databases(environ)
    assert state["MIOPEN_USER_DB_PATH"].startswith("warm: a fresh folder for this worker, "
                                                   "holding 1 entries")
    users = conv.miopen_databases({"MIOPEN_USER_DB_PATH": "/scratch/db"})
    assert users["MIOPEN_USER_DB_PATH"] == "user's, reused: /scratch/db"
    assert users["MIOPEN_CUSTOM_CACHE_DIR"].startswith("unset: MIOpen's default folder")


# --- what "search" means on ROCm ----------------------------------------------------------


def test_rocm_search_workers_start_in_miopens_normal_find_mode() -> None:
    """MIOpen's default find mode (DYNAMIC_HYBRID) answers a problem from the find
    database, the system one installed with MIOpen included, without benchmarking: a
    search case would measure no search. NORMAL benchmarks every applicable solution."""
    search = conv.miopen_worker_env({"search": True}, MI300X)
    assert dict(search.values) == {"MIOPEN_FIND_MODE": "NORMAL"}
    assert conv.miopen_worker_env({"search": False}, MI300X).values == ()
    assert conv.miopen_worker_env({"search": True}, H100).values == ()
    # The user's own find mode is kept, and the case says what it means.
    assert not search.for_user({"MIOPEN_FIND_MODE": "FAST"}).values
    bench = REGISTRY.get("conv")
    on, off = (bench.resolve({"search": value}) for value in (True, False))
    assert bench.worker_identity(on, MI300X) != bench.worker_identity(off, MI300X)


@pytest.mark.parametrize(("environ", "warned"), [
    ({"MIOPEN_FIND_MODE": "NORMAL"}, False),
    ({"MIOPEN_FIND_MODE": "1"}, False),
    ({"MIOPEN_FIND_MODE": "normal"}, False),
    ({"MIOPEN_FIND_MODE": "FAST"}, True),
    ({"MIOPEN_FIND_MODE": "5"}, True),
    ({}, True),  # MIOpen's default: DYNAMIC_HYBRID
])
def test_a_rocm_search_outside_the_normal_find_mode_is_flagged(
    environ: dict[str, str], warned: bool
) -> None:
    note = conv.search_warning(MI300X, True, environ)
    assert (note is not None) == warned
    if note:
        assert "may answer from MIOpen's find database without searching" in note
    assert conv.search_warning(MI300X, False, {}) is None  # no search asked for
    assert conv.search_warning(H100, True, {}) is None  # cuDNN times its candidates


def test_the_algorithm_selection_names_the_find_mode_of_a_rocm_search() -> None:
    out = conv.library_settings(MI300X, FLAGS, {"MIOPEN_FIND_MODE": "NORMAL"})
    assert "find mode NORMAL" in out["algorithm_selection"]
    assert "tuned kernel parameters" in out["algorithm_selection"]
