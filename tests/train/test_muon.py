"""`optimizer: muon` (issue 46): Muon on the blocks' weight matrices, AdamAtan2 on the rest, SignSGD on the puzzle
table (docs/training.md, "Muon"): which parameter goes where, one step against torch's Muon applied by hand, a
resumed run against an uninterrupted one, and the refusals."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from hrm_reason.checkpoint import find_checkpoint, read_state, read_weights
from hrm_reason.config import load_config
from hrm_reason.errors import UserError
from hrm_reason.models import registry
from hrm_reason.models.act import act_loss
from hrm_reason.models.sparse_embedding import SparseSignSGD
from hrm_reason.train.act import loss_scale_of, optimizer_step
from hrm_reason.train.loop import train
from hrm_reason.train.muon import SplitOptimizer, muon_split, newton_schulz, newton_schulz_flops
from hrm_reason.train.optim import AdamAtan2, make_optimizer, set_lr
from tests.helpers import (
    TINY_CLI,
    assert_same_trajectory,
    hrm_in_process,
    puzzle_batch,
    read_metrics,
    rewind,
    tiny_config,
    tiny_hrm,
    write_original_layout,
)

SIZES = {"seq_len": 16, "vocab_size": 6, "num_puzzle_identifiers": 3}
DEFAULT_NS = (3.4445, -4.7750, 2.0315)  # torch.optim.Muon's (and the reference implementation's) coefficients
ATTENTION_BLOCK = (
    "self_attn.qkv_proj.weight",
    "self_attn.o_proj.weight",
    "mlp.gate_up_proj.weight",
    "mlp.down_proj.weight",
)
# What every puzzle model trains with AdamAtan2: the token embedding, the two output heads (the Q head's bias too).
PUZZLE_REST = {"inner.embed_tokens.weight", "inner.lm_head.weight", "inner.q_head.weight", "inner.q_head.bias"}


def split_names(model: nn.Module) -> tuple[set[str], set[str]]:
    names = {id(p): n for n, p in model.named_parameters()}
    matrices, rest = muon_split(model)
    return {names[id(p)] for p in matrices}, {names[id(p)] for p in rest}


@pytest.mark.parametrize(
    ("arch", "blocks"),
    [
        ({"name": "hrm", "H_layers": 1, "L_layers": 2}, ["H_level.layers.0", "L_level.layers.0", "L_level.layers.1"]),
        ({"name": "trm", "L_layers": 2}, ["net.layers.0", "net.layers.1"]),
        ({"name": "transformer", "num_layers": 2}, ["layers.0", "layers.1"]),
        ({"name": "unitf"}, ["block"]),
    ],
)
def test_the_blocks_matrices_go_to_muon_and_the_rest_to_adam_atan2(arch: dict, blocks: list[str]) -> None:
    model = registry.build({**arch, "hidden_size": 32, "num_heads": 2}, SIZES)
    muon, rest = split_names(model)
    assert muon == {f"inner.{block}.{m}" for block in blocks for m in ATTENTION_BLOCK}
    assert rest == PUZZLE_REST
    # The puzzle table is no parameter: SignSGD's, neither Muon's nor AdamAtan2's.
    assert model.puzzle_emb is not None and all(p is not model.puzzle_emb.weights for p in model.parameters())


def test_trm_mlp_token_mixer_and_a_learned_position_table_split_by_role() -> None:
    model = registry.build(
        {"name": "trm", "hidden_size": 32, "L_layers": 1, "mlp_t": True, "pos_encodings": "none"}, SIZES
    )
    muon, rest = split_names(model)
    assert muon == {
        f"inner.net.layers.0.{m}.{p}_proj.weight" for m in ("token_mlp", "mlp") for p in ("gate_up", "down")
    }
    assert rest == PUZZLE_REST
    hrm = registry.build({"name": "hrm", "hidden_size": 32, "num_heads": 2, "pos_encodings": "learned"}, SIZES)
    assert "inner.embed_pos.weight" in split_names(hrm)[1]  # a 2-D table, not a matrix of a layer: AdamAtan2's


def test_an_lm_head_sends_norms_scalars_and_the_tied_embedding_to_adam_atan2() -> None:
    model = registry.build_lm({"name": "hrm_lm", "hidden_size": 32, "num_heads": 2, "N": 1, "T": 1, "K": 1}, 50)
    muon, rest = split_names(model)
    assert {
        "L_net.W_in.weight",
        "H_net.W_out.weight",
        "fusion.out_proj.weight",
        "input_block.attn.qkv_proj.weight",
    } <= muon
    assert {"embed_tokens.weight", "L_net.alpha", "fusion.log_tau", "input_block.norm1.weight"} <= rest
    assert all(p.ndim == 2 for n, p in model.named_parameters() if n in muon)
    assert len(muon) + len(rest) == len(list(model.parameters()))


def muon_config(*overrides: str):
    return load_config(None, ["data_path=d", "device=cpu", "optimizer=muon", *overrides])


def test_make_optimizer_builds_both_with_their_own_lr_and_weight_decay() -> None:
    config = muon_config("lr=1e-3", "weight_decay=0.5", "muon_lr=0.05", "muon_weight_decay=0.2")
    model = tiny_hrm()
    opt = make_optimizer(config, model, torch.device("cpu"))
    assert isinstance(opt, SplitOptimizer) and list(opt.parts) == ["muon", "adam_atan2"]
    muon, adam = opt.parts["muon"], opt.parts["adam_atan2"]
    assert isinstance(muon, torch.optim.Muon) and isinstance(adam, AdamAtan2)
    assert [(g["lr"], g["weight_decay"]) for g in opt.param_groups] == [(0.05, 0.2), (1e-3, 0.5)]
    assert len(muon.param_groups[0]["params"]) == 8 and len(adam.param_groups[0]["params"]) == 4
    set_lr(opt, 5e-4)  # the schedule at half the peak: both groups at half theirs
    assert muon.param_groups[0]["lr"] == pytest.approx(0.025, rel=1e-12) and adam.param_groups[0]["lr"] == 5e-4
    # The default stays one AdamAtan2 over every parameter.
    plain = make_optimizer(load_config(None, ["data_path=d", "device=cpu"]), model, torch.device("cpu"))
    assert type(plain) is AdamAtan2 and len(plain.param_groups) == 1


def act_loss_of(model: nn.Module) -> torch.Tensor:
    """One training segment of the model on a fixed batch; returns the summed loss (backward left to the caller)."""
    model.train()
    batch = puzzle_batch(4)
    carry, out = model(model.empty_carry(batch), batch)
    loss, _ = act_loss(out, carry.current_data["labels"], carry.halted, carry.steps, "softmax_cross_entropy")
    return loss


def test_two_steps_equal_torch_muon_and_adam_atan2_applied_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """The training step (the loop's backward of the loss times train/act.py loss_scale_of, then optimizer_step: the
    schedule's lr, the split optimizer, SignSGD) against torch.optim.Muon on the block matrices, AdamAtan2 on the rest
    and SignSGD on the puzzle table, built by hand on a copy of the model with the same gradients; the second step at
    another lr runs on the first one's momentum. torch's Newton-Schulz computes in bf16, ours on a CPU in fp32: the
    hand-built Muon runs torch's step with its iteration patched to fp32, so this equality says that nothing else
    differs (and torch's unpatched step, in bf16, would fail it)."""
    config = muon_config("lr=1e-3", "weight_decay=0.1", "muon_lr=0.02", "muon_weight_decay=0.01")
    model = tiny_hrm()
    ref, initial = copy.deepcopy(model), copy.deepcopy(model.state_dict())
    names = {id(p): n for n, p in ref.named_parameters()}
    opt = make_optimizer(config, model, torch.device("cpu"))
    sparse = SparseSignSGD(model.puzzle_emb, 1e-2, 0.1)
    hand_matrices = [p for n, p in ref.named_parameters() if n.endswith(ATTENTION_BLOCK)]
    hand_rest = [p for p in ref.parameters() if id(p) not in {id(q) for q in hand_matrices}]
    assert {names[id(p)] for p in hand_rest} == PUZZLE_REST
    hand_muon = torch.optim.Muon(hand_matrices, lr=0.02, weight_decay=0.01)
    hand_adam = AdamAtan2(hand_rest, lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    hand_sparse = SparseSignSGD(ref.puzzle_emb, 1e-2, 0.1)
    for lr in (1e-3, 4e-4):
        (act_loss_of(model) * loss_scale_of(8, 1)).backward()
        optimizer_step(opt, sparse, lr, 1e-2)
        (act_loss_of(ref) * (1 / 8)).backward()
        for group in hand_muon.param_groups:
            group["lr"] = 0.02 * lr / 1e-3
        for group in hand_adam.param_groups:
            group["lr"] = lr
        with monkeypatch.context() as patch:
            patch.setattr(torch.optim._muon, "_zeropower_via_newtonschulz", fp32_newton_schulz)
            hand_muon.step()
        hand_adam.step()
        hand_sparse.step()
        for o in (hand_muon, hand_adam):
            o.zero_grad(set_to_none=True)
        ours, theirs = model.state_dict(), ref.state_dict()
        for k in ours:
            torch.testing.assert_close(
                ours[k], theirs[k], rtol=0, atol=0, msg=lambda m, k=k, lr=lr: f"{k} (lr {lr}): {m}"
            )
    # Every parameter and the puzzle rows of the batch moved: no part of the comparison is of untouched tensors.
    moved = {k for k, v in model.state_dict().items() if not torch.equal(v, initial[k])}
    assert {n for n, _ in model.named_parameters()} | {"inner.puzzle_emb.weights"} <= moved


@pytest.mark.parametrize("shape", [(12, 20), (20, 12), (16, 16)])
def test_newton_schulz_is_torchs_iteration_op_for_op(shape: tuple[int, int]) -> None:
    """On a bf16 input ours computes what torch's computes, bit for bit (torch casts every input to bf16; ours keeps
    the input's dtype), for wide, tall and square matrices; in fp32 it is the same map to bf16's precision."""
    g = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    args = (DEFAULT_NS, 5, 1e-7)
    theirs = torch.optim._muon._zeropower_via_newtonschulz(g, *args)
    ours = newton_schulz(g.bfloat16(), *args)
    assert ours.dtype == theirs.dtype == torch.bfloat16 and ours.shape == g.shape
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
    fp32 = newton_schulz(g, *args)
    assert fp32.dtype == torch.float32
    assert (fp32 - theirs.float()).norm() / fp32.norm() < 0.02
    # The map it approximates: singular values pulled towards 1 (the quintic leaves them between about 0.5 and 1.5).
    s = torch.linalg.svdvals(fp32)
    assert s.min() > 0.4 and s.max() < 1.6, s


def test_newton_schulz_flops_are_what_torch_counts_of_the_iterations() -> None:
    """The FLOPs the lever study adds to a Muon run's count: torch's FLOP counter over the iterations on every Muon
    matrix of the model (wide and tall ones among them) gives the same number."""
    model = tiny_hrm()
    matrices = muon_split(model)[0]
    assert {p.shape[0] > p.shape[1] for p in matrices} == {True, False}
    with FlopCounterMode(display=False) as counter:
        for p in matrices:
            newton_schulz(torch.randn(p.shape), DEFAULT_NS, 5, 1e-7)
    assert newton_schulz_flops(model) == counter.get_total_flops()
    assert newton_schulz_flops(model, steps=1) * 5 == newton_schulz_flops(model)


def fp32_newton_schulz(
    grad: torch.Tensor, coefficients: tuple[float, float, float], steps: int, eps: float
) -> torch.Tensor:
    """Stands in for torch's private iteration in the hand-built reference: the same iteration, in fp32."""
    return newton_schulz(grad.float(), coefficients, steps, eps)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_original_layout(tmp_path_factory.mktemp("data") / "sudoku4", distinct_identifiers=True)


RESUME = (
    "optimizer=muon",
    "lr_min_ratio=0.1",
    "epochs=4",
    "eval_interval=2",
    "checkpoint_every_steps=4",
    "arch.halt_exploration_prob=0.5",
)


@pytest.fixture(scope="module")
def full_run(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train(tiny_config(data, tmp_path_factory.mktemp("muon") / "full", *RESUME), progress=False)


def test_a_resumed_muon_run_is_the_uninterrupted_one_bit_for_bit(data: Path, full_run: Path, tmp_path: Path) -> None:
    cut = rewind(full_run, tmp_path / "cut", 4)  # inside the first round, with momentum and live carries
    saved = read_state(cut / "checkpoints" / "step_4")["optimizer"]
    assert set(saved) == {"muon", "adam_atan2"}
    assert len(saved["muon"]["state"]) == 8 and all("momentum_buffer" in s for s in saved["muon"]["state"].values())
    resumed = train(tiny_config(data, cut, *RESUME), resume=True, progress=False)
    assert_same_trajectory(full_run, resumed)
    a, _ = read_weights(find_checkpoint(full_run))
    b, _ = read_weights(find_checkpoint(resumed))
    assert all(torch.equal(a[k], b[k]) for k in a)
    sa, sb = read_state(find_checkpoint(full_run))["optimizer"], read_state(find_checkpoint(resumed))["optimizer"]
    for part in ("muon", "adam_atan2"):
        assert sa[part]["param_groups"] == sb[part]["param_groups"]
        for i, state in sa[part]["state"].items():
            assert all(torch.equal(v, sb[part]["state"][i][k]) for k, v in state.items())
    lrs = [r["train/lr"] for r in read_metrics(full_run) if "train/lr" in r]
    assert lrs[0] == pytest.approx(1e-3 / 2) and sa["muon"]["param_groups"][0]["lr"] == pytest.approx(
        0.02 * lrs[-1] / 1e-3
    )


def test_resuming_with_another_optimizer_is_one_line_naming_it(data: Path, full_run: Path, tmp_path: Path) -> None:
    cut = rewind(full_run, tmp_path / "cut", 4)
    log = (cut / "metrics.jsonl").read_text()
    with pytest.raises(
        UserError, match=r"^optimizer: the checkpoint's optimizer state does not fit optimizer adam_atan2"
    ) as e:
        train(tiny_config(data, cut, *RESUME, "optimizer=adam_atan2"), resume=True, progress=False)
    assert "\n" not in str(e.value)
    assert (cut / "metrics.jsonl").read_text() == log  # refused before a step was taken


def test_a_model_without_block_matrices_is_refused_in_one_line() -> None:
    class TableOnly(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed_tokens = nn.Embedding(6, 4)
            self.lm_head = nn.Linear(4, 6)

    with pytest.raises(UserError, match=r"^optimizer: muon trains the weight matrices") as e:
        make_optimizer(muon_config(), TableOnly(), torch.device("cpu"))
    assert "\n" not in str(e.value)


def test_hrm_train_without_torch_muon_refuses_in_one_line_before_training(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(torch.optim, "Muon")
    run = tmp_path / "run"
    args = ["--data", str(data), "--run-dir", str(run), *TINY_CLI, "max_steps=2", "optimizer=muon"]
    code, err = hrm_in_process(capsys, monkeypatch, "train", *args)
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("no --config given")]
    assert code != 0 and len(lines) == 1, err
    assert lines[0].startswith("error: optimizer: muon needs torch.optim.Muon"), lines
    assert not (run / "checkpoints").exists()


def test_an_lm_head_trains_with_muon(tmp_path: Path) -> None:
    from datasets_build.text import TextBuildOptions, build_text

    (tmp_path / "c").mkdir()
    for i in range(4):
        (tmp_path / "c" / f"{i}.txt").write_text("the cat sat. a dog ran. " * 20)
    text = build_text(
        TextBuildOptions(input=[str(tmp_path / "c")], out=tmp_path / "ds", val_fraction=0.3), progress=False
    )
    overrides = [
        *("arch.name=hrm_lm", "arch.hidden_size=32", "arch.num_heads=2", "arch.N=1", "arch.T=1", "arch.K=1"),
        *("arch.max_seq_len=64", f"data_path={text}", f"run_dir={tmp_path / 'run'}", "seq_len=16"),
        *("global_batch_size=2", "max_steps=3", "eval_every_steps=3", "eval_max_tokens=32", "lr_warmup_steps=1"),
        *("device=cpu", "optimizer=muon"),
    ]
    run = train(load_config(None, overrides), progress=False)
    state = read_state(find_checkpoint(run))["optimizer"]
    assert set(state) == {"muon", "adam_atan2"} and len(state["muon"]["state"]) == 20
