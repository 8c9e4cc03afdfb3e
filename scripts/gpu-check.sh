#!/usr/bin/env bash
# Check accelbench end to end on this machine's GPU (CUDA or ROCm):
#   1. set up: online, .venv-gpu from requirements-dev.txt and this checkout (a PyTorch
#      that python3 already has and that sees a GPU is kept, as scripts/quickstart.sh
#      does); offline, nothing is installed: accelbench runs from src/ with python3's
#      PyTorch and packages, plus any wheels from --wheelhouse, and the packages missing
#      are listed (bench/gpu_packages.py): a missing optional one skips only what needs it;
#   2. run the GPU tests: pytest -m gpu tests/gpu tests/qualify (the node's health and
#      copy matrix among them, tests/gpu/test_gpu_node_health.py, with the figures expected
#      on an H200, and every qualification figure of every GPU);
#   3. qualify the node at level 1 (`accelbench qualify --prologue`: its health, as
#      `accelbench health` reads it, and its GPU model's configuration gates) into the
#      store, then measure every figure its model has a level-2 gate for (GEMM per
#      precision, memory, host and peer links, all-reduce, launch), briefly, against it;
#   4. serve a 1B LLaMA under eight concurrent streams (serve-llm), then run the quick
#      suite on the GPU into the store;
#   5. print each headline figure beside plain PyTorch measured now and the range expected
#      for the device, and the energy counter against the power integrals on a 2 s and a
#      10 s window (bench/gpu_reference.py), then a summary of every step.
#
#   scripts/gpu-check.sh [--offline] [--wheelhouse WHEELS] [DIR]
#     DIR           store, report and logs go to DIR (default: a new temporary folder)
#     --offline     reach no package index (taken when python3's PyTorch sees the GPU and
#                   no index answers)
#     --wheelhouse  offline, adding the wheels in WHEELS (pip install --no-index --no-deps
#                   into .gpu-check-site, put on PYTHONPATH)
#
# Exit codes: 0 every check passed; 1 a check failed (a test, a case of the quick suite, a
# figure outside its range or disagreeing with the reference, a step that ran out of
# time); 2 bad arguments; 3 the environment could not be set up (a required package
# missing offline); 4 no GPU here (nothing was checked). The checks after set-up are held
# to ACCELBENCH_GPU_CHECK_BUDGET seconds in all (default 450: with an offline set-up, the
# whole run ends within 8 minutes); an online set-up has its own limit, for downloads.
set -euo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

offline=no
wheelhouse=""
out=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --offline) offline=yes ;;
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
budget="${ACCELBENCH_GPU_CHECK_BUDGET:-450}"
if ! [[ "$budget" =~ ^[0-9]+$ ]] || [ "$budget" -lt 60 ]; then
  echo "gpu-check: ACCELBENCH_GPU_CHECK_BUDGET must be a whole number of seconds, 60 or more" >&2
  exit 2
fi
cd "$(dirname "$0")/.."

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
  if ! "$py" bench/gpu_packages.py | tee -a "$setup_log"; then
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

# --- 2-4. the checks, within the budget ---------------------------------------------------

deadline=$((SECONDS + budget))
names=()
results=()
times=()
failed=0

# run_step NAME CAP LOG COMMAND...: run COMMAND for at most CAP seconds (less when the
# budget has less left), its output shown and kept in LOG; record how it went.
run_step() {
  local name=$1 cap=$2 log=$3 left start status
  shift 3
  left=$((deadline - SECONDS))
  if [ "$left" -lt "$cap" ]; then cap=$left; fi
  names+=("$name")
  if [ "$cap" -lt 15 ]; then
    results+=("not run: the budget of ${budget} s is spent")
    times+=("-")
    failed=1
    return 0
  fi
  echo
  echo "== $name (at most ${cap} s; log: $log)"
  start=$SECONDS
  if timeout --kill-after=20 "$cap" "$@" 2>&1 | tee "$log"; then status=0; else status=$?; fi
  times+=("$((SECONDS - start)) s")
  case "$status" in
    0) results+=("ok") ;;
    124|137) results+=("FAILED: out of time after ${cap} s"); failed=1 ;;
    *) results+=("FAILED: exit $status"); failed=1 ;;
  esac
}

