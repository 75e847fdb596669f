#!/usr/bin/env bash
# One GPU window (issue 47): the GPU path proved in two short commands on one machine. GPU machines come rarely and
# for minutes, so each command writes what it measured under OUT (at most 8 files, each under 16 MiB, none deeper than
# OUT/a/b/file: what the device tool brings back) and ends with OUT/summary.json, every command it ran named there.
#
#   bash scripts/gpu_window.sh --part check $OUT   # <= 4 min: the carried wheels; tests/test_cuda.py, and the rest of
#                                                  # the suite on the machine's other cores; hrm bench compiled at paper
#                                                  # size (HRM, TRM-MLP, batch 768); 10 compiled HRM steps profiled
#   bash scripts/gpu_window.sh --part train $OUT   # <= 6 min, same warm machine: hard 9x9 Sudoku built on all cores,
#                                                  # the paper-size HRM trained for a wall-clock budget with held-out
#                                                  # evaluations, then hrm eval --mmax 16 and --tta 8 --select vote
#   bash scripts/gpu_window.sh --smoke --part all OUT   # the same steps on the CPU at tiny sizes (tests/test_gpu_window.py)
#
# Every step runs under a limit drawn from its part's deadline, so a slow step is cut and reported, never the window.
# The budgets below can be set from the environment (GPU_WINDOW_*). Exit 0 when every step passed, 1 when one failed or
# was cut (summary.json says which), 2 on bad arguments.
set -uo pipefail
export LC_ALL=C

usage="usage: scripts/gpu_window.sh [--smoke] [--part check|train|all] OUT"
die() {
  echo "error: $*" >&2
  exit 2
}

smoke=0 part=all out=""
while (($#)); do
  case $1 in
  --smoke) smoke=1 ;;
  --part)
    (($# >= 2)) || die "--part needs a value: check, train or all"
    part=$2
    shift
    ;;
  --part=*) part=${1#--part=} ;;
  -h | --help)
    echo "$usage"
    exit 0
    ;;
  -*) die "unknown option $1 ($usage)" ;;
  *)
    [[ -z $out ]] || die "one OUT folder expected, got '$out' and '$1' ($usage)"
    out=$1
    ;;
  esac
  shift
