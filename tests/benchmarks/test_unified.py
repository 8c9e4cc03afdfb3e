"""The unified-memory benchmark without a GPU: its parameters, where it is skipped and why
(the CPU, a runtime that cannot be reached, for real with the CUDA runtime PyTorch ships,
a device without managed memory, a size larger than what is free), the buffers over a
fake runtime, the round trip, and what it records on an MI300A (XNACK on and off), an
MI300X and an MI250X (XNACK on and off, from faked device properties) and an H100: every
figure into the store and the report."""

from __future__ import annotations

import ctypes
import dataclasses
import math
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
import torch
from unified_fakes import fake_runtime

from accelbench.benchmarks import REGISTRY
from accelbench.benchmarks.micro import unified, view
from accelbench.benchmarks.micro.unified_buffers import Buffers, CudaArray, cells, cpu_tensor
from accelbench.cli.main import main
from accelbench.core.context import CaseContext
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseFailed, CaseSkipped, Measurement, from_result
from accelbench.core.request import RunRequest
from accelbench.core.timing import Timing, TimingPolicy
from accelbench.core.view import Bars
from accelbench.env.apu import MemoryModel
from accelbench.env.pcie import HostLink, Link
from accelbench.errors import UserError
from accelbench.report.results import row
from accelbench.runner.plan import expand, validate
from accelbench.store import Store
from fakes import FakeClock, device_properties, run_benchmark

BENCH = unified.BENCHMARK
GIB, MIB = 1 << 30, 1 << 20
CPU = DeviceInfo("cpu", None, "cpu", "cpu")
MI300A = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI300A", "gfx942", 110 * GIB, 228,
                    4 * MIB)
MI300X = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI300X", "gfx942", 192 * GIB, 304,
                    4 * MIB)
H100 = DeviceInfo("cuda", 0, "cuda", "NVIDIA H100 80GB HBM3", "sm_90", 80 * GIB, 132, 50 * MIB)
MI250X = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI250X", "gfx90a", 64 * GIB, 110, 8 * MIB)
APU_XNACK_ON = MemoryModel(True, "PyTorch's is_integrated", True, "gcnArchName gfx942:xnack+")
APU_XNACK_OFF = MemoryModel(True, "PyTorch's is_integrated", False, "gcnArchName gfx942:xnack-")
DISCRETE_AMD = MemoryModel(False, "PyTorch's is_integrated", True, "gcnArchName gfx942:xnack+")
DISCRETE = MemoryModel(False, "PyTorch's is_integrated")
PEAK_5_3 = 5.3e12  # MI300A and MI300X HBM3, B/s
PEAK_H100 = 3.35e12
PEAK_MI250X_GCD = 3.2768e12 / 2  # one of the package's two GCDs


def context(device: DeviceInfo) -> CaseContext:
    return CaseContext(device, FakeClock(1e-3), TimingPolicy(max_time=0.05, warmup_time=0.0))


# -- parameters and planning ---------------------------------------------------------


def test_parameters_apply_to_the_operations_they_mean_something_for():
    assert BENCH.resolve({}) == {"op": "bandwidth", "memory": "host", "size_mib": 256}
    assert BENCH.resolve({"op": "first-touch", "memory": "device"}) == {
        "op": "first-touch", "size_mib": 256}  # the touch operations measure managed memory
    assert BENCH.resolve({"op": "handoff", "size_mib": "64"}) == {
        "op": "handoff", "memory": "host"}


@pytest.mark.parametrize(("given", "message"), [
    ({"memory": "pageable"}, "memory='pageable' is not one of: device, host, managed"),
    ({"op": "prefetch"}, "op='prefetch' is not one of: bandwidth, first-touch, cpu-touch"),
    ({"size_mib": 0}, "size_mib=0 is below 1"),
])
def test_an_unknown_memory_kind_or_operation_is_a_usage_error(given, message):
    with pytest.raises(UserError, match=message):
        BENCH.resolve(given)


def _unified(suite: str, device: DeviceInfo, **request: Any) -> list[dict[str, Any]]:
    cases = expand(validate(RunRequest(suite=suite, **request), REGISTRY), device)
    return [dict(c.params) for c in cases if c.benchmark.name == "unified-memory"]


