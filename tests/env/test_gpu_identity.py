"""Which physical GPU each visible device is (env.gpu_identity): from the recorded answers
of NVML and amdsmi, matched to PyTorch's devices by PCI address under remapping
visible-device variables, and never an error when nothing can be read."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from accelbench.env.fingerprint import collect
from accelbench.env.gpu_identity import FIELDS, read_identities
from fakes import no_vendor_tools
from gpu_fakes import FakeAmdSmi, FakeNvml, Handle, importer_of, load_node

H100_SERIALS = [f"16549230010{i:02d}" for i in range(1, 9)]
H100_BUSES = [24, 42, 58, 93, 154, 171, 186, 219]
MI300X_BDFS = ["0000:05:00.0", "0000:26:00.0", "0000:46:00.0", "0000:65:00.0",
               "0000:85:00.0", "0000:a6:00.0", "0000:c6:00.0", "0000:e5:00.0"]


class Nvml(FakeNvml):
    """The recorded node, and each GPU's UUID as NVML writes it."""

    def nvmlDeviceGetUUID(self, h: Handle) -> str:
        return f"GPU-{h.index:08x}-1111-2222-3333-444444444444"


class AmdSmi(FakeAmdSmi):
    """The recorded node, with each GPU's UUID and board serial (ROCm 6.x amdsmi)."""

    def amdsmi_get_gpu_device_uuid(self, h: Handle) -> str:
        return f"{h.index:02x}ff74a1-0000-1000-80fd-5c9c8a7b6e5d"

    def amdsmi_get_gpu_board_info(self, h: Handle) -> dict[str, Any]:
        return {"product_serial": f"PCB{h.index:04d}", "product_name": "MI300X OAM"}


