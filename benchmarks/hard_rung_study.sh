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
# With --levers, issue 46's lever study on the rung instead (docs/training.md, "Levers"): HRM with the study's recipe
# and budget plus one lever each (LEVERS below; `best`, the arm without one, trains as the study's own `hrm` runs did,
# in the lever arms' sitting: the budget is CPU-seconds, so final accuracies compare only on one machine), trained only
# (their training evaluations at the trained segments give the final accuracy and the time to each target), into
# runs/hard-rung-levers/RUNG/runs/ARM/seedK:
#
#   bash benchmarks/hard_rung_study.sh RUNG --levers [--parallel N] [ARM-SEED ...]   # default: every arm, seed 0, 1, 2
#   bash benchmarks/hard_rung_study.sh --list-levers                                   # the arms and their overrides
#   python benchmarks/keep_records.py runs/hard-rung-levers/RUNG benchmarks/hard-rung-levers/RUNG
#   hrm compare --runs benchmarks/hard-rung-levers/RUNG benchmarks/hard-rung-runs/RUNG/runs/hrm/seed? --out DIR ...
#
# A run whose records are kept (benchmarks/hard-rung-runs/RUNG, benchmarks/hard-rung-levers/RUNG) is skipped; a run that exists is resumed (or left as it
# is when finished); an evaluation whose JSON exists is not redone.
set -euo pipefail
cd "$(dirname "$0")/.."
source benchmarks/parallel.sh
HRM=${HRM:-.venv/bin/hrm}
export OMP_NUM_THREADS=1
NOISE=0.1

# arm | overrides of the rung's HRM recipe: none (`best`, the recipe itself), the original code's optimizer recipe (its
# Q target, no EMA, lr 1e-4 constant after the warmup, the puzzle embedding's lr 1e-4; its weight decay 1.0 is the
# recipe's), Muon at its default muon_lr 0.02 and at 5e-3, CGAR (the depth curriculum and supervision weighting 0.7),
# half the batch, and the quickstart rung's best combination (benchmarks/levers.sh): Muon at 5e-3 with half the batch;
# last, that combination with CGAR, which the quickstart rung left out and the hard rung found as fast as Muon to 50%.
CGAR='depth_curriculum=[{"until":0.3,"H_cycles":1,"L_cycles":1},{"until":0.6,"H_cycles":2,"L_cycles":1}] segment_loss_decay=0.7'
LEVERS="
best|
original|arch.q_target=extra_forward ema=null lr=1e-4 lr_min_ratio=1.0 puzzle_emb_lr=1e-4
muon|optimizer=muon
muon-lr5e-3|optimizer=muon muon_lr=5e-3
cgar|$CGAR
batch32|global_batch_size=32
muon-lr5e-3-batch32|optimizer=muon muon_lr=5e-3 global_batch_size=32
muon-lr5e-3-batch32-cgar|optimizer=muon muon_lr=5e-3 global_batch_size=32 $CGAR
"
if [ "${1:-}" = --list-levers ]; then printf '%s\n' "$LEVERS" | sed '/^$/d'; exit 0; fi

rung=${1:?usage: bash benchmarks/hard_rung_study.sh RUNG [--parallel N] [MODEL-SEED ...]}
shift
line=$(HRM="$HRM" bash benchmarks/hard_rung_pilot.sh --list | grep "^$rung|") \
  || { echo "error: RUNG: $rung is not a candidate of benchmarks/hard_rung_pilot.sh --list" >&2; exit 2; }
