"""Fakes of `accelbench tune`'s GPU path: a worker on a faked ROCm GPU whose PyTorch
records GEMM shapes as TunableOp does, and TunableOp's offline tuner."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace
from typing import Any, ClassVar

from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseResult, Rate, from_result
from accelbench.env.fingerprint import collect
from accelbench.runner import messages
from accelbench.runner import tune as steps
from fakes import FakeClock, no_vendor_tools

VALIDATORS = {"PT_VERSION": "2.6.0", "HIP_VERSION": "60342131", "GCN_ARCH_NAME": "gfx90a",
              "ROCBLAS_VERSION": "4.3.0", "HIPBLASLT_VERSION": "800-abc"}
SHARED = "GemmTunableOp_Half_TN,tn_4096_4096_4096_ld_4096_4096_4096"


def mi250x(count: int) -> SimpleNamespace:
    """The torch API the fingerprint reads, on `count` MI250X GCDs under ROCm."""
    gcd = SimpleNamespace(name="AMD Instinct MI250X", gcnArchName="gfx90a:sramecc+:xnack-",
                          total_memory=68702699520, multi_processor_count=110, major=9,
                          minor=0, L2_cache_size=8 << 20, is_integrated=False)
    return SimpleNamespace(
        __version__="2.6.0+rocm6.3",
        __config__=SimpleNamespace(show=lambda: ""),
        version=SimpleNamespace(hip="6.3.42131-fa1d09cbd", cuda=None, git_version="0", debug=False),
        cuda=SimpleNamespace(is_available=lambda: True, device_count=lambda: count,
                             get_device_properties=lambda index: gcd,
                             nccl=SimpleNamespace(version=lambda: (2, 21, 5))),
        backends=SimpleNamespace(
            cudnn=SimpleNamespace(version=lambda: 3003000, is_available=lambda: True),
            cuda=SimpleNamespace(preferred_blas_library=lambda: SimpleNamespace(name="Cublaslt")),
            mps=SimpleNamespace(is_available=lambda: False)),
        get_num_threads=lambda: 32,
    )


def case_shape(label: str) -> str:
    size = 256 + 64 * (sum(map(ord, label)) % 16)
    return f"GemmTunableOp_Half_NN,nn_{size}_{size}_{size}_ld_{size}_{size}_{size}"


class FakeGpu:
    """A worker process on the faked GPU. With PYTORCH_TUNABLEOP_RECORD_UNTUNED=1 it
    appends, as TunableOp does, each GEMM it runs with no tuned entry once per process to
    PYTORCH_TUNABLEOP_UNTUNED_FILENAME with its device's ordinal before the last '.':
    its case's own shape and a shape every case shares."""

    devices: ClassVar[int] = 1
    runs_gemms: ClassVar[bool] = True
    started: ClassVar[list[dict[str, str]]] = []

    def __init__(self, env: Any) -> None:
        self.env = dict(env.values)
        self.recorded: set[str] = set()
        FakeGpu.started.append(self.env)

    def ask(self, message: Any, timeout: float) -> Any:
        if isinstance(message, messages.ReadFingerprint):
            found = collect("cuda", torch_module=mi250x(FakeGpu.devices), run=no_vendor_tools,
                            environ=self.env, wiring=lambda platform: {})
            return messages.FingerprintRead(found.to_dict())
        case = message.planned.case
        if self.env.get(steps.RECORD_UNTUNED) == "1" and FakeGpu.runs_gemms:
            stem, dot, suffix = self.env[steps.UNTUNED_FILENAME].rpartition(".")
            with open(f"{stem}0{dot}{suffix}", "a") as untuned:
                for shape in (case_shape(case.label), SHARED):
                    if shape not in self.recorded:
                        self.recorded.add(shape)
                        untuned.write(shape + "\n")
        tuned = self.env.get(steps.FILENAME) is not None
        cost = 1e-3 / (1.5 if tuned else 1.0) * math.exp(0.001 * len(FakeGpu.started) % 3)
        timing = CaseContext(message.device, FakeClock(cost, noise=1e-4, seed=1),
                             message.policy).time(lambda: None)
        result = CaseResult(timing, rates=(Rate("throughput", 1.0 / cost, "item/s"),))
        return messages.CaseMeasured(from_result(case, result, (), 0.0, 0.1).to_dict())

    def stop(self) -> None:
        pass

    def kill(self) -> None:
        pass


class FakeTuner:
    """TunableOp's offline tuner, as far as tune relies on it: reads the GEMMs file in
    its folder and writes the results file its FILENAME names for device 0 (or the
    multi-GPU gathered one), validators first; what it was asked is kept."""

    def __init__(self, skip: int = 0) -> None:
        self.commands: list[steps.TunerCommand] = []
        self.gemms: list[str] = []
        self.skip = skip

    def __call__(self, command: steps.TunerCommand, timeout: float) -> str:
        self.commands.append(command)
        self.timeout = timeout
        self.gemms = (command.cwd / command.argv[2]).read_text().splitlines()
        gpus = int(command.argv[3])
        name = (command.argv[4] if gpus > 1
                else command.env[steps.FILENAME].replace("%d", "0"))
        lines = [f"Validator,{k},{v}" for k, v in VALIDATORS.items()]
        lines += [f"{g},Gemm_Hipblaslt_{i},0.0{i + 1}" for i, g in
                  enumerate(self.gemms[self.skip:])]
        (command.cwd / name).write_text("\n".join(lines) + "\n")
        return "a warning TunableOp printed\n" + json.dumps({"results": name}) + "\n"


def rocm(devices: int = 1, multi: bool = True) -> steps.GpuStack:
    return steps.GpuStack("rocm", devices, "2.6.0+rocm6.3", True, multi)
