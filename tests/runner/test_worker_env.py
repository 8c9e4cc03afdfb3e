"""A case's worker starts with the environment its benchmark asks for, before torch is
imported; cases that share a worker run next to each other; the worker steps aside for
distributed jobs; the user's own variables win."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sample_benches import ENV_REGISTRY

from accelbench.benchmarks import REGISTRY
from accelbench.core.device import DeviceInfo
from accelbench.core.measurement import CaseResult
from accelbench.core.request import RunRequest
from accelbench.core.worker_env import NONE, WorkerEnv, combined
from accelbench.env.fingerprint import collect
from accelbench.runner import messages
from accelbench.runner.plan import expand, load_suite, validate
from accelbench.runner.session import run_session
from accelbench.runner.supervisor import WorkerSlot
from accelbench.store import Store

FAST = {"max_time": 0.05, "warmup_time": 0.0, "processes": 1}
MI300X = DeviceInfo("cuda", 0, "rocm", "AMD Instinct MI300X", "gfx942", 192 * 2**30, 304)
H100 = DeviceInfo("cuda", 0, "cuda", "NVIDIA H100 80GB HBM3", "sm_90", 80 * 2**30, 132)


# --- the environment itself ------------------------------------------------------------

def test_the_users_own_variables_win() -> None:
    env = WorkerEnv.of({"A": "1", "B": "2"}, fresh_dirs=("DB", "CACHE"))
    left = env.for_user({"A": "0", "CACHE": "/mine"})
    assert left == WorkerEnv.of({"B": "2"}, fresh_dirs=("DB",))
    assert not NONE and not env.for_user({"A": "", "B": "", "DB": "", "CACHE": ""})


def test_a_distributed_job_takes_every_cases_environment() -> None:
    job = combined([WorkerEnv.of({"A": "1"}), NONE, WorkerEnv.of({"B": "2"}, ("DB",))])
    assert job == WorkerEnv.of({"A": "1", "B": "2"}, ("DB",))
    assert job.describe() == "A=1 B=2 DB=<fresh folder>"


@pytest.mark.slow
def test_a_real_worker_starts_with_the_environment_and_its_fresh_folder(store_path) -> None:
    request = RunRequest(benches=("environ_probe",), overrides={"value": ("x", "y")}, timing=FAST)
    with Store.open(store_path) as store:
        outcome = run_session(validate(request, ENV_REGISTRY), store)
    first, second = (m.details for m in outcome.measurements)
    assert (first["value"], second["value"]) == ("x", "y")
    assert first["pid"] != second["pid"]  # another environment: another process
    assert first["fresh"] == "SAMPLE_FRESH"
    assert first["folder_entries"] == [] and second["folder_entries"] == []
    assert first["folder"] != second["folder"]
    # The folders lived as long as their workers.
    assert not Path(first["folder"]).exists() and not Path(second["folder"]).exists()


@pytest.mark.slow
def test_a_variable_the_user_set_is_left_as_it_is(store_path, monkeypatch) -> None:
    monkeypatch.setenv("SAMPLE_VALUE", "mine")
    monkeypatch.setenv("SAMPLE_FRESH", str(store_path.parent))
    request = RunRequest(benches=("environ_probe",), overrides={"value": ("x",)}, timing=FAST)
    with Store.open(store_path) as store:
        outcome = run_session(validate(request, ENV_REGISTRY), store)
    details = outcome.measurements[0].details
    assert details["value"] == "mine" and details["folder"] == str(store_path.parent)
    assert details["fresh"] is None


# --- the slot: which cases share a process ---------------------------------------------

class Counting:
    """A worker factory that records the environment of every process it starts."""

    def __init__(self, device: DeviceInfo | None = None) -> None:
        self.started: list[WorkerEnv] = []
        self.measured: list[tuple[int, str, bool]] = []  # (process, benchmark, search)
        self.device = device

    def __call__(self, env: WorkerEnv) -> _FakeWorker:
        self.started.append(env)
        return _FakeWorker(self, len(self.started))


class _FakeWorker:
    def __init__(self, owner: Counting, number: int) -> None:
        self.owner, self.number = owner, number

    def ask(self, message, timeout):
        from accelbench.core.context import CaseContext
        from accelbench.core.measurement import from_result
        from fakes import FakeClock, no_vendor_tools

        if isinstance(message, messages.ReadFingerprint):
            data = collect("cpu", run=no_vendor_tools, environ={}).to_dict()
            if self.owner.device is not None:
                data["device"] = self.owner.device.to_dict()
                data["platform"] = self.owner.device.platform
                data["devices"] = {**data["devices"], "count": 8}
            return messages.FingerprintRead(data)
        planned = message.planned
        self.owner.measured.append((self.number, planned.case.benchmark,
                                    bool(planned.params.get("search"))))
        timing = CaseContext(message.device, FakeClock(1e-3), message.policy).time(lambda: None)
        return messages.CaseMeasured(from_result(planned.case, CaseResult(timing), (), 0.0,
                                                 0.1).to_dict())

    def stop(self) -> None:
        pass

    def kill(self) -> None:
        pass


def test_the_slot_replaces_the_worker_only_when_the_environment_changes() -> None:
    factory = Counting()
    slot = WorkerSlot(factory, environ={})
    request = RunRequest(benches=("environ_probe",), overrides={"value": ("a", "b")})
    planned = {p.params["value"]: p for p in expand(validate(request, ENV_REGISTRY), MI300X)}
    device = MI300X
    first = slot.for_case(planned["a"], device)
    assert slot.for_case(planned["a"], device) is first
    assert slot.for_case(planned["b"], device) is not first
    assert [dict(env.values)["SAMPLE_VALUE"] for env in factory.started] == ["a", "b"]
    slot.release()
    slot.for_case(planned["b"], device)
    assert slot.starts == 3


def test_quick_suite_conv_cases_run_in_one_worker_per_search_setting(store_path) -> None:
    """Search is conv's innermost grid axis; in plan order every case would switch."""
    factory = Counting(MI300X)
    request = RunRequest(suite="quick", benches=("conv",), timing=FAST)
    with Store.open(store_path) as store:
        run_session(validate(request, REGISTRY), store, worker_factory=factory)
    conv = [(process, search) for process, name, search in factory.measured if name == "conv"]
    assert len(conv) == 12  # six layers, search on and off, one process each
    assert len({process for process, _ in conv}) == 2
    assert [search for _, search in conv] == [True] * 6 + [False] * 6
    # On ROCm each of those workers starts with MIOpen's databases in fresh folders.
    assert all(env.fresh_dirs == ("MIOPEN_CUSTOM_CACHE_DIR", "MIOPEN_USER_DB_PATH")
               for env in factory.started[1:])


