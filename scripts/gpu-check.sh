#!/usr/bin/env bash
# Check accelbench end to end on this machine's GPU (CUDA or ROCm), in one call of at most
# 8 minutes that always ends with a figures table:
#   1. set up: online, .venv-gpu from requirements-dev.txt and this checkout (a PyTorch
#      that python3 already has and that sees a GPU is kept, as scripts/quickstart.sh
#      does); offline, nothing is fetched: accelbench runs from src/ with python3's
#      PyTorch and packages, plus the wheels of --wheelhouse (made beforehand with
#      --prepare), and it says which packages came from where (bench/gpu_packages.py);
#   2. the stages, most valuable first, each under its own deadline within the budget, a
#      stage that fails or runs out of time reported and the next one run all the same
#      (bench/gpu_check.py): fingerprint; health and level-1 gates; headline figures
#      (GEMM 8192³ in bf16, fp16, fp8, tf32; device and host copies; launch and graph
#      replay); bert-base training with its MFU and GPT-2 inference; the headline figures
#      again with plain PyTorch and the energy counter against the power integrals; the GPU
#      tests (pytest -m gpu) but FSDP; with --extended, LLM serving and FSDP2 at the end;
#   3. the figures table: every stored figure beside its published peak or the range
#      expected for the device, out-of-range figures marked (bench/gpu_figures.py).
# Everything measured is stored in DIR/results.sqlite (`accelbench merge` takes it into
# another store), beside each stage's log, stages.json and figures.md.
#
#   scripts/gpu-check.sh [--offline] [--wheelhouse WHEELS] [--extended] [DIR]
#   scripts/gpu-check.sh --prepare WHEELS [--have LIST]   (where a package index answers)
#   scripts/gpu-check.sh --dry-run [DIR]                  (no GPU: the CPU, faked)
#     DIR           results go to DIR (default: a new temporary folder)
#     --offline     reach no package index (taken when python3's PyTorch sees the GPU and
#                   no index answers)
#     --wheelhouse  offline, adding the wheels in WHEELS (pip install --no-index --no-deps
#                   into .gpu-check-site, put on PYTHONPATH)
#     --extended    also serve a 1B LLaMA and train with FSDP2 (about 4 minutes more)
#     --prepare     download into WHEELS the wheels a GPU machine with no index lacks, for
#                   its Python (GPU_CHECK_PYTHON_VERSION, default 3.12) on manylinux
#                   x86-64; LIST is that machine's `pip list --format=freeze`
#                   (bench/gpu_wheels.py); nothing is checked
#     --dry-run     the same stages and deadlines on the CPU, PyTorch's CUDA calls faked;
#                   runs with $GPU_CHECK_PYTHON, else .venv's Python where there is one,
#                   else python3 (ACCELBENCH_GPU_CHECK_STRETCH=F: deadlines F times longer)
#
# Exit codes: 0 every stage passed and every figure is in range; 1 a stage failed, ran out
# of time or was not reached, or a figure is out of range; 2 bad arguments; 3 the
# environment could not be set up (a required package missing offline, or a wheel that
# could not be brought); 4 no GPU here (nothing was checked). The stages are held to
# ACCELBENCH_GPU_CHECK_BUDGET seconds in all (default 420: with an offline set-up, the
# whole call ends within 8 minutes); an online set-up has its own limit, for downloads.
set -euo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