@pytest.mark.parametrize("device", [MI300A, MI300X, H100], ids=lambda d: d.name)
def test_the_quick_suite_has_a_short_slice_on_every_gpu(device):
    assert _unified("quick", device) == [
        {"op": "bandwidth", "memory": "device", "size_mib": 256},
        {"op": "bandwidth", "memory": "host", "size_mib": 256},
        {"op": "bandwidth", "memory": "managed", "size_mib": 256},
        {"op": "first-touch", "size_mib": 256},
        {"op": "handoff", "memory": "device"},
        {"op": "handoff", "memory": "host"},
        {"op": "handoff", "memory": "managed"},
    ]
    standard = _unified("standard", device)
    assert {(c["op"], c.get("memory"), c.get("size_mib")) for c in standard} >= {
        ("cpu-touch", None, 1024), ("first-touch", None, 64), ("bandwidth", "host", 1024),
        ("handoff", "managed", None)}
    assert len(standard) == 13


def test_the_quick_suite_does_not_grow_on_a_cpu_but_asking_by_name_is_answered():
    for suite in ("quick", "standard"):
        assert _unified(suite, CPU) == []
    assert _unified("quick", CPU, benches=("unified-memory",)) == [
        {"op": "bandwidth", "memory": "host", "size_mib": 256}]


# -- skipped, with the reason --------------------------------------------------------


def test_on_a_cpu_the_case_is_skipped_with_the_reason(ctx):
    with pytest.raises(CaseSkipped, match="on the CPU alone there is nothing to share"):
        run_benchmark(BENCH, ctx, op="bandwidth", memory="managed")


@pytest.mark.skipif(not torch.version.cuda or torch.cuda.is_available(),
                    reason="needs a CUDA build of PyTorch on a machine without a GPU driver")
@pytest.mark.parametrize(("memory", "what"), [("managed", "managed memory"),
                                              ("host", "mapped host memory")])
def test_the_real_cuda_runtime_without_a_driver_skips_the_case(memory, what):
    """cudaMallocManaged's runtime is reached for real (PyTorch's own libcudart): with no
    driver its calls return an error code, and the case is skipped with it."""
    with pytest.raises(CaseSkipped) as info:
        run_benchmark(BENCH, context(H100), op="bandwidth", memory=memory, size_mib=1)
    reason = str(info.value)
    assert reason.startswith(f"{what} cannot be reached through the GPU runtime: cuda")
    assert "returned" in reason and "cudaError" in reason


def test_a_hip_runtime_that_is_not_there_skips_the_case(monkeypatch):
    monkeypatch.setattr("accelbench.benchmarks.micro.gpu_runtime.find_library",
                        lambda api: None)
    with pytest.raises(CaseSkipped, match=r"libamdhip64\.so was not found"):
        run_benchmark(BENCH, context(MI300A), op="first-touch", size_mib=1)


@pytest.mark.parametrize(("device", "platform", "number", "name"), [
    (MI300X, "rocm", 24, "hipDeviceAttributeManagedMemory"),
    (H100, "cuda", 83, "cudaDevAttrManagedMemory"),
])
def test_a_device_without_managed_memory_skips_the_case(monkeypatch, device, platform, number,
                                                        name):
    runtime, library = fake_runtime(platform, attributes={number: 0})
    monkeypatch.setattr(unified, "open_runtime", lambda p: runtime)
    with pytest.raises(CaseSkipped, match=f"cannot use managed memory on this system "
                                          f"\\({name} is 0\\)"):
        run_benchmark(BENCH, context(device), op="cpu-touch", size_mib=1)
    assert library.allocations() == []


def test_a_device_that_cannot_map_host_memory_skips_the_case(monkeypatch):
    runtime, _ = fake_runtime("rocm", attributes={3: 0})
    monkeypatch.setattr(unified, "open_runtime", lambda p: runtime)
    with pytest.raises(CaseSkipped, match="hipDeviceAttributeCanMapHostMemory is 0"):
        run_benchmark(BENCH, context(MI300A), op="handoff", memory="host")


# -- the size guard ------------------------------------------------------------------


def test_the_guard_refuses_more_than_nine_tenths_of_what_is_free():
    assert unified.too_large("managed", 9 * GIB, 2, 4608, 10 * GIB) is None
    refusal = unified.too_large("managed", 9 * GIB + 1, 2, 4608, 10 * GIB)
    assert refusal == ("needs 9.00 GiB of managed memory (2 x 4608 MiB), more than 90% of "
                       "the 10.00 GiB of device memory free: nothing was allocated (more "
                       "managed memory than is free can hang the GPU)")
    host_refusal = unified.too_large("host", 2 * GIB, 2, 1024, GIB)
    assert host_refusal is not None and "of host memory free" in host_refusal


