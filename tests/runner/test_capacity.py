"""Rank counts the node cannot hold are refused, with the reason, before anything starts."""

import pytest

from accelbench.cli.main import main
from accelbench.errors import EXIT_USAGE, UserError
from accelbench.runner import capacity
from accelbench.runner.capacity import GIB, RANK_MEMORY_BYTES, NodeResources, check_ranks
from accelbench.store import Store

SMALL = NodeResources(cores=2, available_memory=2 * GIB)  # a 2-core, 2 GiB node


def test_cpu_ranks_beyond_the_cores_or_the_memory_are_refused_with_the_reason():
    assert check_ranks(2, "cpu", 0, resources=SMALL) is None
    assert check_ranks(1, "cpu", 0, resources=NodeResources(1, 0)) is None
    with pytest.raises(UserError, match=r"3 CPU ranks: this node has 2 logical cores") as info:
        check_ranks(3, "cpu", 0, resources=SMALL)
    assert "--oversubscribe" in str(info.value) and "GiB" in str(info.value)
    with pytest.raises(UserError, match=r"need about 3 GiB \(1 GiB each\) and 2\.0 GiB"):
        check_ranks(3, "cpu", 0, resources=NodeResources(64, 2 * GIB))
    assert RANK_MEMORY_BYTES == GIB


def test_oversubscribe_turns_the_cpu_refusal_into_a_warning():
    warning = check_ranks(64, "cpu", 0, oversubscribe=True, resources=SMALL)
    assert warning is not None and warning.startswith("64 CPU ranks: this node has 2")
    assert "starting them anyway" in warning


def test_gpu_ranks_need_a_device_each_whatever_is_asked():
    assert check_ranks(8, "cuda", 8) is None
    for oversubscribe in (False, True):
        with pytest.raises(UserError, match=r"3 ranks need 3 GPUs .* this node has 2"):
            check_ranks(3, "cuda", 2, oversubscribe=oversubscribe)


@pytest.mark.slow
def test_run_refuses_before_any_rank_starts_or_the_run_is_stored(monkeypatch, capsys,
                                                                   store_path):
    monkeypatch.setattr(capacity, "node_resources", lambda: SMALL)
    argv = ["run", "--bench", "collectives", "--nproc-per-node", "64", "--device", "cpu",
            "--no-report", "--store", str(store_path)]
    assert main(argv) == EXIT_USAGE
    [line] = capsys.readouterr().err.strip().splitlines()[-1:]
    assert line.startswith("accelbench: error: 64 CPU ranks: this node has 2 logical cores")
    assert not store_path.exists(), "a refused run creates no store"


@pytest.mark.slow
def test_ranks_a_suite_asks_for_skip_their_cases_on_a_node_too_small(monkeypatch, capsys,
                                                                     store_path):
    """The quick suite runs on a one-core node: its collectives are skipped, with the
    reason, and nothing is refused."""
    monkeypatch.setattr(capacity, "node_resources", lambda: NodeResources(1, 64 * GIB))
    argv = ["run", "--bench", "collectives", "--device", "cpu", "--no-report", "--store",
            str(store_path)]
    assert main(argv) == 0
    capsys.readouterr()
    with Store.open(store_path, create=False) as store:
        [run] = store.list_runs()
        measurements = store.load_run(run.id).measurements
    assert measurements and all(m.status == "skipped" for m in measurements)
    assert all(m.reason is not None
               and m.reason.startswith("2 CPU ranks: this node has 1 logical core ")
               for m in measurements)
