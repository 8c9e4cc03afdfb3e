"""torchtext, where it still imports with this torch: built for it, and the part of it
that remains (tokenizer, vocabulary, padding to a tensor) feeding an embedding on the
device.

torchtext is no longer developed: its last release, 0.18, was built for torch 2.3, so
with a newer torch it is skipped with that reason.

- build: torchtext's version goes with this torch and its torch requirement is met.
- vocab: the basic_english tokenizer splits known sentences into the known tokens, a
  vocabulary built from them maps every token to an index and back, unknown words to
  <unk>, to_tensor pads with <pad>, and an embedding lookup of the padded batch on the
  device returns exactly the rows of the weight: every wrong token, index or element
  counts.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from accelbench.benchmarks.validation.libraries import (
    installed_build,
    load,
    require_built_for,
)
from accelbench.benchmarks.validation.verdict import Verdict, conclude, exact_verdict
from accelbench.core.context import CaseContext
from accelbench.core.measurement import CaseResult, Figure
from accelbench.core.params import Param
from accelbench.core.registry import Benchmark

TEXT_CHECKS = ("build", "vocab")
SENTENCES = {
    "The quick brown fox jumps over the lazy dog.":
        ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "."],
    "Does the stack compute correctly, in every precision?":
        ["does", "the", "stack", "compute", "correctly", ",", "in", "every", "precision",
         "?"],
    "A fox!": ["a", "fox", "!"],
}
UNKNOWN = "zebra"
TRUNCATE = 8
SPECIALS = ["<unk>", "<pad>"]


@dataclass(frozen=True)
class TorchtextParams:
    """The parameters of a torchtext case (`BENCHMARK.params`)."""

    check: str


def measure(ctx: CaseContext, params: TorchtextParams) -> CaseResult:
    import torch

    check = params.check
    torchtext = load("torchtext", torch)
    build = installed_build("torchtext", torchtext, torch)
    require_built_for(build)
    details: dict[str, Any] = {"check": check, "torchtext": build.to_dict()}
    if check == "build":
        return conclude(Verdict(None, None), details)
    utils = importlib.import_module("torchtext.data.utils")
    vocab_module = importlib.import_module("torchtext.vocab")
    functional = importlib.import_module("torchtext.functional")

    problems: list[str] = []
    wrong = 0
    tokenizer = utils.get_tokenizer("basic_english")
    tokens = [tokenizer(s) for s in SENTENCES]
    for sentence, got in zip(SENTENCES, tokens, strict=True):
        if got != SENTENCES[sentence]:
            wrong += 1
            problems.append(f"basic_english split {sentence!r} into {got}")
    vocab = vocab_module.build_vocab_from_iterator(tokens, specials=SPECIALS)
    vocab.set_default_index(vocab["<unk>"])
    ids = [vocab(t)[:TRUNCATE] for t in tokens]
    for row, t in zip(ids, tokens, strict=True):
        back = vocab.lookup_tokens(row)
        bad = sum(a != b for a, b in zip(back, t[:TRUNCATE], strict=True))
        if bad:
            wrong += bad
            problems.append(f"{bad} tokens do not map back: {back} for {t[:TRUNCATE]}")
    if vocab([UNKNOWN]) != [vocab["<unk>"]]:
        wrong += 1
        problems.append(f"an unknown word maps to {vocab([UNKNOWN])}, not <unk>")
    pad = vocab["<pad>"]
    device = torch.device(ctx.device.torch_device)
    batch = functional.to_tensor(ids, padding_value=pad).to(device)
    for i, row in enumerate(ids):
        expected = torch.tensor(row + [pad] * (batch.shape[1] - len(row)), device=device)
        bad = int((batch[i] != expected).sum())
        if bad:
            wrong += bad
            problems.append(f"{bad} wrong indices in padded row {i}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        embedding = torch.nn.Embedding(len(vocab), 16)
    got = embedding.to(device)(batch).detach().cpu()
    want = embedding.weight.detach().cpu()[batch.cpu()]
    bad = int((got != want).sum())
    if bad:
        wrong += bad
        problems.append(f"{bad} of {want.numel()} embedding elements differ from the "
                        "weight rows they look up")
    verdict = exact_verdict(wrong, "elements", f"wrong result: torchtext: {'; '.join(problems)}",
                            extra=(Figure("vocabulary", float(len(vocab)), "tokens"),))
    details.update(batch_shape=list(batch.shape), vocabulary=len(vocab))
    return conclude(verdict, details)


BENCHMARK = Benchmark(
    name="torchtext",
    family="validation",
    summary="torchtext, where it imports with this torch: built for it, tokenizer, "
    "vocabulary and padding feeding an embedding on the device",
    entry="accelbench.benchmarks.validation.text:measure",
    sources=("accelbench.benchmarks.validation.verdict",
             "accelbench.benchmarks.validation.libraries"),
    params=(Param("check", "str", "build", help="what is checked", choices=TEXT_CHECKS),),
    devices=("cpu", "cuda"),
    timeout_s=300.0,
    views=("accelbench.benchmarks.validation.view:sections",),
    typed=TorchtextParams,
)
