"""Test helpers: a tiny dataset written straight from the original format spec (not through our builders)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hrm_reason.config import TrainConfig, load_config
from hrm_reason.models.act import ACTOutput

REPO = Path(__file__).resolve().parents[1]
# The original builders' 8 dihedral transforms, written with numpy's named functions (the reference the fast
# implementation in hrm_reason.tasks.dihedral is checked against).
DIHEDRAL_REFERENCE = [
    lambda g: g,
    np.rot90,
    lambda g: np.rot90(g, 2),
    lambda g: np.rot90(g, 3),
    np.fliplr,
    np.flipud,
    lambda g: g.T,
    lambda g: np.fliplr(np.rot90(g)),
]


def latin_4x4(rng: np.random.Generator) -> np.ndarray:
    """A random valid 4x4 Sudoku solution (values 1..4)."""
    base = np.array([[1, 2, 3, 4], [3, 4, 1, 2], [2, 1, 4, 3], [4, 3, 2, 1]])
    base = base[np.concatenate([rng.permutation(2), 2 + rng.permutation(2)])][
        :, np.concatenate([rng.permutation(2), 2 + rng.permutation(2)])
    ]
    relabel = np.concatenate([[0], rng.permutation(4) + 1])
    return relabel[base]


def write_original_layout(
    root: Path,
    n_train_groups: int = 24,
    n_test: int = 16,
    per_group: int = 2,
    seed: int = 0,
    distinct_identifiers: bool = False,
) -> Path:
    """<root>/{train,test}/dataset.json + all__*.npy + identifiers.json, exactly as the original HRM builders write.

    distinct_identifiers: each training puzzle gets its own puzzle identifier (1..N; test puzzles use the blank 0),
    as in the ARC datasets, so that the puzzle embedding is trained."""
    rng = np.random.default_rng(seed)
    num_identifiers = n_train_groups * per_group + 1 if distinct_identifiers else 1

    def split(n_groups: int, per: int, own_identifiers: bool) -> dict[str, np.ndarray]:
        inputs, labels = [], []
        for _ in range(n_groups * per):
            sol = latin_4x4(rng)
            puzzle = np.where(rng.random((4, 4)) < 0.5, 0, sol)
            inputs.append(puzzle.reshape(-1) + 1)
            labels.append(sol.reshape(-1) + 1)
        n = n_groups * per
        return {
            "inputs": np.array(inputs, dtype=np.int32),
            "labels": np.array(labels, dtype=np.int32),
            "puzzle_identifiers": np.arange(1, n + 1, dtype=np.int32)
            if own_identifiers
            else np.zeros(n, dtype=np.int32),
            "puzzle_indices": np.arange(n + 1, dtype=np.int32),
            "group_indices": np.arange(0, n + 1, per, dtype=np.int32),
        }

    for name, arrays, groups in (
        ("train", split(n_train_groups, per_group, distinct_identifiers), n_train_groups),
        ("test", split(n_test, 1, False), n_test),
    ):
        d = root / name
        d.mkdir(parents=True)
        for key, arr in arrays.items():
            np.save(d / f"all__{key}.npy", arr)
        meta = {
            "pad_id": 0,
            "ignore_label_id": 0,
            "blank_identifier_id": 0,
            "vocab_size": 6,
            "seq_len": 16,
            "num_puzzle_identifiers": num_identifiers,
            "total_groups": groups,
            "mean_puzzle_examples": 1.0,
            "sets": ["all"],
        }
        (d / "dataset.json").write_text(json.dumps(meta))
    (root / "identifiers.json").write_text(json.dumps(["<blank>"] + [f"puzzle{i}" for i in range(1, num_identifiers)]))
    return root


def tiny_config(data: Path, run_dir: Path, *overrides: str) -> TrainConfig:
    base = [
        f"data_path={data}",
        f"run_dir={run_dir}",
        "global_batch_size=8",
        "epochs=4",
        "eval_interval=2",
        "arch.hidden_size=32",
        "arch.num_heads=2",
        "arch.halt_max_steps=3",
        "lr=1e-3",
        "lr_warmup_steps=2",
        "puzzle_emb_lr=1e-2",
        "seed=0",
    ]
    # Options of one model only (another model's option is an error): HRM's small sizes, a transformer of as many blocks.
    name = next((o.partition("=")[2] for o in overrides if o.startswith("arch.name=")), "hrm")
    own = {
        "hrm": ["arch.H_layers=1", "arch.L_layers=1", "arch.H_cycles=2", "arch.L_cycles=2"],
        "transformer": ["arch.num_layers=2"],
    }.get(name, [])
    return load_config(None, base + own + list(overrides))


def ref_distances(passable: np.ndarray, sources: list[tuple[int, int]]) -> np.ndarray:
    """Textbook queue BFS on one grid, -1 where unreachable."""
    H, W = passable.shape
    dist = np.full((H, W), -1)
    queue = deque()
    for s in sources:
        if passable[s]:
            dist[s] = 0
            queue.append(s)
    while queue:
        r, c = queue.popleft()
        for nr, nc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if 0 <= nr < H and 0 <= nc < W and passable[nr, nc] and dist[nr, nc] < 0:
                dist[nr, nc] = dist[r, c] + 1
                queue.append((nr, nc))
    return dist


def rewind(run: Path, to: Path, step: int) -> Path:
    """A copy of `run` as it was when the checkpoint of `step` was the latest."""
    shutil.copytree(run, to)
    for ckpt in (to / "checkpoints").iterdir():
        if ckpt.is_dir() and int(ckpt.name.split("_")[1]) > step:
            shutil.rmtree(ckpt)
    (to / "checkpoints" / "latest").write_text(f"step_{step}")
    return to


def write_csv_file(path: Path, header: list[str], rows: list) -> None:
    """A CSV file in the published Sudoku/maze layout: a header row, then the rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def run_hrm(
    *args: str, timeout: float = 300, cwd: Path | None = None, offline: bool = False
) -> subprocess.CompletedProcess:
    """`hrm ARGS` in a fresh process (this checkout first on the path), its output captured as text."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if offline:
        env |= {"HRM_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-c", "import cli; cli.main()", *args]
    return subprocess.run(cmd, check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def fake_hub(monkeypatch: Any, csv_dir: Path | None, revision: str = "abc123") -> None:
    """The builders' Hugging Face download (datasets_build.sources.download_csvs) serves `csv_dir`'s train.csv and
    test.csv at `revision`; with None it fails as an unreachable hub does."""
    from datasets_build import sources
    from hrm_reason.errors import UserError

    def download(repo: str) -> tuple[Path, Path, str]:
        if csv_dir is None:
            raise UserError(f"--source hf: could not download {repo} (offline)")
        return csv_dir / "train.csv", csv_dir / "test.csv", revision

    monkeypatch.setattr(sources, "download_csvs", download)


def halting_output(q_halt: torch.Tensor, q_continue: torch.Tensor | None = None) -> ACTOutput:
    """An ACT output carrying only what the task metrics read (the halting logits), for metrics fed by hand."""
    q_continue = torch.zeros_like(q_halt) if q_continue is None else q_continue
    return ACTOutput(logits=torch.empty(0), q_halt_logits=q_halt, q_continue_logits=q_continue)


def hrm_in_process(capsys: Any, monkeypatch: Any, *args: str) -> tuple[int, str]:
    """(exit code, stderr) of `hrm ARGS` run in this process (capsys and monkeypatch: the test's fixtures)."""
    import cli

    capsys.readouterr()
    monkeypatch.setattr(sys, "argv", ["hrm", *args])
    try:
        cli.main()
    except SystemExit as stop:
        return stop.code, capsys.readouterr().err  # type: ignore[return-value]
    raise AssertionError(f"hrm {' '.join(args)} returned without exiting")
