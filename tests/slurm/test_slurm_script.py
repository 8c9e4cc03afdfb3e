"""The generated batch scripts: their text, the request each hands its job (read back
out of the script, and as the job's command receives it when bash runs the script), and
values that must not reach a shell or an #SBATCH line as they are."""

import subprocess
from pathlib import Path

import pytest
from batch_scripts import requests_in

from accelbench.core.request import RunRequest
from accelbench.errors import UserError
from accelbench.slurm.script import (
    END_OF_REQUEST,
    Directives,
    Launch,
    across_nodes_script,
    directive_value,
    qualify_script,
    time_limit,
)

LAUNCH = Launch(python="/opt/venv/bin/python", pythonpath="/opt/src", workdir="/home/me")
DIRECTIVES = Directives(job_name="accelbench-qualify", partition="gpu",
                        output="/home/me/slurm-logs/%x-%N-%j.out", time="01:00:00",
                        account="lab")
RUN = RunRequest(suite="quick", benches=("gemm",), dtypes=("bf16",))
VALIDATE = RunRequest(command="validate", suite="validate", benches=("health",))
COLLECTIVES_REQUEST = RunRequest(benches=("collectives",), overrides={"op": ("all-reduce",)})


def _json(request: RunRequest) -> str:
    return request.to_json().rstrip("\n")


QUALIFY = """\
#!/bin/bash
# accelbench qualification of one node. Submit it once per node:
#   for node in $(scontrol show hostnames 'gpu[01-16]'); do
#       sbatch --nodelist="$node" accelbench-qualify.sbatch
#   done
#SBATCH --job-name=accelbench-qualify
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --time=01:00:00
#SBATCH --account=lab
#SBATCH --output=/home/me/slurm-logs/%x-%N-%j.out
#SBATCH --exclusive

cd -- /home/me
# The accelbench this job was generated with.
export PYTHONPATH=/opt/src
# The node this run is on, for the run and for its output.
export SLURMD_NODENAME="${SLURMD_NODENAME:-$(hostname -s)}"
echo "accelbench qualification on $SLURMD_NODENAME (job $SLURM_JOB_ID)"

# What this job runs (`accelbench show RUN --request` prints it back).
requests=$(mktemp -d) || exit
trap 'rm -rf -- "$requests"' EXIT
cat >"$requests/run.json" <<'ACCELBENCH_REQUEST'
""" + _json(RUN) + """
ACCELBENCH_REQUEST
cat >"$requests/validate.json" <<'ACCELBENCH_REQUEST'
""" + _json(VALIDATE) + """
ACCELBENCH_REQUEST

status=0
/opt/venv/bin/python -m accelbench run --store /shared/results.sqlite \
--request "$requests/run.json" || status=$?
/opt/venv/bin/python -m accelbench validate --store /shared/results.sqlite \
--request "$requests/validate.json" || status=$?
exit "$status"
"""

COLLECTIVES = """\
#!/bin/bash
# accelbench collectives across the nodes of one allocation: srun starts one
# torchrun per node; they meet through c10d on the allocation's first node.
#SBATCH --job-name=accelbench-collectives
#SBATCH --partition=gpu
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=1
#SBATCH --output=/home/me/slurm-logs/%x-%j.out
#SBATCH --exclusive

cd -- /home/me
# The accelbench this job was generated with.
export PYTHONPATH=/opt/src
head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
echo "accelbench collectives on $SLURM_JOB_NODELIST, rendezvous at $head:29500"

# What every rank runs (`accelbench show RUN --request` prints it back). This script
# runs on the first node only: srun hands the request on to each node's task in
# its environment.
ACCELBENCH_JOB_REQUEST=$(cat <<'ACCELBENCH_REQUEST'
""" + _json(COLLECTIVES_REQUEST) + """
ACCELBENCH_REQUEST
)
export ACCELBENCH_JOB_REQUEST

# Each node's task writes the request to a file of its own node (the nodes may
# share no file system) and starts torchrun, whose ranks read it. It stays (no exec)
# to remove the file when torchrun ends.
per_node=$(cat <<'PER_NODE'
export SLURMD_NODENAME
request=$(mktemp) || exit
trap 'rm -f -- "$request"' EXIT
printf '%s\\n' "$ACCELBENCH_JOB_REQUEST" >"$request" || exit
unset ACCELBENCH_JOB_REQUEST
"$0" -m torch.distributed.run --nnodes "$SLURM_NNODES" --node-rank "$SLURM_NODEID" \\
    "$@" --request "$request"
PER_NODE
)

# --whole: each node's torchrun gets every CPU and device the job holds there.
srun --whole --ntasks-per-node=1 --kill-on-bad-exit=1 \\
    bash -c "$per_node" \\
    /opt/venv/bin/python --nproc-per-node 8 --rdzv-backend c10d \\
    --rdzv-endpoint "$head:29500" --rdzv-id "$SLURM_JOB_ID" \\
    -m accelbench run --store postgresql://u@db/bench
"""


