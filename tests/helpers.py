"""Test helpers: tiny datasets written straight from the original format spec (not through our builders), the tiny
models many tests build, and `hrm` run as a user runs it."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import os
import shutil
import subprocess
import sys
from collections import deque
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from hrm_reason.checkpoint import find_checkpoint, read_weights
from hrm_reason.config import TrainConfig, load_config
from hrm_reason.models.act import ACTOutput
from hrm_reason.models.hrm import HRM, HRMConfig
from hrm_reason.models.lm import hrm_text
from hrm_reason.runtime.clock import KEYS as CLOCK_KEYS

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


# --- tiny models: the small settings many tests build, in one place so that each case reads as its differences

# HRM: one block per level, two cycles of each.
TINY_HRM: dict[str, Any] = dict(hidden_size=32, num_heads=2, H_layers=1, L_layers=1, H_cycles=2, L_cycles=2)
# HRM-Text: one layer per stack, two heads of 16 (its SPEC's tiny options; each test sets its own context length).
TINY_HRM_TEXT: dict[str, Any] = {k: v for k, v in hrm_text.SPEC.tiny.items() if k != "max_position_embeddings"}
# HAM-LM: two layers, RNN heads of 8/12 and KV heads of 8/12 channels (query-key/value), chunks of 4 tokens.
TINY_HAM: dict[str, Any] = dict(
    hidden_size=32,
    num_layers=2,
    qk_dim=16,
    v_dim=24,
    rnn_head_qk_dim=8,
    rnn_head_v_dim=12,
    kv_head_qk_dim=8,
    kv_head_v_dim=12,
    chunk_size=4,
)
# `hrm train` overrides of a tiny HRM (the default config's symmetries need a builder record that the datasets
# written by write_original_layout lack), on the CPU as tiny_config's (tests/conftest.py, the device guard).
TINY_CLI = [
    "global_batch_size=8",
    "arch.hidden_size=32",
    "arch.num_heads=2",
    "arch.H_layers=1",
    "arch.L_layers=1",
    "arch.halt_max_steps=3",
    "lr_warmup_steps=2",
    "augment=none",
    "device=cpu",
]


def arch_overrides(fields: dict[str, Any]) -> list[str]:
    """`arch.KEY=VALUE` overrides of a model's fields (numbers and names)."""
    return [f"arch.{key}={value}" for key, value in fields.items()]


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
        "device=cpu",  # fp32 on the CPU: tests compare runs float for float (on a GPU, bf16 and atomics would differ)
    ]
    # Options of one model only (another model's option is an error): HRM's small sizes, a transformer of as many blocks.
    name = next((o.partition("=")[2] for o in overrides if o.startswith("arch.name=")), "hrm")
    own = {
        "hrm": ["arch.H_layers=1", "arch.L_layers=1", "arch.H_cycles=2", "arch.L_cycles=2"],
        "transformer": ["arch.num_layers=2"],
    }.get(name, [])
    return load_config(None, base + own + list(overrides))


def tiny_lm_run(root: Path) -> tuple[Path, Path]:
    """(run, its text dataset) under `root`: a tiny hrm_lm trained for one step on a corpus of two sentences."""
    from datasets_build.text import TextBuildOptions, build_text
    from hrm_reason.train.loop import train

    rng = np.random.default_rng(0)
    (root / "c").mkdir(parents=True)
    for i in range(6):
        (root / "c" / f"{i}.txt").write_text("".join(rng.choice(["the cat sat. ", "a dog ran. "], size=30)))
    data = build_text(TextBuildOptions(input=[str(root / "c")], out=root / "ds", val_fraction=0.3), progress=False)
    overrides = [
        *("arch.name=hrm_lm", "arch.hidden_size=32", "arch.num_heads=2", "arch.N=1", "arch.T=1", "arch.K=1"),
        *("arch.max_seq_len=64", f"data_path={data}", f"run_dir={root / 'run'}", "seq_len=16", "global_batch_size=2"),
        *("max_steps=1", "eval_every_steps=1", "eval_max_tokens=32", "lr_warmup_steps=1", "device=cpu"),
    ]
    return train(load_config(None, overrides), progress=False), data


def tiny_hrm(**overrides: Any) -> HRM:
    """A small HRM (seeded with torch.manual_seed(0)) for 16-token puzzles of vocabulary 6 and 3 identifiers."""
    fields = {
        "seq_len": 16,
        "vocab_size": 6,
        "num_puzzle_identifiers": 3,
        **TINY_HRM,
        "L_cycles": 3,
        "halt_max_steps": 4,
        "halt_exploration_prob": 0.0,
        "puzzle_emb_ndim": 32,
        **overrides,
    }
    torch.manual_seed(0)
    return HRM(HRMConfig(**fields))


def puzzle_batch(n: int = 4, seed: int = 0) -> dict[str, torch.Tensor]:
    """A random batch for tiny_hrm's sizes: inputs 1..5, labels 2..5 (no ignored label), identifiers 0..2."""
    g = torch.Generator().manual_seed(seed)
    return {
        "inputs": torch.randint(1, 6, (n, 16), generator=g, dtype=torch.int32),
        "labels": torch.randint(2, 6, (n, 16), generator=g, dtype=torch.int32),
        "puzzle_identifiers": torch.randint(0, 3, (n,), generator=g, dtype=torch.int32),
    }


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Torch's intra-op threads set to `count` inside the block and restored after it."""
    threads = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


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


