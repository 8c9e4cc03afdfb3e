"""The GPU check's stages under their deadlines (a fake clock and fake commands, then real
processes), its trimmed requests as planned on a GPU, its figures table and the wheels it
brings to a machine with no package index: runs on any machine."""

from __future__ import annotations

import io
import sys
import time
import zipfile
from pathlib import Path

import pytest

from accelbench.benchmarks import REGISTRY
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import Figure
from accelbench.env.fingerprint import Fingerprint
from accelbench.runner.recorder import RunRecorder
from accelbench.store import Store
from fakes import stored_measurement

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))

import gpu_check
import gpu_expectations as ge
import gpu_figures
import gpu_stages as gs
import gpu_wheels as gw

H200 = DeviceInfo(type="cuda", index=0, platform="cuda", name="NVIDIA H200", arch="sm_90",
                  compute_units=132)


# --- stages under their deadlines -----------------------------------------------------


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def fake_spawn(clock, outcomes):
    """Each stage takes the seconds and gives the exit status (None: out of time) named
    for it; its log says what it printed."""
    calls = []

    def spawn(argv, cap, log):
        took, status, printed = outcomes[argv[0]]
        calls.append((argv[0], cap))
        clock.now += min(took, cap)
        log.write_text(printed, encoding="utf-8")
        return None if took > cap else status
    return spawn, calls


def stages(*specs):
    return [gs.Stage(name, cap, (name,), f"{name}.log", summary)
            for name, cap, summary in specs]


def test_each_stage_gets_its_cap_or_what_the_budget_has_left_and_every_one_is_reported(
        tmp_path):
    clock = Clock()
    spawn, calls = fake_spawn(clock, {
        "a": (20, 0, "x\n7 cases, 0 failed\n"),
        "b": (100, 1, "Traceback\nboom\n"),  # fails: the next stage runs all the same
        "c": (500, 0, "slow\n"),  # out of time at its cap
        "d": (5, 0, "done\n"),
        "e": (5, 0, ""),
    })
    results = gs.run_stages(stages(("a", 30, r"^\d+ cases"), ("b", 120, ""), ("c", 60, ""),
                                   ("d", 60, ""), ("e", 60, "")),
                            tmp_path, budget=200, reserve=20, spawn=spawn, clock=clock,
                            say=lambda _: None)
    by = {r.name: r for r in results}
    assert [r.name for r in results] == ["a", "b", "c", "d", "e"]
    assert by["a"].ok and by["a"].detail == "7 cases, 0 failed"
    assert by["b"].status == gs.FAILED and by["b"].detail == "exit 1; boom"
    # 180 s of budget less 120 spent leaves c 60 s, its cap: it times out there
    assert by["c"].status == gs.TIMED_OUT and by["c"].detail.startswith("stopped after 60 s")
    # nothing is left for d and e: reported as not run, with the reason
    assert by["d"].status == gs.NOT_RUN and "left" in by["d"].detail
    assert by["e"].status == gs.NOT_RUN
    assert calls == [("a", 30), ("b", 120), ("c", 60)]


def test_a_stage_is_held_to_what_is_left_when_that_is_below_its_cap(tmp_path):
    clock = Clock()
    spawn, calls = fake_spawn(clock, {"a": (90, 0, ""), "b": (10, 0, "")})
    gs.run_stages(stages(("a", 100, ""), ("b", 100, "")), tmp_path, budget=130, reserve=10,
                  spawn=spawn, clock=clock, say=lambda _: None)
    assert calls == [("a", 100), ("b", 30)]


def test_a_command_that_cannot_start_fails_its_stage_alone(tmp_path):
    def spawn(argv, cap, log):
        if argv[0] == "missing":
            raise FileNotFoundError(2, "No such file or directory", "missing")
        log.write_text("fine\n")
        return 0
    results = gs.run_stages(stages(("missing", 30, ""), ("next", 30, "")), tmp_path, 100,
                            spawn=spawn, say=lambda _: None)
    assert results[0].status == gs.FAILED and "exit 127" in results[0].detail
    assert results[1].ok


