"""PrefixLM on puzzles (lm_puzzle.py): the sequence layout, greedy decoding (cached = recomputed), exact and token
accuracy, the bidirectional prefix and causal response of hrm_text, a short training, and `hrm train` / `hrm eval`
on a tiny puzzle dataset in the original layout."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import yaml
from torch import nn
from typer.testing import CliRunner

from hrm_reason.data.prefix_lm import PuzzleLayout, PuzzleLMData, forward_sequences, response_grid, to_sequences
from hrm_reason.data.puzzle import dataset_kind
from hrm_reason.errors import UserError
from hrm_reason.evaluate.prefix_lm import evaluate_puzzle_lm, greedy_decode
from hrm_reason.losses import IGNORE_LABEL_ID
from hrm_reason.models.lm.head import LMOutput
from hrm_reason.models.registry import build_lm
from tests.helpers import read_metrics, write_original_layout
from tests.reference import hrm_text_param_count

L = 16  # cells of the helpers' 4x4 grids
TINY_TEXT = {
    "name": "hrm_text",
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "head_dim": 16,
    "H_cycles": 2,
    "L_cycles": 2,
    "max_position_embeddings": 40,
}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_original_layout(tmp_path_factory.mktemp("puzzles") / "sudoku", n_train_groups=24, n_test=16)


@pytest.fixture(scope="module")
def data(data_dir: Path) -> PuzzleLMData:
    return PuzzleLMData(data_dir)


def tiny_text(data: PuzzleLMData, seed: int = 0, **fields) -> nn.Module:
    return build_lm({**TINY_TEXT, **fields}, data.layout.vocab_size, "cpu", seed)


# ---------------------------------------------------------------------------------------------------------- layout


def test_layout_prefix_types_response_labels_and_round_trip(data: PuzzleLMData) -> None:
    lay = data.layout
    assert (lay.puzzle_vocab, lay.sep_id, lay.vocab_size, lay.prefix_len, lay.seq_len) == (6, 6, 7, L + 1, 2 * L + 1)
    seqs = data.train_batch(8, seed=3, step=5)
    assert seqs.input_ids.shape == seqs.token_type_ids.shape == seqs.labels.shape == (8, 2 * L + 1)
    assert (seqs.token_type_ids[:, : L + 1] == 1).all() and (seqs.token_type_ids[:, L + 1 :] == 0).all()
    assert (seqs.input_ids[:, L] == lay.sep_id).all() and (seqs.input_ids[:, :L] < lay.puzzle_vocab).all()
    assert (seqs.labels[:, : L + 1] == IGNORE_LABEL_ID).all()  # no loss on the prefix (it sees itself both ways)
    assert torch.equal(seqs.labels[:, L + 1 :], seqs.input_ids[:, L + 1 :])  # Sudoku labels have no ignored cell
    # Round trip: every row is a (puzzle, solution) pair of the train split, with the dataset's own ids.
    s = data.train.sets["all"]
    pairs = {(tuple(i), tuple(l)) for i, l in zip(np.asarray(s.inputs).tolist(), np.asarray(s.labels).tolist())}
    for puzzle, solution in zip(seqs.input_ids[:, :L].tolist(), response_grid(seqs.input_ids, lay).tolist()):
        assert (tuple(puzzle), tuple(solution)) in pairs
    # Batches depend on (seed, step) only.
    assert torch.equal(data.train_batch(8, 3, 5).input_ids, seqs.input_ids)
    assert not torch.equal(data.train_batch(8, 3, 6).input_ids, seqs.input_ids)


def test_ignored_label_cells_are_fed_raw_and_not_scored() -> None:
    lay = PuzzleLayout(puzzle_len=3, puzzle_vocab=5)
    seqs = to_sequences(np.array([[2, 3, 0]]), np.array([[4, 0, 0]]), lay, ignore_label_id=0)
    assert seqs.input_ids.tolist() == [[2, 3, 0, 5, 4, 0, 0]]
    assert seqs.labels.tolist() == [[-100] * 4 + [4, -100, -100]]
    assert seqs.token_type_ids.tolist() == [[1, 1, 1, 1, 0, 0, 0]]


# ------------------------------------------------------------------------------------------------ greedy decoding


def test_greedy_decoding_with_cache_equals_recomputation(data: PuzzleLMData) -> None:
    model = tiny_text(data, initializer_range=0.2)  # larger weights: decisive, varied argmaxes
    prompt = data.train_batch(8, 0, 0).input_ids[:, : data.layout.prefix_len]
    cached = greedy_decode(model, prompt, data.layout, use_cache=True)
    full = greedy_decode(model, prompt, data.layout, use_cache=False)
    assert cached.shape == (8, L)
    assert torch.equal(cached, full)
    assert len(cached.unique()) > 1
    # And both are the argmax of one PrefixLM pass over prompt + decoded cells (prefix bidirectional, cells causal).
    ids = torch.cat([prompt, cached], dim=1)
    types = torch.cat([torch.ones_like(prompt), torch.zeros_like(cached)], dim=1)
    with torch.no_grad():
        logits = model(ids, token_type_ids=types).logits
    assert torch.equal(logits[:, L : 2 * L].argmax(-1), cached)


def test_causal_only_head_takes_the_puzzle_as_a_causal_prompt(data: PuzzleLMData) -> None:
    model = build_lm(
        {"name": "unitf_lm", "hidden_size": 32, "num_heads": 2, "M": 2, "K": 1, "max_seq_len": 40},
        data.layout.vocab_size,
    )
    seqs = data.train_batch(4, 0, 0)
    assert torch.isfinite(forward_sequences(model, seqs).loss)  # no token_type_ids reach the causal-only head
    prompt = seqs.input_ids[:, : data.layout.prefix_len]
    assert torch.equal(
        greedy_decode(model, prompt, data.layout, True), greedy_decode(model, prompt, data.layout, False)
    )


class OracleLM(nn.Module):
    """Test-only head: looks the puzzle up and puts a one-hot on the next solution cell, optionally one cell wrong."""

    supports_cache = False

    def __init__(self, data: PuzzleLMData, wrong: tuple[int, int] | None = None) -> None:
        super().__init__()
        self.config = SimpleNamespace(vocab_size=data.layout.vocab_size)
        s = data.test.sets["all"]
        self.solutions = {
            tuple(p): np.array(sol) for p, sol in zip(np.asarray(s.inputs).tolist(), np.asarray(s.labels).tolist())
        }
        if wrong is not None:  # (example, cell): predict another id there
            example, cell = wrong
            sol = self.solutions[tuple(np.asarray(s.inputs[example]).tolist())]
            sol[cell] = 2 + (sol[cell] - 2 + 1) % 4

    def forward(self, input_ids, token_type_ids=None, labels=None, past_key_values=None, use_cache=False) -> LMOutput:
        B, T = input_ids.shape
        logits = torch.zeros(B, T, self.config.vocab_size)
        for b in range(B):
            sol = self.solutions[tuple(input_ids[b, :L].tolist())]
            for t in range(L, min(T, 2 * L)):  # SEP predicts cell 0, cell k predicts cell k + 1
                logits[b, t, sol[t - L]] = 50.0
        return LMOutput(logits=logits)


def test_exact_and_token_accuracy(data_dir: Path, tmp_path: Path) -> None:
    data = PuzzleLMData(data_dir)
    n = data.num_test_examples()
    right = evaluate_puzzle_lm(OracleLM(data), data, 5, "cpu")
    assert (right.count, right.exact_accuracy, right.token_accuracy) == (n, 1.0, 1.0)
    assert right.ce < 1e-6
    wrong = evaluate_puzzle_lm(OracleLM(data, wrong=(3, 7)), data, 5, "cpu")
    assert wrong.exact_accuracy == pytest.approx((n - 1) / n)
    assert wrong.token_accuracy == pytest.approx(1 - 1 / (L * n))
    assert evaluate_puzzle_lm(OracleLM(data, wrong=(3, 7)), data, 5, "cpu", max_examples=3).exact_accuracy == 1.0
    # The same wrong cell, marked ignored in the dataset, is not scored.
    import shutil

    copy = shutil.copytree(data_dir, tmp_path / "ignored")
    labels = np.load(copy / "test" / "all__labels.npy")
    labels[3, 7] = 0  # ignore_label_id
    np.save(copy / "test" / "all__labels.npy", labels)
    masked = PuzzleLMData(copy)
    result = evaluate_puzzle_lm(OracleLM(data, wrong=(3, 7)), masked, 5, "cpu")
    assert result.exact_accuracy == 1.0 and result.token_accuracy == 1.0


# ------------------------------------------------------------------------------------------------------ masking


def test_prefix_is_bidirectional_and_response_is_causal(data: PuzzleLMData) -> None:
    model = tiny_text(data, initializer_range=0.2).eval()
    seqs = data.train_batch(2, 0, 0)

    def logits(ids: torch.Tensor, m: nn.Module = model) -> torch.Tensor:
        with torch.no_grad():
            return forward_sequences(m, seqs.__class__(ids, seqs.token_type_ids, seqs.labels)).logits

    base = logits(seqs.input_ids)
    last_cell = seqs.input_ids.clone()
    last_cell[:, L - 1] = 1 + (last_cell[:, L - 1] % 5)
    changed = logits(last_cell)
    assert not torch.allclose(changed[:, 0], base[:, 0], atol=1e-4)  # an earlier prefix position sees it
    assert not torch.allclose(changed[:, L], base[:, L], atol=1e-4)  # so does the first response prediction (SEP)
    # Control: the same weights without the prefix block (prefix_lm false) are causal there.
    causal = tiny_text(data, initializer_range=0.2, prefix_lm=False).eval()
    assert torch.allclose(logits(last_cell, causal)[:, : L - 1], logits(seqs.input_ids, causal)[:, : L - 1], atol=1e-6)

    k = L + 1 + 6  # a response cell: no earlier position may see it
    later = seqs.input_ids.clone()
    later[:, k] = 2 + (later[:, k] - 1) % 4
    moved = logits(later)
    assert torch.allclose(moved[:, :k], base[:, :k], atol=1e-6)
    assert not torch.allclose(moved[:, k], base[:, k], atol=1e-4)


# ------------------------------------------------------------------------------------------------------ training


def test_training_steps_lower_the_response_loss(data: PuzzleLMData) -> None:
    torch.manual_seed(0)
    model = tiny_text(data)
    before = evaluate_puzzle_lm(model, data, 16, "cpu").ce
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(30):
        loss = forward_sequences(model, data.train_batch(16, 0, step)).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    after = evaluate_puzzle_lm(model, data, 16, "cpu").ce
    assert before > 1.6  # about ln 7 at init
    assert after < before - 0.3


def test_model_that_cannot_hold_the_layout_is_refused(data: PuzzleLMData) -> None:
    with pytest.raises(UserError, match="arch.max_position_embeddings"):
        data.check_model(tiny_text(data, max_position_embeddings=32), "cfg")
    with pytest.raises(UserError, match="vocabulary has 6 ids"):
        data.check_model(build_lm(TINY_TEXT, 6), "cfg")


# ----------------------------------------------------------------------------------------------------------- CLI


def test_cli_train_then_eval_on_a_puzzle_dataset(data_dir: Path, tmp_path: Path) -> None:
    import cli

    assert dataset_kind(data_dir) == "puzzle" and dataset_kind(data_dir / "train") is None
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "data_path": "unused",
                "global_batch_size": 8,
                "max_steps": 4,
                "eval_interval": 2,
                "lr_warmup_steps": 1,
                "optimizer": "adamw",
                "device": "cpu",  # the CLI's evaluation below must give the training's own numbers
                "arch": TINY_TEXT,
            }
        )
    )
    run = tmp_path / "run"
    runner = CliRunner()
    res = runner.invoke(cli.app, ["train", "-c", str(cfg), "--data", str(data_dir), "--run-dir", str(run), "--quiet"])
    assert res.exit_code == 0, res.output
    records = read_metrics(run)
    assert records[0]["vocab_size"] == 7 and records[0]["sequence_len"] == 2 * L + 1
    evals = [r for r in records if "eval/exact_accuracy" in r]
    assert [r["step"] for r in evals] == [2, 4]
    assert all(0 <= r["eval/exact_accuracy"] <= r["eval/accuracy"] <= 1 and r["eval/count"] == 16 for r in evals)

    eval_args = ["eval", "--run", str(run), "--device", "cpu", "--quiet"]
    res = runner.invoke(cli.app, [*eval_args, "--json", str(tmp_path / "e.json")])
    assert res.exit_code == 0, res.output
    assert "exact accuracy" in res.output
    result = json.loads((tmp_path / "e.json").read_text())
    assert result["exact_accuracy"] == evals[-1]["eval/exact_accuracy"]
    assert result["token_accuracy"] == evals[-1]["eval/accuracy"]
    assert result["ce"] == pytest.approx(evals[-1]["eval/ce"], rel=1e-5)
    res = runner.invoke(cli.app, [*eval_args, "--max-examples", "4", "--json", str(tmp_path / "e4.json")])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "e4.json").read_text())["count"] == 4


def test_sudoku_preset_loads_and_matches_the_seq2seq_preset_size() -> None:
    from hrm_reason.config import load_config
    from hrm_reason.models.registry import lm_config

    repo = Path(__file__).resolve().parents[2]
    config = load_config(repo / "configs" / "hrm_text_sudoku_quick.yaml")
    arch = lm_config(config.arch, PuzzleLayout(puzzle_len=16, puzzle_vocab=6).vocab_size)
    assert arch.max_position_embeddings >= 2 * 16 + 1
    assert abs(hrm_text_param_count(arch) - 1.05e6) / 1.05e6 < 0.1  # configs/sudoku_quick.yaml's HRM has 1.05M
