"""Whether a run fits in memory, asked before anything is allocated: the bytes a training step needs, estimated from
plain sizes (a model built on the `meta` device, the batch, the sequence), against what the machine has now; and an
allocation that fails anyway, as the same one line instead of the allocator's trace.

The estimate is a floor, not a forecast: it counts what a step certainly holds, so that a refused run could not have
run, and every shipped config passes at its own batch size on a 24 GiB machine (the paper's 30x30 runs, made for 8
GPUs, on each GPU: tests/test_memory.py). What a step holds:

- weights: every parameter and buffer (the puzzle-embedding table is a buffer), exactly, counted on the meta device;
- optimizer: a gradient and Adam's two moments per trainable parameter, in the parameter's dtype (Muon keeps one
  momentum where Adam keeps two moments: the caller passes the bytes of the matrices it takes, `one_state_bytes`);
- activations: what backward keeps. Every matrix product saves its input for its weight's gradient, so a step keeps at
  least batch x positions x (the input widths of every weight matrix) elements, in the compute dtype; the norms, the
  attention's and the SwiGLU's other tensors come on top. Measured on the shipped quick configs (saved-tensor hooks
  over one training step on a CPU, 81 cells), a step keeps 3.6 (HRM) to 15 (TRM's MLP mixer) times the matrix
  inputs; ACTIVATION_FACTOR counts 2 of them. Attention scores (batch x heads x positions^2) are not counted: the fused
  kernels (flash attention on CUDA and on CPUs) never keep them;
- evaluation: a forward without gradients of the evaluation batch holds at least its recurrent state and one
  block's input and output, EVAL_WIDTHS x hidden_size per position;
- data: host memory the run's data pipeline builds (the puzzle sampler plans a whole round of batches at once).

The check compares weights + optimizer + the larger of the two steps with the device's available memory (CUDA: free
memory; CPU: MemAvailable, within a cgroup's limit), and the data part with the host's when the device is a GPU.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from hrm_reason.errors import UserError

GIB = 2**30
ACTIVATION_FACTOR = 2  # elements a step keeps per element of the matrix products' inputs (at least; see above)
EVAL_WIDTHS = 4  # hidden-size vectors per position an evaluation forward holds at least (state, a block's in and out)
ADAM_COPIES = 3  # gradient, exp_avg, exp_avg_sq


@dataclass(frozen=True)
class ModelSize:
    """What a model's memory depends on, read from the model built on the meta device."""

    weight_bytes: int  # parameters and buffers
    trainable_bytes: int  # parameters that take gradients
    matrix_inputs: int  # summed input width of every weight matrix: elements a step saves per position, at least

    @classmethod
    def of(cls, model: nn.Module) -> ModelSize:
        def size(t: torch.Tensor) -> int:
            return t.numel() * t.element_size()

        params, buffers = list(model.parameters()), list(model.buffers())
        inputs = 0
        for module in model.modules():
            weight = getattr(module, "weight", None)
            if isinstance(weight, torch.Tensor) and weight.dim() == 2 and "Embedding" not in type(module).__name__:
                inputs += weight.shape[1]  # (out, in): an embedding's rows are looked up, not multiplied
        return cls(
            weight_bytes=sum(map(size, params)) + sum(map(size, buffers)),
            trainable_bytes=sum(size(p) for p in params if p.requires_grad),
            matrix_inputs=inputs,
        )


def meta_size(build: Callable[[torch.device], nn.Module]) -> ModelSize:
    """The size of the model `build` makes, made on the meta device: shapes without storage, at once at any size."""
    return ModelSize.of(build(torch.device("meta")))


