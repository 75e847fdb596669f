#!/usr/bin/env bash
# The language-model heads' comparison (issue 42; docs/results.md, "The language-model heads"): HRM-LM against its two
# controls, UniTF-LM (one block iterated: flat shared-weight iteration) and Transformer-LM (the HRM-LM paper's T-L4: four
# blocks, no iteration), at about equal parameters (1.04M, 1.12M, 1.08M: the quick presets' d and depth) and equal
# training time, 600 CPU-seconds each on one thread, 3 seeds, next-token prediction on the project's offline corpus
# (this Python's standard library source, bytes). Every head keeps its quick preset's recipe (lr 1e-3, warmup 40,
# AdamW); the LR schedule spans the time budget, so every run completes its decay. Evaluations every 250 steps and at
# the end: validation cross-entropy over the first 131,072 tokens of the val split, the same tokens for every run.
#
# A fourth arm, hrm_lm-wc, is HRM-LM with its recurrent blocks at the controls' width-corrected init (arch.init_c=2:
# std 0.04 at d = 128, where the HRM-LM paper's 0.02/sqrt(M), set at d = 4096, gives 0.01; docs/results.md says why).
#
#   bash benchmarks/lm_study.sh [--parallel N] [ARM-SEED ...]   # ARM: hrm_lm, unitf_lm, transformer_lm, hrm_lm-wc; default: all, seeds 0-2
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
# arm | its preset | overrides
ARMS='
hrm_lm|hrm_lm_quick|
unitf_lm|unitf_lm_quick|
transformer_lm|transformer_lm_quick|
hrm_lm-wc|hrm_lm_quick|arch.init_c=2
'
NAMES=$(printf '%s\n' "$ARMS" | cut -d'|' -f1 | xargs)

parallel=1
if [ "${1:-}" = --parallel ]; then parallel=$2; shift 2; fi
jobs=("$@")
if [ ${#jobs[@]} -eq 0 ]; then
  for seed in 0 1 2; do for arm in $NAMES; do jobs+=("$arm-$seed"); done; done
fi
for job in "${jobs[@]}"; do
  [[ " $NAMES " == *" ${job%-*} "* && ${job##*-} =~ ^[0-9]+$ ]] \
    || { echo "error: ARM-SEED: $job is not one of $NAMES with a seed, e.g. hrm_lm-0" >&2; exit 2; }
done

data=data/text-stdlib
[ -d "$data" ] || "$HRM" build-data text --input stdlib --out "$data" --quiet < /dev/null

one() {
  local arm=${1%-*} seed=${1##*-} run kept preset extra over
  run=runs/lm-study/runs/$arm/seed$seed
  kept=benchmarks/lm-study-runs/runs/$arm/seed$seed
  if [ -f "$kept/metrics.jsonl" ]; then echo "$arm seed $seed: kept in $kept, skipped" >&2; return; fi
  if [ -f "$run/config.yaml" ]; then
    "$HRM" train --run-dir "$run" --resume --quiet < /dev/null
  else
    IFS='|' read -r _ preset extra <<< "$(printf '%s\n' "$ARMS" | grep "^$arm|")"
    read -r -a over <<< "$BUDGET $extra"
    "$HRM" train -c "configs/$preset.yaml" "${over[@]}" data_path="$data" seed="$seed" run_dir="$run" --quiet < /dev/null
  fi
  echo "$arm seed $seed: done ($run)" >&2
}

run_parallel "$parallel" one "${jobs[@]}"
