"""Test-time compute for the ACT puzzle models: transformed copies of each puzzle (augmentation), several noisy
trajectories per copy (sampling), the answer picked by the halting head's confidence or by vote, and the blank puzzle
identifier. The decisions are in docs/training.md ("Test-time compute").

Every trajectory is one run of the ACT loop (models/act.py) over its own copy of the batch, with its own carry: copy a
(a = 0: the puzzle as given) and sample s (s = 0: no noise). Trajectory (a, s) depends only on the seed, the batch
and (a, s), never on how many others run, so one pass at the largest K yields every smaller combination exactly (the
first a copies, the first s samples), and (1 copy, 1 sample) is plain evaluation.

Bounds (docs/commands.md, `hrm eval`): --samples at most MAX_SAMPLES; copies at most the task's group (more are
capped with a notice, `fit_to_group`); copies x samples at most MAX_TRAJECTORIES per puzzle; and the puzzles of a
batch cut down until every trajectory's carried state fits half the free memory (`fit_batch`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from hrm_reason.errors import UserError
from hrm_reason.limits import SAMPLES
from hrm_reason.losses import IGNORE_LABEL_ID
from hrm_reason.models.act import ACTOutput
from hrm_reason.tasks.base import TaskTransforms, vote_order

Batch = dict[str, torch.Tensor]
BLANK_IDENTIFIER = 0
MAX_SAMPLES = SAMPLES.high  # trajectories per copy (hrm_reason/limits.py)
# Trajectories (copies x samples) per puzzle: each is a full ACT loop with its own carry, one forward per segment (1,024
# of them cost what 1,024 plain evaluations do), and --select vote compares every pair (a million pairs per puzzle).
MAX_TRAJECTORIES = 1024


@dataclass(frozen=True)
class TestTimeOptions:
    __test__ = False  # not a pytest class

    tta: int = 1  # transformed copies per puzzle (1 = only the puzzle as given)
    samples: int = 1  # trajectories per copy
    noise: float = 0.0  # std of Gaussian noise added to the carried recurrent state
    noise_at: Literal["every", "initial"] = "every"  # every segment (PTRM) or only the initial state
    select: Literal["q", "vote"] = "q"  # pick the answer by halting confidence, or by vote (ties: mean confidence)
    seed: int = 0
    blank_puzzle_id: bool = False  # replace every puzzle identifier with the blank one (0)

    def __post_init__(self) -> None:
        if self.tta < 1:
            raise UserError(f"--tta {self.tta}: expected 1 or more transformed copies (1: the puzzle as given)")
        if self.samples < 1:
            raise UserError(f"--samples {self.samples}: expected 1 or more trajectories per copy")
        if self.samples > MAX_SAMPLES:
            raise UserError(f"--samples {self.samples}: at most {MAX_SAMPLES} trajectories per copy (docs/commands.md)")
        if not self.noise >= 0 or not np.isfinite(self.noise):
            raise UserError(f"--noise {self.noise}: expected a finite standard deviation >= 0")
        if self.noise > 0 and self.samples == 1:
            raise UserError(
                f"--noise {self.noise}: has no effect with --samples 1 (sample 0 is the noiseless trajectory); "
                "pass --samples 2 or more"
            )
        if self.noise_at not in ("every", "initial"):
            raise UserError(f"--noise-at {self.noise_at!r}: expected 'every' or 'initial'")
        if self.select not in ("q", "vote"):
            raise UserError(f"--select {self.select!r}: expected 'q' (halting confidence) or 'vote'")
        if self.seed < 0:
            raise UserError(f"--tta-seed {self.seed}: expected 0 or more")

    @property
    def plain(self) -> bool:
        """Nothing beyond plain evaluation."""
        return self.tta == 1 and self.samples == 1 and not self.blank_puzzle_id

    @property
    def trajectories(self) -> int:
        return self.tta * self.samples


def fit_to_group(options: TestTimeOptions, transforms: TaskTransforms | None) -> tuple[TestTimeOptions, str | None]:
    """(options, notice): --tta capped at the size of the task's group, with the notice saying so (more copies than
    elements would only repeat them), and a UserError when copies x samples exceed MAX_TRAJECTORIES."""
    size = transforms.group_size if transforms is not None else None
    name = transforms.group_name if transforms is not None else "the task's group"
    copies, notice = options.tta, None
    if size is not None and copies > size:
        copies = size
        notice = f"--tta {options.tta}: {name} has {size} element{'s' * (size != 1)}; using {size}"
    if copies * options.samples > MAX_TRAJECTORIES:
        group = f" ({name} has {size} elements)" if copies < options.tta else ""
        raise UserError(
            f"{_flags(options)}: {copies * options.samples} trajectories per puzzle{group}; at most "
            f"{MAX_TRAJECTORIES} copies x samples (docs/commands.md)"
        )
    return (dataclasses.replace(options, tta=copies) if copies != options.tta else options), notice


def carry_row_bytes(model: nn.Module, seq_len: int, device: torch.device) -> int:
    """Bytes one trajectory of one puzzle keeps between segments: its core's carried state (read from an empty carry
    of one row, so every family and dtype is measured as it is) and four int64 token rows (predictions, ACT answer)."""
    carry = model.inner.empty_carry(1, device)
    state = sum(getattr(carry, f.name).nbytes for f in dataclasses.fields(carry))
    return state + 4 * 8 * seq_len


def fit_batch(batch: int, options: TestTimeOptions, row_bytes: int, free: int) -> tuple[int, str | None]:
    """(puzzles per batch, notice): `batch` when the carried state of its copies x samples trajectories fits half of
    the `free` bytes, else the most that fit, with the notice saying so; a UserError when not even one puzzle's do."""
    per_puzzle = options.trajectories * row_bytes
    fits = free // 2 // per_puzzle
    if fits < 1:
        raise UserError(
            f"{_flags(options)}: the carried state of one puzzle's {options.trajectories} trajectories needs "
            f"{_gib(per_puzzle)}, more than half of the {_gib(free)} free"
        )
    if batch <= fits:
        return batch, None
    return fits, (
        f"{_flags(options)}: {fits} puzzles per batch instead of {batch}, so that the carried state of their "
        f"{options.trajectories * fits} trajectories ({_gib(fits * per_puzzle)}) fits half of the {_gib(free)} free"
    )