def test_the_stages_table_and_its_json(tmp_path):
    results = [gs.StageResult("health", gs.OK, 12.4, 60, "PASS | 16 checks"),
               gs.StageResult("tests", gs.NOT_RUN, 0, 180, "no time")]
    lines = gs.render(results)
    assert lines[2] == "| health | ok: PASS / 16 checks | 12 s of 60 |"
    assert lines[3] == "| tests | not run: no time | - |"
    gs.write(results, tmp_path / "stages.json")
    assert '"status": "not run"' in (tmp_path / "stages.json").read_text()


def test_a_real_stage_is_logged_and_stopped_at_its_deadline_with_its_children(tmp_path):
    marker = tmp_path / "child-alive"
    child = tmp_path / "child.py"
    child.write_text(f"import pathlib, time\ntime.sleep(4)\npathlib.Path({str(marker)!r})"
                     ".touch()\n")
    parent = tmp_path / "parent.py"
    parent.write_text(f"import subprocess, sys, time\nprint('started', flush=True)\n"
                      f"subprocess.Popen([sys.executable, {str(child)!r}])\ntime.sleep(60)\n")
    log = tmp_path / "slow.log"
    began = time.monotonic()
    status = gs.spawn_logged([sys.executable, str(parent)], 2.0, log)
    assert status is None and time.monotonic() - began < 30
    assert log.read_text().startswith("started")
    time.sleep(4.5)
    assert not marker.exists()  # the child went with its group
    assert gs.spawn_logged([sys.executable, "-c", "print('ok')"], 30, log) == 0
    assert log.read_text() == "ok\n"


# --- the requests: a trimmed GPU suite -------------------------------------------------


def planned(request_dict, device):
    from accelbench.core.request import RunRequest
    from accelbench.runner.plan import expand, validate

    request = RunRequest.from_dict(request_dict)
    return [p.case for p in expand(validate(request, REGISTRY), device)]


def test_the_headline_request_plans_the_headline_figures_in_four_precisions_on_a_gpu():
    cases = planned(gpu_check.requests("cuda", dry_run=False)["headline"], H200)
    gemms = sorted(c.param_dict["dtype"] for c in cases if c.benchmark == "gemm")
    assert gemms == sorted(gpu_check.HEADLINE_DTYPES)
    assert {c.param_dict["shape"] for c in cases if c.benchmark == "gemm"} == {"8192"}
    for headline in ge.HEADLINES:  # every headline figure has its case, once
        matching = [c for c in cases if c.benchmark == headline.benchmark and all(
            c.param_dict.get(k) == v for k, v in headline.params.items())]
        assert len(matching) == 1, headline.key
    memory = {(c.param_dict["op"], c.param_dict.get("pinned")) for c in cases
              if c.benchmark == "memory"}
    assert {("h2d", True), ("d2h", True), ("copy", None)} <= memory
    assert len(cases) <= 14  # one worker process each: a couple of minutes on a GPU


def test_the_models_request_plans_bert_base_training_and_one_inference_case():
    cases = planned(gpu_check.requests("cuda", dry_run=False)["models"], H200)
    assert sorted((c.benchmark, c.param_dict["model"], c.param_dict["dtype"])
                  for c in cases) == [("infer", "gpt2-small", "bf16"),
                                      ("train", "bert-base", "bf16")]


def test_the_dry_run_plans_the_same_requests_on_the_cpu_with_a_small_gemm():
    cpu = DeviceInfo(type="cpu", index=None, platform="cpu", name="AMD EPYC")
    requests = gpu_check.requests("cpu", dry_run=True)
    cases = planned(requests["headline"], cpu)
    assert {c.param_dict["shape"] for c in cases if c.benchmark == "gemm"} == {
        gpu_check.DRY_GEMM}
    assert {c.benchmark for c in cases} == {"gemm", "memory", "launch"}
    assert {c.benchmark for c in planned(requests["models"], cpu)} == {"train", "infer"}


