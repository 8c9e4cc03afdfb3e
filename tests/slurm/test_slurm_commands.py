"""The Slurm seam and `accelbench slurm` on recorded outputs: what is checked before
anything is submitted, and the one line (with its exit code) for each bad input."""

from pathlib import Path
from urllib.parse import quote

import pytest
from batch_scripts import requests_in
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import accelbench.benchmarks
from accelbench.cli.main import build_parser, main
from accelbench.cli.request_options import request_of
from accelbench.cli.validate_request import validate_request
from accelbench.core.family import Family, SlurmJob
from accelbench.core.registry import Registry
from accelbench.core.request import RunRequest
from accelbench.errors import EXIT_NODES, EXIT_SCHEDULER, EXIT_USAGE, SchedulerError
from accelbench.slurm import commands
from accelbench.slurm.commands import Completed, Slurm
from accelbench.slurm.wait import wait_for_jobs

FIXTURES = Path(__file__).parents[1] / "fixtures" / "slurm"


def _out(name: str, returncode: int = 0) -> Completed:
    text = (FIXTURES / name).read_text()
    return Completed(returncode, text, "") if returncode == 0 else Completed(returncode, "",
                                                                             text)


class FakeSlurm:
    """Answers each command from recorded outputs, and records what was run."""

    def __init__(self, nodes=("vm",), partitions=("debug",)):
        self.nodes = set(nodes)
        self.partitions = set(partitions)
        self.calls: list[tuple[list[str], str | None]] = []
        self.envs: list[dict[str, str] | None] = []  # what each call added to its environment
        self.queue: list[str] = []  # squeue outputs, one per call, the last one repeated
        self.next_job = 40

    def __call__(self, argv, stdin=None, env=None):
        self.calls.append((list(argv), stdin))
        self.envs.append(dict(env) if env else None)
        # Every name is given after "--", so that none can be read as an option.
        argv = [word for word in argv if word != "--"]
        if argv[:3] == ["scontrol", "show", "hostnames"]:
            # Slurm expands hostlists; these tests need only this one and plain lists.
            names = (["gpu01", "gpu02"] if argv[3] == "gpu[01-02]" else
                     [n for n in argv[3].split(",") if n])
            return Completed(0, "".join(f"{n}\n" for n in names), "")
        if argv[:4] == ["scontrol", "-o", "show", "partition"]:
            if argv[4] in self.partitions:
                return _out("scontrol-show-partition.txt")
            return Completed(1, "", f"Partition {argv[4]} not found\n")
        if argv[:4] == ["scontrol", "-o", "show", "node"]:
            if argv[4] in self.nodes:
                text = (FIXTURES / "scontrol-show-node.txt").read_text()
                return Completed(0, text.replace("NodeName=vm", f"NodeName={argv[4]}"), "")
            return Completed(1, "", f"Node {argv[4]} not found\n")
        if argv[0] == "sbatch":
            self.next_job += 1
            return Completed(0, f"{self.next_job}\n", "")
        if argv[0] == "squeue":
            text = self.queue.pop(0) if len(self.queue) > 1 else self.queue[0]
            return Completed(0, text, "")
        if argv[:4] == ["scontrol", "-o", "show", "job"]:
            return Completed(0, f"JobId={argv[4]} JobName=accelbench-qualify "
                             "JobState=COMPLETED Reason=None ExitCode=0:0 NodeList=vm "
                             f"StdOut=/l/accelbench-qualify-%N-{argv[4]}.out\n", "")
        if argv[0] == "scancel":
            return Completed(0, "", "")
        raise AssertionError(f"unexpected command {argv}")

    def submitted(self):
        return [(argv, stdin) for argv, stdin in self.calls if argv[0] == "sbatch"]


@pytest.fixture
def fake(monkeypatch):
    slurm = FakeSlurm(nodes=("vm", "gpu01", "gpu02"))
    monkeypatch.setattr(commands, "run_command", slurm)
    return slurm