def _flags(options: TestTimeOptions) -> str:
    """The flags that set the trajectories, as typed: "--tta 8", "--samples 4", "--tta 8 x --samples 4"."""
    given = [f"--tta {options.tta}"] * (options.tta > 1) + [f"--samples {options.samples}"] * (options.samples > 1)
    return " x ".join(given) or "--tta 1"


def _gib(count: int) -> str:
    return f"{count / 2**30:.2f} GiB"


@dataclass
class Prediction:
    preds: torch.Tensor  # [B, seq_len] predicted tokens in the puzzle's own frame (transforms undone)
    confidence: torch.Tensor  # [B] sigmoid(q_halt) of the chosen answer (mean over the copies that voted for it)
    segments: torch.Tensor  # [B] ACT segments the chosen answer used (first q_halt > q_continue, else mmax)


# ---------------------------------------------------------------------------------------------------------- voting


def answer_hash(preds: torch.Tensor) -> torch.Tensor:
    """[..., L] tokens -> [...] int64, equal for equal answers; distinct answers collide with probability < 2^-50 (a
    random linear map modulo 2^64 with fixed odd weights), so votes are counted without comparing sequences pairwise."""
    g = torch.Generator().manual_seed(0x5EED)
    weights = torch.randint(-(2**62), 2**62, (preds.shape[-1],), generator=g, dtype=torch.int64) * 2 + 1
    return (preds.long() * weights.to(preds.device)).sum(-1)


