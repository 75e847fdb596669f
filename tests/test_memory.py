"""The memory floor of a run (hrm_reason/runtime/memory.py, train/run_memory.py): below what a training step really keeps,
so a refusal is never wrong; never refusing a shipped config; naming the key to lower; and a real allocation failure
as one line (issue 35)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from hrm_reason.config import load_config
from hrm_reason.errors import UserError
from hrm_reason.models import registry
from hrm_reason.models.act import act_loss
from hrm_reason.runtime.memory import (
    GIB,
    ModelSize,
    allocation_errors,
    check_fits,
    host_available,
    out_of_memory,
    training_need,
)
from hrm_reason.train.run_memory import PLAN_BYTES, run_need
from tests.helpers import REPO, TINY_HAM, TINY_HRM_TEXT, puzzle_batch

CPU = torch.device("cpu")


def saved_activation_bytes(model: torch.nn.Module, step: Any) -> int:
    """Bytes of the tensors autograd keeps for backward during `step()`, the parameters left out (they are weights)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            kept[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step()
    return sum(kept.values())


ACT_MODELS = {
    "hrm": dict(name="hrm", hidden_size=32, num_heads=2, H_layers=2, L_layers=1, H_cycles=2, L_cycles=2),
    "trm": dict(name="trm", hidden_size=32, num_heads=2, L_layers=2, H_cycles=2, L_cycles=2),
    "transformer": dict(name="transformer", hidden_size=32, num_heads=2, num_layers=3),
    "unitf": dict(name="unitf", hidden_size=32, num_heads=2, unitf_steps=3),
}


@pytest.mark.parametrize("name", sorted(ACT_MODELS))
def test_the_floor_is_below_what_a_puzzle_models_step_keeps(name: str) -> None:
    """Were the floor above what a step really keeps, a run that fits would be refused."""
    sizes = dict(seq_len=16, vocab_size=6, num_puzzle_identifiers=3)
    model = registry.build(ACT_MODELS[name], sizes, CPU)
    batch = puzzle_batch(n=8)
    state = {"carry": model.empty_carry(batch)}

    def step() -> None:
        state["carry"], out = model(state["carry"], batch)
        carry = state["carry"]
        loss, _ = act_loss(out, carry.current_data["labels"], carry.halted, carry.steps, "softmax_cross_entropy")
        loss.backward()

    step()  # the first segment starts from the initial carry; the second is a step in the middle of a run
    kept = saved_activation_bytes(model, step)
    positions = 16 + model.config.prefix_len
    need = training_need(ModelSize.of(model), 8, positions, 32, 4)
    assert 0 < need.activations <= kept
    assert need.weights == sum(t.numel() * 4 for t in [*model.parameters(), *model.buffers()])


@pytest.mark.parametrize(
    "arch",
    [
        dict(name="hrm_lm", hidden_size=32, num_heads=2),
        {"name": "hrm_text", **TINY_HRM_TEXT},
        {"name": "ham_lm", **TINY_HAM},
    ],
)
def test_the_floor_is_below_what_a_language_model_step_keeps(arch: dict[str, Any]) -> None:
    model = registry.build_lm(arch, 40, CPU)
    ids = torch.randint(0, 40, (4, 24), generator=torch.Generator().manual_seed(0))
    kept = saved_activation_bytes(model, lambda: model(ids, labels=ids).loss.backward())
    need = training_need(ModelSize.of(model), 4, 24, 32, 4)
    assert 0 < need.activations <= kept


def test_the_meta_build_counts_the_model_exactly() -> None:
    config = load_config(REPO / "configs" / "quickstart.yaml", ["device=cpu"])
    sizes = dict(seq_len=36, vocab_size=8, num_puzzle_identifiers=5)
    need, key = run_need(config, sizes, CPU, 64, 64, 0)
    model = registry.build(config.arch, sizes, CPU)
    params = [*model.parameters()]
    assert need.weights == sum(t.numel() * t.element_size() for t in [*params, *model.buffers()])
    assert need.optimizer == 3 * sum(p.numel() * p.element_size() for p in params)
    assert key == ("arch.hidden_size", 128)


@pytest.mark.parametrize("optimizer", ["adam_atan2", "adamw", "muon"])
def test_the_optimizer_floor_is_what_a_step_keeps(optimizer: str) -> None:
    """A gradient per trainable parameter and the optimizer's state after a step: Adam's two moments, Muon's one
    momentum on the matrices it takes (issue 46: the floor counted Adam's moments for Muon's matrices too)."""
    from hrm_reason.train.optim import make_optimizer

    config = load_config(REPO / "configs" / "quickstart.yaml", ["device=cpu", f"optimizer={optimizer}"])
    sizes = dict(seq_len=36, vocab_size=8, num_puzzle_identifiers=5)
    need, _ = run_need(config, sizes, CPU, 64, 64, 0)
    model = registry.build(config.arch, sizes, CPU)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer(config, model, CPU)
    for p in params:
        p.grad = torch.ones_like(p)
    opt.step()
    parts = getattr(opt, "parts", {"": opt}).values()  # muon: a SplitOptimizer, each part with its own state
    state = [t for o in parts for p in params for t in o.state[p].values() if getattr(t, "shape", None) == p.shape]
    kept = sum(t.numel() * t.element_size() for t in [*state, *(p.grad for p in params)])
    assert need.optimizer == kept
    assert (kept < 3 * sum(p.numel() * p.element_size() for p in params)) == (optimizer == "muon")


# Each shipped config's dataset as its builder writes it (seq_len, vocab_size, puzzle identifiers, groups), by data_path.
DATASETS = {
    "data/sudoku-extreme-1k-aug-1000": dict(seq_len=81, vocab_size=11, num_puzzle_identifiers=1, total_groups=1000),
    "data/sudoku-6x6-easy": dict(seq_len=36, vocab_size=8, num_puzzle_identifiers=1, total_groups=1000),
    "data/ladder/sudoku6x6": dict(seq_len=36, vocab_size=8, num_puzzle_identifiers=1, total_groups=1000),
    "data/sudoku-4x4": dict(seq_len=16, vocab_size=6, num_puzzle_identifiers=1, total_groups=1000),
    "data/maze-9x9": dict(seq_len=81, vocab_size=6, num_puzzle_identifiers=1, total_groups=1000),
    "data/ladder/maze9x9": dict(seq_len=81, vocab_size=6, num_puzzle_identifiers=1, total_groups=1000),
    "data/ladder/maze6x6": dict(seq_len=36, vocab_size=6, num_puzzle_identifiers=1, total_groups=1000),
    "data/maze-30x30-hard-1k": dict(seq_len=900, vocab_size=6, num_puzzle_identifiers=1, total_groups=1000),
    "data/arc-quick": dict(seq_len=900, vocab_size=12, num_puzzle_identifiers=20 * 9, total_groups=20),
    "data/arc-rung": dict(seq_len=100, vocab_size=12, num_puzzle_identifiers=250 * 9 + 1, total_groups=250),
    "data/arc1-eval10-aug64": dict(seq_len=100, vocab_size=12, num_puzzle_identifiers=77 * 65 + 1, total_groups=77),
    "data/your-task": dict(seq_len=100, vocab_size=4, num_puzzle_identifiers=1, total_groups=10000),  # examples/life
    "data/arc-aug-1000": dict(seq_len=900, vocab_size=12, num_puzzle_identifiers=960 * 1000 + 1, total_groups=960),
    "data/arc-2-aug-1000": dict(seq_len=900, vocab_size=12, num_puzzle_identifiers=1120 * 1000 + 1, total_groups=1120),
    "data/arc1concept-aug-1000": dict(
        seq_len=900, vocab_size=12, num_puzzle_identifiers=960 * 1000 + 1, total_groups=960
    ),
    "data/text-stdlib": dict(vocab_size=259),
}
# The paper's runs on 30x30 grids, on 8 GPUs (the original README): 768 examples of 900 cells need ~70 GiB at the least
# in one process, so they are checked per GPU (global_batch_size / 8, bf16) on 80 GiB, and at `hrm bench`'s stand-in
# shape (81 cells) on 24 GiB.
EIGHT_GPUS = {"arc1.yaml", "arc2.yaml", "maze.yaml", "maze_fast.yaml", "trm_arc1.yaml", "trm_maze.yaml"}


def shipped_need(name: str, sizes_of: Any, device: torch.device, processes: int = 1) -> int:
    config = load_config(REPO / "configs" / name)
    assert config.data_path in DATASETS, f"configs/{name}: add the shape of {config.data_path} to DATASETS"
    sizes = dict(DATASETS[config.data_path])
    if config.family == "lm" and "seq_len" in sizes:  # PrefixLM sequences of a puzzle dataset: puzzle, SEP, solution
        sizes = dict(seq_len=2 * sizes["seq_len"] + 1, vocab_size=sizes["vocab_size"] + 1)
    elif config.family == "lm":
        sizes["seq_len"] = config.seq_len
    sizes = sizes_of(sizes)
    batch = config.global_batch_size // processes
    plan = (config.eval_interval or 0) * sizes.get("total_groups", 0) * PLAN_BYTES
    need, _ = run_need(config, sizes, device, batch, (config.eval_global_batch_size or batch) // processes, plan)
    check_fits(need, device, {}, has=(80 if processes > 1 else 24) * GIB)  # raises when refused
    return need.device + need.data


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "configs").glob("*.yaml")))
def test_every_shipped_config_passes_at_its_own_batch_size(name: str) -> None:
    if name in EIGHT_GPUS:
        # The same check `hrm train` makes in each of the 8 processes (a GPU only has to be named, not present).
        shipped_need(name, lambda s: s, torch.device("cuda", 0), processes=8)
        shipped_need(name, lambda s: {**s, "seq_len": 81}, CPU)
    else:
        assert shipped_need(name, lambda s: s, CPU) < 16 * GIB


