"""Training throughput (examples/s) of full training steps: ACT segment + Q-target segment + backward + both optimizers.

    python benchmarks/bench_train.py                      # paper Sudoku config at batch 32, and the CPU preset
    python benchmarks/bench_train.py --config configs/sudoku.yaml --batch 32 --steps 5

Uses random tokens of the dataset's shape (seq_len, vocab) so no dataset is needed. Prints, never asserts.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hrm_reason.config import load_config  # noqa: E402
from hrm_reason.data import PuzzleDatasetMetadata  # noqa: E402
from hrm_reason.losses import act_loss  # noqa: E402
from hrm_reason.models.registry import build_model  # noqa: E402
from hrm_reason.models.sparse_embedding import SparseSignSGD  # noqa: E402
from hrm_reason.optim import make_adam_atan2  # noqa: E402
from hrm_reason.train import optimizer_step, resolve_device  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def bench(config_path: Path, batch: int, seq_len: int, vocab: int, steps: int, warmup: int, device: torch.device) -> float:
    config = load_config(config_path)
    meta = PuzzleDatasetMetadata(pad_id=0, ignore_label_id=0, blank_identifier_id=0, vocab_size=vocab, seq_len=seq_len,
                                 num_puzzle_identifiers=1, total_groups=1, mean_puzzle_examples=1.0, sets=["all"])
    model = build_model(config.arch, meta, device, seed=0)
    model.train()
    opt = make_adam_atan2(model.parameters(), lr=config.lr, betas=(config.beta1, config.beta2), weight_decay=config.weight_decay, device=device)
    sparse = SparseSignSGD(model.puzzle_emb, config.puzzle_emb_lr, config.puzzle_emb_weight_decay) if model.puzzle_emb is not None else None
    g = torch.Generator().manual_seed(0)
    data = {
        "inputs": torch.randint(1, vocab, (batch, seq_len), generator=g, dtype=torch.int32).to(device),
        "labels": torch.randint(2, vocab, (batch, seq_len), generator=g, dtype=torch.int32).to(device),
        "puzzle_identifiers": torch.zeros(batch, dtype=torch.int32, device=device),
    }
    carry = model.initial_carry(data)

    def step() -> None:
        nonlocal carry
        carry, out = model(carry, data)
        loss, _ = act_loss(out, carry.current_data["labels"], carry.halted, carry.steps, config.arch.loss.loss_type)
        optimizer_step(loss, opt, sparse, batch, 1, config.lr, config.puzzle_emb_lr)

    for _ in range(warmup):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return batch * steps / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, action="append", help="config(s) to measure (default: paper + CPU preset)")
    parser.add_argument("--batch", type=int, help="batch size (default: 32 for the paper config, the config's otherwise)")
    parser.add_argument("--seq-len", type=int, help="default: 81 (9x9) for the paper config; the dataset's, else 16 (4x4), for the preset")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    device = resolve_device(args.device)
    runs = [(p, None, None) for p in args.config] if args.config else [
        (REPO / "configs" / "sudoku.yaml", 32, 81),
        (REPO / "configs" / "sudoku_quick.yaml", None, None),
    ]
    print(f"device: {device}, torch {torch.__version__}, threads {torch.get_num_threads()}")
    for path, default_batch, default_seq in runs:
        config = load_config(path)
        batch = args.batch or default_batch or config.global_batch_size
        seq_len = args.seq_len or default_seq or _dataset_seq_len(config.data_path) or 16
        vocab = 11 if seq_len == 81 else int(round(seq_len**0.5)) + 2
        rate = bench(path, batch, seq_len, vocab, args.steps, args.warmup, device)
        a = config.arch
        print(f"{path.name}: d={a.hidden_size} {a.H_layers}+{a.L_layers} layers, H/L cycles {a.H_cycles}/{a.L_cycles}, "
              f"seq {seq_len}, batch {batch}: {rate:.1f} train examples/s")


def _dataset_seq_len(data_path: str) -> int | None:
    meta = Path(data_path) / "train" / "dataset.json"
    if not meta.is_file():
        return None
    import json

    return json.loads(meta.read_text())["seq_len"]


if __name__ == "__main__":
    main()
