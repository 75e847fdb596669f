#!/usr/bin/env bash
# The ARC rung study (issue 33; docs/results.md, "The ARC rung"): HRM (configs/arc_rung.yaml) and TRM
# (configs/arc_rung_trm.yaml) on the rung's six training families, 1,800 training CPU-seconds per run on one thread,
# then (a) hrm eval's voting on the build's evaluation tasks, with their trained rows and with the blank identifier,
# and (b) new tasks, (c) new families through hrm adapt: the blank identifier, adapted rows (with their curve), rows
# and network. benchmarks/arc_rung_study.py says what each split holds and makes the tables from the records.
#
#   bash benchmarks/arc_rung_study.sh [--parallel N] [MODEL-SEED ...]   # default: hrm-0 trm-0 hrm-1 trm-1 hrm-2 trm-2
#   python benchmarks/keep_records.py runs/arc-rung-study benchmarks/arc-rung-runs
#   python benchmarks/arc_rung_study.py table benchmarks/arc-rung-runs
#
# A run that exists is resumed (or left as it is when finished); an evaluation whose JSON exists is not redone.
set -euo pipefail
cd "$(dirname "$0")/.."
source benchmarks/parallel.sh
HRM=${HRM:-.venv/bin/hrm}
PYTHON=${PYTHON:-.venv/bin/python}
DATA=data/arc-rung-6f
TASKS=data/arc-rung-6f-tasks
RUNS=runs/arc-rung-study
STEPS=${STEPS:-400}
CURVE=${CURVE:-0,25,50,100,200,400}
export OMP_NUM_THREADS=1

parallel=1
if [ "${1:-}" = --parallel ]; then parallel=$2; shift 2; fi
jobs=("$@")
[ ${#jobs[@]} -gt 0 ] || jobs=(hrm-0 trm-0 hrm-1 trm-1 hrm-2 trm-2)

[ -d "$DATA" ] || "$HRM" build-data arc --source generate --split protocol --held-out-families crop,ray \
  --rung-tasks 200 --rung-eval-tasks 50 --num-aug 8 --seed 42 --out "$DATA" --quiet
[ -d "$TASKS" ] || "$PYTHON" benchmarks/arc_rung_study.py tasks "$TASKS"

one() {
  local model=$1 seed=$2 run config
  run=$RUNS/$model-seed$seed
  config=configs/arc_rung.yaml
  [ "$model" = hrm ] || config=configs/arc_rung_$model.yaml
  if [ -f "$run/config.yaml" ]; then
    "$HRM" train --run-dir "$run" --resume --quiet
  else
    "$HRM" train -c "$config" data_path="$DATA" seed="$seed" run_dir="$run" device=cpu --quiet
  fi
  [ -f "$run/eval-a.json" ] || "$HRM" eval --run "$run" --mmax 4 --device cpu --quiet --json "$run/eval-a.json" >/dev/null
  [ -f "$run/eval-a-blank.json" ] || "$HRM" eval --run "$run" --mmax 4 --device cpu --quiet --puzzle-id blank \
    --json "$run/eval-a-blank.json" >/dev/null
  local split folder
  for split in b c; do
    folder=$TASKS/new-tasks/arc-rung/evaluation
    [ $split = b ] || folder=$TASKS/new-families/arc-rung/evaluation
    [ -f "$run/eval-$split-blank.json" ] || "$HRM" adapt "$run" "$folder" --steps 0 --init blank --quiet \
      --out "$run/adapt/$split-blank" --json "$run/eval-$split-blank.json" >/dev/null
    [ -f "$run/eval-$split-rows.json" ] || "$HRM" adapt "$run" "$folder" --steps "$STEPS" --curve "$CURVE" --quiet \
      --seed "$seed" --out "$run/adapt/$split-rows" --json "$run/eval-$split-rows.json" >/dev/null
    [ -f "$run/eval-$split-whole.json" ] || "$HRM" adapt "$run" "$folder" --steps "$STEPS" --whole --quiet \
      --seed "$seed" --out "$run/adapt/$split-whole" --json "$run/eval-$split-whole.json" >/dev/null
  done
  echo "done $run"
}

one_job() { one "${1%-*}" "${1#*-}"; }
run_parallel "$parallel" one_job "${jobs[@]}"
