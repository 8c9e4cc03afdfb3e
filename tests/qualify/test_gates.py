"""The gates table: the shipped data, the strict reader of site files, choosing a device's
gates, the docs table and the file `qualify --init` writes."""

from __future__ import annotations

import hashlib
import re
import sys
from fnmatch import fnmatch
from pathlib import Path

import pytest

from accelbench.benchmarks.qualify import catalog
from accelbench.benchmarks.qualify.gates import (
    CPU,
    MAX_GATES_BYTES,
    load_gates,
    load_shipped,
    parse_gates,
    same_to_3_digits,
    select,
    table_markdown,
)
from accelbench.benchmarks.qualify.gates import init_yaml as write_init
from accelbench.core.device import DeviceInfo
from accelbench.errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DOCS = Path(__file__).parents[2] / "docs" / "gates.md"
MODELS = (
    "AMD Instinct MI300X", "AMD Instinct MI325X", "AMD Instinct MI250X", "AMD Instinct MI210",
    "AMD Radeon PRO W7900", "AMD Radeon RX 7900 XTX", "NVIDIA H200 SXM", "NVIDIA H100 SXM5",
    "NVIDIA H100 PCIe", "NVIDIA A100 SXM4 80GB", "NVIDIA A100 SXM4 40GB",
    "NVIDIA A100 PCIe 80GB", "NVIDIA A100 PCIe 40GB", "NVIDIA L40S", CPU,
)
MI300X_MEMORY = 205_822_885_888  # what ROCm reports of a 192 GB MI300X


def rocm(name: str, cus: int, memory: int, arch: str = "gfx942:sramecc+:xnack-") -> DeviceInfo:
    return DeviceInfo(type="cuda", index=0, platform="rocm", name=name, arch=arch,
                      memory_bytes=memory, compute_units=cus)


def cuda(name: str) -> DeviceInfo:
    return DeviceInfo(type="cuda", index=0, platform="cuda", name=name, arch="sm_90")


CPU_DEVICE = DeviceInfo(type="cpu", index=None, platform="cpu", name="AMD EPYC 9654")


# ---- the shipped table ------------------------------------------------------------------


def test_every_listed_model_has_gates():
    shipped = load_shipped()
    assert set(MODELS) <= set(shipped)
    for name in MODELS:
        assert shipped[name].gates, name


def test_every_shipped_gate_is_well_formed():
    for model in load_shipped().values():
        for gate in model.gates:
            kind = catalog.kind(gate.figure)
            assert gate.unit == kind.unit, (model.model, gate.figure)
            assert gate.direction == ("min" if kind.higher_is_better else "max")
            assert gate.source.strip() and gate.basis.strip() and gate.origin == "shipped"
            assert 1 <= gate.level <= 4
            if gate.published is not None:
                assert gate.efficiency is not None
                assert same_to_3_digits(gate.threshold, gate.published * gate.efficiency)
            assert gate.per == "device" or model.model == CPU


def test_figures_are_gated_at_their_levels():
    """Read figures at level 1, timed ones at 2, power at 3, training at 4 (the cpu's short
    GEMM and launch at 1)."""
    for model in load_shipped().values():
        for gate in model.gates:
            kind = catalog.kind(gate.figure)
            if not kind.timed:
                assert gate.level == 1
            elif gate.figure == "power":
                assert gate.level == 3
            elif gate.figure == "train":
                assert gate.level == 4
            elif model.model != CPU:
                assert gate.level == 2, (model.model, gate.figure)


def test_mi300x_gemm_bf16_is_the_rvs_target():
    gates = load_shipped()["AMD Instinct MI300X"].for_figure("gemm-bf16", 2)
    assert len(gates) == 1
    gate = gates[0]
    assert (gate.threshold, gate.source_key, gate.direction) == (552.0, "rvs", "min")
    assert "gst_single.conf" in gate.source
    assert gate.describe().startswith("gemm-bf16 ≥ 552 TFLOP/s (RVS GST")
    assert not load_shipped()["AMD Instinct MI300X"].for_figure("gemm-bf16", 1)