def test_qualify_submits_one_job_per_node_pinned_to_it(fake, tmp_path, capsys):
    code = main(["slurm", "qualify", "--nodes", "gpu[01-02]", "--partition", "debug",
                 "--store", "/shared/r.sqlite", "--output-dir", str(tmp_path / "logs"),
                 "--python", "/venv/bin/python", "--", "--bench", "launch"])
    assert code == 0
    jobs = fake.submitted()
    assert [argv for argv, _ in jobs] == [["sbatch", "--parsable", "--nodelist=gpu01"],
                                          ["sbatch", "--parsable", "--nodelist=gpu02"]]
    script = jobs[0][1]
    assert ('/venv/bin/python -m accelbench run --store /shared/r.sqlite --request '
            '"$requests/run.json" || status=$?') in script
    assert requests_in(script) == [RunRequest(suite="quick", benches=("launch",))]
    assert f"#SBATCH --output={tmp_path / 'logs'}/%x-%N-%j.out" in script
    assert (tmp_path / "logs").is_dir()  # Slurm makes no folder for an output file
    assert "41 42" in capsys.readouterr().out


def test_scaling_writes_the_scaling_suite_once_per_node_count(fake, tmp_path, capsys):
    code = main(["slurm", "scaling", "--nodes", "2,1", "--nproc-per-node", "8",
                 "--partition", "debug", "--store", "/shared/r.sqlite", "--python",
                 "/venv/bin/python", "--print", "--", "-p", "model=llama-1b"])
    assert code == 0 and fake.calls == []
    scripts = capsys.readouterr().out.split("#!/bin/bash\n")[1:]
    assert ["#SBATCH --nodes=1" in s for s in scripts] == [True, False]  # fewest first
    assert ["#SBATCH --nodes=2" in s for s in scripts] == [False, True]
    for script in scripts:
        assert "#SBATCH --job-name=accelbench-scaling" in script
        assert "--nproc-per-node 8 --rdzv-backend c10d" in script
        assert "    -m accelbench run --store /shared/r.sqlite\n" in script
        assert requests_in(script) == [RunRequest(suite="scaling",
                                                  overrides={"model": ("llama-1b",)})]
    # Submitted: one job per count, checked against the partition first.
    assert main(["slurm", "scaling", "--nodes", "1", "--partition", "debug",
                 "--output-dir", str(tmp_path / "logs")]) == 0
    [(argv, script)] = fake.submitted()
    assert argv == ["sbatch", "--parsable"] and "accelbench-scaling" in (script or "")
    assert main(["slurm", "scaling", "--nodes", "1,3", "--partition", "debug"]) == 8
    assert len(fake.submitted()) == 1  # 3 nodes is more than the partition has: none


