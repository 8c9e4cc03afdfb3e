"""Fakes of amdsmi and pynvml that replay a node's recorded answers (tests/fixtures/health)
through the bindings' own function names and argument shapes.

A recorded answer {"raises": NAME} makes the call raise the binding's own error class with
that status, as the library does for a reading the GPU does not support; a call with no
recorded answer raises the "not supported" error.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from enum import IntEnum
from pathlib import Path
from types import SimpleNamespace
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "health"

AMD_NODES = ("mi300x-healthy", "mi300x-uncorrectable-ecc", "mi300x-xgmi-link-down")
NVIDIA_NODES = ("h100-sxm-healthy", "h100-sxm-pcie-downgraded")


def load_node(name: str) -> dict[str, Any]:
    """A fresh copy of the recording, safe to alter in a test."""
    return copy.deepcopy(json.loads((FIXTURES / f"{name}.json").read_text()))


def importer_of(modules: dict[str, object]) -> Callable[[str], object]:
    def importer(name: str) -> object:
        if name not in modules:
            raise ModuleNotFoundError(f"No module named {name!r}")
        return modules[name]

    return importer


class Handle:
    """A processor or device handle: the bindings' opaque ctypes handle."""

    def __init__(self, index: int) -> None:
        self.index = index


def _raises(answer: object) -> str | None:
    if isinstance(answer, dict) and set(answer) == {"raises"}:
        return str(answer["raises"])
    return None


# ------------------------------------------------------------------------------ amdsmi

# Values of the amdsmi 7.0 wrapper's enums (amdsmi_wrapper.py).
_AMDSMI_STATUS = {"AMDSMI_STATUS_NOT_SUPPORTED": 2, "AMDSMI_STATUS_DRIVER_NOT_LOADED": 34,
                  "AMDSMI_STATUS_NO_DATA": 40}


class AmdSmiException(Exception):
    """amdsmi's base error class."""


class AmdSmiLibraryException(AmdSmiException):
    """A status other than success from the C library, with its code."""

    def __init__(self, status: str) -> None:
        self.err_code = _AMDSMI_STATUS.get(status, 1)
        super().__init__(f"Error code:\n\t{self.err_code} | {status}")


class AmdSmiGpuBlock(IntEnum):
    INVALID = 0
    UMC = 1
    SDMA = 2
    GFX = 4
    MMHUB = 8
    ATHUB = 16
    PCIE_BIF = 32
    HDP = 64
    XGMI_WAFL = 128
    DF = 256
    SMN = 512
    SEM = 1024
    MP0 = 2048
    MP1 = 4096
    FUSE = 8192
    MCA = 16384
    VCN = 32768
    JPEG = 65536
    IH = 131072
    MPIO = 262144
    RESERVED = 0x8000000000000000


class AmdSmiFwBlock(IntEnum):
    AMDSMI_FW_ID_SMU = 1
    AMDSMI_FW_ID_CP_MEC1 = 7
    AMDSMI_FW_ID_CP_MEC2 = 8
    AMDSMI_FW_ID_RLC = 9
    AMDSMI_FW_ID_SDMA0 = 10
    AMDSMI_FW_ID_SDMA1 = 11
    AMDSMI_FW_ID_VCN = 18
    AMDSMI_FW_ID_PSP_SOSDRV = 30
    AMDSMI_FW_ID_TA_RAS = 73
    AMDSMI_FW_ID_TA_XGMI = 74
    AMDSMI_FW_ID_PM = 77


class AmdSmiLinkType(IntEnum):
    AMDSMI_LINK_TYPE_INTERNAL = 0
    AMDSMI_LINK_TYPE_PCIE = 1
    AMDSMI_LINK_TYPE_XGMI = 2
    AMDSMI_LINK_TYPE_NOT_APPLICABLE = 3
    AMDSMI_LINK_TYPE_UNKNOWN = 4


class AmdSmiXgmiStatus(IntEnum):
    NO_ERRORS = 0
    ERROR = 1
    MULTIPLE_ERRORS = 2


class AmdSmiMemoryPageStatus(IntEnum):
    RESERVED = 0
    PENDING = 1
    UNRESERVABLE = 2


