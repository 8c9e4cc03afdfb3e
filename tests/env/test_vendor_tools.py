from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from accelbench.env.vendor_tools import (
    AMD_SMI_STATIC,
    AMD_SMI_VERSION,
    FAILED,
    MISSING,
    NVIDIA_SMI_QUERY,
    NVIDIA_SMI_VERSION,
    ROCM_SMI_INFO,
    TIMED_OUT,
    TIMEOUTS_S,
    ToolRun,
    driver_info,
    parse_amd_smi_static,
    parse_amd_smi_version,
    parse_nvidia_smi_query,
    parse_nvidia_smi_version,
    parse_rocm_smi_json,
    run_tool,
)

GARBAGE = [
    None,
    "",
    "garbage",
    "{",
    "[1, 2, 3]",
    '{"card0": "not a dict"}',
    "ERROR: GPU not found\n",
    "\x00\xff",
    "null",
]
PARSERS = [
    parse_amd_smi_static,
    parse_amd_smi_version,
    parse_nvidia_smi_query,
    parse_nvidia_smi_version,
    parse_rocm_smi_json,
]


def read(fakes, node: str, name: str) -> str:
    path: Path = fakes.fixtures / node / name
    return path.read_text(encoding="utf-8")


# --- nvidia-smi -------------------------------------------------------------------------


def test_nvidia_smi_query_on_an_h100_node(fakes):
    gpus = parse_nvidia_smi_query(read(fakes, "h100-cuda12.4", "nvidia-smi-query.csv"))
    assert len(gpus) == 8
    assert gpus[0] == {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "driver_version": "550.90.07",
        "memory_total_mib": 81559,
        "pci_bus_id": "00000000:18:00.0",
        "vbios_version": "96.00.99.00.01",
    }
    assert [g["index"] for g in gpus] == list(range(8))


def test_nvidia_smi_query_skips_broken_lines_and_reads_na():
    text = (
        "No devices were found\n"
        "0, NVIDIA GB10, 580.142, [N/A], 0000000F:01:00.0, [N/A]\n"
        "1, too, few\n"
    )
    assert parse_nvidia_smi_query(text) == [
        {
            "index": 0,
            "name": "NVIDIA GB10",
            "driver_version": "580.142",
            "memory_total_mib": None,
            "pci_bus_id": "0000000F:01:00.0",
            "vbios_version": None,
        }
    ]


def test_nvidia_smi_version(fakes):
    text = read(fakes, "h100-cuda12.4", "nvidia-smi-version.txt")
    assert parse_nvidia_smi_version(text) == {
        "smi_version": "550.90.07",
        "nvml_version": "550.90",
        "driver_version": "550.90.07",
        "cuda_version": "12.4",
    }


# --- amd-smi ----------------------------------------------------------------------------


def test_amd_smi_version_on_rocm_6_2(fakes):
    text = read(fakes, "mi250x-rocm6.2", "amd-smi-version.json")
    assert parse_amd_smi_version(text) == {
        "tool_version": "24.6.2+2b02a07",
        "library_version": "24.6.2",
        "rocm_version": "6.2.0",
    }


def test_amd_smi_version_other_shapes():
    newer = json.dumps(
        [
            {
                "tool": "AMDSMI Tool",
                "version": "26.2.0+021c61fc",
                "amdsmi_library_version": "26.2.0",
                "rocm_version": "7.0.2",
                "amdgpu_version": "6.16.6",
                "amd_hsmp_driver_version": "N/A",
            }
        ]
    )
    assert parse_amd_smi_version(newer)["driver_version"] == "6.16.6"
    bare = '{"tool": "AMDSMI Tool", "version": "24.5.1", "rocm_version": "N/A"}'
    assert parse_amd_smi_version(bare) == {"tool_version": "24.5.1"}
    text = "AMDSMI Tool: 24.6.2+2b02a07 | AMDSMI Library version: 24.6.2 | ROCm version: 6.2.0"
    assert parse_amd_smi_version(text) == {
        "tool_version": "24.6.2+2b02a07",
        "library_version": "24.6.2",
        "rocm_version": "6.2.0",
    }


