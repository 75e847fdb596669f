#!/usr/bin/env bash
# The hard-rung pilot (docs/results.md, "Choosing the hard rung"): for each candidate rung, its strict build, then HRM
# (the rung's recipe) and the one-pass transformer (transformer_direct, same parameters and recipe) for 600
# CPU-seconds of training each, one seed, evaluated at up to 8 segments and with ACT by `hrm compare`.
# Usage: bash benchmarks/hard_rung_pilot.sh [--list] [CANDIDATE ...]   (default: every candidate, in order)
# Data goes to data/pilot/<candidate>, runs to runs/pilot/<candidate>; a rerun skips what is built and finished.
# Keep the records: python benchmarks/keep_records.py runs/pilot/<candidate> benchmarks/pilot-runs/<candidate>
set -euo pipefail
cd "$(dirname "$0")/.."

SUDOKU="global_batch_size=64 lr=2e-3 lr_warmup_steps=100 lr_min_ratio=0.1 weight_decay=1.0 puzzle_emb_lr=1e-3 \
puzzle_emb_weight_decay=1.0 ema=0.99 augment=symmetry epochs=100000 eval_interval=16"
MAZE="global_batch_size=32 lr=1e-3 lr_warmup_steps=100 lr_min_ratio=0.1 weight_decay=1.0 puzzle_emb_lr=1e-3 \
puzzle_emb_weight_decay=1.0 ema=0.99 augment=symmetry epochs=100000 eval_interval=1"
BUDGET="max_seconds=600 budget_clock=cpu schedule_over=seconds max_steps=1000000 arch.q_target=next_segment"

# candidate | build arguments of `hrm` | HRM's config | recipe | --metric
CANDIDATES="
sudoku6x6-min|build-data sudoku --source generate --box 2x3 --strict-split solution --train-size 1000 --test-size 1000 --seed 0|configs/quickstart.yaml|$SUDOKU|exact_accuracy
sudoku9x9-singles|build-data sudoku --source generate --box 3x3 --max-difficulty 0 --strict-split solution --train-size 1000 --test-size 1000 --seed 0|configs/quickstart.yaml|$SUDOKU|exact_accuracy
maze9x9|build-data maze --source generate --size 9 --strict-split solution --train-size 10000 --test-size 1000 --seed 0|configs/ladder_maze6x6.yaml|$MAZE|optimal_path_accuracy
maze13x13|build-data maze --source generate --size 13 --strict-split solution --train-size 10000 --test-size 1000 --seed 0|configs/ladder_maze6x6.yaml|$MAZE|optimal_path_accuracy
"

if [ "${1:-}" = --list ]; then printf '%s\n' "$CANDIDATES" | sed '/^$/d'; exit 0; fi
read -r -a hrm <<< "${HRM:-hrm}"
while IFS='|' read -r name build config recipe metric; do
  [ -n "$name" ] || continue
  if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then continue; fi
  data=data/pilot/$name
  read -r -a argv <<< "$build"
  [ -d "$data" ] || "${hrm[@]}" "${argv[@]}" --out "$data" --quiet < /dev/null
  read -r -a over <<< "$recipe $BUDGET data_path=$data"
  OMP_NUM_THREADS=1 "${hrm[@]}" compare "$config" configs/transformer_direct_quick.yaml --seeds 1 --out "runs/pilot/$name" \
    --mmax 8 --jobs 2 --quiet --targets 0.1,0.3 --metric "$metric" "${over[@]}" < /dev/null
done <<< "$CANDIDATES"
