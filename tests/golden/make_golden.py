"""Writes tests/golden/golden.pt: weights, a batch and the outputs (logits, losses, gradients) of every registered model,
saved from the code as it stood before the one-spine refactor (issue 13). `test_golden.py` reloads the weights into
today's models and requires the same numbers. Rerun only on purpose: `python -m tests.golden.make_golden`."""

from __future__ import annotations

from pathlib import Path

import torch

from tests.golden.cases import CASES, run_case

OUT = Path(__file__).with_name("golden.pt")


def main() -> None:
    golden = {}
    for name in CASES:
        model, result = run_case(name, state_dict=None)
        golden[name] = {"state_dict": {k: v.clone() for k, v in model.state_dict().items()}, **result}
    torch.save(golden, OUT)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(golden)} models)")


if __name__ == "__main__":
    main()