def _torch(props: list[SimpleNamespace], hip: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(
        version=SimpleNamespace(hip=hip, cuda=None if hip else "12.4"),
        cuda=SimpleNamespace(device_count=lambda: len(props),
                             get_device_properties=lambda i: props[i]))


def _h100_props(physical: list[int], uuid: bool = False) -> list[SimpleNamespace]:
    """PyTorch's view of the H100 node's GPUs `physical`, in that order (as
    CUDA_VISIBLE_DEVICES chose them)."""
    return [SimpleNamespace(name="NVIDIA H100 80GB HBM3", pci_domain_id=0,
                            pci_bus_id=H100_BUSES[p], pci_device_id=0,
                            **({"uuid": f"{p:08x}-1111-2222-3333-444444444444"} if uuid else {}))
            for p in physical]


def test_nvidia_devices_are_matched_by_pci_address_under_cuda_visible_devices() -> None:
    nvml = Nvml(load_node("h100-sxm-healthy"))
    found = read_identities(_torch(_h100_props([5, 2])), "cuda",
                            {"CUDA_VISIBLE_DEVICES": "5,2"},
                            importer=importer_of({"pynvml": nvml}))
    assert [g["index"] for g in found] == [0, 1]
    assert [g["serial"] for g in found] == [H100_SERIALS[5], H100_SERIALS[2]]
    assert [g["key"] for g in found] == [H100_SERIALS[5], H100_SERIALS[2]]
    assert found[0] == {
        "index": 0, "key": H100_SERIALS[5], "uuid": "GPU-00000005-1111-2222-3333-444444444444",
        "serial": H100_SERIALS[5], "bus_id": "0000:ab:00.0",
        "product": "NVIDIA H100 80GB HBM3", "matched_by": "pci"}
    assert nvml.shut


def test_without_an_address_the_uuid_then_the_visible_order_decide() -> None:
    nvml = Nvml(load_node("h100-sxm-healthy"))
    props = [SimpleNamespace(name="H100", uuid="00000006-1111-2222-3333-444444444444"),
             SimpleNamespace(name="H100")]
    found = read_identities(_torch(props), "cuda", {"CUDA_VISIBLE_DEVICES": "6,3"},
                            importer=importer_of({"pynvml": nvml}))
    assert [(g["serial"], g["matched_by"]) for g in found] == [
        (H100_SERIALS[6], "uuid"), (H100_SERIALS[3], "order")]


def test_amd_devices_are_matched_by_bus_id_under_rocr_and_hip_visible_devices() -> None:
    amd = AmdSmi(load_node("mi300x-healthy"))
    # ROCR keeps physical 7, 4, 1; HIP then shows the 3rd and 1st of those: 1, then 7.
    env = {"ROCR_VISIBLE_DEVICES": "7,4,1", "HIP_VISIBLE_DEVICES": "2,0"}
    props = [SimpleNamespace(name="AMD Instinct MI300X", pci_domain_id=0,
                             pci_bus_id=int(MI300X_BDFS[p].split(":")[1], 16), pci_device_id=0)
             for p in (1, 7)]
    found = read_identities(_torch(props, hip="6.3"), "rocm", env,
                            importer=importer_of({"amdsmi": amd}))
    assert [g["serial"] for g in found] == ["PCB0001", "PCB0007"]
    assert [g["bus_id"] for g in found] == [MI300X_BDFS[1], MI300X_BDFS[7]]
    assert found[1]["uuid"] == "07ff74a1-0000-1000-80fd-5c9c8a7b6e5d"
    assert found[1]["product"] == "AMD Instinct MI300X"
    assert amd.shut


def test_gcds_that_share_a_board_serial_are_kept_apart_by_their_uuid() -> None:
    node = load_node("mi300x-healthy")

    class Mi250x(AmdSmi):
        def amdsmi_get_gpu_board_info(self, h: Handle) -> dict[str, Any]:
            return {"product_serial": f"PCB{h.index // 2:04d}"}  # two GCDs a board

    props = [SimpleNamespace(name="MI250X", pci_domain_id=0,
                             pci_bus_id=int(MI300X_BDFS[p].split(":")[1], 16), pci_device_id=0)
             for p in (0, 1, 2)]
    found = read_identities(_torch(props, hip="6.2"), "rocm", {},
                            importer=importer_of({"amdsmi": Mi250x(node)}))
    assert [g["serial"] for g in found] == ["PCB0000", "PCB0000", "PCB0001"]
    assert len({g["key"] for g in found}) == 3
    assert found[0]["key"] == found[0]["uuid"]


def test_nothing_readable_costs_only_the_identity() -> None:
    props = _h100_props([0, 1], uuid=True)
    missing = read_identities(_torch(props), "cuda", {}, importer=importer_of({}))
    # No library: PyTorch's own UUID and address remain, and the UUID is the key.
    assert [g["key"] for g in missing] == [f"GPU-0000000{i}-1111-2222-3333-444444444444"
                                           for i in (0, 1)]
    assert [g["bus_id"] for g in missing] == ["0000:18:00.0", "0000:2a:00.0"]
    assert all(g["serial"] is None for g in missing)
    failing = Nvml(load_node("h100-sxm-healthy"), init_fails="DriverNotLoaded")
    assert read_identities(_torch(props), "cuda", {},
                           importer=importer_of({"pynvml": failing}))[0]["serial"] is None

    def broken(index: int) -> object:
        raise RuntimeError("no device")

    torch = _torch(props)
    torch.cuda.get_device_properties = broken
    bare = read_identities(torch, "cuda", {}, importer=importer_of({}))
    assert [set(g) for g in bare] == [set(FIELDS)] * 2
    assert all(g["key"] is None for g in bare)
    assert read_identities(_torch(props), "cpu", {}) == []


def test_the_fingerprint_lists_the_gpus_and_a_failing_reader_fails_no_run(fakes) -> None:
    def reader(torch: object, platform: str, environ: object) -> list[dict[str, Any]]:
        return [{"index": 0, "key": "S1", "uuid": "GPU-1", "serial": "S1",
                 "bus_id": "0000:18:00.0", "product": "H100", "matched_by": "pci"}]

    def failing(torch: object, platform: str, environ: object) -> list[dict[str, Any]]:
        raise RuntimeError("the library crashed")

    torch = fakes.h100()
    fp = collect("cuda", torch_module=torch, run=no_vendor_tools, environ={},
                 wiring=lambda platform: {}, gpus=reader)
    assert fp.data["gpus"][0]["serial"] == "S1"
    fp = collect("cuda", torch_module=torch, run=no_vendor_tools, environ={},
                 wiring=lambda platform: {}, gpus=failing)
    assert fp.data["gpus"] == []
    cpu = collect("cpu", torch_module=torch, run=no_vendor_tools, environ={},
                  wiring=lambda platform: {})
    assert "gpus" not in cpu.data


def test_accelbench_env_shows_which_gpu_each_device_is() -> None:
    from accelbench.report.fingerprint import rows

    shown = dict(rows({"gpus": [
        {"index": 0, "key": "S1", "uuid": "GPU-1", "serial": "S1", "bus_id": "0000:18:00.0",
         "product": "NVIDIA H100"},
        {"index": 1, "key": None, "uuid": None, "serial": None, "bus_id": None,
         "product": None}, "not a gpu"]}))
    assert shown["GPU 0"] == "serial S1, UUID GPU-1, 0000:18:00.0, NVIDIA H100"
    assert shown["GPU 1"] == "identity not readable"