def choose(hashes: torch.Tensor, q: torch.Tensor, select: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row, the chosen trajectory and its confidence, from [N, B] answer hashes and float64 confidences.

    q: the most confident trajectory (the first on ties). vote: the answer most trajectories give, ties broken by the
    mean confidence of its voters (vote_order); its confidence is that mean."""
    if select == "q":
        best = q.argmax(0)
        return best, q.gather(0, best[None])[0]
    same = hashes[:, None, :] == hashes[None, :, :]  # [N, N, B]
    counts = same.sum(1)
    mean_q = (same * q[None]).sum(1) / counts
    best = vote_order(counts.T, mean_q.T)[:, 0]
    return best, mean_q.gather(0, best[None])[0]


# ---------------------------------------------------------------------------------------------------- trajectories


def _seed(*key: int) -> int:
    return int(np.random.SeedSequence([int(k) for k in key]).generate_state(1, np.uint64)[0] >> 1)


@dataclass
class Segment:
    """One segment of every trajectory, trajectory t = copy * samples + sample."""

    index: int  # 0-based
    preds: torch.Tensor  # [N, B, seq_len] in the puzzle's frame
    q: torch.Tensor  # [N, B] float64 sigmoid(q_halt)
    halt: torch.Tensor  # [N, B] bool: q_halt > q_continue
    plain: ACTOutput  # trajectory (0, 0): the puzzle as given, no noise


def _add_noise(inner: Any, scale: float, generator: torch.Generator) -> Any:
    """N(0, scale^2) added to every tensor of the core's carry dataclass."""
    noisy = {}
    for f in dataclasses.fields(inner):
        state = getattr(inner, f.name)
        noise = torch.randn(state.shape, generator=generator, device=state.device, dtype=torch.float32)
        noisy[f.name] = state + (scale * noise).to(state.dtype)
    return dataclasses.replace(inner, **noisy)


@torch.no_grad()
def trajectories(
    model: nn.Module,
    batch: Batch,
    mmax: int,
    options: TestTimeOptions,
    transforms: TaskTransforms | None,
    key: Sequence[int] = (),
    allowed: torch.Tensor | None = None,
) -> Iterator[Segment]:
    """Run every trajectory of `batch` for mmax segments; yield each segment with predictions mapped back.

    `key` (e.g. rank and batch number) enters every seed, so batches get different transforms and noise; `allowed`
    (token ids) limits each prediction to the likeliest of them (hrm solve: `Task.answer_tokens`). The model runs in
    eval mode, and is left in the mode it had."""
    if options.tta > 1 and transforms is None:
        raise UserError(f"--tta {options.tta}: this dataset's task has no test-time transforms")
    if options.trajectories > MAX_TRAJECTORIES:
        raise UserError(f"--tta x --samples: {options.trajectories} trajectories; at most {MAX_TRAJECTORIES}")
    B = batch["inputs"].shape[0]
    A, S = options.tta, options.samples
    model_batch = dict(batch)
    if options.blank_puzzle_id:
        model_batch["puzzle_identifiers"] = torch.full_like(batch["puzzle_identifiers"], BLANK_IDENTIFIER)
    elements: list[Any] = []
    copies = [model_batch]
    if A > 1:
        assert transforms is not None
        rng = np.random.default_rng([options.seed, *key])
        elements = transforms.draw(rng, B, A)
        inputs = batch["inputs"].cpu().numpy()
        for element in elements:
            moved = torch.from_numpy(np.ascontiguousarray(transforms.apply(inputs, element)))
            copies.append({**model_batch, "inputs": moved.to(batch["inputs"].device, batch["inputs"].dtype)})
    generators: dict[int, torch.Generator] = {}
    for t in range(A * S):
        if t % S and options.noise > 0:
            device = batch["inputs"].device
            generators[t] = torch.Generator(device).manual_seed(_seed(options.seed, *key, t // S, t % S))
    was_training = model.training
    model.eval()
    try:
        carries = [model.started_carry(copies[t // S]) for t in range(A * S)]
        for m in range(mmax):
            preds, q, halt = [], [], []
            plain: ACTOutput | None = None
            for t, carry in enumerate(carries):
                if t in generators and (m == 0 or options.noise_at == "every"):
                    carry.inner_carry = _add_noise(carry.inner_carry, options.noise, generators[t])
                carries[t], out = model(carry, copies[t // S], halt_max_steps=mmax)
                plain = out if t == 0 else plain
                logits = out.logits if allowed is None else out.logits[..., allowed]
                preds.append(logits.argmax(-1) if allowed is None else allowed[logits.argmax(-1)])
                q.append(torch.sigmoid(out.q_halt_logits.double()))
                halt.append(out.q_halt_logits > out.q_continue_logits)
            stacked = torch.stack(preds)
            if A > 1:
                assert transforms is not None
                moved = stacked[S:].cpu().numpy()
                back = [transforms.invert(moved[i], elements[i // S]) for i in range(moved.shape[0])]
                stacked[S:] = torch.from_numpy(np.stack(back)).to(stacked.device, stacked.dtype)
            assert plain is not None
            yield Segment(m, stacked, torch.stack(q), torch.stack(halt), plain)
    finally:
        model.train(was_training)


class ActTracker:
    """Each trajectory's ACT answer: its prediction at the first segment with q_halt > q_continue, else at mmax."""

    def __init__(self) -> None:
        self.preds: torch.Tensor | None = None
        self.q = self.segments = self.done = torch.empty(0)

    def update(self, seg: Segment, mmax: int) -> None:
        if self.preds is None:
            self.preds, self.q = seg.preds.clone(), seg.q.clone()
            self.segments = torch.zeros_like(seg.halt, dtype=torch.int64)
            self.done = torch.zeros_like(seg.halt)
        now = ~self.done & (seg.halt | (seg.index == mmax - 1))
        self.preds = torch.where(now[..., None], seg.preds, self.preds)
        self.q = torch.where(now, seg.q, self.q)
        self.segments = torch.where(now, seg.index + 1, self.segments)
        self.done |= now


def predict(segments: Iterable[Segment], mmax: int, select: str) -> Prediction:
    """Each puzzle's answer over the trajectories of `segments` (from `trajectories`), each trajectory halted by ACT
    (cap mmax), the answer chosen by `select` (q or vote)."""
    act = ActTracker()
    for seg in segments:
        act.update(seg, mmax)
    assert act.preds is not None
    hashes = answer_hash(act.preds)
    best, confidence = choose(hashes, act.q, select)
    rows = torch.arange(best.numel(), device=best.device)
    # the segments of the most confident trajectory among those giving the chosen answer
    agree = hashes == hashes[best, rows]
    voter = torch.where(agree, act.q, -1.0).argmax(0)
    return Prediction(act.preds[best, rows], confidence.float(), act.segments[voter, rows])


# ------------------------------------------------------------------------------------------------------ evaluation


def budgets(k: int) -> list[int]:
    """Powers of two below k, and k: the numbers of copies (or samples) the table reports."""
    return sorted({1 << i for i in range(k.bit_length()) if 1 << i < k} | {k})


class TestTimeEval:
    """The test-time table of an evaluation (evaluate/act.py `evaluate(..., test_time=...)`): per segment budget m,
    number of copies a and samples s, the exact and token accuracy of the chosen answer; per (a, s) the ACT result.

    `segments` runs every trajectory of a batch and hands the plain one (copy 0, sample 0) to the usual metrics."""

    __test__ = False  # not a pytest class

    def __init__(self, options: TestTimeOptions, transforms: TaskTransforms | None, mmax: int) -> None:
        self.options, self.transforms, self.mmax = options, transforms, mmax
        self.copies, self.samples = budgets(options.tta), budgets(options.samples)
        self.sums: torch.Tensor | None = None  # [mmax + 1 (ACT), copies, samples, 3: exact, token, segments]
        self.count: torch.Tensor | None = None

    def _subset(self, a: int, s: int) -> list[int]:
        S = self.options.samples
        return [c * S + k for c in range(a) for k in range(s)]

    def _score(self, preds: torch.Tensor, q: torch.Tensor, labels: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """[copies, samples, 2] summed exact and token accuracy of the chosen answers over the valid rows."""
        hashes = answer_hash(preds)
        mask = labels != IGNORE_LABEL_ID
        n_valid = mask.sum(-1).clamp_min(1)
        rows = torch.arange(labels.shape[0], device=labels.device)
        out = torch.zeros(len(self.copies), len(self.samples), 2, dtype=torch.float64, device=labels.device)
        for i, a in enumerate(self.copies):
            for j, s in enumerate(self.samples):
                idx = torch.tensor(self._subset(a, s), device=labels.device)
                best, _ = choose(hashes[idx], q[idx], self.options.select)
                chosen = preds[idx][best, rows]
                correct = mask & (chosen == labels)
                out[i, j, 0] = (valid & (correct.sum(-1) == mask.sum(-1))).sum()
                out[i, j, 1] = torch.where(valid, correct.sum(-1) / n_valid, 0).sum()
        return out

    def segments(self, model: nn.Module, batch: Batch, mmax: int, key: Sequence[int]) -> Iterator[ACTOutput]:
        labels = batch["labels"]
        valid = (labels != IGNORE_LABEL_ID).sum(-1) > 0
        if self.sums is None:
            shape = (mmax + 1, len(self.copies), len(self.samples), 3)
            self.sums = torch.zeros(shape, dtype=torch.float64, device=labels.device)
            self.count = torch.zeros((), dtype=torch.float64, device=labels.device)
        assert self.count is not None
        self.count += valid.sum()
        act = ActTracker()
        for seg in trajectories(model, batch, mmax, self.options, self.transforms, key):
            self.sums[seg.index, ..., :2] += self._score(seg.preds, seg.q, labels, valid)
            act.update(seg, mmax)
            yield seg.plain
        assert act.preds is not None
        self.sums[mmax, ..., :2] += self._score(act.preds, act.q, labels, valid)
        for i, a in enumerate(self.copies):
            for j, s in enumerate(self.samples):
                total = act.segments[self._subset(a, s)].sum(0)
                self.sums[mmax, i, j, 2] += torch.where(valid, total, 0).sum()

    def result(self, world_size: int) -> dict[str, Any]:
        sums = (
            self.sums if self.sums is not None else torch.zeros(self.mmax + 1, len(self.copies), len(self.samples), 3)
        )
        count = self.count if self.count is not None else torch.zeros((), dtype=torch.float64)
        if world_size > 1:
            both = torch.cat([sums.flatten(), count.view(1)])
            torch.distributed.all_reduce(both)
            sums, count = both[:-1].view(sums.shape), both[-1]
        sums, d = sums.cpu(), max(float(count), 1.0)
        table = [
            {
                "segments": m + 1,
                "tta": a,
                "samples": s,
                "total_segments": (m + 1) * a * s,
                "exact_accuracy": float(sums[m, i, j, 0]) / d,
                "token_accuracy": float(sums[m, i, j, 1]) / d,
            }
            for i, a in enumerate(self.copies)
            for j, s in enumerate(self.samples)
            for m in range(self.mmax)
        ]
        act = [
            {
                "tta": a,
                "samples": s,
                "exact_accuracy": float(sums[self.mmax, i, j, 0]) / d,
                "token_accuracy": float(sums[self.mmax, i, j, 1]) / d,
                "mean_total_segments": float(sums[self.mmax, i, j, 2]) / d,
            }
            for i, a in enumerate(self.copies)
            for j, s in enumerate(self.samples)
        ]
        return {"options": dataclasses.asdict(self.options), "count": int(d), "table": table, "act": act}


def format_test_time(table: dict[str, Any]) -> str:
    """The printed table: one line per (copies, samples), exact accuracy after each segment budget m, then ACT."""
    o = table["options"]
    rows: dict[tuple[int, int], dict[int, float]] = {}
    for r in table["table"]:
        rows.setdefault((r["tta"], r["samples"]), {})[r["segments"]] = r["exact_accuracy"]
    mmax = max((m for r in rows.values() for m in r), default=0)
    noise = f", noise {o['noise']} ({o['noise_at']})" if o["noise"] > 0 else ""
    blank = ", blank puzzle id" if o["blank_puzzle_id"] else ""
    lines = [
        f"test-time compute: exact accuracy of the answer chosen by {o['select']}{noise}{blank}, seed {o['seed']}; "
        "total segments per puzzle = m x tta x samples",
        f"{'tta':>4} {'samples':>7}"
        + "".join(f" {'m=' + str(m):>7}" for m in range(1, mmax + 1))
        + "  ACT (mean total)",
    ]
    act = {(r["tta"], r["samples"]): r for r in table["act"]}
    for (a, s), by_m in rows.items():
        cells = "".join(f" {by_m[m]:>7.4f}" for m in range(1, mmax + 1))
        r = act[(a, s)]
        lines.append(f"{a:>4} {s:>7}{cells}  {r['exact_accuracy']:.4f} ({r['mean_total_segments']:.1f})")
    return "\n".join(lines)
