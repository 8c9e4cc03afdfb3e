"""Parsing what Slurm's commands print, from outputs recorded on a real Slurm 22.05
(tests/fixtures/slurm)."""

from pathlib import Path

import pytest

from accelbench.slurm import parse

FIXTURES = Path(__file__).parents[1] / "fixtures" / "slurm"


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_a_node_record_keeps_values_that_hold_spaces():
    record = parse.records(_fixture("scontrol-show-node.txt"))[0]
    assert record["NodeName"] == "vm"
    assert record["State"] == "ALLOCATED"  # recorded while a job ran
    assert record["Partitions"] == "debug"
    assert record["OS"] == "Linux 6.18.44-fc-v857 #1 SMP PREEMPT_DYNAMIC @0"
    assert record["CfgTRES"] == "cpu=2,mem=1000M,billing=2"


def test_a_partition_record():
    record = parse.records(_fixture("scontrol-show-partition.txt"))[0]
    assert (record["PartitionName"], record["State"], record["TotalNodes"]) == ("debug", "UP",
                                                                                "1")


def test_hostnames_one_per_line():
    assert parse.hostnames(_fixture("scontrol-show-hostnames.txt")) == (
        "gpu01", "gpu02", "gpu03", "x")


def test_jobs_of_an_array_a_running_and_a_pending_job():
    jobs = [parse.job_from_record(r) for r in parse.records(_fixture("scontrol-show-job.txt"))]
    by_id = {job.job_id: job for job in jobs}
    assert set(by_id) == {"1_0", "1_1", "3", "4"}
    assert by_id["1_0"].succeeded and by_id["1_0"].exit_code == 0
    failed = by_id["1_1"]
    assert (failed.state, failed.exit_code, failed.signal, failed.finished) == ("FAILED", 1, 0,
                                                                              True)
    assert not failed.succeeded and failed.reason == "NonZeroExitCode"
    assert failed.output == "/tmp/slurmtry/out-1_1.txt" and failed.nodes == "vm"
    running = by_id["3"]
    assert (running.state, running.exit_code, running.finished) == ("RUNNING", None, False)
    pending = by_id["4"]
    assert (pending.state, pending.nodes, pending.reason) == ("PENDING", "", "Resources")


def test_a_cancelled_job_ended_by_its_signal():
    job = parse.job_from_record(parse.records(_fixture("scontrol-show-job-cancelled.txt"))[0])
    assert (job.state, job.exit_code, job.signal) == ("CANCELLED", 0, 15)
    assert job.finished and not job.succeeded


def test_the_node_of_a_one_node_job_fills_the_output_pattern_that_scontrol_leaves():
    record = {"JobId": "7", "JobState": "COMPLETED", "ExitCode": "0:0", "NodeList": "gpu01",
              "StdOut": "/logs/accelbench-qualify-%N-7.out"}
    assert parse.job_from_record(record).output == "/logs/accelbench-qualify-gpu01-7.out"
    record["NodeList"] = "gpu[01-02]"  # several nodes: the first one is Slurm's to name
    assert parse.job_from_record(record).output == "/logs/accelbench-qualify-%N-7.out"


def test_queue_states():
    assert parse.queue_states(_fixture("squeue.txt")) == {
        "1_0": "COMPLETED", "1_1": "FAILED", "4": "PENDING", "3": "RUNNING"}


@pytest.mark.parametrize(("text", "job_id"), [("12\n", "12"), ("12;cluster2\n", "12")])
def test_sbatch_parsable_job_id(text, job_id):
    assert parse.submitted_job_id(text) == job_id


def test_sbatch_output_without_a_job_id_is_refused():
    with pytest.raises(ValueError, match="no job id"):
        parse.submitted_job_id(_fixture("sbatch-bad-partition.txt"))


def test_accounting_lines():
    # sacct -n -P -X -o JobID,JobName,State,ExitCode,NodeList (this Slurm has no
    # accounting, so these lines are written in sacct's documented --parsable2 form).
    text = "12|accelbench-qualify|COMPLETED|0:0|gpu01\n13|accelbench-qualify|CANCELLED by 0|0:15|\n"
    jobs = parse.accounting_jobs(text)
    assert [(j.job_id, j.state, j.exit_code, j.signal, j.nodes) for j in jobs] == [
        ("12", "COMPLETED", 0, 0, "gpu01"), ("13", "CANCELLED", 0, 15, "")]
    assert parse.accounting_jobs(_fixture("sacct-disabled.txt")) == []
