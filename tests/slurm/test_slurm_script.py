"""The generated batch scripts: their text, and values that must not reach a shell or
an #SBATCH line as they are."""

import subprocess

import pytest

from accelbench.errors import UserError
from accelbench.slurm.script import (
    ISOLATE_PROGRAM,
    Directives,
    Launch,
    collectives_script,
    directive_value,
    qualify_script,
    time_limit,
)

LAUNCH = Launch(python="/opt/venv/bin/python", pythonpath="/opt/src", workdir="/home/me")
DIRECTIVES = Directives(job_name="accelbench-qualify", partition="gpu",
                        output="/home/me/slurm-logs/%x-%N-%j.out", time="01:00:00",
                        account="lab")

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

status=0
/opt/venv/bin/python -m accelbench run --suite quick --store /shared/results.sqlite || status=$?
/opt/venv/bin/python -m accelbench validate --store /shared/results.sqlite || status=$?
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

# --whole: each node's torchrun gets every CPU and device the job holds there.
srun --whole --ntasks-per-node=1 --kill-on-bad-exit=1 \\
    bash -c 'export SLURMD_NODENAME; exec "$0" -m torch.distributed.run \
--nnodes "$SLURM_NNODES" --node-rank "$SLURM_NODEID" "$@"' \\
    /opt/venv/bin/python --nproc-per-node 8 --rdzv-backend c10d \\
    --rdzv-endpoint "$head:29500" --rdzv-id "$SLURM_JOB_ID" \\
    -m accelbench run --bench collectives -p op=all-reduce --store postgresql://u@db/bench
"""


def test_qualify_script_text():
    script = qualify_script(DIRECTIVES, LAUNCH, hostlist="gpu[01-16]",
                            run_args=["--suite", "quick"], store="/shared/results.sqlite",
                            validate=True)
    assert script == QUALIFY


def test_collectives_script_text():
    directives = Directives(job_name="accelbench-collectives", partition="gpu",
                            output="/home/me/slurm-logs/%x-%j.out")
    script = collectives_script(directives, LAUNCH, node_count=4, hostlist=None,
                                nproc_per_node=8, port=29500, run_args=["-p", "op=all-reduce"],
                                store="postgresql://u@db/bench")
    assert script == COLLECTIVES  # the store URL is handed on unchanged


def test_collectives_on_named_nodes_asks_for_that_list():
    directives = Directives(job_name="accelbench-collectives", partition="gpu",
                            output="/l/%x-%j.out")
    script = collectives_script(directives, LAUNCH, node_count=None, hostlist="gpu[01-02]",
                                nproc_per_node=1, port=29600, run_args=[], store=None)
    assert "#SBATCH --nodelist=gpu[01-02]\n" in script and "--nodes=" not in script
    assert '"$head:29600"' in script and "--store" not in script


def test_an_isolate_job_runs_isolate_on_every_rank():
    directives = Directives(job_name="accelbench-isolate", partition="gpu",
                            output="/l/%x-%j.out")
    script = collectives_script(directives, LAUNCH, node_count=8, hostlist=None,
                                nproc_per_node=8, port=29500, run_args=["--bytes", "64M"],
                                store=None, program=ISOLATE_PROGRAM)
    assert script.startswith("#!/bin/bash\n# accelbench isolate across the nodes")
    assert script.endswith("-m accelbench isolate --bytes 64M\n")
    assert "--bench" not in script and "#SBATCH --nodes=8\n" in script


HOSTILE = ["$(touch /tmp/owned)", "`id`", "a b; rm -rf ~", "it's", "line\nbreak", "--x=\"y\"",
           "*", "~root"]


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_values_reach_the_job_as_one_word_each(value, tmp_path):
    """The shell lines of a script, run by bash, hand every value over unchanged."""
    launch = Launch(python=str(tmp_path / "echo-args"), pythonpath=value,
                    workdir=str(tmp_path))
    (tmp_path / "echo-args").write_text('#!/bin/bash\nprintf "%s\\0" "$@"\n')
    (tmp_path / "echo-args").chmod(0o755)
    script = qualify_script(Directives("j", "p", "/l/%j.out"), launch, hostlist="gpu[01-02]",
                            run_args=["--suite", value], store=value, validate=False)
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": "n1"}, check=True)
    out = done.stdout.split("\n", 1)[1]  # after the job's first echo
    assert out.split("\0")[:-1] == ["-m", "accelbench", "run", "--suite", value, "--store",
                                    value]
    assert not (tmp_path / "owned").exists()


@pytest.mark.parametrize("hostlist", ["gpu01\nid", "gpu01 gpu02", "$(id)'"])
def test_a_hostlist_that_could_leave_its_comment_or_quotes_is_refused(hostlist):
    """The recipe's comment quotes the hostlist; a line break would end the comment and
    make the rest a command."""
    with pytest.raises(UserError, match="--nodes"):
        qualify_script(DIRECTIVES, LAUNCH, hostlist=hostlist, run_args=[], store=None,
                       validate=False)


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