def test_transferbench_limits_carry_its_tolerance():
    mi300x = load_shipped()["AMD Instinct MI300X"]
    (h2d,) = mi300x.for_figure("h2d", 2)
    assert (h2d.published, h2d.efficiency, h2d.threshold) == (50.0, 0.97, 48.5)
    # Its HBM limits are for its own kernels: the memory gates are the datasheet's.
    (read,) = mi300x.for_figure("memory-read", 2)
    assert (read.published, read.efficiency, read.source_key) == (5300.0, 0.7, "datasheet")
    (xgmi,) = mi300x.for_figure("peer", 2, link="xgmi")
    assert xgmi.link == "xgmi" and xgmi.threshold == pytest.approx(43.65)
    assert not mi300x.for_figure("peer", 2, link="nvlink")


def test_mi250x_gates_are_per_gcd():
    """PyTorch sees each of an MI250X's two GCDs as a device: its gates are half the
    package's datasheet figures times the efficiency."""
    from accelbench.core.peaks import all_peaks

    peaks = next(p for p in all_peaks() if p.name == "AMD Instinct MI250X")
    (bf16,) = load_shipped()["AMD Instinct MI250X"].for_figure("gemm-bf16", 2)
    per_gcd = peaks.dense["bf16"] / peaks.devices_per_package
    assert bf16.published == pytest.approx(per_gcd)


def test_datasheet_gemm_gates_use_the_peak_table():
    """A GEMM gate from a datasheet names the dense peak core.peaks holds for the model."""
    from accelbench.core.peaks import all_peaks

    peaks = {p.name: p for p in all_peaks()}
    for model in load_shipped().values():
        for gate in model.gates:
            if not gate.figure.startswith("gemm-") or gate.source_key != "datasheet":
                continue
            entry = peaks[model.model]
            dense = entry.dense[gate.figure.removeprefix("gemm-")] / entry.devices_per_package
            assert gate.published == pytest.approx(dense, rel=1e-3), (model.model, gate.figure)


def test_per_core_gates_scale_with_the_threads():
    (gemm,) = load_shipped()[CPU].for_figure("gemm-fp32", 1)
    assert gemm.per == "core"
    assert gemm.threshold_for(8) == pytest.approx(8 * gemm.threshold)
    assert gemm.passes(gemm.threshold * 4, cores=4)
    assert not gemm.passes(gemm.threshold * 3.9, cores=4)
    assert not gemm.passes(float("nan"))
    (launch,) = load_shipped()[CPU].for_figure("launch", 1)
    assert launch.threshold_for(64) == launch.threshold
    assert launch.passes(5.0) and not launch.passes(launch.threshold + 1)
    with pytest.raises(ValueError):
        gemm.threshold_for(0)


# ---- choosing a device's gates ----------------------------------------------------------


def test_h200_is_chosen_by_its_cuda_name():
    model, why = select(cuda("NVIDIA H200"), load_shipped())
    assert model is not None and model.model == "NVIDIA H200 SXM"
    assert why == "gates for NVIDIA H200 SXM, identified by device name"


def test_a_generically_named_mi300x_is_chosen_by_what_it_reports():
    model, why = select(rocm("AMD Radeon Graphics", 304, MI300X_MEMORY), load_shipped())
    assert model is not None and model.model == "AMD Instinct MI300X"
    assert "gfx942, 304 CUs" in why


