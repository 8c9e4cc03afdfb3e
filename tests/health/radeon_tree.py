"""Fake sysfs trees of AMD desktop nodes, laid out as the kernel lays them out and with the
PCI IDs lspci shows on such machines: a Ryzen 7000 (Raphael) host whose x16 slot hangs off
the root port 00:01.1 (GPP Bridge, 1022:14db), a Radeon card in it and, where asked, the
processor's own Radeon.

The card is a Navi 31 (RX 7900 XTX, 1002:744c) behind the PCIe switch on the card: its
upstream port 01:00.0 (1002:1478) and downstream port 02:00.0 (1002:1479), with the GPU and
its HDMI audio (1002:ab30) at 03:00.0 and 03:00.1. Only the upstream port's link leaves the
card; the downstream port's and the GPU's links are inside the chip and read x16 at the
chip's top speed whatever the slot (lspci on such cards: the upstream port "LnkSta: Speed
2.5GT/s (downgraded), Width x1 (downgraded)" in an x1 slot, the downstream port and the GPU
"Speed 32GT/s, Width x16").

The processor's Radeon (1002:164e) sits at 0f:00.0 behind the internal bridge 00:08.1
(1022:14dd), beside its HDMI audio (1002:1640) and the processor's own functions: the
PSP/CCP (1022:1649) and two USB controllers (1022:15b6, 1022:15b7).
"""

from __future__ import annotations

from pathlib import Path

from sysfs_tree import GEN4, Node

GEN1, GEN5 = "2.5 GT/s PCIe", "32.0 GT/s PCIe"
ROOT_PORT, UPSTREAM, DOWNSTREAM = "0000:00:01.1", "0000:01:00.0", "0000:02:00.0"
GPU, AUDIO = "0000:03:00.0", "0000:03:00.1"
LONE_GPU = "0000:01:00.0"  # a GPU on the root port itself, with no switch on its card
IGPU_BRIDGE, IGPU = "0000:00:08.1", "0000:0f:00.0"
BRIDGE, DISPLAY = "0x060400", "0x030000"
Link = tuple[str, int, str, int]  # current speed, width, max speed, max width
X16_GEN4: Link = (GEN4, 16, GEN4, 16)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _pci(sys: Path, path: str, class_code: str, vendor: str, device: str,
         link: Link | None) -> None:
    folder = sys / "devices" / path
    for name, value in (("class", class_code), ("vendor", vendor), ("device", device),
                        ("numa_node", "-1")):
        _write(folder / name, value + "\n")
    if link is not None:
        speed, width, max_speed, max_width = link
        for name, value in (("current_link_speed", speed), ("current_link_width", str(width)),
                            ("max_link_speed", max_speed),
                            ("max_link_width", str(max_width))):
            _write(folder / name, value + "\n")
    for kind, total in (("correctable", "TOTAL_ERR_COR"), ("nonfatal", "TOTAL_ERR_NONFATAL"),
                        ("fatal", "TOTAL_ERR_FATAL")):
        _write(folder / f"aer_dev_{kind}", f"{total} 0\n")
    (folder / "config").write_bytes(bytes(256))
    listing = sys / "bus" / "pci" / "devices"
    listing.mkdir(parents=True, exist_ok=True)
    (listing / folder.name).symlink_to(folder)


def desktop(root: Path, *, slot: Link = X16_GEN4, upstream: Link = X16_GEN4,
            downstream: Link = X16_GEN4, gpu: Link = X16_GEN4, card_switch: bool = True,
            card: tuple[str, str, str] = ("0x1002", "0x744c", "0xab30"),
            igpu: bool = False) -> Node:
    """The node with the card's links as given (`slot` is the root port's). Without
    `card_switch` the GPU sits on the root port itself (at LONE_GPU) and `gpu` is its
    link to the slot. `card` is the vendor ID, the GPU's and its HDMI audio's device ID."""
    sys = root / "sys"
    _pci(sys, f"pci0000:00/{ROOT_PORT}", BRIDGE, "0x1022", "0x14db", slot)
    above = f"pci0000:00/{ROOT_PORT}"
    if card_switch:
        _pci(sys, f"{above}/{UPSTREAM}", BRIDGE, "0x1002", "0x1478", upstream)
        _pci(sys, f"{above}/{UPSTREAM}/{DOWNSTREAM}", BRIDGE, "0x1002", "0x1479", downstream)
        above = f"{above}/{UPSTREAM}/{DOWNSTREAM}"
    vendor, device, audio = card
    gpu_address = GPU if card_switch else LONE_GPU
    _pci(sys, f"{above}/{gpu_address}", DISPLAY, vendor, device, gpu)
    _pci(sys, f"{above}/{gpu_address[:-1]}1", "0x040300", vendor, audio, gpu)
    if igpu:
        bridge = f"pci0000:00/{IGPU_BRIDGE}"
        _pci(sys, bridge, BRIDGE, "0x1022", "0x14dd", X16_GEN4)
        for function, class_code, vendor, device in (
                (0, DISPLAY, "0x1002", "0x164e"), (1, "0x040300", "0x1002", "0x1640"),
                (2, "0x108000", "0x1022", "0x1649"), (3, "0x0c0330", "0x1022", "0x15b6"),
                (4, "0x0c0330", "0x1022", "0x15b7")):
            _pci(sys, f"{bridge}/{IGPU[:-1]}{function}", class_code, vendor, device, X16_GEN4)
    return Node(sys, root / "proc")