@pytest.mark.parametrize(("device", "platform"), [(MI300A, "rocm"), (MI300X, "rocm"),
                                                  (H100, "cuda")], ids=["MI300A", "MI300X",
                                                                        "H100"])
@pytest.mark.parametrize(("op", "memory", "buffers"), [
    ("bandwidth", "managed", 2), ("first-touch", None, 1), ("bandwidth", "device", 2)])
def test_managed_and_device_buffers_larger_than_the_free_device_memory_are_refused(
        monkeypatch, device, platform, op, memory, buffers):
    runtime, library = fake_runtime(platform)
    monkeypatch.setattr(unified, "open_runtime", lambda p: runtime)
    asked: list[Any] = []

    def mem_get_info(where: Any) -> tuple[int, int]:
        asked.append(where)
        return 3 * GIB, device.memory_bytes

    monkeypatch.setattr(torch.cuda, "mem_get_info", mem_get_info)
    given = {"op": op, "size_mib": 4096, **({"memory": memory} if memory else {})}
    with pytest.raises(CaseSkipped) as info:
        run_benchmark(BENCH, context(device), **given)
    kind = memory or "managed"
    assert str(info.value).startswith(
        f"needs {buffers * 4:.2f} GiB of {kind} memory ({buffers} x 4096 MiB), more than "
        f"90% of the 3.00 GiB of device memory free")
    assert asked == [torch.device("cuda:0")]
    assert library.allocations() == []  # refused before anything was allocated


def test_host_buffers_are_checked_against_the_host_s_memory(monkeypatch):
    runtime, library = fake_runtime("cuda")
    monkeypatch.setattr(unified, "open_runtime", lambda p: runtime)
    monkeypatch.setattr("psutil.virtual_memory", lambda: SimpleNamespace(available=GIB))
    with pytest.raises(CaseSkipped, match=r"of the 1\.00 GiB of host memory free"):
        run_benchmark(BENCH, context(H100), op="bandwidth", memory="host", size_mib=1024)
    assert library.allocations() == []


def test_an_allocation_the_runtime_refuses_fails_the_case_with_its_error(monkeypatch):
    runtime, library = fake_runtime("rocm", fail={"hipMallocManaged": 2})
    monkeypatch.setattr(unified, "open_runtime", lambda p: runtime)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda where: (100 * GIB, 110 * GIB))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: SimpleNamespace(
        gcnArchName="gfx942:sramecc+:xnack+", is_integrated=True))
    with pytest.raises(CaseFailed, match="managed memory could not be allocated: "
                                         "hipMallocManaged returned 2 \\(hipError2"):
        run_benchmark(BENCH, context(MI300A), op="first-touch", size_mib=1)
    assert library.allocations() == [("hipMallocManaged", MIB, 0x1)]
    assert library.freed == []


# -- buffers over a fake runtime -------------------------------------------------------


class FakeGpuTensor:
    def __init__(self, pointer: int, device: torch.device) -> None:
        self.pointer, self.device = pointer, device

    def data_ptr(self) -> int:
        return self.pointer


def fake_torch(shift: int = 0) -> ModuleType:
    """torch as Buffers uses it, with a GPU tensor that only holds its pointer (moved by
    `shift` bytes: a copy)."""
    synced: list[Any] = []

    def as_tensor(obj: Any, device: torch.device) -> FakeGpuTensor:
        return FakeGpuTensor(obj.__cuda_array_interface__["data"][0] + shift, device)

    fake = ModuleType("torch")
    vars(fake).update(as_tensor=as_tensor, frombuffer=torch.frombuffer,
                      float32=torch.float32, int32=torch.int32, synced=synced,
                      cuda=SimpleNamespace(synchronize=synced.append))
    return fake


@pytest.mark.parametrize(("platform", "frees"), [("rocm", ["Free", "FreeHost"]),
                                                 ("cuda", ["Free", "FreeHost"])])
def test_host_and_managed_buffers_are_views_freed_after_the_gpu_is_idle(platform, frees):
    runtime, library = fake_runtime(platform)
    gpu = torch.device("cuda", 0)
    fake = fake_torch()
    with Buffers(fake, gpu, runtime) as buffers:
        host = buffers.make("host", 256)
        managed = buffers.make("managed", 2, "int32")
        assert host.gpu.data_ptr() == host.address and host.gpu.device == gpu
        assert host.cpu is not None and host.cpu.data_ptr() == host.address
        host.cpu.fill_(1.5)  # the CPU tensor is the memory the runtime handed out
        assert ctypes.c_float.from_address(host.address + 4 * 255).value == 1.5
        managed_cells = cells(managed.address, 2)
        managed_cells[1] = 7
        assert managed.cpu is not None and managed.cpu.tolist() == [0, 7]
        assert fake.synced == []
    assert fake.synced == [gpu]
    assert [how for how, _ in library.freed] == frees
    assert [p for _, p in library.freed] == [managed.address, host.address]
    prefix = "hip" if platform == "rocm" else "cuda"
    host_alloc = "hipHostMalloc" if platform == "rocm" else "cudaHostAlloc"
    assert library.allocations() == [(host_alloc, 1024, 0x2),
                                     (f"{prefix}MallocManaged", 8, 0x1)]