class FakeAmdSmi:
    """The amdsmi functions the health reader calls, answering from one node's recording."""

    AmdSmiException = AmdSmiException
    AmdSmiLibraryException = AmdSmiLibraryException
    AmdSmiGpuBlock = AmdSmiGpuBlock
    AmdSmiFwBlock = AmdSmiFwBlock
    AmdSmiLinkType = AmdSmiLinkType
    AmdSmiXgmiStatus = AmdSmiXgmiStatus
    AmdSmiMemoryPageStatus = AmdSmiMemoryPageStatus

    def __init__(self, node: dict[str, Any], *, init_fails: str | None = None) -> None:
        self.gpus: list[dict[str, Any]] = node["gpus"]
        self.init_fails = init_fails
        self.started = self.shut = False
        self.calls: list[str] = []

    def _answer(self, name: str, handle: Handle, key: str | None = None) -> Any:
        assert self.started and not self.shut, f"{name} called outside init/shut_down"
        assert isinstance(handle, Handle), f"{name} wants a processor handle"
        self.calls.append(name)
        answer = self.gpus[handle.index].get(name, {"raises": "AMDSMI_STATUS_NOT_SUPPORTED"})
        if key is not None and _raises(answer) is None:
            answer = answer.get(key, {"raises": "AMDSMI_STATUS_NOT_SUPPORTED"})
        status = _raises(answer)
        if status is not None:
            raise AmdSmiLibraryException(status)
        return copy.deepcopy(answer)

    def amdsmi_init(self) -> None:
        if self.init_fails:
            raise AmdSmiLibraryException(self.init_fails)
        self.started = True

    def amdsmi_shut_down(self) -> None:
        self.shut = True

    def amdsmi_get_processor_handles(self) -> list[Handle]:
        return [Handle(i) for i in range(len(self.gpus))]

    def amdsmi_get_gpu_device_bdf(self, h: Handle) -> str:
        return str(self._answer("amdsmi_get_gpu_device_bdf", h))

    def amdsmi_get_gpu_asic_info(self, h: Handle) -> dict[str, Any]:
        return dict(self._answer("amdsmi_get_gpu_asic_info", h))

    def amdsmi_get_gpu_driver_info(self, h: Handle) -> dict[str, Any]:
        return dict(self._answer("amdsmi_get_gpu_driver_info", h))

    def amdsmi_get_fw_info(self, h: Handle) -> dict[str, Any]:
        listed = self._answer("amdsmi_get_fw_info", h)["fw_list"]
        return {"fw_list": [{"fw_name": AmdSmiFwBlock[e["fw_name"]],
                             "fw_version": e["fw_version"]} for e in listed]}

    def amdsmi_get_gpu_vbios_info(self, h: Handle) -> dict[str, Any]:
        return dict(self._answer("amdsmi_get_gpu_vbios_info", h))

    def amdsmi_get_gpu_ecc_enabled(self, h: Handle) -> int:
        return int(self._answer("amdsmi_get_gpu_ecc_enabled", h))

    def amdsmi_get_gpu_ecc_count(self, h: Handle, block: IntEnum) -> dict[str, int]:
        assert isinstance(block, AmdSmiGpuBlock), "amdsmi checks the block's type"
        return dict(self._answer("amdsmi_get_gpu_ecc_count", h, block.name))

    def amdsmi_get_gpu_total_ecc_count(self, h: Handle) -> dict[str, int]:
        return dict(self._answer("amdsmi_get_gpu_total_ecc_count", h))

    def amdsmi_get_gpu_ras_feature_info(self, h: Handle) -> dict[str, Any]:
        return dict(self._answer("amdsmi_get_gpu_ras_feature_info", h))

    def amdsmi_get_gpu_bad_page_info(self, h: Handle) -> list[dict[str, Any]]:
        return list(self._answer("amdsmi_get_gpu_bad_page_info", h))

    def amdsmi_get_pcie_info(self, h: Handle) -> dict[str, Any]:
        return dict(self._answer("amdsmi_get_pcie_info", h))

    def amdsmi_get_gpu_xgmi_link_status(self, h: Handle) -> dict[str, Any]:
        return dict(self._answer("amdsmi_get_gpu_xgmi_link_status", h))

    def amdsmi_get_link_metrics(self, h: Handle) -> dict[str, Any]:
        return dict(self._answer("amdsmi_get_link_metrics", h))

    def amdsmi_gpu_xgmi_error_status(self, h: Handle) -> int:
        return int(AmdSmiXgmiStatus(self._answer("amdsmi_gpu_xgmi_error_status", h)).value)

    def amdsmi_get_violation_status(self, h: Handle) -> dict[str, Any]:
        return dict(self._answer("amdsmi_get_violation_status", h))

    def amdsmi_get_gpu_metrics_info(self, h: Handle) -> dict[str, Any]:
        return dict(self._answer("amdsmi_get_gpu_metrics_info", h))

    def amdsmi_get_gpu_activity(self, h: Handle) -> dict[str, Any]:
        return dict(self._answer("amdsmi_get_gpu_activity", h))

    def amdsmi_topo_get_link_type(self, src: Handle, dst: Handle) -> dict[str, Any]:
        """Recorded per source GPU, keyed by the destination's PCI address; the type by
        its AmdSmiLinkType member name, returned as the number the binding gives."""
        assert isinstance(dst, Handle), "amdsmi wants a processor handle"
        target = str(self.gpus[dst.index]["amdsmi_get_gpu_device_bdf"])
        found = self._answer("amdsmi_topo_get_link_type", src, target)
        return {"hops": int(found["hops"]), "type": int(AmdSmiLinkType[found["type"]])}