def _collectives(request: RunRequest = COLLECTIVES_REQUEST, **changes) -> str:
    shape = {"node_count": 4, "hostlist": None, "nproc_per_node": 8, "port": 29500,
             "store": "postgresql://u@db/bench", **changes}
    directives = Directives(job_name="accelbench-collectives", partition="gpu",
                            output="/home/me/slurm-logs/%x-%j.out")
    return across_nodes_script(directives, LAUNCH, what="collectives", command="run",
                               request=request, **shape)


def test_qualify_script_text():
    script = qualify_script(DIRECTIVES, LAUNCH, hostlist="gpu[01-16]", run=RUN,
                            check=VALIDATE, store="/shared/results.sqlite")
    assert script == QUALIFY
    assert requests_in(script) == [RUN, VALIDATE]


def test_qualify_without_validation_runs_one_request():
    script = qualify_script(DIRECTIVES, LAUNCH, hostlist="gpu01", run=RUN, check=None,
                            store=None)
    assert requests_in(script) == [RUN]
    assert "validate" not in script and "--store" not in script


def test_collectives_script_text():
    script = _collectives()
    assert script == COLLECTIVES  # the store URL is handed on unchanged
    assert requests_in(script) == [COLLECTIVES_REQUEST]


def test_collectives_on_named_nodes_asks_for_that_list():
    script = _collectives(node_count=None, hostlist="gpu[01-02]", port=29600, store=None)
    assert "#SBATCH --nodelist=gpu[01-02]\n" in script and "--nodes=" not in script
    assert '"$head:29600"' in script and "--store" not in script


def test_an_isolate_job_runs_isolate_on_every_rank():
    directives = Directives(job_name="accelbench-isolate", partition="gpu",
                            output="/l/%x-%j.out")
    request = RunRequest(command="isolate", benches=("isolate",), values={"bytes": ("64M",)})
    script = across_nodes_script(directives, LAUNCH, what="isolate", command="isolate",
                                 request=request, node_count=8, hostlist=None,
                                 nproc_per_node=8, port=29500, store=None)
    assert script.startswith("#!/bin/bash\n# accelbench isolate across the nodes")
    assert script.endswith("    -m accelbench isolate\n")
    assert requests_in(script) == [request] and "#SBATCH --nodes=8\n" in script


HOSTILE = ["$(touch /tmp/owned)", "`id`", "a b; rm -rf ~", "it's", "line\nbreak", "--x=\"y\"",
           "*", "~root", END_OF_REQUEST, f"\n{END_OF_REQUEST}\n", "PER_NODE", "\\", "nöde ²",
           "'\"'\"'"]


def _hostile_request(value: str) -> RunRequest:
    return RunRequest(suite=value, benches=(value,), overrides={value: (value, "x")},
                      report=value, timing={"telemetry": (value,)})


def _recorder(path: Path) -> str:
    """A stand-in for the job's python: writes its arguments and the request file it is
    given into CAPTURE, as NODE-COMMAND.args and NODE-COMMAND.json."""
    path.write_text("""#!/bin/bash
prev=
for word in "$@"; do
    [ "$prev" = accelbench ] && command=$word
    [ "$prev" = --request ] && request=$word
    prev=$word
done
out="$CAPTURE/${SLURM_NODEID:-0}-$command"
printf '%s\\0' "$@" >"$out.args"
cat -- "$request" >"$out.json"
""")
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_values_reach_the_job_unchanged(value, tmp_path):
    """The shell lines of a qualification script, run by bash, hand every value over
    unchanged: the launch's as words, the request's as the very JSON it was written as."""
    launch = Launch(python=_recorder(tmp_path / "python"), pythonpath=value,
                    workdir=str(tmp_path))
    run, check = _hostile_request(value), _hostile_request(value).replace(command="validate")
    script = qualify_script(Directives("j", "p", "/l/%j.out"), launch, hostlist="gpu[01-02]",
                            run=run, check=check, store=value)
    temp = tmp_path / "tmp"
    temp.mkdir()
    subprocess.run(["bash", "-c", script], capture_output=True, check=True,
                   env={"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": "n1", "TMPDIR": str(temp),
                        "CAPTURE": str(tmp_path)})
    for command, request in (("run", run), ("validate", check)):
        words = (tmp_path / f"0-{command}.args").read_text().split("\0")[:-1]
        assert words[:5] == ["-m", "accelbench", command, "--store", value]
        assert words[5] == "--request"
        assert (tmp_path / f"0-{command}.json").read_text() == request.to_json()
    assert not (tmp_path / "owned").exists()
    assert list(temp.iterdir()) == []  # the requests' folder went with the job