def test_a_copy_instead_of_a_view_fails_and_the_memory_is_still_freed():
    runtime, library = fake_runtime("cuda")
    with pytest.raises(CaseFailed, match="PyTorch copied the memory"), \
            Buffers(fake_torch(shift=64), torch.device("cuda", 0), runtime) as buffers:
        buffers.make("managed", 16)
    assert len(library.freed) == 1


def test_a_free_that_fails_fails_the_case():
    runtime, _ = fake_runtime("cuda", fail={"cudaFree": 1})
    with pytest.raises(CaseFailed, match="freeing managed memory: cudaFree returned 1"), \
            Buffers(fake_torch(), torch.device("cuda", 0), runtime) as buffers:
        buffers.make("managed", 16)


def test_the_array_interface_and_the_cpu_view_hold_the_address_itself():
    assert CudaArray(0x7000, 4, "float32").__cuda_array_interface__ == {
        "shape": (4,), "typestr": "<f4", "data": (0x7000, False), "strides": None,
        "version": 2}
    backing = ctypes.create_string_buffer(64)
    view = cpu_tensor(torch, ctypes.addressof(backing), 16, "int32")
    view[3] = 42
    assert view.data_ptr() == ctypes.addressof(backing)
    assert cells(ctypes.addressof(backing), 4)[3] == 42


# -- timing pieces -------------------------------------------------------------------


def test_the_round_trip_counts_every_wrong_answer():
    shared = (ctypes.c_int32 * 2)()
    waits: list[int] = []

    def gpu() -> None:
        shared[1] = shared[0] + 1

    trip = unified.RoundTrip(shared, gpu, lambda: waits.append(1))
    for _ in range(3):
        trip()
    assert (trip.calls, trip.wrong, len(waits), list(shared)) == (3, 0, 3, [3, 4])
    stale = unified.RoundTrip(shared, lambda: None, lambda: None)  # the GPU never answers
    stale()
    stale()
    assert stale.wrong == 2


def test_the_prepared_part_of_each_call_is_not_timed():
    clock = FakeClock(2e-3)
    prepared: list[int] = []
    timed = unified.AfterEach(clock, lambda: prepared.append(clock.calls))
    assert timed.time(lambda: None, 3) == pytest.approx(6e-3)
    assert prepared == [0, 1, 2]  # before each call, none of it on the clock


# -- the operations, run on the CPU as if it were the GPU -------------------------------


class TorchOnCpu:
    """torch, with the device calls the operations make answered on the CPU."""

    def __init__(self) -> None:
        self.synchronized = 0
        self.cuda = SimpleNamespace(synchronize=self._synchronize,
                                    current_stream=lambda device: SimpleNamespace(
                                        synchronize=self._synchronize))

    def _synchronize(self, *device: Any) -> None:
        self.synchronized += 1

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)


class CpuBuffers:
    """Buffers of host memory the test owns, the same tensor for GPU and CPU."""

    def __init__(self) -> None:
        self.backing: list[Any] = []
        self.made: list[Any] = []

    def make(self, kind: str, count: int, element: str = "float32") -> Any:
        backing = ctypes.create_string_buffer(count * 4)
        self.backing.append(backing)
        view = cpu_tensor(torch, ctypes.addressof(backing), count, element)
        buffer = SimpleNamespace(kind=kind, gpu=view, cpu=view,
                                 address=ctypes.addressof(backing), nbytes=count * 4)
        self.made.append(buffer)
        return buffer


def cpu_context() -> CaseContext:
    from accelbench.core.timing import PerfCounterClock

    return CaseContext(CPU, PerfCounterClock(), TimingPolicy(max_time=0.05, warmup_time=0.0,
                                                             min_samples=3))


