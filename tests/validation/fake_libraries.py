"""Faked torchaudio, torchtext, torchrec and fbgemm_gpu, injected into sys.modules.

None of them has a build for the pinned torch (torchaudio's and torchrec's releases pin
older torches, torchtext ended with torch 2.3), so their checks are tested against these
stand-ins: each implements, with torch itself, exactly the part of the library's API the
check calls, and `wrong=True` makes it compute something else, as a broken build would.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType

import pytest
import torch
from torch import nn


def _modules(**modules: ModuleType) -> dict[str, ModuleType]:
    return {name.replace("__", "."): module for name, module in modules.items()}


def _module(name: str, **attributes: object) -> ModuleType:
    module = ModuleType(name)
    vars(module).update(attributes)
    return module


# -- torchaudio ----------------------------------------------------------------------------


def torchaudio(version: str = "2.11.0+cu130", wrong: bool = False) -> dict[str, ModuleType]:
    class Spectrogram(nn.Module):
        window: torch.Tensor  # a buffer

        def __init__(self, n_fft: int = 400, hop_length: int | None = None,
                     power: float = 2.0) -> None:
            super().__init__()
            self.n_fft, self.hop, self.power = n_fft, hop_length or n_fft // 2, power
            self.register_buffer("window", torch.hann_window(n_fft))

        def forward(self, wave: torch.Tensor) -> torch.Tensor:
            spec = torch.stft(wave, self.n_fft, self.hop, window=self.window,
                              return_complex=True).abs().pow(self.power)
            return spec * 1.01 if wrong and spec.dtype != torch.float64 else spec

    class MelSpectrogram(nn.Module):
        bank: torch.Tensor  # a buffer

        def __init__(self, sample_rate: int = 16000, n_fft: int = 400,
                     hop_length: int | None = None, n_mels: int = 128) -> None:
            super().__init__()
            self.spectrogram = Spectrogram(n_fft, hop_length)
            bank = torch.rand(n_fft // 2 + 1, n_mels, generator=torch.Generator().manual_seed(3))
            self.register_buffer("bank", bank)

        def forward(self, wave: torch.Tensor) -> torch.Tensor:
            spec: torch.Tensor = self.spectrogram(wave)
            return (spec.transpose(-1, -2) @ self.bank).transpose(-1, -2)

    def resample(wave: torch.Tensor, orig_freq: int, new_freq: int) -> torch.Tensor:
        step = orig_freq // new_freq
        out = torch.nn.functional.avg_pool1d(wave[:, None, :], step, step)[:, 0, :]
        return out + 0.01 if wrong and out.dtype != torch.float64 else out

    transforms = _module("torchaudio.transforms", Spectrogram=Spectrogram,
                         MelSpectrogram=MelSpectrogram)
    functional = _module("torchaudio.functional", resample=resample)
    top = _module("torchaudio", __version__=version, transforms=transforms,
                  functional=functional)
    return _modules(torchaudio=top, torchaudio__transforms=transforms,
                    torchaudio__functional=functional)


# -- torchtext -----------------------------------------------------------------------------


class Vocab:
    def __init__(self, tokens: list[str]) -> None:
        self._itos = tokens
        self._stoi = {t: i for i, t in enumerate(tokens)}
        self._default: int | None = None

    def __len__(self) -> int:
        return len(self._itos)

    def __getitem__(self, token: str) -> int:
        if token in self._stoi:
            return self._stoi[token]
        if self._default is None:
            raise RuntimeError(f"token {token} not found and default index is not set")
        return self._default

    def __call__(self, tokens: list[str]) -> list[int]:
        return [self[t] for t in tokens]

    def set_default_index(self, index: int) -> None:
        self._default = index

    def lookup_tokens(self, indices: list[int]) -> list[str]:
        return [self._itos[i] for i in indices]


def torchtext(version: str = "0.18.0", wrong: bool = False) -> dict[str, ModuleType]:
    def get_tokenizer(name: str):
        assert name == "basic_english"
        if wrong:  # forgets to split off punctuation
            return lambda text: text.lower().split()
        return lambda text: re.sub(r"([.,!?])", r" \1 ", text.lower()).split()

    def build_vocab_from_iterator(iterator, specials=()):
        counts = Counter(t for tokens in iterator for t in tokens)
        ordered = sorted(counts, key=lambda t: -counts[t])  # stable: first seen first
        return Vocab([*specials, *(t for t in ordered if t not in specials)])

    def to_tensor(ids, padding_value):
        return nn.utils.rnn.pad_sequence([torch.tensor(row) for row in ids], batch_first=True,
                                         padding_value=padding_value)

    utils = _module("torchtext.data.utils", get_tokenizer=get_tokenizer)
    data = _module("torchtext.data", utils=utils)
    vocab = _module("torchtext.vocab", build_vocab_from_iterator=build_vocab_from_iterator)
    functional = _module("torchtext.functional", to_tensor=to_tensor)
    top = _module("torchtext", __version__=version, data=data, vocab=vocab,
                  functional=functional)
    return _modules(torchtext=top, torchtext__data=data, torchtext__data__utils=utils,
                    torchtext__vocab=vocab, torchtext__functional=functional)


# -- torchrec and fbgemm_gpu ----------------------------------------------------------------


def fbgemm_gpu(version: str = "1.9.0+cu130") -> dict[str, ModuleType]:
    return {"fbgemm_gpu": _module("fbgemm_gpu", __version__=version)}


def torchrec(version: str = "1.9.0+cu130", wrong: bool = False) -> dict[str, ModuleType]:
    @dataclass
    class EmbeddingBagConfig:
        name: str
        embedding_dim: int
        num_embeddings: int
        feature_names: list[str]

    class KeyedJaggedTensor:
        def __init__(self, keys, values, lengths) -> None:
            self.keys, self.values, self.lengths = list(keys), values, lengths

        @staticmethod
        def from_lengths_sync(keys, values, lengths):
            return KeyedJaggedTensor(keys, values, lengths)

    class KeyedTensor:
        def __init__(self, pooled: dict[str, torch.Tensor]) -> None:
            self._pooled = pooled

        def to_dict(self) -> dict[str, torch.Tensor]:
            return dict(self._pooled)

    class EmbeddingBagCollection(nn.Module):
        def __init__(self, tables, device=None) -> None:
            super().__init__()
            self._tables = list(tables)
            mode = "mean" if wrong else "sum"
            self.embedding_bags = nn.ModuleDict({
                t.name: nn.EmbeddingBag(t.num_embeddings, t.embedding_dim, mode=mode,
                                        device=device) for t in self._tables})

        def forward(self, kjt: KeyedJaggedTensor) -> KeyedTensor:
            lengths = kjt.lengths.view(len(kjt.keys), -1)
            values = torch.split(kjt.values, lengths.sum(dim=1).tolist())
            by_key = dict(zip(kjt.keys, zip(values, lengths, strict=True), strict=True))
            pooled = {}
            for table in self._tables:
                for feature in table.feature_names:
                    ids, bag_lengths = by_key[feature]
                    offsets = torch.cumsum(bag_lengths, 0) - bag_lengths
                    pooled[feature] = self.embedding_bags[table.name](ids, offsets)
            return KeyedTensor(pooled)

    module = _module("torchrec", __version__=version, EmbeddingBagConfig=EmbeddingBagConfig,
                     EmbeddingBagCollection=EmbeddingBagCollection,
                     KeyedJaggedTensor=KeyedJaggedTensor)
    return {"torchrec": module}


def inject(monkeypatch: pytest.MonkeyPatch, modules: Mapping[str, ModuleType | None]) -> None:
    """Put the faked modules (None: not installed) in place of the real ones. A real
    package of the same name may be installed beside them (torchaudio beside the floor
    torch): its package metadata is hidden too, so a fake is judged by itself."""
    from accelbench.benchmarks.validation import libraries

    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    faked = {name.split(".")[0].replace("_", "-") for name in modules}
    real_requirement, real_version = libraries.torch_requirement, libraries._dist_version

    def requirement(distribution: str) -> str | None:
        faked_one = distribution.replace("_", "-") in faked
        return None if faked_one else real_requirement(distribution)

    def version(distribution: str) -> str | None:
        return None if distribution.replace("_", "-") in faked else real_version(distribution)

    monkeypatch.setattr(libraries, "torch_requirement", requirement)
    monkeypatch.setattr(libraries, "_dist_version", version)