def test_amd_smi_static_on_rocm_6(fakes):
    parsed = parse_amd_smi_static(read(fakes, "mi300x-rocm6.3", "amd-smi-static.json"))
    assert parsed["driver_version"] == "6.10.5"
    assert len(parsed["gpus"]) == 8
    assert parsed["gpus"][0] == {
        "gpu": 0,
        "product": "AMD Instinct MI300X",
        "gfx_version": "gfx942",
    }


def test_amd_smi_static_gpu_data_wrapper_of_amd_smi_26():
    text = json.dumps(
        {
            "gpu_data": [
                {
                    "gpu": 0,
                    "asic": {
                        "market_name": "AMD Instinct MI300X",
                        "target_graphics_version": "gfx942",
                    },
                    "driver": {"name": "amdgpu", "version": "6.16.6"},
                }
            ]
        }
    )
    assert parse_amd_smi_static("WARNING: banner\n" + text) == {
        "driver_version": "6.16.6",
        "gpus": [{"gpu": 0, "product": "AMD Instinct MI300X", "gfx_version": "gfx942"}],
    }


# --- rocm-smi ---------------------------------------------------------------------------


def test_rocm_smi_on_an_mi250x_node(fakes):
    parsed = parse_rocm_smi_json(read(fakes, "mi250x-rocm6.2", "rocm-smi.json"))
    assert parsed["driver_version"] == "6.8.5"
    assert len(parsed["cards"]) == 8
    assert parsed["cards"][0] == {
        "card": 0,
        "product": "AMD Instinct MI250X",
        "gfx_version": "gfx90a",
    }


def test_rocm_smi_older_spellings_and_banners():
    banner = "WARNING: AMD GPU device(s) is/are in a low-power state.\n\n"
    text = banner + json.dumps(
        {
            "card10": {
                "Card series": "N/A",
                "Card model": "0x0b0c",
                "Market Name": "AMD Instinct MI210",
            },
            "card2": {
                "Card series": "AMD INSTINCT MI250 (MCM) OAM AC MBA",
                "Card model": "0x0b0c",
            },
            "system": {"Driver version": "6.2.4"},
        }
    )
    parsed = parse_rocm_smi_json(text)
    assert parsed["driver_version"] == "6.2.4"
    assert parsed["cards"] == [
        {"card": 2, "product": "AMD INSTINCT MI250 (MCM) OAM AC MBA", "gfx_version": None},
        {"card": 10, "product": "AMD Instinct MI210", "gfx_version": None},
    ]


@pytest.mark.parametrize("parser", PARSERS)
@pytest.mark.parametrize("text", GARBAGE)
def test_parsers_tolerate_garbage(parser, text):
    assert parser(text) in ({}, [])


# --- driver_info ------------------------------------------------------------------------


def test_driver_info_cuda(fakes):
    info = driver_info("cuda", fakes.replay("h100-cuda12.4"))
    assert info == {
        "driver_version": "550.90.07",
        "cuda_driver_version": "12.4",
        "products": ["NVIDIA H100 80GB HBM3"] * 8,
        "vbios_versions": ["96.00.99.00.01"],
        "tool": "nvidia-smi",
    }


def test_driver_info_rocm_prefers_amd_smi(fakes):
    calls = []
    replay = fakes.replay("mi300x-rocm6.3")

    def run(argv, timeout):
        calls.append(argv[0])
        return replay(argv, timeout)

    info = driver_info("rocm", run)
    assert info == {
        "amd_smi_version": "24.7.1+b446d6c",
        "rocm_version": "6.3.1",
        "driver_version": "6.10.5",
        "products": ["AMD Instinct MI300X"] * 8,
        "tool": "amd-smi",
    }
    assert "rocm-smi" not in calls


def test_driver_info_rocm_fills_gaps_from_rocm_smi_and_says_what_failed(fakes):
    replay = fakes.replay("mi250x-rocm6.2")

    def run(argv, timeout):
        return fakes.answer(None) if argv[1] == "static" else replay(argv, timeout)

    info = driver_info("rocm", run)
    assert info["driver_version"] == "6.8.5"
    assert info["rocm_version"] == "6.2.0"
    assert info["tool"] == "amd-smi, rocm-smi"
    assert info["problems"] == ["amd-smi static: failed (exit status 1)"]