@pytest.mark.parametrize("kind", ["host", "managed"])
def test_the_bandwidth_kernel_is_checked_then_timed(kind):
    buffers = CpuBuffers()
    # TorchOnCpu and CpuBuffers stand in for the torch module and Buffers.
    timing = unified._bandwidth(cpu_context(), TorchOnCpu(), buffers, kind, 1 << 12,  # type: ignore[arg-type]
                                torch.device("cpu"))
    a, b = buffers.made
    assert torch.equal(b.cpu, a.cpu * unified.SCALE) and a.cpu.std() > 0
    assert timing.samples and all(t > 0 for t in timing.samples)


def test_a_wrong_product_anywhere_fails_the_check():
    count = (1 << 24) + 4  # past what float32 counts exactly: count - 1 rounds up to count
    a = torch.rand(count, generator=torch.Generator().manual_seed(1))
    unified.check_scaled(torch, a, a * unified.SCALE)
    b = a * unified.SCALE
    b[-1] += 1
    with pytest.raises(CaseFailed, match=f"elements {1 << 24}..{count - 1}"):
        unified.check_scaled(torch, a, b)


@pytest.mark.parametrize("op", ["first-touch", "cpu-touch"])
def test_each_touch_increments_every_element_once_on_each_side(op):
    fake, buffers = TorchOnCpu(), CpuBuffers()
    # TorchOnCpu and CpuBuffers stand in for the torch module and Buffers.
    timing = unified._touch(cpu_context(), fake, buffers, op, 1 << 10, torch.device("cpu"))  # type: ignore[arg-type]
    (x,) = buffers.made
    calls = timing.warmup_calls + timing.number * len(timing.samples)
    # zeros, one checked cycle, then one cycle per call: the timed half and the other
    assert x.cpu.min() == x.cpu.max() == 2.0 * (1 + calls)
    if op == "cpu-touch":  # the GPU's half is waited for before each timed CPU touch
        assert fake.synchronized == 1 + calls


@pytest.mark.parametrize("kind", ["host", "managed"])
def test_a_handoff_through_shared_cells_round_trips_every_value(kind):
    fake, buffers = TorchOnCpu(), CpuBuffers()
    # TorchOnCpu and CpuBuffers stand in for the torch module and Buffers.
    timing = unified._handoff(cpu_context(), fake, buffers, kind, torch.device("cpu"))  # type: ignore[arg-type]
    (both,) = buffers.made
    trips = 1 + timing.warmup_calls + timing.number * len(timing.samples)
    assert both.cpu.tolist() == [trips, trips + 1]
    assert fake.synchronized == trips


def test_a_handoff_whose_answer_never_comes_fails(monkeypatch):
    fake = TorchOnCpu()
    monkeypatch.setattr(fake, "add", lambda *args, **kwargs: None, raising=False)
    with pytest.raises(CaseFailed, match="answer through host memory was not"):
        # TorchOnCpu and CpuBuffers stand in for the torch module and Buffers.
        unified._handoff(cpu_context(), fake, CpuBuffers(), "host", torch.device("cpu"))  # type: ignore[arg-type]


# -- what is recorded ----------------------------------------------------------------


TIMING = Timing(tuple(1e-3 * s for s in (1.0, 1.01, 0.99, 1.002, 0.998)), 4, 8, "converged")


def recorded(device: DeviceInfo, model: MemoryModel | None, op: str, memory: str,
             size_mib: int = 1024, link: HostLink | None = None) -> Measurement:
    params = BENCH.resolve({"op": op, "memory": memory, "size_mib": size_mib})
    result = unified.record(op, params.get("memory", "managed"), TIMING,
                            size_mib * MIB if op != "handoff" else 0, model,
                            context(device), {"op": op}, link)
    return from_result(BENCH.case(params, device.torch_device), result, (), 0.0, 0.1)


@pytest.mark.parametrize("model", [APU_XNACK_ON, APU_XNACK_OFF], ids=["xnack-on", "xnack-off"])
@pytest.mark.parametrize(("op", "memory", "moved"), [
    ("bandwidth", "device", 2), ("bandwidth", "host", 2), ("bandwidth", "managed", 2),
    ("first-touch", "managed", 1), ("cpu-touch", "managed", 1)])
def test_on_an_mi300a_every_bandwidth_is_a_share_of_the_one_hbm(model, op, memory, moved):
    m = recorded(MI300A, model, op, memory)
    bandwidth = m.figure(unified.figure_name(op))
    assert bandwidth is not None
    assert bandwidth.peak == PEAK_5_3
    assert bandwidth.value == pytest.approx(moved * GIB / 1e-3)
    assert bandwidth.pct_of_peak == pytest.approx(100 * moved * GIB / 1e-3 / PEAK_5_3)
    assert m.details["peak_of"] == "the one memory the CPU and the GPU share (an APU)"
    assert (m.details["integrated"], m.details["xnack"]) == (True, model.xnack)
    assert m.details["bytes_per_call"] == moved * GIB