IFS='|' read -r _ build hrm_config recipe metric <<< "$line"
levers=
if [ "${1:-}" = --levers ]; then levers=1; shift; fi
parallel=1
if [ "${1:-}" = --parallel ]; then parallel=$2; shift 2; fi
jobs=("$@")
if [ ${#jobs[@]} -eq 0 ]; then
  for seed in 0 1 2; do
    if [ -n "$levers" ]; then
      while IFS='|' read -r arm _; do [ -z "$arm" ] || jobs+=("$arm-$seed"); done <<< "$LEVERS"
    else
      for model in hrm transformer_direct transformer_act trm unitf; do jobs+=("$model-$seed"); done
    fi
  done
fi

data=data/pilot/$rung
trm=configs/trm_quick.yaml
[[ $rung == maze* ]] && trm=configs/trm_att_quick.yaml

lever_of() {
  local line
  line=$(printf '%s\n' "$LEVERS" | grep "^$1|") \
    || { echo "error: ARM-SEED: no lever arm $1 ($(printf '%s\n' "$LEVERS" | cut -d'|' -f1 | xargs))" >&2; exit 2; }
  echo "${line#*|}"
}

# train_run RUN CONFIG SEED [OVERRIDE ...]: resume RUN where it exists (a finished run is left as it is), else train
# CONFIG with the rung's recipe and budget, then the overrides (given last, so they win).
train_run() {
  local run=$1 config=$2 seed=$3 over
  shift 3
  if [ -f "$run/config.yaml" ]; then
    "$HRM" train --run-dir "$run" --resume --quiet < /dev/null
    return
  fi
  read -r -a over <<< "$recipe max_seconds=1800 budget_clock=cpu schedule_over=seconds max_steps=1000000"
  "$HRM" train -c "$config" "${over[@]}" "$@" data_path="$data" seed="$seed" run_dir="$run" --quiet < /dev/null
}

# One lever arm's run: the rung's HRM recipe and budget with the arm's overrides.
lever() {
  local arm=${1%-*} seed=${1##*-} run kept extra
  run=runs/hard-rung-levers/$rung/runs/$arm/seed$seed
  kept=benchmarks/hard-rung-levers/$rung/runs/$arm/seed$seed
  if [ -f "$kept/metrics.jsonl" ]; then echo "$arm seed $seed: kept in $kept, skipped" >&2; return; fi
  read -r -a extra <<< "$(lever_of "$arm")"
  train_run "$run" "$hrm_config" "$seed" arch.q_target=next_segment "${extra[@]}"
  echo "$arm seed $seed: done ($run)" >&2
}

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
  local model=${1%-*} seed=${1##*-} run kept
  run=runs/hard-rung/$rung/runs/$model/seed$seed
  kept=benchmarks/hard-rung-runs/$rung/runs/$model/seed$seed
  if [ -f "$kept/eval16.json" ] && { [ "$model" != hrm ] && [ "$model" != trm ] || [ -f "$kept/eval-noise8.json" ]; }; then
    echo "$model seed $seed: kept in $kept, skipped" >&2
    return
  fi
  local q=()
  [ "$model" = trm ] || q=(arch.q_target=next_segment)  # TRM has one halting logit: no continue target
  train_run "$run" "$(config_of "$model")" "$seed" "${q[@]}"
  [ -f "$run/eval16.json" ] || "$HRM" eval --run "$run" --mmax 16 --batch-size 250 --json "$run/eval16.json" --quiet
  if [ "$model" = hrm ] || [ "$model" = trm ]; then
    [ -f "$run/eval-tta8.json" ] || "$HRM" eval --run "$run" --mmax 4 --tta 8 --select vote --batch-size 250 \
      --json "$run/eval-tta8.json" --quiet
    [ -f "$run/eval-noise8.json" ] || "$HRM" eval --run "$run" --mmax 4 --samples 8 --noise "$NOISE" \
      --select q --batch-size 250 --json "$run/eval-noise8.json" --quiet
  fi
  echo "$model seed $seed: done ($run)" >&2
}

check=config_of run_job=one what=MODEL-SEED example=hrm-0
[ -z "$levers" ] || { check=lever_of; run_job=lever; what=ARM-SEED; example=muon-0; }
for job in "${jobs[@]}"; do  # every job named right before the data is built or any run starts
  [[ $job =~ ^[a-z0-9._-]+-[0-9]+$ ]] || { echo "error: $what: $job is not $what (e.g. $example)" >&2; exit 2; }
  "$check" "${job%-*}" > /dev/null
done
read -r -a argv <<< "$build"
[ -d "$data" ] || "$HRM" "${argv[@]}" --out "$data" --quiet < /dev/null
run_parallel "$parallel" "$run_job" "${jobs[@]}"