def test_driver_info_without_tools_or_on_other_platforms(fakes):
    assert driver_info("rocm", fakes.no_tools) == {
        "problems": ["amd-smi: not installed", "rocm-smi: not installed"]
    }
    assert driver_info("cuda", fakes.no_tools) == {"problems": ["nvidia-smi: not installed"]}
    assert driver_info("cpu", fakes.replay("h100-cuda12.4")) == {}
    assert driver_info("rocm", lambda argv, timeout: fakes.answer("garbage")) == {
        "problems": ["amd-smi version: unreadable output", "rocm-smi: unreadable output"]
    }


# --- time limits ------------------------------------------------------------------------


def timing_out(fakes, node, hung):
    """A runner replaying `node` in which the commands in `hung` time out, as run_tool
    reports it (no real waiting), and which notes the time each command was given."""
    replay = fakes.replay(node)
    given = {}

    def run(argv, timeout):
        given[tuple(argv)] = timeout
        if tuple(argv) in hung:
            return ToolRun(problem=TIMED_OUT, detail=f"no answer within {timeout:g} s")
        return replay(argv, timeout)

    return run, given


def test_amd_smi_static_timing_out_is_recorded_and_rocm_smi_fills_in(fakes):
    run, given = timing_out(fakes, "mi250x-rocm6.2", {AMD_SMI_STATIC})
    info = driver_info("rocm", run)
    assert info["problems"] == ["amd-smi static: timed out (no answer within 30 s)"]
    # amd-smi gave its versions; rocm-smi, asked for what static did not give, the rest.
    assert info["rocm_version"] == "6.2.0"
    assert info["driver_version"] == "6.8.5"
    assert info["products"] == ["AMD Instinct MI250X"] * 8
    assert info["tool"] == "amd-smi, rocm-smi"
    assert given == {AMD_SMI_VERSION: 20.0, AMD_SMI_STATIC: 30.0, ROCM_SMI_INFO: 20.0}


def test_a_hung_tool_is_not_asked_again(fakes):
    run, given = timing_out(fakes, "h100-cuda12.4", {NVIDIA_SMI_QUERY})
    info = driver_info("cuda", run)
    assert info == {"problems": ["nvidia-smi --query-gpu: timed out (no answer within 20 s)"]}
    assert list(given) == [NVIDIA_SMI_QUERY]  # --version would hang as long


def test_every_command_has_a_bounded_time_of_its_own():
    for argv in (AMD_SMI_VERSION, AMD_SMI_STATIC, ROCM_SMI_INFO, NVIDIA_SMI_QUERY,
                 NVIDIA_SMI_VERSION):
        assert 10.0 <= TIMEOUTS_S[argv] <= 60.0
    assert TIMEOUTS_S[AMD_SMI_STATIC] == 30.0 and TIMEOUTS_S[NVIDIA_SMI_QUERY] == 20.0


# --- run_tool ---------------------------------------------------------------------------


def test_run_tool_returns_stdout():
    result = run_tool([sys.executable, "-c", "print('550.90.07')"], 10.0)
    assert result == ToolRun("550.90.07\n")


@pytest.mark.parametrize(
    ("argv", "problem", "detail"),
    [
        ([], MISSING, ""),
        (["accelbench-no-such-vendor-tool"], MISSING, ""),
        ([sys.executable, "-c", "import sys; sys.exit(3)"], FAILED, "exit status 3"),
        ([sys.executable, "-c", "pass"], FAILED, "printed nothing"),
    ],
)
def test_run_tool_says_why_a_tool_gave_nothing(argv, problem, detail):
    assert run_tool(argv, 10.0) == ToolRun(problem=problem, detail=detail)


def test_run_tool_reports_a_real_timeout():
    # Only that a timeout is reported is asserted, never how long anything took.
    result = run_tool([sys.executable, "-c", "import time; time.sleep(5)"], 0.2)
    assert result.stdout is None
    assert result.problem == TIMED_OUT
    assert result.describe() == "timed out (no answer within 0.2 s)"