def test_a_cpx_partition_gets_an_eighth_of_the_throughput_gates():
    model, why = select(rocm("AMD Instinct MI300X", 38, MI300X_MEMORY // 4), load_shipped())
    assert model is not None and model.model == "AMD Instinct MI300X (CPX)"
    assert "CPX partition (1 of 8)" in why and "divided by 8" in why
    (bf16,) = model.for_figure("gemm-bf16", 4)
    assert bf16.threshold == pytest.approx(552 / 8)
    assert "divided by 8" in bf16.describe()
    assert {g.figure for g in model.gates} <= {*(f for f in catalog.FIGURES
                                                 if f.startswith("gemm-")),
                                               "memory-read", "memory-write", "memory-copy",
                                               "train"}
    assert not model.for_figure("power", 4) and not model.for_figure("memory-size", 4)


def test_the_cpu_is_judged_as_any_cpu():
    model, why = select(CPU_DEVICE, load_shipped())
    assert model is not None and model.model == CPU and "per core" in why


def test_an_unknown_gpu_has_no_gates_and_says_what_to_do():
    model, why = select(cuda("NVIDIA GeForce RTX 4090"), load_shipped())
    assert model is None
    assert why.startswith("no gates for 'NVIDIA GeForce RTX 4090': it is not a GPU in the "
                          "gates table")
    assert why.endswith("add it in a site gates file (--gates)")


def test_a_gpu_that_could_be_two_products_has_no_gates_and_says_so():
    gcd = rocm("AMD Radeon Graphics", 104, 68_702_699_520, "gfx90a")  # MI210 or MI250 GCD
    model, why = select(gcd, load_shipped())
    assert model is None
    assert "AMD Instinct MI210 and AMD Instinct MI250" in why and "(--gates)" in why


def test_an_identified_gpu_without_gates_is_named():
    mi100 = rocm("AMD Instinct MI100", 120, 34_342_961_152, "gfx908")
    model, why = select(mi100, load_shipped())
    assert model is None
    assert why.startswith("no gates for 'AMD Instinct MI100': it is not a GPU in the gates")


def test_the_gates_file_ships_in_the_wheel():
    pyproject = tomllib.loads((DOCS.parents[1] / "pyproject.toml").read_text("utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["accelbench"]
    assert any(fnmatch("benchmarks/qualify/gates.yaml", p) for p in patterns)


def test_a_site_file_can_gate_a_gpu_accelbench_does_not_know(tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text(SITE_HEAD.replace("NVIDIA H200 SXM", "NVIDIA GeForce RTX 4090") + """
      - {figure: gemm-bf16, min: 100, unit: TFLOP/s, level: 2, source: ours,
         basis: "measured on our healthy cards, less 20%"}
""")
    model, why = select(cuda("NVIDIA GeForce RTX 4090"), load_gates(site))
    assert model is not None and model.gates[0].threshold == 100.0
    assert "named so in the gates file" in why


# ---- site files -------------------------------------------------------------------------

SITE_HEAD = """format: 1
models:
  - model: "NVIDIA H200 SXM"
    vendor: nvidia
    sources: {ours: "our acceptance test, 2026"}
    gates:"""


def test_a_site_gate_replaces_the_shipped_one_and_says_where_it_came_from(tmp_path):
    text = SITE_HEAD + """
      - {figure: gemm-bf16, min: 600, unit: TFLOP/s, level: 2, source: ours,
         basis: "our H200s reach 700"}
"""
    site = tmp_path / "site-gates.yaml"
    site.write_text(text)
    gates = load_gates(site)
    h200 = gates["NVIDIA H200 SXM"]
    (bf16,) = h200.for_figure("gemm-bf16", 2)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    assert bf16.threshold == 600.0 and bf16.source == "our acceptance test, 2026"
    assert bf16.origin == f"site file site-gates.yaml sha256:{digest}"
    # The model's other gates are the shipped ones, and nothing shipped changed.
    assert len(h200.gates) == len(load_shipped()["NVIDIA H200 SXM"].gates)
    assert {g.origin for g in h200.gates if g.figure != "gemm-bf16"} == {"shipped"}
    assert load_shipped()["NVIDIA H200 SXM"].for_figure("gemm-bf16", 2)[0].threshold != 600


def test_a_site_gate_can_remove_a_shipped_one(tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text(SITE_HEAD + """
      - {figure: links-up, link: nvlink, remove: true}
      - {figure: allreduce, size_mib: 1024, remove: true}
""")
    h200 = load_gates(site)["NVIDIA H200 SXM"]
    assert not h200.for_figure("links-up", 4) and not h200.for_figure("allreduce", 4)
    assert h200.for_figure("gemm-bf16", 4)


def test_removing_a_gate_that_is_not_shipped_is_refused(tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text(SITE_HEAD + """
      - {figure: peer, link: xgmi, remove: true}
""")
    with pytest.raises(UserError, match=r"no shipped peer over xgmi gate to remove"):
        load_gates(site)


def test_an_oversize_site_file_is_refused_unread(tmp_path):
    site = tmp_path / "huge.yaml"
    site.write_bytes(b"#" * (MAX_GATES_BYTES + 1))
    with pytest.raises(UserError, match="larger than"):
        load_gates(site)


def test_no_site_file_means_the_shipped_gates():
    assert load_gates(None) == load_shipped()


GOOD = ("{figure: gemm-bf16, min: 552, unit: TFLOP/s, level: 2, source: s, basis: b}")


def _file(gate: str = GOOD, *, model: str = '"AMD Instinct MI300X"', vendor: str = "amd",
          sources: str = '{s: "a citation"}', top: str = "format: 1", extra: str = "") -> str:
    return (f"{top}\nmodels:\n  - model: {model}\n    vendor: {vendor}\n"
            f"    sources: {sources}\n{extra}    gates:\n      - {gate}\n")


def _gate(**changes: object) -> str:
    fields: dict[str, object] = {"figure": "gemm-bf16", "min": 552, "unit": "TFLOP/s",
                                 "level": 2, "source": "s", "basis": "b"}
    for key, value in changes.items():
        if value is None:
            fields.pop(key)
        else:
            fields[key] = value
    return "{" + ", ".join(f"{k}: {v}" for k, v in fields.items()) + "}"


BAD = [
    (_file(_gate(figure="gemm-bf17")),
     r"^site.yaml: models\[0\]\.gates\[0\]: unknown figure 'gemm-bf17' \(did you mean "
     r"gemm-bf16\?\)$"),
    (_file(_gate(colour="red")), r"models\[0\]\.gates\[0\]: unknown field 'colour'"),
    (_file(_gate(min="fast")), r"gates\[0\]: 'min' must be a number, got 'fast'"),
    (_file(_gate(min=".nan")), r"gates\[0\]: 'min' must be a finite number"),
    (_file(_gate(min=".inf")), r"gates\[0\]: 'min' must be a finite number"),
    (_file(_gate(min=-1)), r"gates\[0\]: 'min' must be a finite number not below 0"),
    (_file(_gate(min="true")), r"gates\[0\]: 'min' must be a number"),
    (_file(_gate(unit="GFLOP/s")), r"gates\[0\]: gemm-bf16 is measured in TFLOP/s, not "
                                   r"'GFLOP/s'"),
    (_file(_gate(min=None, max=10)), r"gates\[0\]: gemm-bf16 is better higher: its gate is "
                                     r"'min', not 'max'"),
    (_file(_gate(figure="launch", unit="us", min=10)),
     r"gates\[0\]: launch is better lower: its gate is 'max', not 'min'"),
    (_file(_gate(min=None)), r"gates\[0\]: missing field 'min'"),
    (_file(_gate(link="nvlink")), r"gates\[0\]: gemm-bf16 is not measured per link"),
    (_file(_gate(figure="peer", unit="GB/s", link="infiniband")),
     r"gates\[0\]: unknown link 'infiniband'"),
    (_file(_gate(level=5)), r"gates\[0\]: 'level' must be one of 1, 2, 3, 4, got 5"),
    (_file(_gate(level=0)), r"'level' must be one of"),
    (_file(_gate(level="true")), r"'level' must be one of"),
    (_file(_gate(source="rvs")), r"gates\[0\]: source 'rvs' is not a key of the model's "
                                 r"'sources' \(s\)"),
    (_file(_gate(basis=None)), r"gates\[0\]: missing field 'basis'"),
    (_file(_gate(published=1307.4, efficiency=0.5)),
     r"gates\[0\]: the gate 552 is not published x efficiency \(1307.4 x 0.5 = 653.7\)"),
    (_file(_gate(published=1307.4)), r"gates\[0\]: 'published' needs 'efficiency'"),
    (_file(_gate(published=1000, efficiency=1.5, min=1500)),
     r"'efficiency' must be above 0 and at most 1"),
    (_file(_gate(per="core")), r"'per: core' is for the 'cpu' model"),
    (_file(_gate(per="socket")), r"'per' must be device or core"),
    (_file(_gate(figure="pcie-gen", unit="generation", min=5, size_mib=64)),
     r"pcie-gen is read, not timed: no 'size_mib'"),
    (_file(_gate(size_mib=0)), r"'size_mib' must be positive"),
    (_file(_gate(remove='"yes"')), r"'remove' must be true or false"),
    (_file("{figure: gemm-bf16, remove: true, min: 3}"),
     r"a gate to remove names only its figure, link and size, not 'min'"),
    (_file(GOOD + "\n      - " + GOOD),
     r"models\[0\]\.gates\[1\]: a second gemm-bf16 gate for 'AMD Instinct MI300X'"),
    (_file("[1, 2]"), r"gates\[0\]: expected a mapping of fields, got list"),
    (_file(vendor="intel"), r"models\[0\]: vendor 'intel' is not one of amd, nvidia, cpu"),
    (_file(vendor="cpu"), r"models\[0\]: the model 'cpu' and only it has vendor 'cpu'"),
    (_file(model='""'), r"models\[0\]: 'model' must be a non-empty string"),
    (_file(sources="[a, b]"), r"models\[0\]: 'sources' must map each key"),
    (_file(extra="    tbp_w: -5\n"), r"models\[0\]: 'tbp_w' must be a finite number not "
                                     r"below 0"),
    (_file(extra="    owner: me\n"), r"models\[0\]: unknown field 'owner'"),
    (_file(top="format: 2"), r"^site.yaml: gates format 2 is not one this accelbench reads"),
    (_file(top="format: true"), r"gates format True is not one"),
    (_file(top="# no format"), r"^site.yaml: missing 'format: 1'"),
    (_file(top="format: 1\nextra: 1"), r"^site.yaml: unknown top-level field 'extra'"),
    ("format: 1\nmodels: []\n", r"'models' must be a non-empty list"),
    ("- 1\n- 2\n", r"expected a mapping with 'format' and 'models'"),
    ("format: 1\nmodels: [\n", r"^site.yaml: invalid YAML"),
    (_file() + _file().split("models:\n", 1)[1],
     r"models\[1\]: model 'AMD Instinct MI300X' is listed twice"),
    ("format: 1\nmodels: !!python/object/apply:os.system [echo]\n", r"^site.yaml: invalid YAML"),
    ("a: &a [1]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n" + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n"
        for p, c in zip("bcdefgh", "cdefghi", strict=True)), r"more than .* values"),
]


@pytest.mark.parametrize(("text", "message"), BAD,
                         ids=[f"bad{i}" for i in range(len(BAD))])
def test_a_malformed_site_file_is_one_line_naming_the_entry(tmp_path, text, message):
    site = tmp_path / "site.yaml"
    site.write_text(text)
    with pytest.raises(UserError) as caught:
        parse_gates(text, "site.yaml")
    assert re.search(message, str(caught.value)), str(caught.value)
    assert "\n" not in str(caught.value)
    with pytest.raises(UserError):  # and the same through the loader
        load_gates(site)


def test_a_well_formed_site_file_parses():
    parsed = parse_gates(_file(), "site.yaml")
    (gate,) = parsed["AMD Instinct MI300X"].gates
    assert gate.threshold == 552.0 and gate.source == "a citation"


def test_same_to_3_digits_takes_either_rounding():
    assert same_to_3_digits(43.65, 0.97 * 45) and same_to_3_digits(43.6, 43.65)
    assert same_to_3_digits(3970, 2 * 2045 * 0.97)
    assert not same_to_3_digits(552, 653.7) and not same_to_3_digits(0.0, 1.0)


# ---- writing ----------------------------------------------------------------------------


def test_init_yaml_reads_back_to_the_same_gates():
    shipped = load_shipped()
    models = [shipped["AMD Instinct MI300X"], shipped["NVIDIA H200 SXM"], shipped[CPU]]
    text = write_init(models, 4)
    back = parse_gates(text, "init")
    for model in models:
        assert back[model.model] == model
    assert text.startswith("#")


def test_init_yaml_keeps_only_the_gates_its_level_judges():
    mi300x = load_shipped()["AMD Instinct MI300X"]
    back = parse_gates(write_init([mi300x], 1), "init")["AMD Instinct MI300X"]
    assert back.gates and {g.level for g in back.gates} == {1}
    assert set(back.gates) < set(mi300x.gates)


def test_a_partition_init_file_reads_back():
    model, _ = select(rocm("AMD Instinct MI300X", 38, MI300X_MEMORY // 4), load_shipped())
    assert model is not None
    back = parse_gates(write_init([model], 4), "init")[model.model]
    assert back.gates == model.gates


def test_the_docs_table_is_the_shipped_data():
    text = DOCS.read_text("utf-8")
    start, end = "<!-- gates table -->\n", "<!-- end gates table -->"
    assert start in text and end in text
    table = text.split(start, 1)[1].split(end, 1)[0]
    assert table.strip() == table_markdown(load_shipped()).strip(), (
        "docs/gates.md is out of date: paste table_markdown(load_shipped()) between its "
        "markers")