def refusal(config_overrides: list[str], batch: int | None = None, has: int = 24 * GIB) -> str:
    config = load_config(REPO / "configs" / "quickstart.yaml", ["device=cpu", *config_overrides])
    sizes = dict(seq_len=36, vocab_size=8, num_puzzle_identifiers=1)
    batch = batch or config.global_batch_size
    need, model = run_need(config, sizes, CPU, batch, batch, 0)
    with pytest.raises(UserError) as e:
        check_fits(need, CPU, {"model": model, "activations": ("--batch-size", batch)}, has=has)
    message = str(e.value)
    assert "\n" not in message and f"has {has / GIB:.1f} GiB available on cpu" in message
    return message


def test_a_refusal_names_the_key_to_lower() -> None:
    assert refusal(["arch.hidden_size=1000000"]).startswith("arch.hidden_size 1000000: needs at least 7.2e+05 GiB")
    assert refusal([], batch=10**9).startswith("--batch-size 1000000000: needs at least")
    assert refusal([], batch=10**9).endswith("lower --batch-size")
    # Too big with a batch of one: the batch is not what to lower.
    assert refusal(["arch.puzzle_emb_ndim=100000000000"], batch=10**9).startswith("arch.puzzle_emb_ndim 100000000000:")
    assert refusal(["arch.hidden_size=4096"], has=1 * GIB).startswith("arch.hidden_size 4096: needs at least")