def read_metrics(run: Path) -> list[dict[str, Any]]:
    """The records of a run's metrics.jsonl, in order."""
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def assert_same_trajectory(full: Path, resumed: Path, timing_keys: Collection[str] = CLOCK_KEYS) -> None:
    """A resumed run logged the records of the uninterrupted one (bar its timings: seconds differ between any two runs)
    and ended with the same weights."""
    a, b = read_metrics(full), read_metrics(resumed)
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for ra, rb in zip(a, b):
        assert ra.keys() == rb.keys()
        for k in ra.keys() - set(timing_keys):
            assert ra[k] == pytest.approx(rb[k], rel=1e-5, abs=1e-7), (ra["step"], k)
    wa, _ = read_weights(find_checkpoint(full))
    wb, _ = read_weights(find_checkpoint(resumed))
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-5, atol=1e-6)


def write_csv_file(path: Path, header: list[str], rows: list) -> None:
    """A CSV file in the published Sudoku/maze layout: a header row, then the rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


# The `hrm` commands that take --device (default auto: CUDA in bf16 where there is a GPU).
DEVICE_COMMANDS = (("eval",), ("solve",), ("generate",), ("viz", "predictions"), ("viz", "html"))


def on_cpu(args: Collection[str]) -> list[str]:
    """`hrm ARGS` with `--device cpu` added when the command takes --device and ARGS name none: the suite's numbers are
    the CPU's fp32 ones (tests/conftest.py, the device guard). `hrm train` takes its device from the config
    (`device=cpu`, in TINY_CLI and tiny_config)."""
    args = list(args)
    takes = tuple(args[:1]) in DEVICE_COMMANDS or tuple(args[:2]) in DEVICE_COMMANDS
    return [*args, "--device", "cpu"] if takes and "--device" not in args else args


def run_hrm(
    *args: str,
    timeout: float = 300,
    cwd: Path | None = None,
    offline: bool = False,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """`hrm ARGS` in a fresh process (this checkout first on the path, `env` added to this one's environment), its
    output captured as text; on the CPU unless ARGS name a device (on_cpu)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    if offline:
        env |= {"HRM_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-c", "import cli; cli.main()", *on_cpu(args)]
    return subprocess.run(cmd, check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    """The command failed with one line `error: ...` holding every fragment (after the no-config notice), no traceback."""
    assert proc.returncode != 0, proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("no --config given")]
    assert "Traceback" not in proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def bench_args(config: str, out: Path, batch_size: int, *overrides: str, steps: int = 1, warmup: int = 1) -> list[str]:
    """`hrm bench` of configs/CONFIG writing its figures to `out`: `warmup` untimed steps, then `steps` timed ones."""
    return [
        "bench",
        "--config",
        str(REPO / "configs" / config),
        "--json",
        str(out),
        "--batch-size",
        str(batch_size),
        "--steps",
        str(steps),
        "--warmup",
        str(warmup),
        *overrides,
    ]


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


def output_tensors(out: ACTOutput) -> dict[str, torch.Tensor]:
    """The tensors of an ACT output that are set, by field name (what the golden files and the lever tests compare)."""
    return {f.name: v for f in dataclasses.fields(out) if (v := getattr(out, f.name)) is not None}


def hrm_in_process(capsys: Any, monkeypatch: Any, *args: str) -> tuple[int, str]:
    """(exit code, stderr) of `hrm ARGS` run in this process (capsys and monkeypatch: the test's fixtures), on the CPU
    unless ARGS name a device (on_cpu)."""
    import cli

    capsys.readouterr()
    monkeypatch.setattr(sys, "argv", ["hrm", *on_cpu(args)])
    try:
        cli.main()
    except SystemExit as stop:
        return stop.code, capsys.readouterr().err  # type: ignore[return-value]
    raise AssertionError(f"hrm {' '.join(args)} returned without exiting")


# The state dict of the original code's ACTLossHead (less torch.compile's "_orig_mod." prefix) for one H and one L
# block with a puzzle embedding.
ORIGINAL_KEYS_1_LAYER = {
    "model.inner.H_init",
    "model.inner.L_init",
    "model.inner.embed_tokens.embedding_weight",
    "model.inner.lm_head.weight",
    "model.inner.q_head.weight",
    "model.inner.q_head.bias",
    "model.inner.puzzle_emb.weights",
    *(
        f"model.inner.{lvl}_level.layers.0.{p}.weight"
        for lvl in "HL"
        for p in ("self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj")
    ),
}


# --- the `hrm` command line as typer declares it (tests/commands/test_bounds.py, tests/test_commands_doc.py)


def cli_commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(command path, click command) of every command under `group` (typer.main.get_command(cli.app)), recursing into
    its groups (`hrm build-data`, `hrm viz`): ("build-data", "arc"), ("eval",), ..."""
    import typer

    for name, command in sorted(group.commands.items()):
        if isinstance(command, typer.core.TyperGroup):
            yield from cli_commands(command, (*path, name))
        else:
            yield (*path, name), command


def declared(param: Any) -> tuple[float | None, float | None, Any]:
    """(low, high, the limits.py bound or None) a flag declares: its `bounded` callback's (commands/cli_options.py),
    else typer's min and max."""
    from hrm_reason import limits

    limit = getattr(param.callback, "limit", None)
    if isinstance(limit, limits.Count):
        return limit.low, limit.high, limit
    if isinstance(limit, limits.Rate):
        return 0.0, limit.high, limit
    return param.min, param.max, None


def refuses(model: Any, field: str, value: Any) -> bool:
    """Whether the options model (datasets_build/options.py) refuses `value` for `field` in an error located at that
    field, the other required fields given placeholders."""
    from pydantic import ValidationError

    fields = {name: ["x"] if "list" in str(f.annotation) else Path("x") for name, f in model.model_fields.items()}
    fields = {name: value for name, value in fields.items() if model.model_fields[name].is_required()}
    try:
        model(**{**fields, field: value})
    except ValidationError as e:
        return any(err["loc"][:1] == (field,) for err in e.errors())
    return False