done
case $part in check | train | all) ;; *) die "--part '$part' is not one of check, train, all" ;; esac
[[ -n $out ]] || die "OUT is missing: the folder to write the results to ($usage)"
[[ ! -e $out || -d $out ]] || die "OUT $out is not a folder"
mkdir -p -- "$out" 2>/dev/null || die "OUT $out cannot be created"
out=$(cd -- "$out" && pwd) || die "OUT $out cannot be entered"
probe="$out/.gpu_window_write_test"
{ : >"$probe" && rm -f "$probe"; } 2>/dev/null || die "OUT $out is not writable"
[[ -z $(ls -A "$out") ]] || die "OUT $out is not empty: give a new folder (at most 8 files come back from it)"

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo" || die "cannot enter the checkout $repo"
t_start=$SECONDS
PYTHON=${PYTHON:-python3}
# The cores this process may use (nproc would follow OMP_NUM_THREADS; a container may allow others than 0..N-1).
cpus=$("$PYTHON" -c 'import os; print(*sorted(os.sched_getaffinity(0)))' 2>/dev/null) || die "PYTHON $PYTHON does not run"
read -r -a allowed <<<"$cpus"
cores=${#allowed[@]}
# the training recipe: the fast preset issue 46 earned (docs/training.md, "The fast presets"); configs/sudoku.yaml is
# the paper's
RECIPE=${GPU_WINDOW_RECIPE:-configs/sudoku_fast.yaml}
TRM_CONFIG=configs/trm_sudoku.yaml

if ((smoke)); then
  mode=smoke
  export CUDA_VISIBLE_DEVICES="" # the CPU's steps even on a GPU machine (there the suite runs this beside the benches)
  work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-window-smoke.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  device=cpu
  compile=false # torch.compile on a 2-core CPU costs 30-80 s a process: the smoke proves the plumbing, not Inductor
  CHECK_SECONDS=${GPU_WINDOW_CHECK_SECONDS:-90} CUDA_TESTS_MIN=20
  TRAIN_PART_SECONDS=${GPU_WINDOW_TRAIN_PART_SECONDS:-85} EVAL_RESERVE=20
  TRAIN_SECONDS=${GPU_WINDOW_TRAIN_SECONDS:-4} EVAL_PERIOD=1
  tiny=(arch.hidden_size=32 arch.num_heads=2 arch.H_layers=1 arch.L_layers=1 arch.halt_max_steps=3
    arch.puzzle_emb_ndim=32)
  tiny_trm=(arch.hidden_size=32 arch.num_heads=2 arch.L_layers=1 arch.H_cycles=1 arch.L_cycles=2
    arch.halt_max_steps=3 arch.puzzle_emb_ndim=32)
  bench_batch=8 bench_steps=2 bench_warmup=1 profile_steps=2 profile_warmup=1
  suite_tests=(tests/test_gitignore.py tests/test_atomic.py) # a handful: the machinery, not the suite, is smoked
  train_batch=8 test_size=16 train_size=32 build_workers=1
  sizing="smoke: fixed tiny sizes"
  assumed_rate=100 assumed_note="a tiny HRM at batch 8 on one CPU core, about 100 examples/s"
else
  mode=gpu
  work=${GPU_WINDOW_WORK:-/tmp/hrm-gpu-window} # outside OUT: data, runs and checkpoints never come back
  device=cuda
  compile=true
  CHECK_SECONDS=${GPU_WINDOW_CHECK_SECONDS:-225} CUDA_TESTS_MIN=${GPU_WINDOW_CUDA_TESTS_MIN:-60}
  TRAIN_PART_SECONDS=${GPU_WINDOW_TRAIN_PART_SECONDS:-350} EVAL_RESERVE=40
  TRAIN_SECONDS=${GPU_WINDOW_TRAIN_SECONDS:-200} EVAL_PERIOD=60
  tiny=() tiny_trm=()
  bench_batch=768 bench_steps=10 bench_warmup=3 profile_steps=10 profile_warmup=3
  suite_tests=(tests --ignore=tests/test_cuda.py)
  test_size=1000 build_workers=$cores
  # The generator makes about 45 9x9 puzzles a second on a core, about 60% of them rated >= 1: a training set that
  # builds in about build_target seconds on every core, less the 1,000 held out, in whole thousands.
  build_target=${GPU_WINDOW_BUILD_SECONDS:-50}
  train_size=$(((45 * 60 * cores * build_target / 100 - test_size) / 1000 * 1000))
  ((train_size >= 1000)) || train_size=1000
  sizing="assumed 45 generated puzzles/s per core, 60% rated >= 1: ${build_target} s on $cores cores"
  if [[ $compile == true ]]; then
    assumed_rate=8380 assumed_note="docs/gpu.md: the paper Sudoku config compiled, batch 768, one H100: 8,380 ex/s"
  else
    assumed_rate=3523 assumed_note="docs/gpu.md: the paper Sudoku config eager, batch 768, one H100: 3,523 ex/s"
  fi
fi
if [[ $part != check ]]; then # the recipe must load before any work; its batch spaces the evaluations (not the smoke's)
  recipe_batch=$("$PYTHON" - "$RECIPE" 2>&1 <<'PY'
import sys

try:
    from hrm_reason.config import load_config
    from hrm_reason.errors import UserError

    print(load_config(sys.argv[1]).global_batch_size)
except (ImportError, UserError) as error:
    sys.exit(str(error).splitlines()[0])
PY
  ) || die "GPU_WINDOW_RECIPE: $recipe_batch"
  ((smoke)) || train_batch=$recipe_batch
fi
mkdir -p "$work"
# What an earlier call on this machine left, except bench-hrm.json: the train part's measured rate.
rm -f "$work"/{steps.tsv,suite.out,machine.json,profile-hrm.json,rate.json,train-plan.json} "$work"/*.results.jsonl
log="$out/log.txt"
step_log=$log
: >"$log"

# Foreground steps (the GPU's) on the first half of the cores, the CPU suite on the other half, so that the suite
# runs beside the benches without taking their host cores.
fg_cpus="" bg_cpus="" suite_workers=$cores
if command -v taskset >/dev/null && ((cores >= 2)); then
  half=$((cores / 2))
  fg_cpus=$(IFS=, && echo "${allowed[*]:0:half}") bg_cpus=$(IFS=, && echo "${allowed[*]:half}")
  suite_workers=$((cores - half))
fi
export PYTHONPATH="$repo/scripts${PYTHONPATH:+:$PYTHONPATH}" # -p gpu_window: the suite's results as they come

ledger() { # NAME RC SECONDS LIMIT CPUS COMMAND
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$work/steps.tsv"
}

since() { # seconds since $1 (an $EPOCHREALTIME)
  awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'
}

run_step() { # NAME CAP CPUS CMD...: CMD under min(CAP, what $deadline leaves), its output to $step_log, in the ledger
  local name=$1 cap=$2 cpus=$3 limit cmd rc t0
  shift 3
  limit=$((deadline - SECONDS))
  ((cap < limit)) && limit=$cap
  printf -v cmd '%q ' "$@"
  cmd=${cmd% }
  if ((limit < 3)); then
    ledger "$name" skipped 0 0 "$cpus" "$cmd"
    printf '\n## %s: skipped, no time left\n' "$name" | tee -a "$step_log"
    return 1
  fi
  local pin=()
  [[ -n $cpus ]] && pin=(taskset -c "$cpus")
  printf '\n## %s (limit %s s%s)\n$ %s\n' "$name" "$limit" "${cpus:+, cpus $cpus}" "$cmd" >>"$step_log"
  # A step whose output is a returned file of its own is named in the log too (the suite's output joins it later).
  [[ $step_log != "$log" && $step_log == "$out"/* ]] &&
    printf '\n## %s (limit %s s%s)\n$ %s\n(output: %s)\n' "$name" "$limit" "${cpus:+, cpus $cpus}" "$cmd" \
      "${step_log#"$out"/}" >>"$log"
  echo "## $name (limit $limit s) ..."
  t0=$EPOCHREALTIME
  timeout -k 10 "$limit" "${pin[@]}" "$@" >>"$step_log" 2>&1
  rc=$?
  ledger "$name" "$rc" "$(since "$t0")" "$limit" "$cpus" "$cmd"
  echo "## $name: exit $rc after $(since "$t0") s"
  return $rc
}

if command -v hrm >/dev/null; then hrm=(hrm); else hrm=("$PYTHON" -m cli); fi

setup() { # the carried wheels (scripts/device_wheels.sh) where the machine lacks them; the smoke uses this venv
  local t0=$EPOCHREALTIME rc=0
  if ((smoke)); then
    ledger setup 0 0 0 "" "none: --smoke runs in this environment ($PYTHON)"
  elif [[ -x /tmp/bin/hrm ]] && PYTHONPATH="/tmp/site:$repo" "$PYTHON" -c "import pydantic, typer, hrm_reason" 2>/dev/null; then
    export PYTHONPATH="/tmp/site:$repo:$PYTHONPATH" PATH="/tmp/bin:$PATH"
    hrm=(hrm)
    ledger setup 0 "$(since "$t0")" 0 "" "none: /tmp/site already holds the wheels (an earlier call on this machine)"
  elif ! compgen -G ".whl/*.whl" >/dev/null; then
    echo "error: no wheels in .whl/: run bash scripts/device_wheels.sh where PyPI answers, and carry .whl" |
      tee -a "$log" >&2
    ledger setup 1 0 0 "" ". scripts/device_setup.sh"
    return 1
  else
    printf '\n## setup\n$ . scripts/device_setup.sh\n' >>"$log"
    # shellcheck source=scripts/device_setup.sh
    . scripts/device_setup.sh >>"$log" 2>&1 || rc=$?
    export PYTHONPATH="$repo/scripts:$PYTHONPATH"
    hrm=(hrm)
    ledger setup "$rc" "$(since "$t0")" 0 "" ". scripts/device_setup.sh"
  fi
  return $rc
}

machine() { # the GPU, the libraries and the commit, for the summary
  local top commit="" dirty="" source
  top=$(git -C "$repo" rev-parse --show-toplevel 2>/dev/null)
  if [[ $top == "$repo" ]]; then
    commit=$(git -C "$repo" rev-parse HEAD) source=git
    dirty=$([[ -n $(git -C "$repo" status --porcelain --untracked-files=no) ]] && echo true || echo false)
  elif [[ -n ${HRM_GIT_COMMIT:-} ]]; then
    commit=$HRM_GIT_COMMIT source="HRM_GIT_COMMIT (no .git on this machine)"
  else
    source="unknown: no .git on this machine; pass HRM_GIT_COMMIT=\$(git rev-parse HEAD)"
  fi
  local driver
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)
  "$PYTHON" - "$work/machine.json" "$commit" "$dirty" "$source" "$driver" "$cores" <<'PY' >>"$log" 2>&1
import json, platform, sys
import torch
path, commit, dirty, source, driver, cores = sys.argv[1:]
cuda = torch.cuda.is_available()
record = {
    "gpu": torch.cuda.get_device_name(0) if cuda else None,
    "driver": driver or None,
    "torch": torch.__version__,
    "cuda": torch.version.cuda,
    "python": platform.python_version(),
    "cores": int(cores),
    "git": {"commit": commit or None, "dirty": {"true": True, "false": False}.get(dirty), "source": source},
}
open(path, "w").write(json.dumps(record) + "\n")
PY
}

pytest_cmd() { # RESULTS WORKERS TESTS...: sets PYTEST to pytest on TESTS, each result appended to RESULTS as it comes
  local results=$1 workers=$2
  shift 2
  local parallel=()
  if ((workers > 1)) && "$PYTHON" -c "import xdist" 2>/dev/null; then parallel=(-n "$workers"); fi
  PYTEST=(env OMP_NUM_THREADS=1 GPU_WINDOW_RESULTS="$results" "$PYTHON" -m pytest -p gpu_window -p no:cacheprovider
    -p no:randomly --tb=short -rfE -W ignore::pytest.PytestWarning "${parallel[@]}" "$@")
}

check_part() {
  mkdir -p "$out/check"
  local check_deadline=$((part_clock + CHECK_SECONDS)) bg
  deadline=$check_deadline
  # The suite on the CPU cores the benches leave, until the part's deadline (device-explicit: tests/conftest.py fails
  # a test that leaves `device` at auto, which here would run on the GPU).
  pytest_cmd "$work/suite.results.jsonl" "$suite_workers" "${suite_tests[@]}"
  (step_log="$work/suite.out" run_step suite "$CHECK_SECONDS" "$bg_cpus" "${PYTEST[@]}" >/dev/null) &
  bg=$!
  # The GPU's steps, one at a time so that no two share it; the benches leave CUDA_TESTS_MIN to the CUDA tests.
  deadline=$((check_deadline - CUDA_TESTS_MIN))
  rm -f "$work/bench-hrm.json"
  run_step bench_hrm 150 "$fg_cpus" "${hrm[@]}" bench -c configs/sudoku.yaml --batch-size "$bench_batch" \
    --steps "$bench_steps" --warmup "$bench_warmup" --json "$out/check/bench-hrm.json" data_path=/nonexistent \
    device="$device" compile="$compile" "${tiny[@]}"
  [[ -f $out/check/bench-hrm.json ]] && cp "$out/check/bench-hrm.json" "$work/bench-hrm.json"
  step_log="$out/check/profile-hrm.txt" run_step profile_hrm 90 "$fg_cpus" "$PYTHON" benchmarks/profile_cpu.py \
    -c configs/sudoku.yaml --batch-size "$bench_batch" --steps "$profile_steps" --warmup "$profile_warmup" \
    --json "$work/profile-hrm.json" data_path=/nonexistent device="$device" compile="$compile" "${tiny[@]}"
  run_step bench_trm_mlp 150 "$fg_cpus" "${hrm[@]}" bench -c "$TRM_CONFIG" --batch-size "$bench_batch" \
    --steps "$bench_steps" --warmup "$bench_warmup" --json "$out/check/bench-trm_mlp.json" data_path=/nonexistent \
    device="$device" compile="$compile" "${tiny_trm[@]}"
  deadline=$check_deadline
  pytest_cmd "$work/cuda_tests.results.jsonl" "$suite_workers" tests/test_cuda.py
  run_step cuda_tests "$CHECK_SECONDS" "$fg_cpus" "${PYTEST[@]}"
  wait "$bg"
  printf '\n# the suite, run beside the steps above\n' >>"$log"
  cat "$work/suite.out" >>"$log" 2>/dev/null
}

train_part() {
  mkdir -p "$out/train"
  local part_deadline=$((part_clock + TRAIN_PART_SECONDS))
  deadline=$part_deadline
  rm -rf "$work/train"
  mkdir -p "$work/train"
  local data="$work/train/sudoku9-d1" run="$work/train/run" every
  run_step build 120 "" "${hrm[@]}" build-data sudoku --source generate --box 3x3 --min-difficulty 1 \
    --strict-split solution --train-size "$train_size" --test-size "$test_size" --workers "$build_workers" --seed 0 \
    --quiet --out "$data"
  "$PYTHON" - "$work/train-plan.json" "$RECIPE" "$data" "$build_workers" "$sizing" <<'PY'
import json, sys
path, recipe, data, workers, sizing = sys.argv[1:]
open(path, "w").write(json.dumps({"recipe": recipe, "data": data, "workers": int(workers), "sizing": sizing}) + "\n")
PY
  every=$("$PYTHON" scripts/gpu_window.py eval-steps --bench "$work/bench-hrm.json" --compile "$compile" \
    --batch "$train_batch" --assumed "$assumed_rate" --source-note "$assumed_note" --period "$EVAL_PERIOD" \
    --out "$work/rate.json") || every=100
  deadline=$((part_deadline - EVAL_RESERVE)) # SIGTERM at the limit: the run saves a checkpoint and stops
  local size=()
  ((smoke)) && size=(global_batch_size="$train_batch")
  run_step train $((TRAIN_SECONDS + 120)) "" "${hrm[@]}" train -c "$RECIPE" data_path="$data" run_dir="$run" \
    device="$device" compile="$compile" max_seconds="$TRAIN_SECONDS" budget_clock=wall augment=symmetry \
    eval_every_steps="$every" eval_max_examples="$test_size" checkpoint_every_eval=false "${size[@]}" "${tiny[@]}" \
    --quiet
  [[ -f $run/metrics.jsonl ]] && cp "$run/metrics.jsonl" "$out/train/metrics.jsonl"
  deadline=$part_deadline
  run_step eval_mmax16 90 "" "${hrm[@]}" eval --run "$run" --mmax 16 --device "$device" --batch-size "$test_size" \
    --json "$out/train/eval-mmax16.json" --quiet
  run_step eval_tta8_vote 120 "" "${hrm[@]}" eval --run "$run" --tta 8 --select vote --device "$device" \
    --batch-size "$test_size" --json "$out/train/eval-tta8-vote.json" --quiet
}

deadline=$((SECONDS + 600))
part_clock=$t_start # a part's limit counts from the script's start for the first part (its setup), else its own
if setup; then
  machine
  [[ $part == train ]] || check_part
  part_clock=$SECONDS
  [[ $part == check ]] || train_part
fi
"$PYTHON" scripts/gpu_window.py summary "$work" "$out" --mode "$mode" --part "$part" --seconds $((SECONDS - t_start)) ||
  { echo "error: $out/summary.json could not be written (above)" >&2 && exit 1; }
"$PYTHON" scripts/gpu_window.py fit "$out" || exit 1
echo "wrote $out/summary.json after $((SECONDS - t_start)) s"
awk -F'\t' '$2 != "0" { bad = 1 } END { exit bad }' "$work/steps.tsv"