@pytest.mark.parametrize(("device", "model", "peak"), [(MI300X, DISCRETE_AMD, PEAK_5_3),
                                                       (H100, DISCRETE, PEAK_H100)],
                         ids=["MI300X-xnack-on", "H100"])
def test_on_a_discrete_gpu_only_what_runs_in_device_memory_has_a_peak(device, model, peak):
    for memory in ("device", "managed"):
        m = recorded(device, model, "bandwidth", memory)
        bandwidth = m.figure("bandwidth")
        assert bandwidth is not None and bandwidth.peak == peak
        assert m.details["peak_of"] == "device memory"
    assert recorded(device, model, "bandwidth", "managed").details["managed_memory"] == \
        "migrates"
    for op, memory in (("bandwidth", "host"), ("first-touch", "managed"),
                       ("cpu-touch", "managed")):
        m = recorded(device, model, op, memory)
        bandwidth = m.figure(unified.figure_name(op))
        assert bandwidth is not None and bandwidth.peak is None
        assert m.details["peak_of"].startswith("none: the bytes crossed the host link")
    assert recorded(device, model, "bandwidth", "host").details["integrated"] is False


def model_from_properties(monkeypatch, device: DeviceInfo, gcn_arch: str | None,
                          hsa_xnack: str | None, integrated: bool = False) -> MemoryModel:
    """The memory model the case builds from faked device properties and environment."""
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda index: device_properties(gcn_arch, integrated))
    if hsa_xnack is None:
        monkeypatch.delenv("HSA_XNACK", raising=False)
    else:
        monkeypatch.setenv("HSA_XNACK", hsa_xnack)
    model = unified.device_memory_model(torch, device)
    assert model is not None
    return model


MANAGED_FIGURES = [("bandwidth", "managed"), ("first-touch", "managed"),
                   ("cpu-touch", "managed")]


@pytest.mark.parametrize("hsa_xnack", [None, "0", "1"], ids=["unset", "0", "1-not-in-effect"])
@pytest.mark.parametrize(("op", "memory"), MANAGED_FIGURES)
def test_without_xnack_managed_memory_is_host_resident_access_over_the_link(
        monkeypatch, hsa_xnack, op, memory):
    """hipMallocManaged memory without XNACK never moves: the GPU reaches it in host memory,
    across the link. No figure is called resident or a migration, none is rated against
    HBM, and the record says why."""
    model = model_from_properties(monkeypatch, MI250X, "gfx90a:sramecc+:xnack-", hsa_xnack)
    m = recorded(MI250X, model, op, memory)
    bandwidth = m.figure(unified.figure_name(op))
    assert bandwidth is not None
    assert bandwidth.peak is None and bandwidth.pct_of_peak is None
    assert m.details["managed_memory"] == "host-resident"
    # the GPU's accesses cross the link; the CPU's touch reaches host memory where it is
    crossed = "by the CPU" if op == "cpu-touch" else "over the link"
    assert m.details["measures"].startswith(f"host-resident access {crossed}")
    assert "migrat" not in m.details["measures"].replace("no page migration", "")
    assert not m.details["measures"].startswith("resident")
    assert "device memory" not in m.details["peak_of"]
    assert m.details["peak_of"].startswith("none:")
    assert ("host memory" if op == "cpu-touch" else "link") in m.details["peak_of"]
    assert (m.details["integrated"], m.details["xnack"], m.details["xnack_feature"],
            m.details["hsa_xnack"]) == (False, False, "xnack-", hsa_xnack)
    assert "XNACK" in m.details["managed_memory_by"]
    assert any("host-resident" in w for w in m.warnings)
    assert row(m).pct_of_peak == "-"