@pytest.mark.parametrize("nodes", ["0", "1,x", "", "2,-1"])
def test_scaling_refuses_what_is_no_list_of_node_counts(fake, capsys, nodes):
    assert main(["slurm", "scaling", "--nodes", nodes, "--partition", "debug"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "expected numbers of nodes (1,2,4)" in err
    assert fake.submitted() == []


def test_print_writes_the_script_and_asks_nothing_of_slurm(fake, capsys):
    assert main(["slurm", "collectives", "--nodes", "2", "--partition", "nowhere",
                 "--print"]) == 0
    assert capsys.readouterr().out.startswith("#!/bin/bash\n")
    assert fake.calls == []


@pytest.mark.parametrize(("argv", "code", "message"), [
    (["qualify", "--nodes", "vm", "--partition", "nope"], EXIT_SCHEDULER,
     "partition 'nope' does not exist"),
    (["collectives", "--nodes", "1", "--partition", "nope"], EXIT_SCHEDULER,
     "partition 'nope' does not exist"),
    (["qualify", "--nodes", "gpu01,gpu09", "--partition", "debug"], EXIT_NODES,
     "node 'gpu09' (of --nodes 'gpu01,gpu09') is not in this cluster"),
    (["qualify", "--nodes", "", "--partition", "debug"], EXIT_NODES, "names no node"),
    (["qualify", "--nodes", ",", "--partition", "debug"], EXIT_NODES, "names no node"),
    (["collectives", "--nodes", "0", "--partition", "debug"], EXIT_NODES, "names no node"),
    (["collectives", "--nodes", "3", "--partition", "debug"], EXIT_NODES,
     "partition 'debug' has 1 node(s)"),
    (["qualify", "--nodes", "vm", "--partition", "debug", "--time", "1:2:3:4"], EXIT_USAGE,
     "Slurm time limit"),
    (["qualify", "--nodes", "vm", "--partition", "de bug"], EXIT_USAGE, "--partition"),
    (["qualify", "--nodes", "vm", "--partition", "debug", "--wait-timeout", "5"],
     EXIT_USAGE, "--wait-timeout is for --wait"),
])
def test_bad_input_is_one_line_and_submits_nothing(fake, capsys, argv, code, message):
    assert main(["slurm", *argv]) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("accelbench: error: ") and message in err
    assert fake.submitted() == []


def test_a_node_that_cannot_run_jobs_is_refused(fake, monkeypatch, capsys):
    down = (FIXTURES / "scontrol-show-node.txt").read_text().replace(
        "State=ALLOCATED", "State=IDLE+DRAIN Reason=bad_dimm")
    real = fake.__call__

    def answer(argv, stdin=None):
        if list(argv)[:4] == ["scontrol", "-o", "show", "node"]:
            return Completed(0, down, "")
        return real(argv, stdin)

    monkeypatch.setattr(commands, "run_command", answer)
    assert main(["slurm", "qualify", "--nodes", "vm", "--partition", "debug"]) == EXIT_NODES
    assert "node 'vm' cannot run jobs: its state is IDLE+DRAIN (bad_dimm)" in (
        capsys.readouterr().err)


def test_a_node_outside_the_partition_is_refused(fake, capsys):
    fake.partitions.add("gpu")
    assert main(["slurm", "qualify", "--nodes", "vm", "--partition", "gpu"]) == EXIT_NODES
    assert "node 'vm' is not in partition 'gpu' (it is in: debug)" in capsys.readouterr().err


def test_a_controller_that_does_not_answer(monkeypatch, capsys):
    monkeypatch.setattr(commands, "run_command",
                        lambda argv, stdin=None: _out("scontrol-controller-down.txt", 1))
    assert main(["slurm", "qualify", "--nodes", "vm", "--partition", "debug"]) == (
        EXIT_SCHEDULER)
    err = capsys.readouterr().err
    assert "slurmctld is not answering" in err and "Unable to contact slurm controller" in err


def test_a_machine_with_no_slurm_configuration(monkeypatch, capsys):
    monkeypatch.setattr(commands, "run_command",
                        lambda argv, stdin=None: _out("scontrol-no-configuration.txt", 1))
    assert main(["slurm", "qualify", "--nodes", "vm", "--partition", "debug"]) == (
        EXIT_SCHEDULER)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" not in err
    assert "no Slurm configuration here" in err
    assert "Could not establish a configuration source" in err


def test_slurm_not_installed(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch, no scontrol
    assert main(["slurm", "status", "12"]) == EXIT_SCHEDULER
    assert "scontrol is not installed here" in capsys.readouterr().err


def test_a_refused_submission_cancels_the_jobs_already_submitted(fake, monkeypatch, capsys,
                                                                 tmp_path):
    real = fake.__call__

    def answer(argv, stdin=None):
        if argv[0] == "sbatch" and fake.next_job == 41:
            fake.calls.append((list(argv), stdin))
            return _out("sbatch-bad-partition.txt", 1)
        return real(argv, stdin)

    monkeypatch.setattr(commands, "run_command", answer)
    code = main(["slurm", "qualify", "--nodes", "gpu[01-02]", "--partition", "debug",
                 "--output-dir", str(tmp_path / "logs")])
    assert code == EXIT_SCHEDULER
    assert "sbatch refused the job: sbatch: error: Batch job submission failed: Invalid " \
           "partition name specified" in capsys.readouterr().err
    assert ["scancel", "41"] in [argv for argv, _ in fake.calls]


def test_wait_polls_until_every_job_ended_then_reads_how(fake, tmp_path, capsys):
    fake.queue = ["41|PENDING\n42|PENDING\n", "41|RUNNING\n42|PENDING\n",
                  "41|COMPLETED\n42|RUNNING\n", "41|COMPLETED\n42|COMPLETED\n"]
    code = main(["slurm", "qualify", "--nodes", "gpu[01-02]", "--partition", "debug",
                 "--wait", "--poll-interval", "0.001", "--output-dir", str(tmp_path), "--json"])
    assert code == 0
    import json

    report = json.loads(capsys.readouterr().out)
    assert report["all_ended"] and report["succeeded"]
    assert [(j["job_id"], j["state"], j["output"]) for j in report["jobs"]] == [
        ("41", "COMPLETED", "/l/accelbench-qualify-vm-41.out"),
        ("42", "COMPLETED", "/l/accelbench-qualify-vm-42.out")]
    assert sum(argv[0] == "squeue" for argv, _ in fake.calls) == 4


def test_a_failed_job_makes_the_exit_code_1(fake, monkeypatch, capsys):
    real = fake.__call__

    def answer(argv, stdin=None):
        if list(argv)[:4] == ["scontrol", "-o", "show", "job"]:
            return _out("scontrol-show-job.txt")  # 1_0 COMPLETED, 1_1 FAILED, ...
        return real(argv, stdin)

    monkeypatch.setattr(commands, "run_command", answer)
    assert main(["slurm", "status", "1"]) == 1
    out = capsys.readouterr().out
    assert "FAILED (NonZeroExitCode)" in out and "COMPLETED" in out


class FakeClock:
    def __init__(self):
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


def test_the_wait_ends_at_its_deadline_with_the_jobs_still_running(fake):
    fake.queue = ["41|RUNNING\n"]
    clock = FakeClock()
    states, ended = wait_for_jobs(Slurm(fake), ["41"], interval=10, timeout=25, clock=clock,
                                  sleep=clock.sleep)
    assert not ended and clock.slept == [10, 10, 5]
    assert [s.job_id for s in states] == ["41"]


def test_a_job_gone_from_the_queue_has_ended(fake):
    fake.queue = ["41|RUNNING\n", ""]
    clock = FakeClock()
    _, ended = wait_for_jobs(Slurm(fake), ["41"], interval=3, clock=clock, sleep=clock.sleep)
    assert ended and clock.slept == [3]


def test_a_job_unknown_to_controller_and_accounting(monkeypatch):
    answers = {"scontrol": _out("scontrol-show-job-missing.txt", 1),
               "sacct": _out("sacct-disabled.txt", 1)}
    slurm = Slurm(lambda argv, stdin=None, env=None: answers[argv[0]])
    (job,) = slurm.jobs("999")
    assert job.state == "UNKNOWN" and job.finished and not job.succeeded
    assert "no job accounting" in job.reason


# -- odd input to Slurm: one line, its exit code, nothing submitted --------------------


@pytest.mark.parametrize("nodes", ["²", "-x", "--nodelist=x", "gpu[1-", "a b", "x,,y",
                                   "gpu\n01", "nöde", "\u200bgpu"])
@pytest.mark.parametrize("action", ["qualify", "collectives", "isolate"])
def test_a_node_list_that_is_no_hostlist_is_bad_input(fake, capsys, nodes, action):
    assert main(["slurm", action, f"--nodes={nodes}", "--partition", "debug"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a Slurm hostlist" in err
    assert fake.calls == []  # nothing reached Slurm


def test_every_name_reaches_slurm_after_a_double_dash(fake, tmp_path):
    assert main(["slurm", "qualify", "--nodes", "gpu[01-02]", "--partition", "debug",
                 "--output-dir", str(tmp_path / "logs")]) == 0
    scontrol = [argv for argv, _ in fake.calls if argv[0] == "scontrol"]
    assert len(scontrol) == 4  # the list, the partition, each node
    assert all(argv[-2] == "--" for argv in scontrol), scontrol


def test_an_unreadable_slurm_configuration(monkeypatch, capsys):
    monkeypatch.setattr(commands, "run_command",
                        lambda argv, stdin=None: _out("scontrol-unreadable-configuration.txt",
                                                      1))
    assert main(["slurm", "qualify", "--nodes", "vm", "--partition", "debug"]) == (
        EXIT_SCHEDULER)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" not in err
    assert "the Slurm configuration cannot be read" in err and "line 1" in err


@pytest.mark.parametrize("kind", ["missing", "directory", "empty name"])
def test_a_slurm_conf_that_names_no_file_fails_at_once(kind, tmp_path, monkeypatch):
    """Slurm's clients would retry such a file for a minute: nothing is run."""
    path = {"missing": str(tmp_path / "nowhere.conf"), "directory": str(tmp_path),
            "empty name": ""}[kind]
    monkeypatch.setenv("SLURM_CONF", path)
    monkeypatch.setenv("PATH", str(tmp_path))  # would fail otherwise: nothing may be run
    with pytest.raises(SchedulerError, match="Slurm configuration cannot be read") as e:
        commands.run_command(["scontrol", "-o", "show", "partition", "--", "debug"])
    assert e.value.exit_code == EXIT_SCHEDULER


PG_URL = "postgresql://fleet:pw#Hash9@db.example:5432/results?sslmode=require"


def test_print_keeps_the_password_out_of_the_script(fake, capsys):
    for action in ("qualify", "collectives", "isolate"):
        nodes = "vm" if action == "qualify" else "2"
        assert main(["slurm", action, "--nodes", nodes, "--partition", "debug", "--print",
                     "--store", PG_URL]) == 0
        out, err = capsys.readouterr()
        assert "Hash9" not in out + err and "***" not in out
        assert "--store 'postgresql://fleet@db.example:5432/results?sslmode=require'" in out
        assert "PGPASSWORD" in err
    assert fake.calls == []


def test_a_job_gets_the_password_in_its_environment(fake, tmp_path, capsys):
    assert main(["slurm", "qualify", "--nodes", "gpu[01-02]", "--partition", "debug",
                 "--store", PG_URL, "--output-dir", str(tmp_path)]) == 0
    jobs = fake.submitted()
    assert len(jobs) == 2 and all("Hash9" not in script for _, script in jobs)
    sbatch_envs = [env for (argv, _), env in zip(fake.calls, fake.envs, strict=True)
                   if argv[0] == "sbatch"]
    assert sbatch_envs == [{"PGPASSWORD": "pw#Hash9"}] * 2
    assert all(env is None for (argv, _), env in zip(fake.calls, fake.envs, strict=True)
               if argv[0] != "sbatch")  # no other command sees it
    out, err = capsys.readouterr()
    assert "Hash9" not in out + err


@pytest.mark.parametrize(("store", "run_args", "fragment"), [
    (None, ["--", "--store", PG_URL], "the arguments after -- hold a password"),
    ("postgresql://u@h/db?sslpassword=keypass", [], "sslpassword cannot be handed"),
    ("postgresql://u:x@h:abc/db", [], "is not a port number"),
])
def test_a_secret_that_a_script_would_hold_is_refused(fake, capsys, store, run_args,
                                                      fragment):
    argv = ["slurm", "qualify", "--nodes", "vm", "--partition", "debug", "--print"]
    assert main([*argv, *(["--store", store] if store else []), *run_args]) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and fragment in err
    assert "Hash9" not in err and "keypass" not in err
    assert fake.calls == []


@given(nodes=st.lists(st.sampled_from([*"gpu0129[]-,._ x²", "--", "\n"]), max_size=12).map(
           "".join),
       password=st.text(st.characters(blacklist_categories=["Cs"],
                                      blacklist_characters="\x00"), min_size=6, max_size=12))
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@pytest.mark.slow
def test_fuzz_the_node_list_and_the_store_password(fake, capsys, tmp_path, nodes, password):
    """Whatever the node list and the password: exit 0, 2, 7 or 8 only; one error line;
    the password in no output and in no script; nothing submitted on a refusal."""
    fake.calls.clear()
    fake.envs.clear()
    store = f"postgresql://fleet:{quote(password, safe='')}@db.example/results"
    code = main(["slurm", "qualify", f"--nodes={nodes}", "--partition", "debug", "--store",
                 store, "--output-dir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code in (0, EXIT_USAGE, EXIT_SCHEDULER, EXIT_NODES)
    assert password not in out + err and quote(password, safe="") not in out + err
    assert all(password not in (script or "") for _, script in fake.calls)
    if code != 0:
        assert err.count("\n") == 1 and err.startswith("accelbench: error: ")
        assert fake.submitted() == []


# -- the request each job is handed ------------------------------------------------------


def _parsed(*argv: str):
    """The namespace `accelbench ARGV` parses to, as the command itself would read it."""
    return build_parser().parse_args(list(argv))


def _isolate_request(*argv: str) -> RunRequest:
    from accelbench.benchmarks.isolate.command import build_request

    return build_request(_parsed("isolate", *argv))


@pytest.mark.parametrize(("argv", "expected"), [
    (["qualify", "--nodes", "vm", "--level", "2", "--", "--bench", "gemm", "--dtype",
      "fp32", "--max-time", "0.5"],
     lambda: [request_of(_parsed("run", "--suite", "quick", "--bench", "gemm", "--dtype",
                                 "fp32", "--max-time", "0.5")),
              validate_request(_parsed("validate", "--level", "2"),
                               accelbench.benchmarks.REGISTRY)]),
    (["qualify", "--nodes", "vm", "--suite", "standard", "--validate"],
     lambda: [request_of(_parsed("run", "--suite", "standard")),
              validate_request(_parsed("validate"), accelbench.benchmarks.REGISTRY)]),
    (["collectives", "--nodes", "2", "--", "-p", "op=all-reduce", "--device", "cpu",
      "--timeout", "60"],
     lambda: [request_of(_parsed("run", "--bench", "collectives", "-p", "op=all-reduce",
                                 "--device", "cpu", "--timeout", "60"))]),
    (["isolate", "--nodes", "2", "--", "--bytes", "16K", "--samples", "3", "--serial"],
     lambda: [_isolate_request("--bytes", "16K", "--samples", "3", "--serial")]),
    (["scaling", "--nodes", "1", "--", "-p", "model=llama-1b", "--repeat", "2"],
     lambda: [request_of(_parsed("run", "--suite", "scaling", "-p", "model=llama-1b",
                                 "--repeat", "2"))]),
])
def test_the_script_hands_the_job_the_request_of_its_options(fake, capsys, argv, expected):
    """What the job runs is what `accelbench run|validate|isolate OPTIONS` would run."""
    action, *rest = argv
    assert main(["slurm", action, "--partition", "debug", "--print", *rest]) == 0
    assert requests_in(capsys.readouterr().out) == expected()
    assert fake.calls == []


@pytest.mark.parametrize(("action", "words", "message"), [
    ("qualify", ["--bogus"], "after -- (accelbench run): unrecognized arguments: --bogus"),
    ("qualify", ["-h"], "unrecognized arguments: -h"),  # no help printed in its place
    ("qualify", ["--max-time", "-1"], "argument --max-time: expected a finite number"),
    ("qualify", ["--resume", "r1"], "unrecognized arguments: --resume r1"),
    ("qualify", ["--bench", "nosuch"], "unknown benchmark 'nosuch'"),
    ("collectives", ["-p", "nosuch=1"], "no selected benchmark has a parameter 'nosuch'"),
    ("collectives", ["--dtype", "fp99"], "unknown dtype 'fp99'"),
    ("isolate", ["--bytes", "x"], "not a size: 'x'"),
    ("isolate", ["--run-args"], "after -- (accelbench isolate): unrecognized arguments"),
    ("isolate", ["--store", "/x.sqlite"], "--store after --"),
    ("isolate", ["--json"], "--json after --"),
    ("scaling", ["--suite", "nosuch"], "unknown suite 'nosuch'"),
])
@pytest.mark.parametrize("printed", [False, True])
def test_a_bad_option_after_the_dashes_fails_before_any_slurm_command(
        fake, capsys, tmp_path, action, words, message, printed):
    nodes = {"qualify": "vm", "scaling": "1"}.get(action, "1")
    argv = ["slurm", action, "--nodes", nodes, "--partition", "debug", "--output-dir",
            str(tmp_path / "logs"), *(["--print"] if printed else []), "--", *words]
    assert main(argv) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and message in err, err
    assert fake.calls == []  # not even a look at the partition
    assert not (tmp_path / "logs").exists()


RING = Family("ring", (), slurm=(
    SlurmJob("ring", "one job across nodes: the ring all-reduce", command="run",
             options=("--bench", "collectives", "-p", "op=all-reduce"),
             job_name="accelbench-ring"),))


@pytest.fixture
def with_ring(monkeypatch) -> Registry:
    registry = Registry.of([*accelbench.benchmarks.REGISTRY.declared, RING])
    monkeypatch.setattr(accelbench.benchmarks, "REGISTRY", registry)
    return registry


def test_a_familys_slurm_job_is_an_action(with_ring, fake, capsys, tmp_path):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["slurm", "--help"])
    assert "one job across nodes: the ring all-reduce" in capsys.readouterr().out
    assert main(["slurm", "ring", "--nodes", "2", "--partition", "debug", "--print", "--",
                 "--max-time", "0.2"]) == 0
    script = capsys.readouterr().out
    assert "#SBATCH --job-name=accelbench-ring\n" in script
    assert script.startswith("#!/bin/bash\n# accelbench ring across the nodes")
    assert script.endswith("-m accelbench run\n")
    assert requests_in(script) == [RunRequest(benches=("collectives",),
                                              overrides={"op": ("all-reduce",)},
                                              timing={"max_time": 0.2})]
    assert main(["slurm", "ring", "--nodes", "1", "--partition", "debug", "--output-dir",
                 str(tmp_path / "logs")]) == 0
    [(argv, submitted)] = fake.submitted()
    assert argv == ["sbatch", "--parsable"] and "accelbench-ring" in (submitted or "")
    assert main(["slurm"]) == EXIT_USAGE
    assert "qualify, collectives, isolate, ring, scaling or status" in capsys.readouterr().err


def test_a_request_that_holds_a_secret_is_not_written(monkeypatch, fake, capsys):
    """A secret in the request, wherever it comes from, never reaches the script."""
    leaky = Family("leaky", (), slurm=(
        SlurmJob("leaky", "a job whose options hold a password", command="run",
                 options=("--report", "postgresql://u:pw#Hash9@db/results"),
                 job_name="accelbench-leaky"),))
    monkeypatch.setattr(accelbench.benchmarks, "REGISTRY",
                        Registry.of([*accelbench.benchmarks.REGISTRY.declared, leaky]))
    assert main(["slurm", "leaky", "--nodes", "2", "--partition", "debug", "--print"]) == (
        EXIT_USAGE)
    out, err = capsys.readouterr()
    assert out == "" and "the job's request holds a password" in err and "Hash9" not in err
    assert fake.calls == []
