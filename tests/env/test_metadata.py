from __future__ import annotations

import pytest

from accelbench.env.fingerprint import collect
from accelbench.env.metadata import BY_KEY, KEYS, KINDS
from accelbench.report.fingerprint import format_counted, format_entry, rows


@pytest.fixture
def fingerprints(fakes):
    """One fingerprint dict per platform: the real CPU, a faked ROCm and CUDA node."""
    env = {"HIPBLASLT_LOG_LEVEL": "0", "CUDA_VISIBLE_DEVICES": ""}
    return {
        "cpu": collect("cpu", run=fakes.no_tools, environ=env).to_dict(),
        "rocm": collect(
            "cuda", torch_module=fakes.mi250x(), run=fakes.replay("mi250x-rocm6.2"), environ=env
        ).to_dict(),
        "cuda": collect(
            "cuda", torch_module=fakes.h100(), run=fakes.replay("h100-cuda12.4"), environ=env
        ).to_dict(),
        # A ROCm node without vendor tools.
        "no-tools": collect(
            "cuda", torch_module=fakes.mi250x(), run=fakes.no_tools, environ=env
        ).to_dict(),
        # A GPU accelbench cannot identify.
        "unknown": collect(
            "cuda", torch_module=fakes.rocm("AMD Radeon Graphics", "gfx1100", 20 << 30, 42),
            run=fakes.no_tools, environ=env,
        ).to_dict(),
    }


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (8 << 20, "8.0 MiB"),
        (68702699520, "64.0 GiB"),
        (205822885888, "191.7 GiB"),
        (3 << 40, "3.0 TiB"),
        (None, ""),
    ],
)
def test_format_bytes(n, text):
    assert format_entry(BY_KEY["device.memory_bytes"], n) == text


def test_every_key_declares_a_known_kind():
    assert {meta.kind for meta in KEYS} <= set(KINDS)
    assert all(meta.kind == "bytes" for meta in KEYS if meta.unit == "B")


def test_format_counted():
    assert format_counted(["MI300X"] * 8) == "8 x MI300X"
    assert format_counted(["A", "B"]) == "A, B"


def test_rows_for_a_rocm_node(fingerprints):
    table = dict(rows(fingerprints["rocm"]))
    assert table["Device"] == "AMD Instinct MI250X"
    assert table["Architecture"] == "gfx90a"
    assert table["Device memory"] == "64.0 GiB"
    assert table["Devices visible"] == "2 x AMD Instinct MI250X"
    assert table["Platform"] == "rocm"
    assert table["HIP version (PyTorch build)"] == "6.2.41133-dd7f95766"
    assert table["Driver"] == "6.8.5"
    assert table["ROCm version (installed)"] == "6.2.0"
    assert table["Convolution library"] == "MIOpen 3.2.0"
    assert table["Collective library"] == "RCCL 2.20.5"
    assert table["HIPBLASLT_LOG_LEVEL"] == "0"
    assert table["CUDA_VISIBLE_DEVICES"] == '""'
    assert table["PyTorch debug build"] == "no"
    assert "CUDA version (PyTorch build)" not in table


def test_rows_say_why_the_driver_fields_are_empty(fingerprints):
    assert "Vendor tools not read" not in dict(rows(fingerprints["rocm"]))
    table = dict(rows(fingerprints["no-tools"]))
    assert table["Vendor tools not read"] == "amd-smi: not installed, rocm-smi: not installed"
    assert "Driver" not in table


def test_rows_say_what_a_gpu_was_identified_as_and_why_it_has_no_peaks(fingerprints):
    rocm = dict(rows(fingerprints["rocm"]))
    assert rocm["Device (vendor tool)"] == "AMD Instinct MI250X"
    assert rocm["Identified as"] == "AMD Instinct MI250X"
    assert rocm["Identified by"] == "device name"
    assert rocm["Published peaks"] == "AMD Instinct MI250X"
    assert "No published peaks" not in rocm
    unknown = dict(rows(fingerprints["unknown"]))
    assert unknown["Identified as"] == "AMD Radeon Graphics (gfx1100, 42 WGPs, 20 GiB)"
    assert unknown["No published peaks"] == (
        "gfx1100, 42 WGPs, 20 GiB fits no product in the peak table")
    assert "Identified as" not in dict(rows(fingerprints["cpu"]))


def test_rows_come_in_display_order(fingerprints):
    labels = [label for label, _ in rows(fingerprints["cuda"])]
    order = [
        "Device",
        "Architecture",
        "Platform",
        "Runtime",
        "Driver",
        "PyTorch",
        "Convolution library",
        "numpy",
        "CUDA_VISIBLE_DEVICES",
        "Host",
        "accelbench",
    ]
    assert [labels.index(label) for label in order] == sorted(labels.index(lb) for lb in order)


def test_rows_skip_absent_values():
    assert rows({}) == []
    assert rows({"device": {"name": "x", "arch": None}, "driver": {}}) == [("Device", "x")]


def test_every_declared_key_is_filled_by_some_fingerprint(fingerprints):
    # Only when onnxruntime is installed; only on the ranks of a distributed job (tested
    # in test_cluster.py); only once a CPU run has planned its cases (tested in
    # tests/runner/test_threads.py).
    never_here = {"onnxruntime_providers", "cluster", "threads_source"}
    for meta in KEYS:
        if meta.key in never_here:
            continue
        values = [meta.get(d) for d in fingerprints.values()]
        assert any(v not in (None, "", [], {}) for v in values), meta.key


def test_every_fingerprint_section_has_a_label(fingerprints):
    declared = {key.split(".", 1)[0] for key in BY_KEY}
    for data in fingerprints.values():
        assert set(data) - {"format_version"} <= declared


def test_rows_tolerate_a_foreign_shape():
    foreign = {"device": {"name": "NVIDIA H100 80GB HBM3"}, "torch": "2.4.1", "driver": "550"}
    assert rows(foreign) == [("Device", "NVIDIA H100 80GB HBM3")]
    assert rows({"device": "cpu", "packages": "numpy"}) == [("Packages", "numpy")]
