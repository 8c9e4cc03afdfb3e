"""torchrec on the device, where fbgemm-gpu is present: built for this torch, and an
EmbeddingBagCollection forward and backward on a KeyedJaggedTensor.

- build: torchrec's and fbgemm-gpu's versions go with this torch.
- embedding-bag-collection: two tables (100 x 16 and 50 x 16) for two features, a batch
  of 8 with bags of 0 to 5 ids each; the pooled sums of the forward pass and the
  gradients of both tables are compared with the same sums and scatters in float64 on
  the CPU, with torch.testing's fp32 tolerance relative to the same sums of absolute
  values.

Skipped, with the reason and the install line, without fbgemm-gpu or torchrec, or with
builds for another torch.
"""

from __future__ import annotations

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

RECSYS_CHECKS = ("build", "embedding-bag-collection")
TABLES = {"t0": ("f0", 100), "t1": ("f1", 50)}  # table: (feature, rows)
DIM, BATCH, MAX_BAG = 16, 8, 5
LIBRARIES = ("torchrec", "fbgemm-gpu")


@dataclass(frozen=True)
class TorchrecParams:
    """The parameters of a torchrec case (`BENCHMARK.params`)."""

    check: str
    tolerance_scale: float


def measure(ctx: CaseContext, params: TorchrecParams) -> CaseResult:
    import torch

    check = params.check
    torchrec = load("torchrec", torch, LIBRARIES)
    fbgemm = load("fbgemm_gpu", torch, LIBRARIES, needed_by="torchrec")
    builds = [installed_build("torchrec", torchrec, torch),
              installed_build("fbgemm-gpu", fbgemm, torch)]
    for build in builds:
        require_built_for(build)
    details: dict[str, Any] = {"check": check, "builds": [b.to_dict() for b in builds]}
    if check == "build":
        return conclude(Verdict(None, None), details)
    device = torch.device(ctx.device.torch_device)
    tolerance = tolerance_for("fp32", params.tolerance_scale)
    try:
        verdict = _collection(torch, torchrec, device, tolerance)
    except (NotImplementedError, RuntimeError) as exc:
        if not device_unsupported(exc):
            raise
        line = install_line(LIBRARIES, torch.__version__)
        raise CaseSkipped(f"torchrec has no {ctx.device.type} kernel here: "
                          f"{str(exc).splitlines()[0][:200]}; install the builds for this "
                          f"torch: {line}", details={"install": line}) from None
    return conclude(verdict, details)


def _collection(torch: ModuleType, torchrec: ModuleType, device: Any,
                tolerance: Any) -> Verdict:
    gen = torch.Generator().manual_seed(0)
    configs = [torchrec.EmbeddingBagConfig(name=name, embedding_dim=DIM, num_embeddings=rows,
                                           feature_names=[feature])
               for name, (feature, rows) in TABLES.items()]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        collection = torchrec.EmbeddingBagCollection(tables=configs, device=device)
    lengths = {f: torch.randint(0, MAX_BAG + 1, (BATCH,), generator=gen)
               for f, _ in TABLES.values()}
    ids = {f: torch.randint(0, rows, (int(lengths[f].sum()),), generator=gen)
           for f, rows in TABLES.values()}
    features = [f for f, _ in TABLES.values()]
    kjt = torchrec.KeyedJaggedTensor.from_lengths_sync(
        keys=features, values=torch.cat([ids[f] for f in features]).to(device),
        lengths=torch.cat([lengths[f] for f in features]).to(device))
    pooled = collection(kjt).to_dict()
    upstream = {f: torch.randn(BATCH, DIM, generator=gen) for f in features}
    loss = sum((pooled[f] * upstream[f].to(device)).sum() for f in features)
    weights = {name: collection.embedding_bags[name].weight for name in TABLES}
    grads = torch.autograd.grad(loss, list(weights.values()))
    compared = []
    for (name, (feature, _)), grad in zip(TABLES.items(), grads, strict=True):
        w64 = weights[name].detach().cpu().double()
        bags = _bags(torch, lengths[feature])
        want, size = _pool(torch, w64, ids[feature], bags), _pool(torch, w64.abs(),
                                                                   ids[feature], bags)
        g64 = upstream[feature].double()
        want_grad = _scatter(torch, w64.shape, ids[feature], bags, g64)
        size_grad = _scatter(torch, w64.shape, ids[feature], bags, g64.abs())
        compared += [
            compare(torch, f"pooled {feature}", pooled[feature], want, tolerance, size,
                    "the sum of |rows|"),
            compare(torch, f"grad of {name}", grad, want_grad, tolerance, size_grad,
                    "the scatter of |grad|")]
    return tensors_verdict(compared, tolerance,
                           "torchrec EmbeddingBagCollection on a KeyedJaggedTensor")


def _bags(torch: ModuleType, lengths: Tensor) -> Tensor:
    """The bag (batch position) of every id, in order."""
    return torch.repeat_interleave(torch.arange(len(lengths)), lengths)


def _pool(torch: ModuleType, weight: Tensor, ids: Tensor, bags: Tensor) -> Tensor:
    out = torch.zeros(BATCH, weight.shape[1], dtype=weight.dtype)
    return out.index_add_(0, bags, weight[ids])


def _scatter(torch: ModuleType, shape: Any, ids: Tensor, bags: Tensor, grad: Tensor) -> Tensor:
    out = torch.zeros(*shape, dtype=grad.dtype)
    return out.index_add_(0, ids, grad[bags])


BENCHMARK = Benchmark(
    name="torchrec",
    family="validation",
    summary="torchrec on the device, where fbgemm-gpu is present: an EmbeddingBagCollection "
    "forward and backward on a KeyedJaggedTensor against float64",
    entry="accelbench.benchmarks.validation.recsys:measure",
    sources=("accelbench.benchmarks.validation.verdict",
             "accelbench.benchmarks.validation.libraries"),
    params=(
        Param("check", "str", "build", help="what is checked", choices=RECSYS_CHECKS),
        TOLERANCE_SCALE,
    ),
    devices=("cpu", "cuda"),
    timeout_s=300.0,
    views=("accelbench.benchmarks.validation.view:sections",),
    typed=TorchrecParams,
)