offline=no
wheelhouse=""
out=""
extended=()
prepare=""
have=""
dry_run=no
while [ "$#" -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --offline) offline=yes ;;
    --extended) extended=(--extended) ;;
    --dry-run) dry_run=yes ;;
    --prepare)
      if [ "$#" -lt 2 ]; then echo "gpu-check: --prepare needs a folder" >&2; exit 2; fi
      prepare="$2"; shift ;;
    --have)
      if [ "$#" -lt 2 ]; then echo "gpu-check: --have needs a package list" >&2; exit 2; fi
      have="$2"; shift ;;
    --wheelhouse)
      if [ "$#" -lt 2 ]; then echo "gpu-check: --wheelhouse needs a folder" >&2; exit 2; fi
      wheelhouse="$2"; offline=yes; shift ;;
    -*) echo "gpu-check: unknown option $1" >&2; usage >&2; exit 2 ;;
    *)
      if [ -n "$out" ]; then
        echo "gpu-check: at most one results folder" >&2
        exit 2
      fi
      case "$1" in
        /*) out="$1" ;;
        *) out="$PWD/$1" ;;  # the folder named from where the script was started
      esac ;;
  esac
  shift
done
if [ -n "$wheelhouse" ]; then
  case "$wheelhouse" in /*) ;; *) wheelhouse="$PWD/$wheelhouse" ;; esac
  if ! compgen -G "$wheelhouse/*.whl" >/dev/null; then
    echo "gpu-check: no wheels in $wheelhouse" >&2
    exit 2
  fi
fi
budget="${ACCELBENCH_GPU_CHECK_BUDGET:-420}"
if ! [[ "$budget" =~ ^[0-9]+$ ]] || [ "$budget" -lt 60 ]; then
  echo "gpu-check: ACCELBENCH_GPU_CHECK_BUDGET must be a whole number of seconds, 60 or more" >&2
  exit 2
fi
if [ -n "$have" ] && [ -z "$prepare" ]; then
  echo "gpu-check: --have goes with --prepare" >&2
  exit 2
fi
if [ -n "$prepare" ] && { [ "$dry_run" = yes ] || [ -n "$wheelhouse" ] || [ -n "$out" ]; }; then
  echo "gpu-check: --prepare only downloads: leave out the other options and DIR" >&2
  exit 2
fi
absolute() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
if [ -n "$prepare" ]; then prepare="$(absolute "$prepare")"; fi
if [ -n "$have" ]; then have="$(absolute "$have")"; fi
cd "$(dirname "$0")/.."

# $GPU_CHECK_PYTHON, else the Python of this checkout's development environment where
# there is one, else python3.
dev_python() {
  if [ -n "${GPU_CHECK_PYTHON:-}" ]; then echo "$GPU_CHECK_PYTHON"
  elif [ -x .venv/bin/python ]; then echo .venv/bin/python
  else echo python3; fi
}

if [ -n "$prepare" ]; then
  if ! "$(dev_python)" bench/gpu_wheels.py --dest "$prepare" \
      --python-version "${GPU_CHECK_PYTHON_VERSION:-3.12}" ${have:+--have "$have"}; then
    echo "gpu-check: could not bring every wheel (above)" >&2
    exit 3
  fi
  echo "gpu-check: on the GPU machine, with WHEELS taken along: scripts/gpu-check.sh" \
    "--wheelhouse WHEELS [DIR]"
  exit 0
fi

if [ "$dry_run" = yes ]; then
  if [ -z "$out" ]; then out="$(mktemp -d "${TMPDIR:-/tmp}/accelbench-gpu-check.XXXXXX")"; fi
  mkdir -p "$out"
  PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONPATH
  echo "gpu-check: DRY RUN on the CPU, PyTorch's CUDA calls faked; results in $out"
  exec "$(dev_python)" bench/gpu_check.py --dry-run --out "$out" --budget "$budget" \
    "${extended[@]}"
fi

venv=.venv-gpu
py="$venv/bin/python"
site=.gpu-check-site  # offline: the wheels brought with --wheelhouse

no_gpu() {
  echo "gpu-check: no GPU: $1" >&2
  echo "gpu-check: nothing was checked (exit 4)" >&2
  exit 4
}

# Exit 0 when the torch that python $1 imports sees a GPU (CUDA and ROCm builds alike).
sees_gpu() {
  timeout 120 "$1" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' \
    >/dev/null 2>&1
}

# A device node of the NVIDIA driver, ROCm's kernel driver, or WSL's GPU.
has_gpu_node() {
  compgen -G '/dev/nvidia[0-9]*' >/dev/null || [ -e /dev/kfd ] || [ -e /dev/dxg ]
}

# --- 1. set-up ---------------------------------------------------------------------------

# A venv made with system site packages sees its base interpreter's packages, not those of
# a venv that python3 runs in: name python3's own site folders in the new venv too.
share_site() {
  local own target
  own="$(python3 -c 'import site, sys
if sys.prefix != sys.base_prefix: print("\n".join(site.getsitepackages()))')" || return 1
  if [ -z "$own" ]; then return 0; fi
  target="$("$py" -c 'import site; print(site.getsitepackages()[0])')" || return 1
  echo "$own" >"$target/python3-site.pth" || return 1
}

# Called as a condition, where `set -e` does not act: every command says `|| return 1`.
setup() {
  if ! python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)'; then
    echo "accelbench needs Python 3.10 or newer; python3 is $(python3 -V 2>&1)"
    return 1
  fi
  if [ ! -x "$py" ]; then
    if [ "$system_gpu" = yes ]; then
      python3 -m venv --system-site-packages "$venv" || return 1
      share_site || return 1
    else
      python3 -m venv "$venv" || return 1
    fi
  fi
  timeout 300 "$py" -m pip install --quiet --upgrade pip || return 1
  if grep -q '^include-system-site-packages = true' "$venv/pyvenv.cfg"; then
    # Keep the PyTorch found there: pin it, and take the shared pins without the pinned
    # torch and torchvision and without the one test-only package that depends on torch.
    timeout 120 "$py" -c 'import torch; print(f"torch=={torch.__version__}")' \
      >"$out/constraints.txt" || return 1
    grep -Ev '^HolisticTraceAnalysis==' requirements-common.txt \
      >"$out/requirements.txt" || return 1
    timeout 900 "$py" -m pip install --quiet -r "$out/requirements.txt" \
      -c "$out/constraints.txt" || return 1
  else
    timeout 900 "$py" -m pip install --quiet -r requirements-dev.txt || return 1
  fi
  timeout 300 "$py" -m pip install --quiet --no-deps -e . || return 1
}

# Offline: python3 as it is, accelbench from src/, the wheelhouse's wheels beside them.
setup_offline() {
  if ! python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)'; then
    echo "accelbench needs Python 3.10 or newer; python3 is $(python3 -V 2>&1)"
    return 1
  fi
  if [ -n "$wheelhouse" ]; then
    rm -rf "$site"
    python3 -m pip install --quiet --no-index --no-deps --no-compile --target "$site" \
      "$wheelhouse"/*.whl || return 1
  fi
}

# Exit 0 when the package index pip is set up for answers within a few seconds.
index_answers() {
  timeout 30 python3 -m pip index versions pip --retries 0 --timeout 10 >/dev/null 2>&1
}

system_gpu=no
if sees_gpu python3; then system_gpu=yes; fi
if [ "$system_gpu" = no ] && ! has_gpu_node; then
  no_gpu "no GPU device node (/dev/nvidia*, /dev/kfd, /dev/dxg), and python3 has no PyTorch that sees one"
fi
if [ "$offline" = no ] && [ "$system_gpu" = yes ] && ! index_answers; then
  echo "gpu-check: no package index answers: checking offline, with python3's packages"
  offline=yes
fi
if [ -z "$out" ]; then out="$(mktemp -d "${TMPDIR:-/tmp}/accelbench-gpu-check.XXXXXX")"; fi
mkdir -p "$out"
store="$out/results.sqlite"
setup_log="$out/setup.log"
setup_start=$SECONDS
if [ "$offline" = yes ]; then
  if [ "$system_gpu" = no ]; then
    no_gpu "offline, python3's PyTorch must see the GPU, and $(timeout 120 python3 -c \
'import torch; print("PyTorch " + torch.__version__ + " does not")' 2>&1 | tail -n 1)"
  fi
  py=python3
  where="python3 ($(command -v python3)) with accelbench from src/"
  setup_label="offline"
  echo "gpu-check: offline: $where (log: $setup_log)"
  if ! setup_offline >"$setup_log" 2>&1; then
    tail -n 20 "$setup_log" >&2
    echo "gpu-check: could not install the wheels of $wheelhouse (log: $setup_log)" >&2
    exit 3
  fi
  PYTHONPATH="$PWD/src${wheelhouse:+:$PWD/$site}${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONPATH
  if ! "$py" bench/gpu_packages.py ${wheelhouse:+--site "$PWD/$site"} | tee -a "$setup_log"
  then
    echo "gpu-check: a package accelbench or its tests need is missing (above)" >&2
    exit 3
  fi
else
  where="$venv"
  setup_label="$venv"
  echo "gpu-check: setting up $venv (log: $setup_log)"
  if ! setup >"$setup_log" 2>&1; then
    tail -n 20 "$setup_log" >&2
    echo "gpu-check: could not set up $venv (log: $setup_log); remove $venv to start" \
      "afresh, or run offline (--offline)" >&2
    exit 3
  fi
fi
setup_time=$((SECONDS - setup_start))
if ! sees_gpu "$py"; then
  torch_version="$(timeout 120 "$py" -c 'import torch; print(torch.__version__)' 2>&1 || true)"
  no_gpu "PyTorch in $where ($torch_version) sees no GPU. Install the CUDA or ROCm build \
of PyTorch for this machine for python3 (https://pytorch.org/get-started/locally/), remove \
$venv and run this again"
fi
device="$(timeout 120 "$py" -c \
  'import torch; print(f"{torch.cuda.get_device_name(0)}, PyTorch {torch.__version__}")' \
  2>/dev/null)" || device="a GPU whose name PyTorch could not read"
echo "gpu-check: $device; results in $out"

# --- 2-3. the stages and the figures table ----------------------------------------------

set +e
"$py" bench/gpu_check.py --out "$out" --budget "$budget" "${extended[@]}"
status=$?
set -e
echo "set-up ($setup_label): ${setup_time} s; results: $out (store results.sqlite, logs" \
  "*.log, stages.json, figures.md)"
exit "$status"