FAKE_SRUN = """#!/bin/bash
# srun on two nodes that share no file system: each task in a TMPDIR of its own node.
while [[ $1 == --* ]]; do shift; done
for node in 0 1; do
    mkdir -p "$NODES/$node"
    SLURM_NNODES=2 SLURM_NODEID=$node TMPDIR="$NODES/$node" "$@" || exit
done
"""


@pytest.mark.parametrize("value", HOSTILE)
def test_every_node_of_a_job_across_nodes_gets_the_request(value, tmp_path):
    """srun hands the request to each node's task in the environment; each task writes it
    to a file of its own node, hands it to torchrun, and removes it when done."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(FAKE_SRUN)
    (bin_dir / "scontrol").write_text("#!/bin/bash\necho node0\n")
    for name in ("srun", "scontrol"):
        (bin_dir / name).chmod(0o755)
    request = _hostile_request(value)
    launch = Launch(python=_recorder(tmp_path / "python"), pythonpath=None,
                    workdir=str(tmp_path))
    script = across_nodes_script(Directives("j", "p", "/l/%j.out"), launch, what="isolate",
                                 command="isolate", request=request, node_count=2,
                                 hostlist=None, nproc_per_node=2, port=29500, store=value)
    subprocess.run(["bash", "-c", script], capture_output=True, check=True,
                   env={"PATH": f"{bin_dir}:/usr/bin:/bin", "NODES": str(tmp_path / "nodes"),
                        "CAPTURE": str(tmp_path), "SLURM_JOB_NODELIST": "node[0-1]",
                        "SLURM_JOB_ID": "7"})
    for node in ("0", "1"):
        words = (tmp_path / f"{node}-isolate.args").read_text().split("\0")[:-1]
        assert words[:7] == ["-m", "torch.distributed.run", "--nnodes", "2", "--node-rank",
                             node, "--nproc-per-node"]
        assert words[-5:-1] == ["isolate", "--store", value, "--request"]
        assert words[-1].startswith(str(tmp_path / "nodes" / node))  # its own node's file
        assert (tmp_path / f"{node}-isolate.json").read_text() == request.to_json()
        assert list((tmp_path / "nodes" / node).iterdir()) == []  # removed when done
    assert not (tmp_path / "owned").exists()


@pytest.mark.parametrize("hostlist", ["gpu01\nid", "gpu01 gpu02", "$(id)'"])
def test_a_hostlist_that_could_leave_its_comment_or_quotes_is_refused(hostlist):
    """The recipe's comment quotes the hostlist; a line break would end the comment and
    make the rest a command."""
    with pytest.raises(UserError, match="--nodes"):
        qualify_script(DIRECTIVES, LAUNCH, hostlist=hostlist, run=RUN, check=None,
                       store=None)


@pytest.mark.parametrize("value", ["gpu debug", "a\nb", 'x"y', "p'q", "back\\slash",
                                   "50%", "\x1b[2J", ""])
def test_values_an_sbatch_line_could_misread_are_refused(value):
    with pytest.raises(UserError, match="--partition"):
        Directives("j", value, "/l/%j.out").lines([])
    with pytest.raises(UserError):
        directive_value("--account", value)


def test_output_patterns_are_slurms_but_the_folder_may_not_hold_one():
    assert directive_value("--output", "/l/%x-%j.out", patterns=True) == "/l/%x-%j.out"
    with pytest.raises(UserError):
        directive_value("--output", "/my logs/%j.out", patterns=True)


@pytest.mark.parametrize("text", ["30", "30:00", "01:00:00", "2-12", "2-12:30", "2-12:30:15",
                                  "UNLIMITED", "INFINITE"])
def test_slurm_time_limits(text):
    assert time_limit(text) == text


@pytest.mark.parametrize("text", ["1:2:3:4", "1h", "-5", "", "1-", "01:00:00; id", "nan"])
def test_bad_time_limits(text):
    import argparse

    with pytest.raises(argparse.ArgumentTypeError, match="Slurm time limit"):
        time_limit(text)