def _no_ranks(rounds, *args, **kwargs):
    from accelbench.runner.rounds import skip_all

    skip_all(rounds, "no ranks in this test")


def test_worker_starts_per_suite_follow_the_worker_identities(store_path, monkeypatch) -> None:
    """The quick suite on an H100, three rounds: a fresh process per round for the cases
    that need no particular worker, and one per round for each conv search setting."""
    from accelbench.runner import session

    monkeypatch.setattr(session, "run_distributed", _no_ranks)
    factory = Counting(H100)
    request = RunRequest(suite="quick", timing={**FAST, "processes": 3})
    with Store.open(store_path) as store:
        run_session(validate(request, REGISTRY), store, worker_factory=factory)
    processes: dict[int, set[tuple[str, bool]]] = {}
    for process, name, search in factory.measured:
        processes.setdefault(process, set()).add((name, search if name == "conv" else False))
    # No process ran conv cases of both search settings.
    assert all(len({s for n, s in cases if n == "conv"}) <= 1 for cases in processes.values())
    conv_processes = sum(1 for cases in processes.values() if any(n == "conv" for n, _ in cases))
    assert conv_processes == 2 * 3
    # Per round: one process up to conv with search, one from conv without search on
    # (attention needs no particular worker), one after the collectives. The first
    # cases reuse the process that read the fingerprint.
    assert len(factory.started) == len(processes) == 3 * 3


def test_the_worker_steps_aside_for_a_distributed_job(store_path, monkeypatch) -> None:
    from accelbench.runner import session

    events: list[str] = []

    class Slot(WorkerSlot):
        def release(self) -> None:
            events.append("release" if self._worker is not None else "idle")
            super().release()

    def fake_distributed(rounds, *args, **kwargs):
        events.append("distributed")
        _no_ranks(rounds)

    monkeypatch.setattr(session, "WorkerSlot", Slot)
    monkeypatch.setattr(session, "run_distributed", fake_distributed)
    factory = Counting(H100)
    request = RunRequest(benches=("gemm", "collectives"), overrides={"shape": ("256",)},
                      dtypes=("bf16",), nproc_per_node=2, timing=FAST)
    with Store.open(store_path) as store:
        run_session(validate(request, REGISTRY), store, worker_factory=factory)
    assert events.index("distributed") > events.index("release")
    assert events[events.index("distributed") - 1] == "release"


def test_a_named_gpu_is_one_device_for_the_suite_and_the_first_of_a_job() -> None:
    from accelbench.core.context import DistInfo
    from accelbench.runner.ranks import rank_device

    suite = load_suite("quick")
    named = expand(validate(RunRequest(suite="quick", device="cuda:3"), REGISTRY, suite), H100, 8)
    every = expand(validate(RunRequest(suite="quick", device="cuda"), REGISTRY, suite), H100, 8)
    assert {c.ranks for c in named if c.benchmark.distributed} == {1}
    assert {c.ranks for c in every if c.benchmark.distributed} == {8}
    job_device = DeviceInfo("cuda", 3, "cuda", "NVIDIA H100 80GB HBM3", "sm_90")
    rank1 = DistInfo(rank=1, world_size=2, local_rank=1, local_world_size=2, backend="nccl")
    assert rank_device(job_device, rank1).torch_device == "cuda:4"


def test_ranks_from_a_named_gpu_must_fit_on_the_node() -> None:
    import pytest

    from accelbench.errors import UserError
    from accelbench.runner.capacity import check_ranks

    assert check_ranks(2, "cuda", 8, first=6) is None
    with pytest.raises(UserError, match=r"2 ranks need 2 GPUs \(one each\) from cuda:7"):
        check_ranks(2, "cuda", 8, first=7)


def test_a_case_run_in_this_process_gets_the_environment_for_its_duration(monkeypatch) -> None:
    from accelbench.runner.worker_env import applied

    monkeypatch.setenv("SAMPLE_KEPT", "before")
    monkeypatch.delenv("SAMPLE_VALUE", raising=False)
    with applied(WorkerEnv.of({"SAMPLE_VALUE": "x", "SAMPLE_KEPT": "during"},
                              ("SAMPLE_FRESH",))):
        folder = Path(os.environ["SAMPLE_FRESH"])
        assert os.environ["SAMPLE_VALUE"] == "x" and os.environ["SAMPLE_KEPT"] == "during"
        assert folder.is_dir() and not any(folder.iterdir())
    assert "SAMPLE_VALUE" not in os.environ and "SAMPLE_FRESH" not in os.environ
    assert os.environ["SAMPLE_KEPT"] == "before"
    assert not folder.exists()
