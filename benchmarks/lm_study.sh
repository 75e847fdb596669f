#!/usr/bin/env bash
# The language-model heads' comparison (issue 42; docs/results.md, "The language-model heads"): HRM-LM against its two
# controls, UniTF-LM (one block iterated: flat shared-weight iteration) and Transformer-LM (the HRM-LM paper's T-L4: four
# blocks, no iteration), at about equal parameters (1.04M, 1.12M, 1.08M: the quick presets' d and depth) and equal
# training time, 600 CPU-seconds each on one thread, 3 seeds, next-token prediction on the project's offline corpus
# (this Python's standard library source, bytes). Every head keeps its quick preset's recipe (lr 1e-3, warmup 40,
# AdamW); the LR schedule spans the time budget, so every run completes its decay. Evaluations every 250 steps and at
# the end: validation cross-entropy over the first 131,072 tokens of the val split, the same tokens for every run.
#
#   bash benchmarks/lm_study.sh [--parallel N] [MODEL-SEED ...]   # MODEL: hrm_lm, unitf_lm, transformer_lm; default: all, seeds 0-2
#   python benchmarks/keep_records.py runs/lm-study benchmarks/lm-study-runs
#   python benchmarks/lm_study.py table benchmarks/lm-study-runs
#
# A run whose records are kept (benchmarks/lm-study-runs) is skipped; a run that exists is resumed (or left as it is
# when finished). Checkpoints stay in runs/ only.
set -euo pipefail
cd "$(dirname "$0")/.."
source benchmarks/parallel.sh
HRM=${HRM:-.venv/bin/hrm}
export OMP_NUM_THREADS=1
BUDGET="max_seconds=600 budget_clock=cpu schedule_over=seconds max_steps=1000000 eval_every_steps=250 eval_max_tokens=131072"
MODELS="hrm_lm unitf_lm transformer_lm"

parallel=1
if [ "${1:-}" = --parallel ]; then parallel=$2; shift 2; fi
jobs=("$@")
if [ ${#jobs[@]} -eq 0 ]; then
  for seed in 0 1 2; do for model in $MODELS; do jobs+=("$model-$seed"); done; done
fi
for job in "${jobs[@]}"; do
  [[ " $MODELS " == *" ${job%-*} "* && ${job##*-} =~ ^[0-9]+$ ]] \
    || { echo "error: MODEL-SEED: $job is not one of $MODELS with a seed, e.g. hrm_lm-0" >&2; exit 2; }
done

data=data/text-stdlib
[ -d "$data" ] || "$HRM" build-data text --input stdlib --out "$data" --quiet < /dev/null

one() {
  local model=${1%-*} seed=${1##*-} run kept over
  run=runs/lm-study/runs/$model/seed$seed
  kept=benchmarks/lm-study-runs/runs/$model/seed$seed
  if [ -f "$kept/metrics.jsonl" ]; then echo "$model seed $seed: kept in $kept, skipped" >&2; return; fi
  if [ -f "$run/config.yaml" ]; then
    "$HRM" train --run-dir "$run" --resume --quiet < /dev/null
  else
    read -r -a over <<< "$BUDGET"
    "$HRM" train -c "configs/${model}_quick.yaml" "${over[@]}" data_path="$data" seed="$seed" \
      run_dir="$run" --quiet < /dev/null
  fi
  echo "$model seed $seed: done ($run)" >&2
}

run_parallel "$parallel" one "${jobs[@]}"
