#!/usr/bin/env bash
# The generations chart on one CPU: the same training cases under several PyTorch
# releases, one virtual environment each, stored in one result store and charted with
# `accelbench generations`. The generation key (device | runtime | PyTorch) tells the
# environments apart, so each release is one generation.
#
#   scripts/generations-example.sh          # build what is missing, measure, chart
#   scripts/generations-example.sh setup    # only build the environments
#
# Settings (environment variables):
#   GENERATIONS_TORCH         PyTorch releases, oldest first ("2.9.1 2.13.0 2.14.1")
#   GENERATIONS_DIR           where the environments and the store live (.generations)
#   GENERATIONS_CHART         the SVG chart to write (docs/generations-cpu.svg)
#   GENERATIONS_TRANSFORMERS  the transformers requirement, the same in every
#                             environment so that only PyTorch differs (transformers==5.24.0)
#   GENERATIONS_KEEP_STORE=1  add to the existing store instead of starting a new one
#   OMP_NUM_THREADS           PyTorch's CPU threads, given to `accelbench run --threads`
#                             (1 unless set: one thread is the same work in every
#                             environment and suffers least from other load on the
#                             machine; it is part of every case's identity)
#   PYTHON                    the interpreter the environments are made from (python3)
#
# The environments are kept and reused: a release is installed once (the first install
# of a release that is not on this machine downloads it, with its CUDA libraries, from
# the package index). accelbench is installed editable (--no-deps) from this checkout
# into each, so every environment measures the same code. The cases are the generations
# suite's CPU slice (`accelbench run --suite generations --bench train`): small BERT,
# GPT-2 and LSTM models with SuperBench's heads, which need no torchvision, so every
# release runs the same cases.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"

versions=${GENERATIONS_TORCH:-"2.9.1 2.13.0 2.14.1"}
root=${GENERATIONS_DIR:-.generations}
chart=${GENERATIONS_CHART:-docs/generations-cpu.svg}
transformers_req=${GENERATIONS_TRANSFORMERS:-transformers==5.24.0}
python=${PYTHON:-python3}
store="$root/store.sqlite"
mode=${1:-all}
case "$mode" in
    all|setup) ;;
    *) echo "usage: $0 [setup]" >&2; exit 2 ;;
esac

# Only this checkout's accelbench, never one from the caller's PYTHONPATH.
unset PYTHONPATH
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

# accelbench's own requirements, torch and transformers left out (pinned above).
requirements() {
    "$python" - <<'EOF'
import re
import tomllib

with open("pyproject.toml", "rb") as f:
    deps = tomllib.load(f)["project"]["dependencies"]
for dep in deps:
    name = re.split(r"[<>=!~;\[ ]", dep, maxsplit=1)[0].lower()
    if name not in ("torch", "transformers"):
        print(dep)
EOF
}

env_for() { echo "$root/torch-$1"; }

has_torch() {  # has_torch VENV VERSION: the environment holds that release of torch
    [ -x "$1/bin/python" ] && "$1/bin/python" - "$2" <<'EOF' 2>/dev/null
import sys
import torch
sys.exit(torch.__version__.split("+")[0] != sys.argv[1])
EOF
}

setup() {  # setup VERSION
    local version=$1 venv
    venv=$(env_for "$version")
    if ! has_torch "$venv" "$version"; then
        echo "== building $venv (torch $version)"
        "$python" -m venv "$venv"
        mapfile -t deps < <(requirements)
        "$venv/bin/python" -m pip install --quiet "torch==$version" "$transformers_req" "${deps[@]}"
    fi
    "$venv/bin/python" -m pip install --quiet --no-deps -e .
}

mkdir -p "$root"
for version in $versions; do
    setup "$version"
done
[ "$mode" = setup ] && exit 0

if [ "${GENERATIONS_KEEP_STORE:-0}" != 1 ]; then
    rm -f "$store" "$store-wal" "$store-shm"
fi
for version in $versions; do
    venv=$(env_for "$version")
    echo "== torch $version: accelbench run --suite generations --bench train"
    "$venv/bin/accelbench" run --suite generations --bench train --device cpu \
        --threads "$OMP_NUM_THREADS" --store "$store" --no-report
done

mkdir -p "$(dirname "$chart")"
newest=$(env_for "${versions##* }")
echo "== accelbench generations --store $store --chart $chart"
"$newest/bin/accelbench" generations --store "$store" --chart "$chart"

# The two ways of computing throughput side by side: accelbench's (total samples over
# total timed time of back-to-back windows) and SuperBench's (the mean of per-step
# throughputs over single synchronised steps).
echo "== throughput by method (sample/s)"
"$newest/bin/accelbench" export --format csv --store "$store" -o "$root/export.csv"
"$newest/bin/python" - "$root/export.csv" <<'EOF'
import csv
import json
import sys

rows: dict = {}
with open(sys.argv[1], newline="") as f:
    records = sorted(csv.DictReader(f), key=lambda r: r["run_id"])  # oldest run first
for r in records:
    if r["status"] == "ok" and r["figure"] in ("throughput", "throughput_superbench"):
        key = (r["generation_key"], json.loads(r["params"])["model"])
        rows.setdefault(key, {})[r["figure"]] = float(r["value"])
print("%-36s %-10s %11s %11s %6s" % ("generation", "model", "accelbench", "SuperBench",
                                      "ratio"))
for (generation, model), f in rows.items():
    own, sb = f.get("throughput"), f.get("throughput_superbench")
    ratio = "%.2f" % (sb / own) if own and sb else "-"
    print("%-36s %-10s %11.1f %11.1f %6s" % (generation, model, own or 0, sb or 0, ratio))
EOF