@pytest.mark.parametrize(("op", "memory"), MANAGED_FIGURES)
def test_with_xnack_on_managed_memory_keeps_its_resident_and_migration_figures(
        monkeypatch, op, memory):
    model = model_from_properties(monkeypatch, MI250X, "gfx90a:sramecc+:xnack+", "1")
    m = recorded(MI250X, model, op, memory)
    bandwidth = m.figure(unified.figure_name(op))
    assert bandwidth is not None
    assert m.details["managed_memory"] == "migrates"
    assert (m.details["xnack"], m.details["xnack_feature"], m.details["hsa_xnack"]) == (
        True, "xnack+", "1")
    assert not any("host-resident" in w for w in m.warnings)
    if op == "bandwidth":  # pages in device memory: a share of HBM
        assert bandwidth.peak == PEAK_MI250X_GCD
        assert m.details["peak_of"] == "device memory"
        assert m.details["measures"].startswith("resident bandwidth")
    else:  # the pages cross the link as they move
        assert bandwidth.peak is None
        assert m.details["peak_of"].startswith("none: the bytes crossed the host link")
        assert "migration" in m.details["measures"]


def test_where_xnack_s_state_is_not_known_managed_figures_have_no_peak(monkeypatch):
    model = model_from_properties(monkeypatch, MI250X, None, None)
    assert model.xnack is None
    m = recorded(MI250X, model, "bandwidth", "managed")
    bandwidth = m.figure("bandwidth")
    assert bandwidth is not None and bandwidth.peak is None
    assert m.details["managed_memory"] == "unknown"
    assert m.details["peak_of"].startswith("none:")
    assert not m.details["measures"].startswith("resident")


@pytest.mark.parametrize("model", [APU_XNACK_ON, APU_XNACK_OFF], ids=["xnack-on", "xnack-off"])
def test_on_an_apu_managed_memory_is_the_one_memory_and_nothing_migrates(model):
    for op in ("bandwidth", "first-touch", "cpu-touch"):
        m = recorded(MI300A, model, op, "managed")
        assert m.details["managed_memory"] == "one memory"
        assert "migrat" not in m.details["measures"].replace("nothing migrates", "")
        assert not any("host-resident" in w for w in m.warnings)


def test_on_cuda_managed_memory_migrates_and_the_record_says_what_is_assumed():
    m = recorded(H100, DISCRETE, "first-touch", "managed")
    assert m.details["managed_memory"] == "migrates"
    assert "CUDA" in m.details["managed_memory_by"]
    assert "migration" in m.details["measures"]
    assert "xnack" not in m.details and "xnack_feature" not in m.details


def test_memory_kinds_other_than_managed_carry_no_managed_placement(monkeypatch):
    model = model_from_properties(monkeypatch, MI250X, "gfx90a:sramecc+:xnack-", None)
    for memory in ("device", "host"):
        m = recorded(MI250X, model, "bandwidth", memory)
        assert "managed_memory" not in m.details
        assert m.details["xnack"] is False  # the device's state is recorded all the same
    device = recorded(MI250X, model, "bandwidth", "device").figure("bandwidth")
    assert device is not None and device.peak == PEAK_MI250X_GCD


def test_the_chart_labels_say_where_host_resident_managed_memory_was(monkeypatch):
    model = model_from_properties(monkeypatch, MI250X, "gfx90a:sramecc+:xnack-", None)
    ms = [recorded(MI250X, model, "bandwidth", memory) for memory in ("device", "managed")]
    (section,) = view.sections(ms)
    (chart,) = section.charts
    assert isinstance(chart, Bars)
    assert list(chart.categories) == ["memory=device", "memory=managed (host-resident)"]


def test_a_device_without_published_peaks_says_so():
    unknown = DeviceInfo("cuda", 0, "rocm", "AMD Radeon Graphics", "gfx1151", 96 * GIB, 40)
    m = recorded(unknown, MemoryModel(True, "PyTorch's is_integrated"), "bandwidth", "host")
    bandwidth = m.figure("bandwidth")
    assert bandwidth is not None and bandwidth.peak is None
    assert m.details["peak_of"] == "no published peak for this device"


@pytest.mark.parametrize("memory", ["device", "host", "managed"])
def test_a_handoff_is_a_latency_per_round_trip(memory):
    m = recorded(MI300A, APU_XNACK_ON, "handoff", memory)
    assert m.primary is not None and m.primary.name == "latency"
    assert (m.primary.unit, m.primary.peak, m.primary.higher_is_better) == ("s", None, False)
    assert m.primary.value == pytest.approx(1e-3)
    assert not m.rates and "size_mib" not in m.case.param_dict


def test_small_buffers_are_flagged_as_maybe_cache():
    m = recorded(H100, DISCRETE, "bandwidth", "device", size_mib=16)
    assert any("L2 cache" in w for w in m.warnings)


