"""Bad engine and scenario input: one line, the usage exit code, nothing stored touched."""

from __future__ import annotations

import pytest

from accelbench.cli.main import main
from accelbench.errors import EXIT_USAGE


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("accelbench: error: ") and "Traceback" not in err[0]
    return err[0]


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--bench", "infer-engine", "-p", "engine=tensorrt-llm"],
     "parameter engine='tensorrt-llm' is not one of: eager, compile, compile-max-autotune"),
    (["--bench", "serve", "-p", "scenario=cloud"], "parameter scenario='cloud' is not one of"),
    (["--bench", "infer-engine", "-p", "provider=coreml"],
     "parameter provider='coreml' is not one of"),
    (["--bench", "infer-engine", "-p", "provider=migraphx"],
     "provider='migraphx': ONNX Runtime here has no MIGraphXExecutionProvider "
     "(available: cpu)"),
    (["--bench", "infer-engine", "-p", "int8=fp4"], "parameter int8='fp4' is not one of"),
    (["--bench", "serve", "-p", "latency_bound=0ms"],
     "latency_bound='0ms': '0ms' is not a positive duration"),
    (["--bench", "serve", "-p", "latency_bound=-20ms"], "latency_bound='-20ms'"),
    (["--bench", "serve", "-p", "latency_bound=soon"],
     "'soon' is not a duration (a number with ns, us, ms, s or min)"),
    (["--bench", "serve", "-p", "min_duration=0s"], "min_duration='0s'"),
])
def test_bad_engine_and_scenario_input(argv, fragment, capsys, store_path, monkeypatch) -> None:
    # What this machine's ONNX Runtime offers, whichever build is installed.
    monkeypatch.setattr("accelbench.benchmarks.models.engines.onnxrt.available_providers",
                        lambda: ["CPUExecutionProvider"])
    assert main(["run", "--device", "cpu", *argv]) == EXIT_USAGE
    assert fragment in _one_line_error(capsys)
    assert not store_path.exists(), "nothing may be created for a refused command"
