#!/usr/bin/env bash
# `hrm bench` at paper size on a GPU: the paper Sudoku config (global batch 768, seq 81) and the ARC config (seq 900),
# eager and compiled, q_target extra_forward and next_segment. Writes one JSON per variant to DIR and prints a table.
# Usage, on the GPU machine after `. scripts/device_setup.sh`: bash benchmarks/gpu_bench.sh DIR [sudoku|arc|all]
set -uo pipefail
dir=${1:?usage: gpu_bench.sh DIR [sudoku|arc|all]}
which=${2:-all}
mkdir -p "$dir"
bench() {  # name, config, extra args...
  local name=$1 config=$2; shift 2
  hrm bench -c "$config" --json "$dir/$name.json" --steps 10 --warmup 3 data_path=/nonexistent device=cuda "$@" \
    > "$dir/$name.log" 2>&1 || echo "$name failed: $(tail -n 1 "$dir/$name.log")"
}
if [ "$which" != arc ]; then
  for target in extra_forward next_segment; do
    bench "sudoku-$target-eager" configs/sudoku.yaml arch.q_target=$target
    bench "sudoku-$target-compiled" configs/sudoku.yaml arch.q_target=$target compile=true
  done
fi
if [ "$which" != sudoku ]; then
  for c in false true; do
    bench "arc-extra_forward-compile_$c" configs/arc1.yaml --seq-len 900 --vocab-size 12 compile=$c
  done
fi
python3 - "$dir" <<'PY'
import json, sys
from pathlib import Path
rows = sorted(Path(sys.argv[1]).glob("*.json"))
print(f"{'variant':34} {'batch':>5} {'train ex/s':>10} {'eval ex/s':>10} {'TFLOP/step':>10} {'MFU':>6} {'peak GiB':>8}")
for p in rows:
    r = json.loads(p.read_text())
    print(f"{p.stem:34} {r['batch_size']:5d} {r['train_examples_per_s']:10.1f} {r['eval_examples_per_s']:10.1f} "
          f"{r['train_flops_per_step'] / 1e12:10.2f} {r['mfu']:6.1%} {r['peak_memory_bytes'] / 2**30:8.1f}")
if rows:
    print(f"matmul peak (bf16, measured): {json.loads(rows[0].read_text())['matmul_peak_flops'] / 1e12:.0f} TFLOP/s")
PY