def test_the_stages_are_ordered_by_value_and_the_long_ones_are_opt_in(tmp_path):
    names = [s.name for s in gpu_check.plan("py", tmp_path, dry_run=False, extended=False)]
    assert names == ["fingerprint", "health (qualify level 1)", "headline figures",
                     "training and inference", "reference and energy",
                     "GPU tests (pytest -m gpu)"]
    extended = gpu_check.plan("py", tmp_path, dry_run=False, extended=True)
    assert [s.name for s in extended][-2:] == ["LLM serving (serve-llm)",
                                               "training at scale (FSDP2)"]
    tests = next(s for s in extended if s.name.startswith("GPU tests"))
    assert any(a.endswith("test_gpu_scale.py") for a in tests.argv)  # ignored there
    assert tests.argv[tests.argv.index("--ignore") + 1].endswith("test_gpu_scale.py")
    # the stages' caps fit the default budget with the reserve, but for the tests' own
    assert sum(s.cap for s in extended[:5]) + gpu_check.RESERVE_S <= 470
    dry = gpu_check.plan("py", tmp_path, dry_run=True, extended=False)
    assert [s.name for s in dry] == names and [s.cap for s in dry] == [
        s.cap for s in gpu_check.plan("py", tmp_path, dry_run=False, extended=False)]
    assert "--dry-run" in dry[4].argv and "cpu" in dry[0].argv


# --- the figures table -------------------------------------------------------------------


def case(bench, device="cuda:0", **params):
    benchmark = REGISTRY.get(bench)
    return benchmark.case(benchmark.resolve(params), device)


def measurement(bench, figures, status="ok", reason=None, **params):
    return stored_measurement(case(bench, **params), status, samples=(1e-3,) * 3,
                              figures=figures, reason=reason)


def store_of(tmp_path, measurements, device=H200):
    fingerprint = Fingerprint(device, {"platform": device.platform,
                                       "torch": {"version": "2.11.0"}})
    path = tmp_path / "results.sqlite"
    with Store.open(path) as store:
        recorder = RunRecorder(store, fingerprint, None, ["run"])
        for index, m in enumerate(measurements):
            recorder.record(index, m)
        recorder.finish()
    return path


def test_the_table_sets_each_figure_beside_its_peak_and_marks_what_is_out_of_range(
        tmp_path):
    path = store_of(tmp_path, [
        measurement("gemm", (Figure("throughput", 792e12, "FLOP/s", True, 989.5e12),),
                    shape="8192", dtype="bf16"),
        # below the H200's expected range for the headline copy
        measurement("memory", (Figure("bandwidth", 2.0e12, "B/s", True, 4.8e12),),
                    op="copy", size_mib=1024),
        # fp32 math run as TF32, taken against the fp32 peak
        measurement("train", (Figure("throughput", 900.0, "sample/s"),
                              Figure("mfu", 131.0, "%")),
                    model="bert-base", dtype="fp32", batch=16, seq=128),
        measurement("gemm", (), status="skipped", reason="fp8 needs sm_89 or newer",
                    shape="8192", dtype="fp8"),
        measurement("launch", (), status="failed", reason="worker died",
                    mode="graph"),
    ])
    lines, ok = gpu_figures.figures_table(path)
    assert not ok
    text = "\n".join(lines)
    gemm = next(ln for ln in lines if ln.startswith("| gemm") and "bf16" in ln)
    assert "792 TFLOP/s" in gemm and "990 TFLOP/s" in gemm and "80.0%" in gemm
    assert gemm.rstrip(" |").endswith("ok")
    copy = next(ln for ln in lines if ln.startswith("| memory"))
    assert "OUT: outside 3.80 TB/s to 4.80 TB/s" in copy
    mfu = next(ln for ln in lines if "| mfu |" in ln)
    assert "OUT: MFU above 100%" in mfu
    assert "skipped: fp8 needs sm_89 or newer" in text and "FAILED failed: worker died" in text
    assert lines[-1] == "figures: 3 of 6 in range, 3 OUT OF RANGE or failed"