@dataclass(frozen=True)
class Need:
    """Bytes a run needs at least (module docstring), by what holds them."""

    weights: int
    optimizer: int
    activations: int  # a training step of the per-process batch
    evaluation: int = 0  # an evaluation forward of the per-process evaluation batch
    data: int = 0  # host memory of the data pipeline
    batch: int = 1  # the examples `activations` counts
    eval_batch: int = 1  # the examples `evaluation` counts

    @property
    def device(self) -> int:
        """Bytes on the device the model runs on."""
        return self.weights + self.optimizer + max(self.activations, self.evaluation)

    @property
    def one_example(self) -> int:
        """`device` with batches of one example: above the memory there, no batch size helps."""
        return self.weights + self.optimizer + max(self.activations // self.batch, self.evaluation // self.eval_batch)

    def largest(self, among: tuple[str, ...] = ("model", "activations", "evaluation", "data")) -> str:
        """The part that dominates, of "model" (weights and optimizer), "activations", "evaluation" and "data"."""
        parts = {
            "model": self.weights + self.optimizer,
            "activations": self.activations,
            "evaluation": self.evaluation,
            "data": self.data,
        }
        return max(among, key=parts.__getitem__)


def training_need(
    size: ModelSize,
    batch: int,
    positions: int,
    hidden: int,
    compute_bytes: int,
    eval_batch: int = 0,
    data: int = 0,
    one_state_bytes: int = 0,
) -> Need:
    """The floor of a run's memory (module docstring): `batch` and `eval_batch` per process, `positions` per example
    (tokens, grid cells and prefix), `compute_bytes` per activation element (4: fp32; 2: bf16); `one_state_bytes` of
    the trainable parameters have an optimizer with one state tensor (Muon's momentum) instead of Adam's two."""
    return Need(
        weights=size.weight_bytes,
        optimizer=ADAM_COPIES * size.trainable_bytes - one_state_bytes,
        activations=batch * positions * size.matrix_inputs * compute_bytes * ACTIVATION_FACTOR,
        evaluation=eval_batch * positions * hidden * EVAL_WIDTHS * compute_bytes,
        data=data,
        batch=max(1, batch),
        eval_batch=max(1, eval_batch),
    )


def host_available(meminfo: Path = Path("/proc/meminfo"), cgroup: Path = Path("/sys/fs/cgroup")) -> int | None:
    """Bytes this process may still allocate on the host: Linux's MemAvailable (free memory and reclaimable caches),
    lowered to what a cgroup v2 memory limit leaves; None where neither can be read (not Linux)."""
    available = None
    try:
        match = re.search(r"^MemAvailable:\s+(\d+) kB", meminfo.read_text(), flags=re.M)
        available = int(match.group(1)) * 1024 if match else None
    except OSError:
        pass
    try:
        limit = (cgroup / "memory.max").read_text().strip()
        if limit != "max":
            left = max(0, int(limit) - int((cgroup / "memory.current").read_text().strip()))
            available = left if available is None else min(available, left)
    except (OSError, ValueError):
        pass
    return available


def available(device: torch.device) -> int | None:
    """Bytes free for tensors on `device` now: the GPU's free memory, or the host's (host_available); None: unknown."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    if device.type == "cpu":
        return host_available()
    return None


def gib(n: float) -> str:
    """Bytes as GiB: one decimal, two significant digits below 0.1 GiB and beyond 1000."""
    x = n / GIB
    return f"{x:.1f}" if 0.1 <= x < 1000 else f"{x:.2g}"


def check_fits(
    need: Need, device: torch.device, culprits: dict[str, tuple[str, object]], has: int | None = None
) -> None:
    """UserError, one line, when `need` exceeds the memory `device` has now (`has`: given instead, for tests). `culprits`
    names the key or flag, with its value, to lower for each part of Need ("model", "activations", "evaluation",
    "data"), e.g. {"activations": ("global_batch_size", 768)}; the line names the one of the largest part."""
    has = available(device) if has is None else has
    if device.type == "cpu":  # one memory for everything
        checks = [(need.device + need.data, has, need.largest())]
    else:  # the model's tensors on the device, the data pipeline's on the host
        on_device = need.largest(("model", "activations", "evaluation"))
        checks = [(need.device, has, on_device), (need.data, host_available(), "data")]
    for total, free, part in checks:
        if free is None or total <= free:
            continue
        if part in ("activations", "evaluation") and need.one_example > free:
            # too big at any batch size: the model and its example are (an "example" culprit: what sizes one)
            part = "example" if "example" in culprits else "model"
        key, value = culprits.get(part, culprits.get("model", ("the model", "")))
        parts = f"weights {gib(need.weights)}, optimizer {gib(need.optimizer)}, a training step {gib(need.activations)}"
        parts += f", an evaluation batch {gib(need.evaluation)}" if need.evaluation else ""
        parts += f", data {gib(need.data)}" if need.data else ""
        where = "the host" if part == "data" and device.type != "cpu" else str(device)
        raise UserError(
            f"{key} {value}: needs at least {gib(total)} GiB of memory ({parts} GiB), has {gib(free)} GiB available "
            f"on {where}: lower {key}"
        )


def out_of_memory(e: BaseException) -> bool:
    """An allocation that failed: CUDA's OutOfMemoryError, or the CPU allocator's RuntimeError."""
    if isinstance(e, torch.OutOfMemoryError):
        return True
    text = str(e)
    return isinstance(e, RuntimeError | MemoryError) and (
        "can't allocate memory" in text or "out of memory" in text.lower() or isinstance(e, MemoryError)
    )


def _requested(e: BaseException) -> str:
    """What the failed allocation asked for, as torch said it (empty when it did not)."""
    text = str(e)
    if match := re.search(r"tried to allocate (\d+) bytes", text):
        return f" (an allocation of {gib(int(match.group(1)))} GiB failed)"
    if match := re.search(r"Tried to allocate ([\d.]+ [KMGT]iB)", text):
        return f" (an allocation of {match.group(1)} failed)"
    return ""


@contextlib.contextmanager
def allocation_errors(what: str, culprits: str) -> Iterator[None]:
    """An allocation failing inside the block (what the floor of check_fits let through) becomes one line: `what` ran
    out of memory, on the GPU or the host, lower `culprits` (e.g. "global_batch_size or arch.hidden_size")."""
    try:
        yield
    except (RuntimeError, MemoryError) as e:
        if not out_of_memory(e):
            raise
        device = torch.device("cuda") if isinstance(e, torch.OutOfMemoryError) else torch.device("cpu")
        has = available(device)
        left = f"; {gib(has)} GiB available now" if has is not None else ""
        raise UserError(f"{what}: out of memory on {device.type}{_requested(e)}{left}: lower {culprits}") from None
