"""Tuning provenance (env.tuning): TunableOp results files read as untrusted input, and the
state a case runs under on faked ROCm, CUDA and CPU stacks."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from accelbench.env import tuning
from accelbench.env.tuning import (
    TunableTable,
    TunedGemm,
    begin_case,
    read_tunableop,
    tuning_state,
    with_ordinal,
    write_tunableop,
)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tuning"
MI300X = FIXTURE / "mi300x_tunableop_results0.csv"
MI300X_VALIDATORS = (
    ("PT_VERSION", "2.5.1"),
    ("ROCBLAS_VERSION", "4.2.1-9ef5d6bd"),
    ("HIPBLASLT_VERSION", "0.10.0-4f4b1d5"),
    ("ROCM_VERSION", "6.2.41133-dd7f95766"),
    ("GCN_ARCH_NAME", "gfx942:sramecc+:xnack-"),
)


def fake_torch(*, validators=MI300X_VALIDATORS, enabled: bool = True, tuning_on: bool = False,
               record_untuned: bool = False, filename: str = "", blas: str = "Cublaslt",
               hip: str | None = "6.2.41133-dd7f95766", benchmark: bool = False) -> Any:
    """A torch module as a ROCm (``hip`` set) or CUDA build shows TunableOp to Python."""
    tunable = SimpleNamespace(
        is_enabled=lambda: enabled,
        tuning_is_enabled=lambda: tuning_on,
        record_untuned_is_enabled=lambda: record_untuned,
        get_filename=lambda: filename,
        get_validators=lambda: tuple(validators),
    )
    backend = SimpleNamespace(name=blas)
    return SimpleNamespace(
        __version__="2.5.1",
        version=SimpleNamespace(hip=hip, cuda=None if hip else "12.4"),
        cuda=SimpleNamespace(tunable=tunable, current_device=lambda: 0),
        backends=SimpleNamespace(cuda=SimpleNamespace(preferred_blas_library=lambda: backend),
                                 cudnn=SimpleNamespace(benchmark=benchmark)),
    )


def test_a_recorded_mi300x_results_file_is_parsed() -> None:
    table = read_tunableop(MI300X)
    assert isinstance(table, TunableTable) and table.ok and table.exists
    assert table.validators == dict(MI300X_VALIDATORS)
    assert len(table.entries) == 6
    first = table.entries[0]
    assert first == TunedGemm("GemmTunableOp_BFloat16_TN",
                              "tn_4096_4096_4096_ld_4096_4096_4096",
                              "Gemm_Hipblaslt_1_59211", 0.238417)
    assert {e.solution.split("_")[1] for e in table.entries[:5]} == {"Hipblaslt", "Rocblas"}
    assert table.entries[-1].solution == "Default"
    import hashlib

    assert table.sha256 == hashlib.sha256(MI300X.read_bytes()).hexdigest()
    assert table.bad_lines == 0 and table.problems == ()


def test_written_table_reads_back_the_same(tmp_path: Path) -> None:
    table = read_tunableop(MI300X)
    out = tmp_path / "copy.csv"
    write_tunableop(table, out)
    again = read_tunableop(out)
    assert again.validators == table.validators and again.entries == table.entries


def test_malformed_lines_are_counted_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_bytes(b"Validator,PT_VERSION,2.5.1\nValidator\n"
                     b"GemmTunableOp_float_NT,nt_1_1_1,Gemm_Rocblas_1,0.5\n"
                     b"just text\nGemmTunableOp_float_NT,nt_2_2_2,Gemm_Rocblas_2,fast\n"
                     b"GemmTunableOp_float_NT,nt_3_3_3,Gemm_Rocblas_3,nan\n"
                     b"\xff\xfe,\x1b[31mred,sol\n")
    table = read_tunableop(path)
    assert table.validators == {"PT_VERSION": "2.5.1"}
    assert [e.params for e in table.entries] == ["nt_1_1_1", "[31mred"]  # control chars gone
    assert table.bad_lines == 4
    assert table.problems == ("4 malformed lines skipped",)


def test_missing_directory_fifo_and_binary_files_give_a_table_with_problems(
        tmp_path: Path) -> None:
    assert read_tunableop(tmp_path / "absent.csv").problems == ("no such file",)
    assert not read_tunableop(tmp_path / "absent.csv").exists
    assert read_tunableop(tmp_path).problems == ("not a regular file",)
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)  # opening a FIFO for reading would block without a writer
    assert read_tunableop(fifo).problems == ("not a regular file",)
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"Validator,PT_VERSION,1\n\x00\x01\x02")
    table = read_tunableop(binary)
    assert table.problems == ("binary content",) and table.entries == () and table.sha256


def test_a_huge_file_is_read_only_to_the_cap(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tuning, "PARSE_CAP_BYTES", 4096)
    monkeypatch.setattr(tuning, "HASH_CAP_BYTES", 8192)
    line = "GemmTunableOp_float_NT,nt_1024_1024_1024,Gemm_Rocblas_7,0.25\n"
    path = tmp_path / "huge.csv"
    path.write_text("Validator,PT_VERSION,2.5.1\n" + line * 1000)
    table = read_tunableop(path)
    assert 0 < len(table.entries) < 4096 // len(line) + 1
    assert table.bad_lines == 0  # the line cut at the cap is dropped, not counted as bad
    assert any("only the beginning was read" in p for p in table.problems)
    assert any("digest covers the beginning" in p for p in table.problems)
    assert table.size_bytes == path.stat().st_size


def test_too_many_entries_stop_at_the_entry_cap(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tuning, "MAX_ENTRIES", 3)
    path = tmp_path / "many.csv"
    path.write_text("".join(f"GemmTunableOp_float_NT,nt_{i}_1_1,Gemm_Rocblas_1,0.1\n"
                            for i in range(10)))
    table = read_tunableop(path)
    assert len(table.entries) == 3 and "more than 3 entries" in table.problems[0]


@pytest.mark.parametrize(("name", "ordinal", "expected"), [
    ("tunableop_results.csv", 0, "tunableop_results0.csv"),
    ("out/results%d.csv", 3, "out/results3.csv"),
    ("results", 1, "results1"),
    ("a.b/results.csv", 2, "a.b/results2.csv"),
])
def test_the_file_name_gets_the_device_ordinal_as_pytorch_inserts_it(name, ordinal,
                                                                     expected) -> None:
    assert with_ordinal(name, ordinal) == expected


def _rocm_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"PYTORCH_TUNABLEOP_ENABLED": "1", "HOME": str(tmp_path / "home"),
            "PYTORCH_TUNABLEOP_FILENAME": str(tmp_path / "results%d.csv"), **extra}


def test_rocm_state_with_validators_matching_this_stack(tmp_path: Path) -> None:
    (tmp_path / "results0.csv").write_bytes(MI300X.read_bytes())
    state = tuning_state(_rocm_env(tmp_path), fake_torch(), "cuda", "rocm", 0)
    json.dumps(state)  # plain JSON
    assert state["blas"] == "hipblaslt"
    op = state["tunableop"]
    assert op["applies"] and op["enabled"] and not op["tuning"]
    assert op["file"] == str(tmp_path / "results0.csv") and op["file_existed"]
    assert op["entries"] == 6 and op["validators"]["GCN_ARCH_NAME"] == "gfx942:sramecc+:xnack-"
    assert op["validators_match"] is True and "mismatched_validators" not in op
    assert op["sha256"] == read_tunableop(MI300X).sha256
    assert state["miopen"] == {"find_mode": "default",
                               "user_db_path": str(tmp_path / "home" / ".config" / "miopen"),
                               "user_db_existed": False, "exhaustive_search": False}


def test_validators_of_another_stack_do_not_match(tmp_path: Path) -> None:
    (tmp_path / "results0.csv").write_bytes(MI300X.read_bytes())
    newer = tuple((k, "6.3.42131-fa1d09cbd" if k == "ROCM_VERSION" else v)
                  for k, v in MI300X_VALIDATORS)
    state = tuning_state(_rocm_env(tmp_path), fake_torch(validators=newer), "cuda", "rocm", 0)
    op = state["tunableop"]
    assert op["validators_match"] is False
    assert op["mismatched_validators"] == ["ROCM_VERSION"]
    assert op["stack_validators"]["ROCM_VERSION"] == "6.3.42131-fa1d09cbd"


def test_a_filename_set_through_the_api_wins_and_a_missing_file_is_said(tmp_path: Path) -> None:
    torch = fake_torch(filename=str(tmp_path / "api7.csv"))
    op = tuning_state(_rocm_env(tmp_path), torch, "cuda", "rocm", 0)["tunableop"]
    assert op["file"] == str(tmp_path / "api7.csv")
    assert op["file_existed"] is False and "sha256" not in op and "validators_match" not in op


def test_library_files_are_hashed_and_miopen_state_read(tmp_path: Path) -> None:
    override = tmp_path / "hipblaslt_override.txt"
    override.write_text("N,N,0,1,4096,4096,4096,1,4096,16777216,0,4096,16777216,4096,16777216,"
                        "4096,16777216,bf16_r,bf16_r,bf16_r,bf16_r,f32_r,59211\n")
    gemm = tmp_path / "rocblas_gemm.csv"
    gemm.write_text("transA,transB,M,N,K,solution_index\nN,T,1024,1024,1024,21120\n")
    db = tmp_path / "miopen-db"
    db.mkdir()
    (db / "gfx942130.HIP.3_2_0.ufdb.txt").write_text("x")
    env = _rocm_env(tmp_path, HIPBLASLT_TUNING_OVERRIDE_FILE=str(override),
                    HIPBLASLT_LOG_FILE=str(override), HIPBLASLT_LOG_MASK="32",
                    ROCBLAS_TENSILE_GEMM_OVERRIDE_PATH=str(gemm),
                    HIPBLASLT_API_TOKEN="hunter2",
                    MIOPEN_FIND_MODE="2", MIOPEN_USER_DB_PATH=str(db))
    state = tuning_state(env, fake_torch(benchmark=True), "cuda", "rocm", 0)
    import hashlib

    hip = state["hipblaslt"]
    assert hip["files"]["HIPBLASLT_TUNING_OVERRIDE_FILE"]["sha256"] == hashlib.sha256(
        override.read_bytes()).hexdigest()
    assert "HIPBLASLT_LOG_FILE" not in hip["files"]  # a log is not tuning
    assert hip["variables"]["HIPBLASLT_LOG_MASK"] == "32"
    assert state["rocblas"]["files"]["ROCBLAS_TENSILE_GEMM_OVERRIDE_PATH"]["sha256"] == (
        hashlib.sha256(gemm.read_bytes()).hexdigest())
    assert "hunter2" not in json.dumps(state)  # a credential-looking name is never recorded
    assert state["miopen"] == {"find_mode": "FAST", "user_db_path": str(db),
                               "user_db_existed": True, "exhaustive_search": True}


def test_cuda_names_its_blas_and_cpu_says_tunableop_does_not_apply(tmp_path: Path) -> None:
    cuda = tuning_state({}, fake_torch(hip=None, blas="Cublas", enabled=False), "cuda", "cuda")
    assert cuda["blas"] == "cublas" and cuda["tunableop"]["enabled"] is False
    assert "miopen" not in cuda and cuda["cudnn_benchmark"] is False
    cpu_torch = SimpleNamespace(__config__=SimpleNamespace(
        show=lambda: "  - Build settings: BLAS_INFO=open, LAPACK_INFO=open,\n"))
    cpu = tuning_state({"PYTORCH_TUNABLEOP_ENABLED": "1"}, cpu_torch, "cpu", "cpu")
    assert cpu["tunableop"]["applies"] is False
    assert "does not apply on CPU" in cpu["tunableop"]["reason"]
    assert cpu["blas"] == "open"


def test_gemms_that_ran_untuned_during_the_case_are_recorded(tmp_path: Path) -> None:
    untuned = tmp_path / "untuned0.csv"
    untuned.write_text("GemmTunableOp_BFloat16_TN,tn_1_1_1_ld_1_1_1\n")  # an earlier case's
    env = _rocm_env(tmp_path, PYTORCH_TUNABLEOP_RECORD_UNTUNED="1",
                    PYTORCH_TUNABLEOP_UNTUNED_FILENAME=str(tmp_path / "untuned.csv"))
    probe = begin_case(env, fake_torch(record_untuned=True), "cuda", "rocm", 0)
    with untuned.open("a") as handle:  # what TunableOp appends while the case runs
        for shape in ("tn_4096_4096_4096_ld_4096_4096_4096", "tn_8192_1_8192_ld_8192_8192_8192",
                      "tn_4096_4096_4096_ld_4096_4096_4096"):
            handle.write(f"GemmTunableOp_BFloat16_TN,{shape}\n")
    done = probe.finish()["tunableop"]
    assert done["untuned"] == {
        "file": str(untuned), "count": 2,
        "shapes": ["GemmTunableOp_BFloat16_TN,tn_4096_4096_4096_ld_4096_4096_4096",
                   "GemmTunableOp_BFloat16_TN,tn_8192_1_8192_ld_8192_8192_8192"]}
    assert "file_changed" not in done


def test_a_results_file_written_during_the_case_is_said(tmp_path: Path) -> None:
    env = _rocm_env(tmp_path, PYTORCH_TUNABLEOP_TUNING="1")
    probe = begin_case(env, fake_torch(tuning_on=True), "cuda", "rocm", 0)
    (tmp_path / "results0.csv").write_bytes(MI300X.read_bytes())
    state = probe.finish()
    assert state["tunableop"]["file_existed"] is False  # as the case started
    assert state["tunableop"]["file_changed"] is True