# ------------------------------------------------------------------------------ pynvml

_NVML_STATUS = {"InvalidArgument": 2, "NotSupported": 3, "DriverNotLoaded": 9,
                "GpuIsLost": 15, "Unknown": 999}


class NVMLError(Exception):
    """pynvml's base error; `value` is the NVML return code."""

    def __init__(self, value: int) -> None:
        self.value = value
        super().__init__(value)

    def __str__(self) -> str:
        names = {code: name for name, code in _NVML_STATUS.items()}
        return names.get(self.value, f"NVML error {self.value}")


def _nvml_error(name: str) -> NVMLError:
    """pynvml raises the subclass named after the status (NVMLError_NotSupported)."""
    cls: type[NVMLError] = type(f"NVMLError_{name}", (NVMLError,), {})
    return cls(_NVML_STATUS[name])


class FakeNvml:
    """The pynvml functions and constants the health reader uses, answering from one
    node's recording."""

    NVMLError = NVMLError
    NVML_FEATURE_DISABLED, NVML_FEATURE_ENABLED = 0, 1
    NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 0, 1
    NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC = 0, 1
    NVML_MEMORY_LOCATION_L1_CACHE = 0
    NVML_MEMORY_LOCATION_L2_CACHE = 1
    NVML_MEMORY_LOCATION_DEVICE_MEMORY = 2
    NVML_MEMORY_LOCATION_DRAM = 2
    NVML_MEMORY_LOCATION_REGISTER_FILE = 3
    NVML_MEMORY_LOCATION_TEXTURE_MEMORY = 4
    NVML_MEMORY_LOCATION_TEXTURE_SHM = 5
    NVML_MEMORY_LOCATION_CBU = 6
    NVML_MEMORY_LOCATION_SRAM = 7
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
    NVML_NVLINK_MAX_LINKS = 36
    NVML_NVLINK_ERROR_DL_REPLAY, NVML_NVLINK_ERROR_DL_RECOVERY = 0, 1
    NVML_NVLINK_ERROR_DL_CRC_FLIT, NVML_NVLINK_ERROR_DL_CRC_DATA = 2, 3
    NVML_NVLINK_ERROR_DL_ECC_DATA = 4
    NVML_NVLINK_DEVICE_TYPE_GPU, NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0, 1
    NVML_NVLINK_DEVICE_TYPE_SWITCH, NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 2, 0xFF

    _ERROR_TYPES = ("corrected", "uncorrected")
    _COUNTERS = ("volatile", "aggregate")
    _LOCATIONS = ("L1_CACHE", "L2_CACHE", "DRAM", "REGISTER_FILE", "TEXTURE_MEMORY",
                  "TEXTURE_SHM", "CBU", "SRAM")

    def __init__(self, node: dict[str, Any], *, init_fails: str | None = None) -> None:
        self.node = node
        self.gpus: list[dict[str, Any]] = node["gpus"]
        self.init_fails = init_fails
        self.started = self.shut = False

    def _answer(self, name: str, handle: Handle, *keys: str | int) -> Any:
        assert self.started and not self.shut, f"{name} called outside init/shutdown"
        assert isinstance(handle, Handle), f"{name} wants a device handle"
        answer: Any = self.gpus[handle.index].get(name, {"raises": "NotSupported"})
        for key in keys:
            if _raises(answer) is not None:
                break
            if isinstance(key, int):
                if key >= len(answer):
                    raise _nvml_error("InvalidArgument")
                answer = answer[key]
            else:
                answer = answer.get(key, {"raises": "NotSupported"})
        status = _raises(answer)
        if status is not None:
            raise _nvml_error(status)
        return copy.deepcopy(answer)

    def nvmlInit(self) -> None:
        if self.init_fails:
            raise _nvml_error(self.init_fails)
        self.started = True

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Handle:
        if not 0 <= index < len(self.gpus):
            raise _nvml_error("InvalidArgument")
        status = _raises(self.gpus[index].get("nvmlDeviceGetHandleByIndex"))
        if status is not None:
            raise _nvml_error(status)
        return Handle(index)

    def nvmlSystemGetDriverVersion(self) -> str:
        return str(self.node["nvmlSystemGetDriverVersion"])

    def nvmlDeviceGetName(self, h: Handle) -> str:
        return str(self._answer("nvmlDeviceGetName", h))

    def nvmlDeviceGetPciInfo(self, h: Handle) -> SimpleNamespace:
        return SimpleNamespace(**self._answer("nvmlDeviceGetPciInfo", h))

    def nvmlDeviceGetSerial(self, h: Handle) -> str:
        return str(self._answer("nvmlDeviceGetSerial", h))

    def nvmlDeviceGetVbiosVersion(self, h: Handle) -> str:
        return str(self._answer("nvmlDeviceGetVbiosVersion", h))

    def nvmlDeviceGetInforomImageVersion(self, h: Handle) -> str:
        return str(self._answer("nvmlDeviceGetInforomImageVersion", h))

    def nvmlDeviceGetEccMode(self, h: Handle) -> list[int]:
        return list(self._answer("nvmlDeviceGetEccMode", h))

    def nvmlDeviceGetTotalEccErrors(self, h: Handle, error_type: int, counter: int) -> int:
        key = f"{self._ERROR_TYPES[error_type]}/{self._COUNTERS[counter]}"
        return int(self._answer("nvmlDeviceGetTotalEccErrors", h, key))

    def nvmlDeviceGetMemoryErrorCounter(self, h: Handle, error_type: int, counter: int,
                                        location: int) -> int:
        where = "DRAM" if location == 2 else self._LOCATIONS[location]
        key = f"{self._ERROR_TYPES[error_type]}/{self._COUNTERS[counter]}/{where}"
        return int(self._answer("nvmlDeviceGetMemoryErrorCounter", h, key))

    def nvmlDeviceGetRetiredPages(self, h: Handle, cause: int) -> list[int]:
        return list(self._answer("nvmlDeviceGetRetiredPages", h, str(cause)))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: Handle) -> int:
        return int(self._answer("nvmlDeviceGetRetiredPagesPendingStatus", h))

    def nvmlDeviceGetRemappedRows(self, h: Handle) -> tuple[int, int, int, int]:
        corrected, uncorrected, pending, failure = self._answer("nvmlDeviceGetRemappedRows", h)
        return corrected, uncorrected, pending, failure

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: Handle) -> int:
        return int(self._answer("nvmlDeviceGetCurrPcieLinkGeneration", h))

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: Handle) -> int:
        return int(self._answer("nvmlDeviceGetMaxPcieLinkGeneration", h))

    def nvmlDeviceGetGpuMaxPcieLinkGeneration(self, h: Handle) -> int:
        return int(self._answer("nvmlDeviceGetGpuMaxPcieLinkGeneration", h))

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: Handle) -> int:
        return int(self._answer("nvmlDeviceGetCurrPcieLinkWidth", h))

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: Handle) -> int:
        return int(self._answer("nvmlDeviceGetMaxPcieLinkWidth", h))

    def nvmlDeviceGetPcieReplayCounter(self, h: Handle) -> int:
        return int(self._answer("nvmlDeviceGetPcieReplayCounter", h))

    def nvmlDeviceGetNvLinkState(self, h: Handle, link: int) -> int:
        return int(self._answer("nvmlDeviceGetNvLinkState", h, link))

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: Handle, link: int) -> SimpleNamespace:
        return SimpleNamespace(busId=self._answer("nvmlDeviceGetNvLinkRemotePciInfo", h, link))

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h: Handle, link: int) -> int:
        return int(self._answer("nvmlDeviceGetNvLinkRemoteDeviceType", h, link))

    def nvmlDeviceGetNvLinkErrorCounter(self, h: Handle, link: int, counter: int) -> int:
        return int(self._answer("nvmlDeviceGetNvLinkErrorCounter", h, link, counter))

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: Handle) -> int:
        return int(self._answer("nvmlDeviceGetCurrentClocksEventReasons", h))

    def nvmlDeviceGetUtilizationRates(self, h: Handle) -> SimpleNamespace:
        return SimpleNamespace(**self._answer("nvmlDeviceGetUtilizationRates", h))