def test_a_store_that_was_not_made_gives_a_table_that_says_so(tmp_path):
    lines, ok = gpu_figures.figures_table(tmp_path / "results.sqlite")
    assert not ok and "nothing was stored" in lines[0]


# --- wheels for a machine with no package index -----------------------------------------


def test_the_package_list_is_read_as_pip_freeze_writes_it_or_as_names():
    have = gw.read_have("# list\nNumPy==2.5.2\nrich\n-e git+x\njsonschema_specifications==1\n")
    assert have == {"numpy": "2.5.2", "rich": None, "jsonschema-specifications": "1"}
    with pytest.raises(ValueError, match="not a package name"):
        gw.read_have("numpy; rm -rf /\n")


def wheel(folder, name, version, requires=()):
    """A wheel whose metadata names `requires`."""
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    meta = io.StringIO()
    meta.write(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    for line in requires:
        meta.write(f"Requires-Dist: {line}\n")
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{name.replace('-', '_')}-{version}.dist-info/METADATA", meta.getvalue())
    return path


def test_the_wheels_follow_dependencies_but_leave_what_the_machine_has(tmp_path):
    index = {
        "jsonschema": ("4.26.0", ["attrs>=22.2.0", "referencing>=0.28.4",
                                  "rpds-py>=0.7.1", "idna; extra == 'format'",
                                  "importlib-resources>=1.4.0; python_version < '3.9'"]),
        "referencing": ("0.37.0", ["attrs>=22.2.0", "rpds-py>=0.7.0"]),
        "rpds-py": ("0.30.0", []),
        "platformdirs": ("4.3.0", []),
        "attrs": ("25.1.0", []),
        "numpy": ("2.5.2", []),
    }
    asked = []

    def download(requirement, dest, target):
        from packaging.requirements import Requirement

        name = Requirement(requirement).name
        asked.append(name)
        if name not in index:
            return None, f"No matching distribution found for {requirement}"
        version, requires = index[name]
        return wheel(dest, name, version, requires), ""

    have = {"attrs": "25.1.0", "numpy": "1.20"}
    wheels, kept, failed = gw.bring(
        ["jsonschema>=4", "platformdirs>=3", "numpy>=1.24", "torch>=2.1", "nvidia-nccl-cu13",
         "no-such-thing"], have, tmp_path / "w", gw.Target("3.12"), download)
    assert sorted(w.name.split("-")[0] for w in wheels) == [
        "jsonschema", "numpy", "platformdirs", "referencing", "rpds_py"]
    # attrs is there; an old numpy is not enough; torch and the GPU stack are the
    # machine's own; extras and old-Python markers are not followed
    assert asked.count("rpds-py") == 1 and "attrs" not in asked and "idna" not in asked
    assert "torch" not in asked and "nvidia-nccl-cu13" not in asked
    assert failed == ["no-such-thing: No matching distribution found for no-such-thing"]
    assert "torch>=2.1" in kept


def test_the_target_markers_are_the_gpu_machines_python_not_this_one(tmp_path):
    path = wheel(tmp_path, "pkg", "1.0", ["tomli>=2; python_version < '3.11'",
                                          "typing-extensions; python_version < '3.13'",
                                          "pywin32; sys_platform == 'win32'"])
    assert gw.dependencies(path, (), gw.Target("3.12")) == ["typing-extensions"]
    assert gw.dependencies(path, (), gw.Target("3.10")) == ["tomli>=2", "typing-extensions"]