def test_the_figures_join_the_store_and_the_report(tmp_path: Path, capsys):
    cases = [recorded(MI300A, APU_XNACK_ON, "bandwidth", "host"),
             recorded(MI300A, APU_XNACK_ON, "first-touch", "managed"),
             recorded(MI300A, APU_XNACK_ON, "handoff", "managed")]
    path = tmp_path / "results.sqlite"
    fingerprint = {"format_version": 1, "platform": "rocm",
                   "device": dataclasses.asdict(MI300A),
                   "memory_model": APU_XNACK_ON.to_dict()}
    with Store.open(path) as store:
        run_id = store.begin_run(fingerprint=fingerprint, fingerprint_id="fp-a",
                                 generation_key="AMD Instinct MI300A | ROCm 6.3 | PyTorch 2.9.1",
                                 device="cuda:0", suite="quick", argv=["run"], host="apu-01",
                                 accelbench_version="0.1.0", started_at=1.75e9)
        for m in cases:
            store.add_measurement(run_id, m)
        store.finish_run(run_id, "complete", finished_at=1.75e9 + 10)
        stored = store.load_run(run_id).measurements
    assert [m.figures for m in stored] == [m.figures for m in cases]
    host, touch, handoff = (row(m) for m in stored)
    assert (host.result, host.pct_of_peak) == ("2.15 TB/s", "40.5%")
    assert (touch.result, touch.pct_of_peak) == ("1.07 TB/s", "20.3%")
    assert (handoff.result, handoff.pct_of_peak) == ("1.00 ms", "-")
    assert main(["report", run_id, "--store", str(path), "-o", "-"]) == 0
    report = capsys.readouterr().out
    assert "| unified-memory | memory=host op=bandwidth size_mib=1024 | 2.15 TB/s | 40.5% |" \
        in report
    assert "| unified-memory | memory=managed op=handoff | 1.00 ms | - |" in report
    assert "| Integrated with the CPU (APU) | yes |" in report
    assert "| XNACK | yes |" in report
    bandwidth = stored[0].figure("bandwidth")
    assert bandwidth is not None and math.isfinite(bandwidth.value)


# -- the host link -------------------------------------------------------------------

# PCIe 4.0 x16: 16 GT/s x 16 lanes x 128/130 / 8 bits = 31.5 GB/s each way.
GEN4_X16 = Link(16.0, 16, 16.0, 16)
LINK = HostLink("0000:c1:00.0", "0000:c1:00.0", GEN4_X16, 16e9 * 16 * 128 / 130 / 8)


@pytest.mark.parametrize(("op", "memory", "xnack", "ways"), [
    ("bandwidth", "host", "xnack-", 2),  # mapped host memory: reads in, writes out
    ("bandwidth", "managed", "xnack-", 2),  # host-resident managed memory, the same
    ("first-touch", "managed", "xnack-", 1),  # each element read in and written out once
    ("first-touch", "managed", "xnack+", 1),  # the pages migrate in
    ("cpu-touch", "managed", "xnack+", 1),  # and back out
])
def test_what_crossed_the_host_link_is_a_share_of_that_link(monkeypatch, op, memory, xnack,
                                                            ways):
    model = model_from_properties(monkeypatch, MI250X, f"gfx90a:sramecc+:{xnack}", None)
    m = recorded(MI250X, model, op, memory, link=LINK)
    bandwidth = m.figure(unified.figure_name(op))
    assert bandwidth is not None and bandwidth.peak == pytest.approx(ways * 31.5077e9, rel=1e-4)
    assert m.details["peak_of"].startswith("the host link, PCIe 4.0 x16 (31.5 GB/s each way)")
    assert m.details["peak_of"].endswith("both ways together (reads come in as writes go out)"
                                         if ways == 2 else "one way")
    assert m.details["host_link"]["per_direction_bytes"] == LINK.per_direction


def test_what_stayed_in_a_memory_is_never_a_share_of_the_link(monkeypatch):
    model = model_from_properties(monkeypatch, MI250X, "gfx90a:sramecc+:xnack-", None)
    touched = recorded(MI250X, model, "cpu-touch", "managed", link=LINK)
    figure = touched.figure("transfer_rate")
    assert figure is not None and figure.peak is None and "host_link" not in touched.details
    resident = recorded(MI250X, model_from_properties(
        monkeypatch, MI250X, "gfx90a:sramecc+:xnack+", None), "bandwidth", "managed",
        link=LINK)
    assert resident.details["peak_of"] == "device memory"
    apu = recorded(MI300A, APU_XNACK_OFF, "bandwidth", "host", link=LINK)
    assert apu.details["peak_of"] == "the one memory the CPU and the GPU share (an APU)"