def test_the_plan_of_a_huge_round_is_refused_naming_eval_interval(tmp_path: Path) -> None:
    """epochs=eval_interval=10**15 planned a round of 10**15 epochs of batches: memory and time without end."""
    from hrm_reason.train.run_memory import check_run_memory
    from tests.helpers import tiny_config, write_original_layout

    data = write_original_layout(tmp_path / "data")
    config = tiny_config(data, tmp_path / "run", f"epochs={10**15}", f"eval_interval={10**15}")
    with pytest.raises(UserError, match=r"^eval_interval 1000000000000000: needs at least .* lower eval_interval$"):
        check_run_memory(config, CPU)
    check_run_memory(tiny_config(data, tmp_path / "run"), CPU)  # the tiny run itself fits
    check_run_memory(tiny_config(tmp_path / "missing", tmp_path / "run"), CPU)  # no dataset: the run says so


def test_host_memory_is_memavailable_within_a_cgroup_limit(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24684084 kB\nMemFree:  1 kB\nMemAvailable:   22733412 kB\n")
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    assert host_available(meminfo, cgroup) == 22733412 * 1024
    (cgroup / "memory.max").write_text("max\n")
    (cgroup / "memory.current").write_text("1000\n")
    assert host_available(meminfo, cgroup) == 22733412 * 1024
    (cgroup / "memory.max").write_text(f"{8 * GIB}\n")
    assert host_available(meminfo, cgroup) == 8 * GIB - 1000
    assert host_available(tmp_path / "none", tmp_path / "none") is None


def test_a_failed_allocation_is_one_line_and_other_errors_pass() -> None:
    with pytest.raises(UserError) as e, allocation_errors("hrm bench", "--batch-size or arch.hidden_size"):
        torch.empty(2**52, dtype=torch.uint8)  # 4 PiB: no machine's allocator grants it
    message = str(e.value)
    assert message.startswith("hrm bench: out of memory on cpu (an allocation of 4.2e+06 GiB failed)")
    assert message.endswith("lower --batch-size or arch.hidden_size") and "\n" not in message
    with pytest.raises(RuntimeError, match="shape"), allocation_errors("hrm bench", "--batch-size"):
        torch.zeros(2, 3) @ torch.zeros(2, 3)
    assert out_of_memory(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert not out_of_memory(RuntimeError("expected a tensor"))
