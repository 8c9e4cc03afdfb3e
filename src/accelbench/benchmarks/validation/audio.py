"""torchaudio on the device: built for this torch, and its transforms against float64.

The signal: one second at 16 kHz of a 440 Hz sine of amplitude 0.5 with seeded noise.

- build: torchaudio's version goes with this torch and its torch requirement is met.
- spectrogram: transforms.Spectrogram (n_fft 512, hop 128, power 2) on the device in
  fp32 against the same transform in float64 on the CPU; and the strongest bin of the
  mean spectrum is the sine's (440 Hz / 31.25 Hz per bin: bin 14).
- mel-spectrogram: transforms.MelSpectrogram (40 mels) the same way.
- resample: functional.resample from 16 kHz to 8 kHz the same way.

An FFT spreads each rounding error over every bin, so results are compared relative to
their largest value, with torch.testing's fp32 tolerance times FFT_FACTOR. Each check
skips, with the reason and the install line, where torchaudio is missing or was not
built for this torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelbench.benchmarks.validation.libraries import (
    device_unsupported,
    install_line,
    installed_build,
    load,
    require_built_for,
)
from accelbench.benchmarks.validation.verdict import (
    TOLERANCE_SCALE,
    Verdict,
    compare,
    conclude,
    tensors_verdict,
    tolerance_for,
)
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseResult, CaseSkipped
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark

if TYPE_CHECKING:
    from torch import Tensor

AUDIO_CHECKS = ("build", "spectrogram", "mel-spectrogram", "resample")
RATE, TONE, N_FFT, HOP, MELS = 16000, 440.0, 512, 128, 40
FFT_FACTOR = 10.0
WHY = "an FFT's rounding grows with the log of its length"


def signal(torch: ModuleType) -> Tensor:
    t = torch.arange(RATE, dtype=torch.float64) / RATE
    noise = torch.randn(RATE, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return (0.5 * torch.sin(2 * math.pi * TONE * t) + 0.05 * noise)[None, :]


@dataclass(frozen=True)
class TorchaudioParams:
    """The parameters of a torchaudio case (`BENCHMARK.params`)."""

    check: str
    tolerance_scale: float


def measure(ctx: CaseContext, params: TorchaudioParams) -> CaseResult:
    import torch

    check = params.check
    torchaudio = load("torchaudio", torch)
    build = installed_build("torchaudio", torchaudio, torch)
    require_built_for(build)
    details: dict[str, Any] = {"check": check, "torchaudio": build.to_dict()}
    if check == "build":
        return conclude(Verdict(None, None), details)
    device = torch.device(ctx.device.torch_device)
    tolerance = tolerance_for("fp32", params.tolerance_scale, FFT_FACTOR, WHY)
    wave = signal(torch)
    try:
        verdict = _transform(torch, torchaudio, check, wave, device, tolerance)
    except (NotImplementedError, RuntimeError) as exc:
        if not device_unsupported(exc):
            raise
        line = install_line(["torchaudio"], torch.__version__)
        raise CaseSkipped(f"torchaudio has no {ctx.device.type} kernel for {check}: "
                          f"{str(exc).splitlines()[0][:200]}; install the build for this "
                          f"torch: {line}", details={"install": line}) from None
    return conclude(verdict, details)


def _transform(torch: ModuleType, torchaudio: ModuleType, check: str, wave: Tensor,
               device: Any, tolerance: Any) -> Verdict:
    transforms = torchaudio.transforms
    if check == "resample":
        got = torchaudio.functional.resample(wave.float().to(device), RATE, RATE // 2)
        want = torchaudio.functional.resample(wave, RATE, RATE // 2)
    else:
        got = _make(transforms, check).to(device)(wave.float().to(device))
        want = _make(transforms, check).double()(wave)
    largest = torch.full_like(want, float(want.abs().max()))
    verdict = tensors_verdict(
        [compare(torch, check, got, want, tolerance, largest, "the largest value")],
        tolerance, f"torchaudio {check} against float64")
    if check == "spectrogram":
        peak = int(got.detach().cpu().mean(dim=-1).flatten().argmax())
        expected = round(TONE / (RATE / N_FFT))
        if peak != expected:
            verdict = verdict.but(f"wrong result: the spectrogram of a {TONE:g} Hz sine peaks "
                                  f"at bin {peak}, not {expected}")
    return verdict


def _make(transforms: ModuleType, check: str) -> Any:
    if check == "spectrogram":
        return transforms.Spectrogram(n_fft=N_FFT, hop_length=HOP, power=2.0)
    return transforms.MelSpectrogram(sample_rate=RATE, n_fft=N_FFT, hop_length=HOP,
                                     n_mels=MELS)


BENCHMARK = Benchmark(
    name="torchaudio",
    family="validation",
    summary="torchaudio on the device: built for this torch, Spectrogram, MelSpectrogram "
    "and resample against float64",
    entry="accelbench.benchmarks.validation.audio:measure",
    sources=("accelbench.benchmarks.validation.verdict",
             "accelbench.benchmarks.validation.libraries"),
    params=(
        Param("check", "str", "build", help="what is checked", choices=AUDIO_CHECKS),
        TOLERANCE_SCALE,
    ),
    devices=("cpu", "cuda"),
    timeout_s=300.0,
    views=("accelbench.benchmarks.validation.view:sections",),
    typed=TorchaudioParams,
)
