"""PCIe links from a faked sysfs tree: what a link carries each way, and a GPU's host link
as the narrowest link on its path from the root complex."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench.env.pcie import Link, host_link, pci_address


@pytest.mark.parametrize(("speed", "width", "each_way"), [
    (2.5, 16, 4.0e9),  # PCIe 1.0: 8b/10b
    (8.0, 16, 8e9 * 16 * 128 / 130 / 8),  # PCIe 3.0: 128b/130b, 15.75 GB/s
    (16.0, 16, 31.5077e9),
    (32.0, 8, 31.5077e9),  # PCIe 5.0 x8 carries what 4.0 x16 does
    (64.0, 16, 64e9 * 16 * 242 / 256 / 8),  # PCIe 6.0: FLITs of 242 payload bytes in 256
])
def test_a_link_carries_its_rate_times_its_lanes_less_its_encoding(speed, width, each_way):
    assert Link(speed, width, speed, width).per_direction == pytest.approx(each_way, rel=1e-4)


def test_a_link_of_unknown_speed_or_width_carries_nothing_known():
    assert Link(None, 16, None, 16).per_direction is None
    assert Link(16.0, None, 16.0, None).per_direction is None
    assert Link(12.0, 16, 12.0, 16).per_direction is None  # no PCIe generation runs at 12


def device(folder: Path, speed: str | None, width: int | None, max_speed: str,
           max_width: int, vendor: int | None = None) -> None:
    folder.mkdir(parents=True)
    if vendor is not None:
        (folder / "vendor").write_text(f"{vendor:#06x}\n")
    if speed is not None:
        (folder / "current_link_speed").write_text(f"{speed} PCIe\n")
        (folder / "current_link_width").write_text(f"{width}\n")
    (folder / "max_link_speed").write_text(f"{max_speed} PCIe\n")
    (folder / "max_link_width").write_text(f"{max_width}\n")


@pytest.fixture
def sysfs(tmp_path: Path) -> Path:
    """A GPU behind a switch whose upstream port is wired x8: root port, switch up and
    down ports, GPU; the GPU's link trained down to 2.5 GT/s, as at idle."""
    root = tmp_path / "devices" / "pci0000:00"
    port = root / "0000:00:01.1"
    up = port / "0000:01:00.0"
    down = up / "0000:02:00.0"
    gpu = down / "0000:03:00.0"
    device(port, "16.0 GT/s", 16, "16.0 GT/s", 16)
    device(up, "16.0 GT/s", 8, "16.0 GT/s", 8)
    device(down, "16.0 GT/s", 16, "16.0 GT/s", 16)
    device(gpu, "2.5 GT/s", 16, "16.0 GT/s", 16)
    listing = tmp_path / "bus" / "pci" / "devices"
    listing.mkdir(parents=True)
    for folder in (port, up, down, gpu):
        (listing / folder.name).symlink_to(folder)
    return tmp_path


def test_the_host_link_is_the_narrowest_on_the_path_at_each_devices_maximum(sysfs):
    found = host_link((0, 3, 0), sysfs)
    assert found is not None
    assert (found.device, found.narrowest) == ("0000:03:00.0", "0000:01:00.0")
    assert found.per_direction == pytest.approx(31.5077e9 / 2, rel=1e-4)
    assert found.current is not None and found.current.speed_gts == 2.5  # as read, at idle
    assert found.describe() == "PCIe 4.0 x8 (15.8 GB/s each way, at 0000:01:00.0 above it)"
    assert found.to_dict()["current"]["speed_gts"] == 2.5


def test_a_gpu_sysfs_does_not_list_or_shows_no_link_for_has_no_host_link(sysfs, tmp_path):
    assert host_link((0, 0xC1, 0), sysfs) is None
    bare = tmp_path / "vm"
    (bare / "devices" / "pci0000:00" / "0000:00:04.0").mkdir(parents=True)
    (bare / "bus" / "pci" / "devices").mkdir(parents=True)
    (bare / "bus" / "pci" / "devices" / "0000:00:04.0").symlink_to(
        bare / "devices" / "pci0000:00" / "0000:00:04.0")
    assert host_link((0, 0, 4), bare) is None


@pytest.mark.parametrize("inside", [("32.0 GT/s", 16, "32.0 GT/s", 16),
                                    ("2.5 GT/s", 1, "2.5 GT/s", 1)])
def test_an_amd_card_s_host_link_starts_at_its_switch_s_upstream_port(tmp_path, inside):
    """A Gen5 Radeon in a Gen4 x8 slot (recorded: nokyan/resources#512): the upstream
    port of the switch on the card runs x8 16 GT/s; the links inside the chip, below it,
    read whatever they read and carry nothing to the host."""
    root = tmp_path / "devices" / "pci0000:00"
    port = root / "0000:00:01.1"
    up = port / "0000:01:00.0"
    down = up / "0000:02:00.0"
    gpu = down / "0000:03:00.0"
    device(port, "16.0 GT/s", 8, "16.0 GT/s", 8, vendor=0x1022)
    device(up, "16.0 GT/s", 8, "32.0 GT/s", 16, vendor=0x1002)
    speed, width, max_speed, max_width = inside
    for folder in (down, gpu):
        device(folder, speed, width, max_speed, max_width, vendor=0x1002)
    listing = tmp_path / "bus" / "pci" / "devices"
    listing.mkdir(parents=True)
    for folder in (port, up, down, gpu):
        (listing / folder.name).symlink_to(folder)
    found = host_link((0, 3, 0), tmp_path)
    assert found is not None
    assert (found.device, found.narrowest) == ("0000:03:00.0", "0000:00:01.1")
    assert (found.link.generation, found.link.width) == (4, 8)
    assert found.current == Link(16.0, 8, 32.0, 16)  # the upstream port's, as read


def test_the_address_is_spelled_as_sysfs_names_it():
    assert pci_address((0, 0xC1, 0)) == "0000:c1:00.0"
    assert pci_address((1, 3, 0x1F)) == "0001:03:1f.0"
