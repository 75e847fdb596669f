#!/usr/bin/env bash
# Your own tasks (issue 57; docs/results.md, "Your own tasks: three examples"): three puzzles the project does not
# ship, each made as a user makes one (a generator script under examples/ writing the documented file format, then only
# the README's commands), trained and evaluated as a user would:
#   data        python examples/TASK/generate.py --out data/examples/TASK-src   (its defaults)
#               hrm build-data file .../train.jsonl --test .../test.jsonl --check examples/TASK/check.py:valid
#               plus the symmetries the task keeps (TASKS below) --out data/examples/TASK
#   models      hrm                 HRM, configs/your_task.yaml (the quickstart's model and recipe)
#               transformer_direct  the one-pass transformer of HRM's size: configs/quickstart_transformer.yaml with
#                                   one segment (arch.halt_max_steps=1)
#               transformer_act     the same transformer in HRM's ACT loop (configs/quickstart_transformer.yaml)
#               trm                 TRM-MLP (configs/quickstart_trm.yaml)
#   each on the quickstart's recipe, one thread, BUDGET training CPU-seconds (the LR schedule runs over them), then
#   hrm eval --mmax 8 --json eval8.json, and where the task declares symmetries --mmax 4 --tta 8 --select vote
#   --json eval-tta8.json.
#
#   bash benchmarks/your_tasks_study.sh TASK [--parallel N] [MODEL-SEED ...]   # default: hrm-0 hrm-1 hrm-2
#   bash benchmarks/your_tasks_study.sh TASK --data                           # the data alone
#   python benchmarks/keep_records.py runs/your-tasks/TASK benchmarks/your-tasks-runs/TASK
#   hrm compare --runs benchmarks/your-tasks-runs/TASK --out DIR
#
# Runs go to runs/your-tasks/TASK/runs/MODEL/seedK. A run whose records are kept (benchmarks/your-tasks-runs/TASK) is
# skipped; a run that exists is resumed (or left as it is when finished); an evaluation whose JSON exists is not redone.
set -euo pipefail
cd "$(dirname "$0")/.."
source benchmarks/parallel.sh
HRM=${HRM:-.venv/bin/hrm}
PYTHON=${PYTHON:-.venv/bin/python}
BUDGET=${BUDGET:-900}
export OMP_NUM_THREADS=1

# task | the symmetries it keeps, declared (docs/tasks.md): a rotated or reflected N-Queens board completes to the moved
# solution; Life's rule and the centre crop commute with the square's maps; Futoshiki's signs point one way, so none.
TASKS="
nqueens|--dihedral
futoshiki|
life|--dihedral
"
if [ "${1:-}" = --list ]; then printf '%s\n' "$TASKS" | sed '/^$/d'; exit 0; fi

task=${1:?usage: bash benchmarks/your_tasks_study.sh TASK [--parallel N] [MODEL-SEED ...]}
shift
line=$(printf '%s\n' "$TASKS" | grep "^$task|") \
  || { echo "error: TASK: $task is not one of $(printf '%s\n' "$TASKS" | cut -d'|' -f1 | xargs)" >&2; exit 2; }
symmetries=${line#*|}
data_only=
if [ "${1:-}" = --data ]; then data_only=1; shift; fi
parallel=1
if [ "${1:-}" = --parallel ]; then parallel=$2; shift 2; fi
jobs=("$@")
[ ${#jobs[@]} -gt 0 ] || jobs=(hrm-0 hrm-1 hrm-2)

src=data/examples/$task-src
data=data/examples/$task

config_of() {
  case $1 in
    hrm) echo configs/your_task.yaml ;;
    transformer_direct) echo "configs/quickstart_transformer.yaml arch.halt_max_steps=1" ;;
    transformer_act) echo configs/quickstart_transformer.yaml ;;
    trm) echo configs/quickstart_trm.yaml ;;
    *) echo "error: MODEL-SEED: no model $1 (hrm, transformer_direct, transformer_act, trm)" >&2; exit 2 ;;
  esac
}

one() {
  local model=${1%-*} seed=${1##*-} run kept config
  run=runs/your-tasks/$task/runs/$model/seed$seed
  kept=benchmarks/your-tasks-runs/$task/runs/$model/seed$seed
  if [ -f "$kept/eval8.json" ]; then echo "$model seed $seed: kept in $kept, skipped" >&2; return; fi
  if [ -f "$run/config.yaml" ]; then
    "$HRM" train --run-dir "$run" --resume --quiet < /dev/null
  else
    read -r -a config <<< "$(config_of "$model")"
    "$HRM" train -c "${config[@]}" max_seconds="$BUDGET" budget_clock=cpu schedule_over=seconds max_steps=null \
      epochs=1000 eval_interval=2 data_path="$data" seed="$seed" run_dir="$run" --quiet < /dev/null
  fi
  [ -f "$run/eval8.json" ] || "$HRM" eval --run "$run" --mmax 8 --json "$run/eval8.json" --quiet
  if [ -n "$symmetries" ] && [ ! -f "$run/eval-tta8.json" ]; then
    "$HRM" eval --run "$run" --mmax 4 --tta 8 --select vote --json "$run/eval-tta8.json" --quiet
  fi
  echo "$model seed $seed: done ($run)" >&2
}

[ -n "$data_only" ] || for job in "${jobs[@]}"; do  # every job named right before the data is built or any run starts
  [[ $job =~ ^[a-z0-9._-]+-[0-9]+$ ]] || { echo "error: MODEL-SEED: $job is not MODEL-SEED (e.g. hrm-0)" >&2; exit 2; }
  config_of "${job%-*}" > /dev/null
done
[ -d "$src" ] || "$PYTHON" "examples/$task/generate.py" --out "$src"
read -r -a declared <<< "$symmetries"
[ -d "$data" ] || "$HRM" build-data file "$src/train.jsonl" --test "$src/test.jsonl" "${declared[@]}" \
  --check "examples/$task/check.py:valid" --out "$data" --quiet
[ -z "$data_only" ] || exit 0
run_parallel "$parallel" one "${jobs[@]}"
