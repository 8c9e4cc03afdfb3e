"""An APU's socket power through amdsmi: on an MI300A or a Ryzen AI Max (Strix Halo) the
power and energy amdsmi reports are the whole APU's, CPU cores included, so they are
marked as shared with those cores and never credited to the GPU alone. amdsmi's answers
are faked from an MI300X replay, with each part's asic info and PCI address."""

from __future__ import annotations

from typing import Any

import pytest
import telemetry_recordings as rec
from test_telemetry import FakeAmdSmi, FakeClock, drive, importer_of

from accelbench.env.telemetry import ENERGY_J, POWER_W, Series, TelemetrySampler, summarize
from accelbench.env.telemetry.amd import AmdSmiSource, find_apu

MI300A_ASIC = {"market_name": "AMD Instinct MI300A", "vendor_id": "0x1002",
               "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]", "device_id": "0x74a0",
               "rev_id": "0x00", "asic_serial": "0x8A1B2C3D4E5F6071", "oam_id": 0,
               "num_compute_units": 228, "target_graphics_version": "gfx942"}
MI300X_ASIC = {**MI300A_ASIC, "market_name": "AMD Instinct MI300X", "device_id": "0x74a1",
               "num_compute_units": 304}
STRIX_HALO_ASIC = {"market_name": "AMD Radeon 8060S Graphics", "vendor_id": "0x1002",
                   "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]",
                   "device_id": "0x1586", "rev_id": "0xc1", "asic_serial": "N/A",
                   "oam_id": "N/A", "num_compute_units": 40,
                   "target_graphics_version": "gfx1151"}


class FakeApu(FakeAmdSmi):
    """amdsmi on one part with `asic` info, its GPU (or each compute partition of it) at
    `bdfs`, replaying the MI300X recording."""

    def __init__(self, asic: dict[str, Any], bdfs: tuple[str, ...] = ("0000:02:00.0",)
                 ) -> None:
        super().__init__(rec.mi300x_samples())
        self.asic, self.bdfs = asic, bdfs

    def amdsmi_get_processor_handles(self) -> list[str]:
        return [f"gpu{i}" for i in range(len(self.bdfs))]

    def amdsmi_get_gpu_device_bdf(self, h: str) -> str:
        return self.bdfs[int(h[-1])]

    def amdsmi_get_gpu_asic_info(self, h: str) -> dict[str, Any]:
        return dict(self.asic)

    def amdsmi_get_power_info(self, h: str) -> dict[str, Any]:
        # The socket's power is reported on the first partition only.
        return super().amdsmi_get_power_info(h) if h == "gpu0" else {
            "current_socket_power": 0, "average_socket_power": "N/A"}


def apu_series(lib: FakeApu, index: int = 0) -> Series:
    source = AmdSmiSource.open(index, importer=importer_of({"amdsmi": lib}))
    clock = FakeClock()
    return drive(TelemetrySampler([source], {}, rec.INTERVAL_S, clock=clock), clock, [lib],
                 len(rec.MI300X_POWER_W))


@pytest.mark.parametrize(("asic", "cores"), [
    (MI300A_ASIC, "the CPU cores of its APU (AMD Instinct MI300A)"),
    (STRIX_HALO_ASIC, "the CPU cores of its APU (AMD Radeon 8060S)"),
])
def test_an_apu_s_socket_power_is_shared_with_its_cpu_cores(asic: dict[str, Any],
                                                             cores: str) -> None:
    series = apu_series(FakeApu(asic))
    shared = ("0000:02:00.0", cores)
    assert series.shared_by == {POWER_W: shared, ENERGY_J: shared}
    assert series.channel(POWER_W) == tuple(rec.MI300X_POWER_W)  # read, as the package's
    energy = summarize(series)
    assert energy.mean_power_w is None and energy.peak_power_w is None
    assert energy.energy_j is None  # nothing credited to the GPU alone
    assert energy.package_power_w is not None and energy.package_power_w > 500
    assert energy.package_devices == shared


def test_a_discrete_gpu_of_the_same_target_is_its_own() -> None:
    assert apu_series(FakeApu(MI300X_ASIC)).shared_by == {}


def test_the_partitions_of_an_mi300a_share_the_socket_with_its_cpu_cores() -> None:
    tpx = ("0000:02:00.0", "0000:02:00.1", "0000:02:00.2")
    partition = {**MI300A_ASIC, "num_compute_units": 76}
    series = apu_series(FakeApu(partition, tpx), index=1)
    shared = (*tpx, "the CPU cores of its APU (AMD Instinct MI300A)")
    assert series.shared_by == {POWER_W: shared, ENERGY_J: shared}
    assert series.channel(POWER_W) == tuple(rec.MI300X_POWER_W)  # the first partition's


@pytest.mark.parametrize(("asic", "product"), [
    (MI300A_ASIC, "AMD Instinct MI300A"),
    # A name amdsmi could not look up: the MI300A's PCI device ID (amdgpu.ids: 74A0).
    ({**MI300A_ASIC, "market_name": "N/A"}, "AMD Instinct MI300A"),
    ({**MI300A_ASIC, "market_name": "N/A", "device_id": 0x74A0}, "AMD Instinct MI300A"),
    (STRIX_HALO_ASIC, "AMD Radeon 8060S"),
    # Every product of gfx1151 is an APU: a generic name leaves the target to say so.
    ({**STRIX_HALO_ASIC, "market_name": "AMD Radeon Graphics"}, "gfx1151"),
    ({**STRIX_HALO_ASIC, "market_name": "N/A"}, "gfx1151"),
    (MI300X_ASIC, None),
    ({**MI300X_ASIC, "market_name": "N/A"}, None),  # gfx942 is also the MI300X's
    ({**STRIX_HALO_ASIC, "target_graphics_version": "gfx1100",
      "market_name": "AMD Radeon PRO W7900"}, None),
])
def test_an_apu_is_known_by_its_name_its_device_id_or_its_target(
        asic: dict[str, Any], product: str | None) -> None:
    assert find_apu(FakeApu(asic), "gpu0", (KeyError,)) == product


def test_amdsmi_without_asic_info_marks_nothing() -> None:
    lib = FakeAmdSmi(rec.mi300x_samples())  # no amdsmi_get_gpu_asic_info
    assert find_apu(lib, "gpu0", (KeyError,)) is None