run_step "GPU tests (pytest -m gpu)" 240 "$out/pytest.log" \
  "$py" -m pytest -m gpu tests/gpu tests/qualify -q -p no:cacheprovider
run_step "qualify level 1" 45 "$out/prologue.log" \
  "$py" -m accelbench qualify --prologue --device cuda --store "$store"
# Every figure the GPU model has a gate for at level 2, each briefly and unrested: the
# shipped gates met (or not) by a real GPU.
figures="$("$py" -c 'from accelbench.benchmarks.qualify.catalog import FIGURES
print(",".join(FIGURES))')"
run_step "gates at level 2" 90 "$out/gates.log" \
  "$py" -m accelbench run --bench gate -p "figure=$figures" -p level=2 -p budget=0.5 \
  -p settle=0 --device cuda --store "$store" --no-report
# One small LLM serving case: a 1B LLaMA with random weights on transformers' continuous
# batching, its output checked against eager PyTorch, eight streams at once.
run_step "LLM serving (serve-llm)" 60 "$out/serving.log" \
  "$py" -m accelbench run --bench serve-llm -p model=llama-1b -p dtype=bf16 \
  -p requests=32 -p concurrency=8 -p input_len=256 -p output_len=64 \
  -p slo=ttft:500ms,tpot:50ms --device cuda --store "$store" --no-report
# The quick suite may take what is left but the reference's 75 s. Its headline cases
# (GEMM, memory, launch) come first: stopped by its limit, it still stores them.
quick_cap=$((deadline - SECONDS - 75))
if [ "$quick_cap" -gt 360 ]; then quick_cap=360; fi
run_step "quick suite on the GPU" "$quick_cap" "$out/quick.log" \
  "$py" -m accelbench run --suite quick --device cuda --store "$store"
run_step "figures beside plain PyTorch" 150 "$out/reference.log" \
  "$py" bench/gpu_reference.py --store "$store" --json "$out/gpu-check.json"

# --- summary -------------------------------------------------------------------------------

detail() {  # the line of a log that says how a step went
  case "$1" in
    0) tail -n 1 "$out/pytest.log" 2>/dev/null || true ;;
    1) grep -E '^accelbench qualify level 1: ' "$out/prologue.log" 2>/dev/null | tail -n 1 \
         || true ;;
    2) grep -E '^[0-9]+ cases, ' "$out/gates.log" 2>/dev/null | tail -n 1 || true ;;
    3) grep -E '^[0-9]+ cases, ' "$out/quick.log" 2>/dev/null | tail -n 1 || true ;;
    4) grep -E '^GPU figures: ' "$out/reference.log" 2>/dev/null | tail -n 1 || true ;;
  esac
}

echo
echo "accelbench GPU check: $device"
printf '%-30s %-44s %s\n' "step" "result" "time"
printf '%-30s %-44s %s\n' "set-up ($setup_label)" "ok" "${setup_time} s"
for i in "${!names[@]}"; do
  printf '%-30s %-44s %s\n' "${names[$i]}" "${results[$i]}" "${times[$i]}"
  line="$(detail "$i")"
  if [ -n "$line" ]; then printf '%-30s %s\n' "" "$line"; fi
done
if grep -q '^| figure ' "$out/reference.log" 2>/dev/null; then
  echo
  sed -n '/^| figure /,/^GPU figures: /p' "$out/reference.log"
fi
echo
echo "results: $out (store results.sqlite, report under reports/, logs *.log)"
if [ "$failed" -ne 0 ]; then
  echo "gpu-check: FAILED"
  exit 1
fi
echo "gpu-check: passed"
