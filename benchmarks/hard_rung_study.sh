#!/usr/bin/env bash
# The hard rung's study (issue 42; docs/results.md, "The hard rung"): on a rung of the pilot (benchmarks/hard_rung_pilot.sh,
# same build and recipe), five architectures at HRM's size, 1,800 training CPU-seconds each on one thread:
#   hrm                HRM, the rung's preset (configs/quickstart.yaml on Sudoku, configs/ladder_maze6x6.yaml on mazes)
#   transformer_direct the one-pass transformer (configs/transformer_direct_quick.yaml)
#   transformer_act    the same transformer in HRM's ACT loop (configs/transformer_quick.yaml)
#   trm                TRM, its paper's variant: TRM-MLP on Sudoku (configs/trm_quick.yaml), TRM-Att on mazes
#                      (configs/trm_att_quick.yaml)
#   unitf              UniTF (configs/unitf_quick.yaml)
# Each run: `hrm train` into runs/hard-rung/RUNG/runs/MODEL/seedK, then `hrm eval --mmax 16 --json eval16.json` (ACT
# capped at 16 too); for hrm and trm also the test-time evaluations at the trained 4 segments (ACT capped at 4), each one
# pass at K = 8 that reports K = 1, 2, 4, 8:
#   eval-tta8.json     --tta 8 --select vote               (symmetry copies, majority vote)
#   eval-noise8.json   --samples 8 --noise 0.1 --select q  (noise at every segment, the most confident halting head)
# The noise scale 0.1 was fixed before any result (docs/results.md says why). Checkpoints stay in runs/ only.
#
#   bash benchmarks/hard_rung_study.sh RUNG [--parallel N] [MODEL-SEED ...]   # default: every model, seed 0, 1, 2
#   python benchmarks/keep_records.py runs/hard-rung/RUNG benchmarks/hard-rung-runs/RUNG
#   hrm compare --runs benchmarks/hard-rung-runs/RUNG --out DIR --targets T1,T2 --metric METRIC
#
# A run whose records are kept (benchmarks/hard-rung-runs/RUNG) is skipped; a run that exists is resumed (or left as it
# is when finished); an evaluation whose JSON exists is not redone.
set -euo pipefail
cd "$(dirname "$0")/.."
HRM=${HRM:-.venv/bin/hrm}
export OMP_NUM_THREADS=1
NOISE=0.1

rung=${1:?usage: bash benchmarks/hard_rung_study.sh RUNG [--parallel N] [MODEL-SEED ...]}
shift
line=$(HRM="$HRM" bash benchmarks/hard_rung_pilot.sh --list | grep "^$rung|") \
  || { echo "error: RUNG: $rung is not a candidate of benchmarks/hard_rung_pilot.sh --list" >&2; exit 2; }
IFS='|' read -r _ build hrm_config recipe metric <<< "$line"
parallel=1
if [ "${1:-}" = --parallel ]; then parallel=$2; shift 2; fi
jobs=("$@")
if [ ${#jobs[@]} -eq 0 ]; then
  for seed in 0 1 2; do
    for model in hrm transformer_direct transformer_act trm unitf; do jobs+=("$model-$seed"); done
  done
fi

data=data/pilot/$rung
read -r -a argv <<< "$build"
[ -d "$data" ] || "$HRM" "${argv[@]}" --out "$data" --quiet < /dev/null
trm=configs/trm_quick.yaml
[[ $rung == maze* ]] && trm=configs/trm_att_quick.yaml

config_of() {
  case $1 in
    hrm) echo "$hrm_config" ;;
    transformer_direct) echo configs/transformer_direct_quick.yaml ;;
    transformer_act) echo configs/transformer_quick.yaml ;;
    trm) echo "$trm" ;;
    unitf) echo configs/unitf_quick.yaml ;;
    *) echo "error: MODEL-SEED: no model $1 (hrm, transformer_direct, transformer_act, trm, unitf)" >&2; exit 2 ;;
  esac
}

one() {
  local model=${1%-*} seed=${1##*-} run config kept
  run=runs/hard-rung/$rung/runs/$model/seed$seed
  kept=benchmarks/hard-rung-runs/$rung/runs/$model/seed$seed
  if [ -f "$kept/eval16.json" ] && { [ "$model" != hrm ] && [ "$model" != trm ] || [ -f "$kept/eval-noise8.json" ]; }; then
    echo "$model seed $seed: kept in $kept, skipped" >&2
    return
  fi
  config=$(config_of "$model")
  if [ -f "$run/config.yaml" ]; then
    "$HRM" train --run-dir "$run" --resume --quiet < /dev/null
  else
    local over q=()
    read -r -a over <<< "$recipe max_seconds=1800 budget_clock=cpu schedule_over=seconds max_steps=1000000"
    [ "$model" = trm ] || q=(arch.q_target=next_segment)  # TRM has one halting logit: no continue target
    "$HRM" train -c "$config" "${over[@]}" "${q[@]}" data_path="$data" seed="$seed" run_dir="$run" --quiet < /dev/null
  fi
  [ -f "$run/eval16.json" ] || "$HRM" eval --run "$run" --mmax 16 --batch-size 250 --json "$run/eval16.json" --quiet
  if [ "$model" = hrm ] || [ "$model" = trm ]; then
    [ -f "$run/eval-tta8.json" ] || "$HRM" eval --run "$run" --mmax 4 --tta 8 --select vote --batch-size 250 \
      --json "$run/eval-tta8.json" --quiet
    [ -f "$run/eval-noise8.json" ] || "$HRM" eval --run "$run" --mmax 4 --samples 8 --noise "$NOISE" \
      --select q --batch-size 250 --json "$run/eval-noise8.json" --quiet
  fi
  echo "$model seed $seed: done ($run)" >&2
}

running=0
for job in "${jobs[@]}"; do
  config_of "${job%-*}" > /dev/null
  one "$job" &
  running=$((running + 1))
  if [ "$running" -ge "$parallel" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait
