#!/usr/bin/env bash
# The lever study (docs/training.md, "Levers"): on the quickstart rung (easy 6x6 Sudoku, 1,000 held-out classes), the
# quickstart recipe before the study (configs/levers_base.yaml, arm `base`) and arms that change one lever each,
# several seeds per arm, one thread per run and several runs side by side; then `hrm compare --runs` gives each arm's
# training CPU time, steps and FLOPs to 50% and 80% exact accuracy (mean ± sd over seeds) and the curves. Every run has
# 992 steps of batch 64 (or as many examples at another batch) and is evaluated every 4 epochs.
# A finished run is skipped and an interrupted one resumed, so the study can be spread over several sittings.
# Usage: bash benchmarks/levers.sh [--list] [--seeds N] [--parallel P] [--runs DIR] [--out DIR] [ARM ...]
# HRM=/path/to/hrm runs another `hrm`. Data: the sudoku6x6-easy line of benchmarks/build_ladder.sh, at
# data/sudoku-6x6-easy (the quickstart's path; DATA=... for another).
set -euo pipefail

# arm | overrides of configs/levers_base.yaml (one change each; the next-segment arms combine two or three, and an arm
# named -<N>ep trains N of the base's 64 epochs). Issue 46's arms: `original` is the original code's optimizer recipe
# (lr 1e-4 constant after the warmup, weight decay 1.0, the puzzle embedding's lr 1e-4) at the rung's batch and steps;
# `best` is next-segment-ema0.99-wd1 (the quickstart's recipe) and each best-* arm adds one lever to it: Muon at its
# default muon_lr 0.02 and at 5e-3, CGAR (the depth curriculum and supervision weighting 0.7), half the batch; and the
# best combination, the levers whose mean FLOPs to 80% over 3 seeds beat the best's (docs/results.md, "Fastest to
# accuracy"): Muon at 5e-3 with half the batch.
ARMS='
base|
lr1e-3|lr=1e-3
lr4e-3|lr=4e-3
warmup0|lr_warmup_steps=0
constant-lr|lr_min_ratio=1.0
batch32|global_batch_size=32 max_steps=2000
batch128|global_batch_size=128 max_steps=500 epochs=72
wd1|weight_decay=1.0 puzzle_emb_weight_decay=1.0
ema|ema=0.999
ema0.99|ema=0.99
ema-warmup|ema=0.999 ema_warmup=true
explore0|arch.halt_exploration_prob=0
halt2|arch.halt_max_steps=2
no-augment|augment=none
depth-curriculum|depth_curriculum=[{"until":0.3,"H_cycles":1,"L_cycles":1},{"until":0.6,"H_cycles":2,"L_cycles":1}]
segment-decay|segment_loss_decay=0.7
next-segment|arch.q_target=next_segment
compile|compile=true
next-segment-ema0.99|arch.q_target=next_segment ema=0.99
next-segment-ema0.99-40ep|arch.q_target=next_segment ema=0.99 epochs=40
next-segment-ema0.99-wd1|arch.q_target=next_segment ema=0.99 weight_decay=1.0 puzzle_emb_weight_decay=1.0
next-segment-ema0.99-lr1e-3|arch.q_target=next_segment ema=0.99 lr=1e-3
original|lr=1e-4 lr_min_ratio=1.0 weight_decay=1.0 puzzle_emb_weight_decay=1.0 puzzle_emb_lr=1e-4
best-muon|arch.q_target=next_segment ema=0.99 weight_decay=1.0 puzzle_emb_weight_decay=1.0 optimizer=muon
best-muon-lr5e-3|arch.q_target=next_segment ema=0.99 weight_decay=1.0 puzzle_emb_weight_decay=1.0 optimizer=muon muon_lr=5e-3
best-cgar|arch.q_target=next_segment ema=0.99 weight_decay=1.0 puzzle_emb_weight_decay=1.0 depth_curriculum=[{"until":0.3,"H_cycles":1,"L_cycles":1},{"until":0.6,"H_cycles":2,"L_cycles":1}] segment_loss_decay=0.7
best-batch32|arch.q_target=next_segment ema=0.99 weight_decay=1.0 puzzle_emb_weight_decay=1.0 global_batch_size=32 max_steps=2000
best-muon-lr5e-3-batch32|arch.q_target=next_segment ema=0.99 weight_decay=1.0 puzzle_emb_weight_decay=1.0 optimizer=muon muon_lr=5e-3 global_batch_size=32 max_steps=2000
'

seeds=3 parallel=2 runs=runs/levers out=runs/levers-study wanted=()
while [ $# -gt 0 ]; do
  case $1 in --seeds | --parallel | --runs | --out)
    [ $# -ge 2 ] || { echo "error: $1 needs a value" >&2; exit 2; } ;;
  esac
  case $1 in
    --list) printf '%s\n' "$ARMS" | sed '/^$/d'; exit 0 ;;
    --seeds) seeds=$2; shift ;;
    --parallel) parallel=$2; shift ;;
    --runs) runs=$2; shift ;;
    --out) out=$2; shift ;;
    -*) echo "error: unknown option $1 (usage: levers.sh [--list] [--seeds N] [--parallel P] [--runs DIR] [--out DIR] [ARM ...])" >&2; exit 2 ;;
    *) wanted+=("$1") ;;
  esac
  shift
done
for arm in "${wanted[@]}"; do
  printf '%s\n' "$ARMS" | grep -q "^$arm|" || { echo "error: unknown arm $arm (see: levers.sh --list)" >&2; exit 2; }
done

export HRM=${HRM:-hrm} DATA=${DATA:-data/sudoku-6x6-easy} OMP_NUM_THREADS=1
one_run() {  # arm seed run_dir overrides...
  local arm=$1 seed=$2 dir=$3 log
  shift 3
  log=$dir.log
  read -r -a hrm <<< "$HRM"
  if [ -f "$dir/config.yaml" ]; then
    "${hrm[@]}" train --run-dir "$dir" --resume --quiet >> "$log" 2>&1
  else
    "${hrm[@]}" train -c configs/levers_base.yaml data_path="$DATA" eval_interval=4 seed="$seed" run_dir="$dir" \
      "$@" --quiet > "$log" 2>&1
  fi && echo "$arm seed $seed: done ($dir)" || { echo "$arm seed $seed: failed, see $log" >&2; return 1; }
}
export -f one_run

mkdir -p "$runs"
dirs=() lines=()
while IFS='|' read -r arm overrides; do
  [ -n "$arm" ] || continue
  if [ ${#wanted[@]} -gt 0 ] && ! printf '%s\n' "${wanted[@]}" | grep -qx "$arm"; then continue; fi
  for ((s = 0; s < seeds; s++)); do
    dirs+=("$runs/$arm-seed$s")
    lines+=("$arm $s $runs/$arm-seed$s $overrides")
  done
done <<< "$ARMS"

status=0
# one line per run; its words (no override holds a space) are one_run's arguments
printf '%s\n' "${lines[@]}" | xargs -d '\n' -n 1 -P "$parallel" bash -c 'set -f; one_run $1' _ || status=$?
read -r -a hrm <<< "$HRM"
"${hrm[@]}" compare --runs "${dirs[@]}" --out "$out" --targets 0.5,0.8
exit $status
