"""Model folders made here: complete, cached, seeded, written atomically, and loadable by
transformers with a tokenizer whose words are tokens."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from accelbench.benchmarks.llm.engines.model_dir import (
    FIRST_WORD,
    MODEL_CONFIGS,
    ids_of,
    model_dir,
    prompt_token_ids,
    text_of,
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """With weights: drawing them imports torch and transformers (seconds)."""
    return model_dir("llama-tiny", root=tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def shape_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return model_dir("llama-tiny", weights=False, root=tmp_path_factory.mktemp("models"))


@pytest.mark.slow
def test_tiny_folder_holds_config_tokenizer_and_weights(tiny: Path) -> None:
    names = {p.name for p in tiny.iterdir()}
    assert {"config.json", "generation_config.json", "tokenizer.json",
            "tokenizer_config.json", "model.safetensors"} <= names
    config = json.loads((tiny / "config.json").read_text())
    assert (config["vocab_size"], config["hidden_size"], config["num_hidden_layers"],
            config["num_attention_heads"], config["num_key_value_heads"],
            config["head_dim"]) == (512, 64, 2, 4, 2, 32)
    assert config["eos_token_id"] is None
    assert json.loads((tiny / "generation_config.json").read_text())["eos_token_id"] is None


@pytest.mark.slow
def test_made_once_then_cached(tiny: Path) -> None:
    stamp = (tiny / "model.safetensors").stat().st_mtime_ns
    assert model_dir("llama-tiny", root=tiny.parent) == tiny
    assert (tiny / "model.safetensors").stat().st_mtime_ns == stamp
    assert not [p for p in tiny.parent.iterdir() if p.name.startswith(".")]


@pytest.mark.slow
def test_seed_decides_the_weights(tiny: Path) -> None:
    other = model_dir("llama-tiny", seed=1, root=tiny.parent)
    assert other != tiny
    assert (other / "model.safetensors").read_bytes() != (tiny / "model.safetensors").read_bytes()


def test_without_weights_for_dummy_loading(tmp_path: Path) -> None:
    folder = model_dir("llama-1b", weights=False, root=tmp_path)
    assert not list(folder.glob("*.safetensors"))
    config = json.loads((folder / "config.json").read_text())
    assert (config["vocab_size"], config["hidden_size"], config["num_hidden_layers"],
            config["tie_word_embeddings"], config["head_dim"]) == (128256, 2048, 16, True, 64)
    assert prompt_token_ids(folder)[-1] == 128255


def test_concurrent_makers_see_one_whole_folder(tmp_path: Path) -> None:
    made: list[Path] = []
    threads = [threading.Thread(target=lambda: made.append(
        model_dir("llama-tiny", weights=False, root=tmp_path))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 4 and len(set(made)) == 1
    assert [p.name for p in tmp_path.iterdir()] == [made[0].name]
    assert (made[0] / "tokenizer.json").is_file()


def test_unknown_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown model 'llama-2t'"):
        model_dir("llama-2t", root=tmp_path)


def test_words_are_tokens(shape_only: Path) -> None:
    from tokenizers import Tokenizer

    tiny = shape_only
    ids = prompt_token_ids(tiny)
    assert ids[0] == FIRST_WORD and ids[-1] == MODEL_CONFIGS["llama-tiny"].vocab - 1
    sample = [ids[0], 7, 200, ids[-1]]
    tokenizer = Tokenizer.from_file(str(tiny / "tokenizer.json"))
    assert tokenizer.encode(text_of(sample), add_special_tokens=False).ids == sample
    assert tokenizer.decode(sample) == text_of(sample)
    assert ids_of(text_of(sample)) == sample


@pytest.mark.slow
def test_transformers_loads_it_and_generates_to_max_tokens(tiny: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    assert tokenizer("w5 w7 w100", add_special_tokens=False)["input_ids"] == [5, 7, 100]
    chat = tokenizer.apply_chat_template([{"role": "user", "content": "w5 w9"}],
                                         tokenize=False, add_generation_prompt=True)
    assert chat == "w5 w9"
    model = AutoModelForCausalLM.from_pretrained(tiny)
    out = model.generate(torch.tensor([[5, 7, 100]]), max_new_tokens=40, do_sample=False)
    assert out.shape == (1, 43)
