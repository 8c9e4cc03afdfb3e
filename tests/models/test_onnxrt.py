"""The onnxruntime engine's binding, provider options and node placement: bf16 through
the real CPU build of ONNX Runtime, the GPU providers through a fake session that records
what it is given."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper

from accelbench.benchmarks.models import engines
from accelbench.benchmarks.models.engines import onnxrt
from accelbench.benchmarks.models.precision import Precision


def _square_model(path: Path, elem: int = TensorProto.BFLOAT16) -> Path:
    """output = x * x, computed in float32 between two casts: the CPU provider has Cast
    and Mul kernels for this, so a bf16 input and output run on the CPU."""
    nodes = [helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["xf", "xf"], ["yf"]),
             helper.make_node("Cast", ["yf"], ["output"], to=elem)]
    graph = helper.make_graph(nodes, "square",
                              [helper.make_tensor_value_info("x", elem, [2, 3])],
                              [helper.make_tensor_value_info("output", elem, [2, 3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              str(path))
    return path


def _job(tmp_path: Path, dtype: str = "fp32", device: str = "cpu") -> engines.Job:
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    return engines.Job(torch, torch.nn.Identity(), (x,), ("x",), torch.device(device),
                       Precision(dtype), engines.Options(), tmp_path)


def _cpu_session(path: Path) -> ort.InferenceSession:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


# -- bf16 through the binding ---------------------------------------------------------------

def test_a_bf16_model_runs_on_the_cpu_provider_through_the_binding(tmp_path) -> None:
    job = _job(tmp_path, "bf16")
    sess = _cpu_session(_square_model(tmp_path / "m.onnx"))
    run, output = onnxrt.runner(job, sess, torch.bfloat16)
    out = output(run(job.example))
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
    expected = (job.example[0].to(torch.bfloat16).float() ** 2).to(torch.bfloat16)
    assert torch.equal(out, expected)
    # A second call with other inputs sees them, not the first call's.
    again = output(run((job.example[0] + 1,)))
    assert torch.equal(again, ((job.example[0] + 1) ** 2).to(torch.bfloat16))


def test_onnx_runtime_refuses_bf16_bound_as_uint16_and_takes_its_onnx_type(tmp_path) -> None:
    # Why the element type is ONNX's BFLOAT16: numpy has no bfloat16, and uint16 is refused.
    sess = _cpu_session(_square_model(tmp_path / "m.onnx"))
    x = torch.ones(2, 3, dtype=torch.bfloat16)
    binding = sess.io_binding()
    binding.bind_input("x", "cpu", 0, np.uint16, [2, 3], x.data_ptr())
    binding.bind_output("output", "cpu")
    with pytest.raises(Exception, match=r"expected: \(tensor\(bfloat16\)\)"):
        sess.run_with_iobinding(binding)
    assert onnxrt.element_type(torch, torch.bfloat16) == TensorProto.BFLOAT16
    assert onnxrt.element_type(torch, torch.float16) is np.float16
    assert onnxrt.element_type(torch, torch.int64) is np.int64


def test_fp16_and_int64_inputs_keep_their_types(tmp_path) -> None:
    sess = _cpu_session(_square_model(tmp_path / "m.onnx", TensorProto.FLOAT16))
    job = _job(tmp_path, "fp16")
    run, output = onnxrt.runner(job, sess, torch.float16)
    out = output(run(job.example))
    assert out.dtype == torch.float16
    assert torch.equal(out, (job.example[0] ** 2).half())


# -- GPU providers, through a fake session --------------------------------------------------

class FakeArg:
    def __init__(self, name: str, shape: list[Any], type_: str) -> None:
        self.name, self.shape, self.type = name, shape, type_


class FakeBinding:
    """Records every call, in order, into the shared log."""

    def __init__(self, log: list[Any]) -> None:
        self.log = log
        self._iobinding = types.SimpleNamespace(
            bind_input=lambda *a: log.append(("c_bind_input", *a)),
            bind_output=lambda *a: log.append(("c_bind_output", *a)))

    def bind_input(self, name, device_type, device_id, element_type, shape, buffer_ptr):
        self.log.append(("bind_input", name, device_type, device_id, element_type,
                         tuple(shape)))

    def bind_output(self, name, device_type="cpu", device_id=0, element_type=None,
                    shape=None, buffer_ptr=None):
        self.log.append(("bind_output", name, device_type, device_id, element_type,
                         None if shape is None else tuple(shape), buffer_ptr is not None))

    def synchronize_outputs(self):
        self.log.append(("synchronize_outputs",))

    def copy_outputs_to_cpu(self):
        return [np.zeros((2, 3), np.float32)]


class FakeSession:
    def __init__(self, provider: str, log: list[Any], out_type: str = "tensor(bfloat16)") -> None:
        self.provider, self.log, self.out_type = provider, log, out_type

    def get_providers(self):
        return [self.provider, "CPUExecutionProvider"]

    def get_inputs(self):
        return [FakeArg("x", [2, 3], self.out_type)]

    def get_outputs(self):
        return [FakeArg("output", [2, 3], self.out_type)]

    def io_binding(self):
        return FakeBinding(self.log)

    def run_with_iobinding(self, binding, run_options=None):
        self.log.append(("run",))


@pytest.fixture
def stream_log(monkeypatch):
    """torch.cuda.current_stream(device).synchronize(), recorded (no GPU here)."""
    log: list[Any] = []

    def current_stream(device=None):
        return types.SimpleNamespace(synchronize=lambda: log.append(("sync", str(device))))

    monkeypatch.setattr(torch.cuda, "current_stream", current_stream)
    return log


def test_cuda_binds_bf16_with_its_onnx_type_on_the_cases_device(tmp_path, stream_log) -> None:
    sess = FakeSession("CUDAExecutionProvider", stream_log)
    job = _job(tmp_path, "bf16", "cuda:1")
    run, output = onnxrt.runner(job, sess, torch.bfloat16)
    out = output(run(job.example))
    [bind] = [e for e in stream_log if e[0] == "bind_input"]
    assert bind == ("bind_input", "x", "cuda", 1, TensorProto.BFLOAT16, (2, 3))
    [bound_out] = [e for e in stream_log if e[0] == "bind_output"]
    assert bound_out == ("bind_output", "output", "cuda", 1, TensorProto.BFLOAT16, (2, 3),
                         True)
    # The output comes back as the torch tensor ONNX Runtime wrote into (no numpy).
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
    assert out.shape == (2, 3)


def test_inputs_cast_on_torchs_stream_are_synchronised_before_onnx_runtime_reads_them(
        tmp_path, stream_log) -> None:
    sess = FakeSession("CUDAExecutionProvider", stream_log, "tensor(float16)")
    job = _job(tmp_path, "fp16", "cuda:1")
    run, _ = onnxrt.runner(job, sess, torch.float16)
    run(job.example)
    run(job.example)
    kinds = [e[0] for e in stream_log if e[0] in ("bind_input", "sync", "run")]
    assert kinds == ["bind_input", "sync", "run"] * 2
    assert ("sync", "cuda:1") in stream_log


@pytest.mark.parametrize("provider", ["MIGraphXExecutionProvider", "ROCMExecutionProvider"])
def test_amd_providers_bind_on_an_amd_gpu_device_not_a_cuda_one(tmp_path, stream_log,
                                                               provider) -> None:
    sess = FakeSession(provider, stream_log, "tensor(float)")
    job = _job(tmp_path, "fp32", "cuda:1")  # PyTorch calls ROCm GPUs "cuda"
    run, _ = onnxrt.runner(job, sess, None)
    run(job.example)
    assert not [e for e in stream_log if e[0] == "bind_input" and e[2] == "cuda"]
    [bind] = [e for e in stream_log if e[0] == "c_bind_input"]
    name, device = bind[1], bind[2]
    assert name == "x"
    assert (device.device_type(), device.vendor_id(), device.device_id()) == (
        ort.OrtDevice.make("gpu", 0)._get_c_device().device_type(), 0x1002, 1)


def test_amd_places_per_onnx_runtime_generation() -> None:
    assert onnxrt.place(ort, "migraphx", 2) == onnxrt.Place("gpu", 2, 0x1002)
    assert onnxrt.place(ort, "rocm", 2) == onnxrt.Place("gpu", 2, 0x1002)
    assert onnxrt.place(ort, "cuda", 2) == onnxrt.Place("cuda", 2, None)
    assert onnxrt.place(ort, "tensorrt", 2) == onnxrt.Place("cuda", 2, None)
    assert onnxrt.place(ort, "cpu", 0) == onnxrt.Place("cpu", 0, None)
    # Before device vendors, ONNX Runtime's one GPU device type ("cuda") was every GPU's.
    older = types.SimpleNamespace()
    assert onnxrt.place(older, "migraphx", 2) == onnxrt.Place("cuda", 2, None)


# -- provider options: the math mode the case asks for -------------------------------------

@pytest.mark.parametrize(("provider", "dtype", "expected"), [
    ("cuda", "fp32", {"device_id": "1", "use_tf32": "0"}),
    ("cuda", "tf32", {"device_id": "1", "use_tf32": "1"}),
    ("cuda", "fp16", {"device_id": "1", "use_tf32": "0"}),
    ("tensorrt", "fp32", {"device_id": "1", "trt_fp16_enable": "0"}),
    ("tensorrt", "fp16", {"device_id": "1", "trt_fp16_enable": "1"}),
    ("tensorrt", "bf16", {"device_id": "1", "trt_bf16_enable": "1"}),
    ("migraphx", "fp32", {"device_id": "1", "migraphx_fp16_enable": "0"}),
    ("migraphx", "fp16", {"device_id": "1", "migraphx_fp16_enable": "1"}),
    ("migraphx", "bf16", {"device_id": "1", "migraphx_bf16_enable": "1"}),
    ("rocm", "fp32", {"device_id": "1"}),
    ("cpu", "fp32", {}),
])
def test_each_provider_is_given_the_cases_math_mode(provider, dtype, expected) -> None:
    assert onnxrt.provider_options(provider, dtype, 1) == expected


class RecordingSession:
    made: ClassVar[list[Any]] = []

    def __init__(self, path, options, providers=None, provider_options=None) -> None:
        RecordingSession.made.append((providers, provider_options, options))

    def get_providers(self):
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]


@pytest.mark.parametrize(("dtype", "tf32"), [("fp32", "0"), ("tf32", "1")])
def test_the_session_is_made_with_the_options(tmp_path, monkeypatch, dtype, tf32) -> None:
    RecordingSession.made = []
    monkeypatch.setattr(ort, "InferenceSession", RecordingSession)
    onnxrt.session(_job(tmp_path, dtype, "cuda:1"), tmp_path / "m.onnx", "cuda")
    [(providers, options, _)] = RecordingSession.made
    assert providers == ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert options == [{"device_id": "1", "use_tf32": tf32}, {}]


def test_the_record_shows_the_options_as_the_session_applied_them() -> None:
    sess = types.SimpleNamespace(get_provider_options=lambda: {
        "CUDAExecutionProvider": {"device_id": "0", "use_tf32": "0", "gpu_mem_limit": "9"},
        "CPUExecutionProvider": {}})
    asked = {"CUDAExecutionProvider": {"device_id": "0", "use_tf32": "0"},
             "CPUExecutionProvider": {}}
    assert onnxrt.applied_options(sess, asked) == asked
    # A build that does not echo its options: what was asked is recorded.
    silent = types.SimpleNamespace(get_provider_options=lambda: {})
    assert onnxrt.applied_options(silent, asked) == asked


# -- node placement -------------------------------------------------------------------------

@pytest.mark.parametrize("source", ["assignment", "profile"])
def test_nodes_are_counted_per_provider(tmp_path, monkeypatch, source) -> None:
    if source == "profile":  # an ONNX Runtime without the graph assignment record
        monkeypatch.setattr(onnxrt, "records_assignment", lambda ort_module: False)
    job = _job(tmp_path, "bf16")
    sess = onnxrt.session(job, _square_model(tmp_path / "m.onnx"), "cpu", count_nodes=True)
    run, _ = onnxrt.runner(job, sess, torch.bfloat16)
    placed = onnxrt.placement(sess, lambda: run(job.example), "cpu")
    assert placed is not None
    assert placed.nodes == {"CPUExecutionProvider": 3}
    assert placed.off_requested == {}  # the CPU was asked for: nothing fell back
    assert source in placed.source
    if source == "profile":  # profiling stopped after the one run it needed
        assert sess.end_profiling() == ""


def test_nodes_that_fall_back_to_the_cpu_are_named_by_operator() -> None:
    counts = onnxrt.Placement.of([("CUDAExecutionProvider", "MatMul"),
                                  ("CUDAExecutionProvider", "Add"),
                                  ("CPUExecutionProvider", "Shape"),
                                  ("CPUExecutionProvider", "NonZero"),
                                  ("CPUExecutionProvider", "Shape")], "cuda", "test")
    assert counts.nodes == {"CUDAExecutionProvider": 2, "CPUExecutionProvider": 3}
    assert counts.off_requested == {"CPUExecutionProvider": {"Shape": 2, "NonZero": 1}}
    assert list(counts.nodes) == ["CUDAExecutionProvider", "CPUExecutionProvider"]


def test_an_output_dimension_the_graph_leaves_open_is_learnt_from_one_run(tmp_path) -> None:
    path = tmp_path / "open.onnx"
    nodes = [helper.make_node("Mul", ["x", "x"], ["output"])]
    graph = helper.make_graph(nodes, "open",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                             ["n", 3])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT,
                                                             ["n", 3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              str(path))
    job = _job(tmp_path)
    sess = _cpu_session(path)
    assert sess.get_outputs()[0].shape == ["n", 3]
    run, output = onnxrt.runner(job, sess, None)
    assert torch.equal(output(run(job.example)), job.example[0] ** 2)
    assert torch.equal(output(run((job.example[0] + 1,))), (job.example[0] + 1) ** 2)


def test_a_gpu_case_whose_session_fell_back_to_the_cpu_still_binds_gpu_memory(
        tmp_path, stream_log) -> None:
    class FellBack(FakeSession):
        def get_providers(self):
            return ["CPUExecutionProvider"]

    sess = FellBack("CPUExecutionProvider", stream_log, "tensor(float)")
    run, _ = onnxrt.runner(_job(tmp_path, "fp32", "cuda:0"), sess, None)
    run((torch.ones(2, 3),))
    [bind] = [e for e in stream_log if e[0] == "bind_input"]
    assert bind[2:4] == ("cuda", 0)  # never "cpu": a device pointer read as host memory


def test_the_engines_table_shows_the_nodes_each_provider_runs() -> None:
    from accelbench.benchmarks.models.engines.view import node_counts

    details = {"providers_used": ["CUDAExecutionProvider", "CPUExecutionProvider"],
               "nodes_per_provider": {"CUDAExecutionProvider": 120,
                                      "CPUExecutionProvider": 4}}
    assert node_counts(details) == "CUDAExecutionProvider 120, CPUExecutionProvider 4 nodes"
    # Records without counts (older ones, other engines) show the providers' names.
    assert node_counts({"providers_used": ["CPUExecutionProvider"]}) is None
    assert node_counts(None) is None


def test_an_fp32_tensorrt_case_starts_its_worker_with_tf32_overridden_off() -> None:
    from accelbench.benchmarks.models.infer_engine import engine_worker_env
    from accelbench.core.device import DeviceInfo

    h100 = DeviceInfo(type="cuda", index=0, platform="cuda", name="NVIDIA H100 SXM5")
    env = engine_worker_env({"engine": "onnxruntime", "provider": "tensorrt",
                             "dtype": "fp32"}, h100)
    assert dict(env.values) == {"NVIDIA_TF32_OVERRIDE": "0"}
    # TensorRT's half types are asked for by its options, and the CUDA provider's TF32
    # by use_tf32: neither needs the override.
    assert not engine_worker_env({"provider": "tensorrt", "dtype": "bf16"}, h100)
    assert not engine_worker_env({"provider": "cuda", "dtype": "fp32"}, h100)
