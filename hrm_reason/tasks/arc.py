"""ARC: the token layout, the augmentations and their inverses, and voting over augmented predictions.

Written once here for the builder (datasets_build/arc.py), evaluation and the pictures (hrm_reason/viz); the
decisions are in docs/data.md ("ARC") and docs/training.md ("ARC voting").

Layout: each grid sits in a `size` x `size` canvas (30 x 30 by default), PAD 0, EOS 1, colour c -> c + 2, an EOS row
below and an EOS column right of the grid (the corner stays PAD). An augmentation is a colour map with black fixed,
then a dihedral transform; its puzzle identifier is named `{task}_t{t}_{colour map digits}` (the original is `{task}`).

Voting: every augmented variant of a test input votes for its answer. Each variant's prediction after the last segment
is cropped at the EOS border, mapped back through the inverse augmentation (inverse transform, then inverse colour map)
and counted under the original test input; candidates are ranked by vote count, ties broken by the mean
sigmoid(q_halt). pass@k: the answer is among the top k; a task counts only when all its test inputs are solved (HRM's
rule). The top two candidates per test input form a Kaggle `submission.json`.

Predictions are reduced on the fly (grid bytes -> [votes, sum of q]), never stored as logits: the original notebook
needed a ~9 GB dump. The inverse augmentation comes from the format itself: identifier names in identifiers.json and
the task list in the test split's `builder` record, or, for a dataset the original builder wrote (no record), the
names of each group's first puzzle (`layout_record`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from hrm_reason.data.puzzle import PuzzleDatasetMetadata, PuzzleSplit, load_split
from hrm_reason.errors import UserError
from hrm_reason.readers import parse_json, read_json
from hrm_reason.tasks.base import GridLook, Puzzle, Reading, Task, vote_order
from hrm_reason.tasks.dihedral import (
    DIHEDRAL_INVERSE,
    SWAPS_AXES,
    TRANSFORM_NAMES,
    dihedral_transform,
    inverse_dihedral_transform,
)

if TYPE_CHECKING:
    from hrm_reason.models.act import ACTOutput

MAX_SIZE = 30  # the ARC format: grids of 1x1 up to 30x30
TEST_TASKS = "test_tasks"  # an ARC build's folder of its test split's tasks as task JSON (hrm eval --adapt reads it)
PAD, EOS, COLOUR_OFFSET = 0, 1, 2  # tokens: colour c is c + 2
VOCAB_SIZE = 12
AUG_NAME = re.compile(r"^(?P<task>.+)_t(?P<t>[0-7])_(?P<colours>0[1-9]{9})$")
IDENTITY_COLOURS = np.arange(10, dtype=np.uint8)
PASS_KS = (1, 2, 10, 100, 1000)
SUBMISSION_ATTEMPTS = 2


# ------------------------------------------------------------------------------------------------ augmentation


def inverse_augment(grid: np.ndarray, t: int, inverse_colours: np.ndarray) -> np.ndarray:
    """Undo the augmentation `dihedral_transform(colours[grid], t)`: the inverse transform, then the inverse colour
    map `inverse_colours = argsort(colours)` (voting keeps one per identifier)."""
    return inverse_colours[inverse_dihedral_transform(grid, t)]


def augmentation_name(name: str, t: int, colours: np.ndarray) -> str:
    return f"{name}_t{t}_{''.join(str(int(c)) for c in colours)}"


def parse_identifier(name: str) -> tuple[str, int, np.ndarray]:
    """`{task}_t{t}_{colours}` -> (task, t, colour map); the original puzzle's name is just `{task}`."""
    m = AUG_NAME.match(name)
    if m is None:
        return name, 0, IDENTITY_COLOURS
    return m["task"], int(m["t"]), np.frombuffer(m["colours"].encode(), dtype=np.uint8) - ord("0")


# ------------------------------------------------------------------------------------------------------- grids


def parse_grid(value: Any, where: str, size: int = MAX_SIZE, limit: str | None = None) -> np.ndarray:
    """A grid as ARC's JSON writes it (1..size rows of 1..size cells with colours 0..9) as uint8; a UserError naming
    `where` otherwise (`limit` says what `size` is: the format's maximum, or a model's canvas)."""
    if not isinstance(value, list) or not value:
        raise UserError(f"{where}: expected a non-empty list of rows")
    width = None
    for i, row in enumerate(value):
        if not isinstance(row, list) or not row:
            raise UserError(f"{where}: row {i} is not a non-empty list of colours")
        width = len(row) if width is None else width
        if len(row) != width:
            raise UserError(f"{where}: ragged grid (row {i} has {len(row)} cells, row 0 has {width})")
        for j, v in enumerate(row):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v <= 9:
                raise UserError(f"{where}: colour {v!r} at row {i}, column {j} is outside 0..9")
    assert width is not None
    if len(value) > size or width > size:
        limit = limit or f"the ARC maximum of {size}x{size}"
        raise UserError(f"{where}: a {len(value)}x{width} grid, larger than {limit}")
    return np.array(value, dtype=np.uint8)


def grid_key(grid: np.ndarray) -> bytes:
    """Exact identity of a grid (shape and colours); the vote tables are keyed by it."""
    return bytes(grid.shape) + np.ascontiguousarray(grid, dtype=np.uint8).tobytes()


# The augmentation plan and pair equivalence: the builder (datasets_build/arc.py) and `hrm adapt` draw a task's variants
# with this one code, so that a task adapted at test time gets the variants a build would give it.
AUGMENT_RETRIES = 5  # trials per wanted augmentation, as the original
STREAM_AUGMENT, STREAM_TRANSLATE = 1, 2  # random streams derived from the one seed (the builder's subset stream is 3)


def name_seed(name: str) -> list[int]:
    """Four 32-bit words from the name: a per-task seed that does not depend on any other task."""
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    return [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]


def puzzle_hash(pairs: Iterable[tuple[np.ndarray, np.ndarray]]) -> str:
    """The original's equivalence test: SHA-256 over the sorted per-pair hashes (shape bytes + data bytes)."""

    def one(grid: np.ndarray) -> str:
        return hashlib.sha256(grid_key(grid)).hexdigest()

    return hashlib.sha256("|".join(sorted(f"{one(a)}|{one(b)}" for a, b in pairs)).encode()).hexdigest()


def plan_augmentations(
    name: str, pairs: Sequence[tuple[np.ndarray, np.ndarray]], num_aug: int, seed: int
) -> list[tuple[int, np.ndarray]]:
    """(t, colour map) of the original followed by its distinct augmentations, in trial order: the original's draws,
    seeded by (seed, task name), over the task's `pairs`."""
    plan: list[tuple[int, np.ndarray]] = [(0, IDENTITY_COLOURS)]
    if num_aug == 0:
        return plan
    transformed = [[(dihedral_transform(a, t), dihedral_transform(b, t)) for a, b in pairs] for t in range(8)]
    used = np.unique(np.concatenate([g.reshape(-1) for pair in pairs for g in pair]))
    seen_hashes = {puzzle_hash(pairs)}
    seen_signatures: set[bytes] = set()  # (t, colour map on the colours present): equal signatures, equal puzzles
    rng = np.random.default_rng([seed, STREAM_AUGMENT, *name_seed(name)])
    trials = AUGMENT_RETRIES * num_aug
    ts = rng.integers(0, 8, size=trials)
    maps = np.concatenate(
        [
            np.zeros((trials, 1), dtype=np.uint8),
            rng.permuted(np.tile(np.arange(1, 10, dtype=np.uint8), (trials, 1)), axis=1),
        ],
        axis=1,
    )
    for t, colours in zip(ts.tolist(), maps):
        signature = bytes([t]) + colours[used].tobytes()
        if signature in seen_signatures:
            continue
        seen_signatures.add(signature)
        h = puzzle_hash((colours[a], colours[b]) for a, b in transformed[t])
        if h not in seen_hashes:
            seen_hashes.add(h)
            plan.append((t, colours))
            if len(plan) >= num_aug + 1:
                break
    return plan


def pair_key(a: np.ndarray, b: np.ndarray) -> bytes:
    """The same bytes for an input/output pair and each of its augmentations (one dihedral transform and one colour
    map with black fixed, applied to both grids): per transform, colours renamed in order of first appearance, then
    the smallest. Two pairs are equivalent under the augmentation group iff their keys are equal."""
    best = None
    for t in range(8):
        x, y = np.ascontiguousarray(dihedral_transform(a, t)), np.ascontiguousarray(dihedral_transform(b, t))
        flat = np.concatenate([x.reshape(-1), y.reshape(-1)])
        _, first = np.unique(flat, return_index=True)
        order = flat[np.sort(first)]
        rename = np.zeros(10, dtype=np.uint8)
        rename[order[order != 0]] = np.arange(1, np.count_nonzero(order) + 1, dtype=np.uint8)
        key = bytes([*x.shape, *y.shape]) + rename[flat].tobytes()
        best = key if best is None or key < best else best
    assert best is not None
    return best


def task_json(
    train: Iterable[tuple[np.ndarray, np.ndarray]], test: Iterable[tuple[np.ndarray, np.ndarray]], outputs: bool = True
) -> dict[str, list[dict[str, Any]]]:
    """ARC's task JSON layout of demonstration and test pairs; `outputs` False leaves the test outputs out (hidden)."""

    def pair(a: np.ndarray, b: np.ndarray, output: bool = True) -> dict[str, Any]:
        return {"input": a.tolist(), **({"output": b.tolist()} if output else {})}

    return {"train": [pair(a, b) for a, b in train], "test": [pair(a, b, outputs) for a, b in test]}


def grid_from_key(key: bytes) -> np.ndarray:
    return np.frombuffer(key[2:], dtype=np.uint8).reshape(key[0], key[1])


def encode_pairs(
    pairs: Sequence[tuple[np.ndarray, np.ndarray]],
    plan: Sequence[tuple[int, np.ndarray]],
    size: int,
    rng: np.random.Generator | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Tokens of every (variant, pair): [len(plan) * len(pairs), size*size] inputs and labels, variant-major.

    With `rng` (train split) each pair of a variant gets a random top-left offset shared by its input and output, except
    one random pair per variant kept at (0, 0), as the original; without it every grid sits at the top-left.
    """
    A, E = len(plan), len(pairs)
    inputs = np.zeros((A, E, size, size), dtype=np.uint8)
    labels = np.zeros_like(inputs)
    ts = np.array([t for t, _ in plan])
    colours = np.stack([c for _, c in plan])
    swapped = np.isin(ts, SWAPS_AXES)  # transforms that exchange height and width
    heights = np.array(
        [[max(a.shape[0], b.shape[0]) for a, b in pairs], [max(a.shape[1], b.shape[1]) for a, b in pairs]]
    )
    rows_needed = np.where(swapped[:, None], heights[1][None], heights[0][None])  # [A, E]
    cols_needed = np.where(swapped[:, None], heights[0][None], heights[1][None])
    if rng is not None:
        keep = rng.integers(0, E, size=A)
        off_r = rng.integers(0, size - rows_needed + 1)
        off_c = rng.integers(0, size - cols_needed + 1)
        off_r[np.arange(A), keep] = 0
        off_c[np.arange(A), keep] = 0
    else:
        off_r = np.zeros((A, E), dtype=np.int64)
        off_c = np.zeros((A, E), dtype=np.int64)
    for e, pair in enumerate(pairs):
        for grid, canvas in zip(pair, (inputs, labels)):
            for t in np.unique(ts).tolist():
                idx = np.flatnonzero(ts == t)
                g = dihedral_transform(grid, t)
                h, w = g.shape
                values = colours[idx][:, g] + COLOUR_OFFSET  # [n, h, w]
                r0, c0 = off_r[idx, e], off_c[idx, e]
                rr = r0[:, None] + np.arange(h)  # [n, h]
                cc = c0[:, None] + np.arange(w)  # [n, w]
                n = idx[:, None, None]
                canvas[n, e, rr[:, :, None], cc[:, None, :]] = values
                below, right = r0 + h, c0 + w  # EOS row under the grid, EOS column right of it; the corner stays PAD
                m = below < size
                canvas[idx[m][:, None], e, below[m][:, None], cc[m]] = EOS
                m = right < size
                canvas[idx[m][:, None], e, rr[m], right[m][:, None]] = EOS
    return inputs.reshape(A * E, size * size), labels.reshape(A * E, size * size)


def crop_sizes(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of the grid at the top-left of each [S, S] token canvas, as the original notebook's `crop`:
    the largest-area top-left rectangle made only of colour tokens (2..11), growing row by row while the width can
    only shrink (the first of equal areas wins)."""
    n, size = tokens.shape[0], tokens.shape[-1]
    colour = (tokens >= 2) & (tokens <= 11)
    first_other = np.where(colour.all(-1), size, colour.argmin(-1))  # [n, S] colour run at the start of each row
    width = np.minimum.accumulate(first_other, axis=1)
    area = width * np.arange(1, size + 1)
    best = area.argmax(1)
    has = area[np.arange(n), best] > 0
    return np.where(has, best + 1, 0), np.where(has, width[np.arange(n), best], 0)


def crop(tokens: np.ndarray) -> np.ndarray:
    """One [S, S] canvas -> its grid of colours 0..9 (the inverse of encode_pairs for a grid at the top-left)."""
    h, w = crop_sizes(tokens[None])
    return (tokens[: h[0], : w[0]] - 2).astype(np.uint8)


def placed_grid(tokens: np.ndarray) -> np.ndarray | None:
    """One [S, S] canvas of the train split, its grid anywhere (translated) -> the grid of colours 0..9: the bounding
    box of the colour tokens, None when that box is not all colours (no grid, or not the EOS layout)."""
    colour = (tokens >= COLOUR_OFFSET) & (tokens < COLOUR_OFFSET + 10)
    rows, cols = np.flatnonzero(colour.any(1)), np.flatnonzero(colour.any(0))
    if rows.size == 0:
        return None
    box = (slice(rows[0], rows[-1] + 1), slice(cols[0], cols[-1] + 1))
    return (tokens[box] - COLOUR_OFFSET).astype(np.uint8) if colour[box].all() else None


# -------------------------------------------------------------------------------------------------- test time


@dataclass(frozen=True)
class ArcTransforms:
    """Test-time augmentation on the `size` x `size` EOS canvas (hrm_reason.evaluate.tta, docs/training.md "Test-time
    compute"): each row's grid is cropped, moved by a dihedral transform and a colour map with black fixed (the
    builder's augmentation), and placed again at the top-left with its EOS border. The inverse does the same with the
    inverse element, so a prediction is read back by its crop, as voting reads it."""

    size: int

    @property
    def group_size(self) -> int:
        """8 dihedral maps x 9! orders of the colours 1-9 (black fixed) = 2,903,040."""
        return len(TRANSFORM_NAMES) * math.factorial(9)

    @property
    def group_name(self) -> str:
        return "ARC's symmetry group (8 dihedral maps x 9! colour maps)"

    def draw(self, rng: np.random.Generator, rows: int, copies: int) -> list[tuple[np.ndarray, np.ndarray]]:
        elements = []
        for _ in range(copies - 1):
            ts = rng.integers(0, 8, size=rows)
            colours = rng.permuted(np.tile(np.arange(1, 10, dtype=np.uint8), (rows, 1)), axis=1)
            elements.append((ts, np.concatenate([np.zeros((rows, 1), dtype=np.uint8), colours], axis=1)))
        return elements

    def apply(self, tokens: np.ndarray, element: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        return self._move(tokens, [(int(t), c) for t, c in zip(*element)])

    def invert(self, tokens: np.ndarray, element: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        return self._move(
            tokens, [(DIHEDRAL_INVERSE[int(t)], np.argsort(c).astype(np.uint8)) for t, c in zip(*element)]
        )

    def _move(self, tokens: np.ndarray, plan: list[tuple[int, np.ndarray]]) -> np.ndarray:
        canvases = np.asarray(tokens).reshape(-1, self.size, self.size)
        out = np.empty((canvases.shape[0], self.size * self.size), dtype=canvases.dtype)
        for i, (canvas, element) in enumerate(zip(canvases, plan)):
            grid = crop(canvas)
            out[i] = encode_pairs([(grid, grid)], [element], self.size, None)[0][0]
        return out


def tta_transforms(metadata: PuzzleDatasetMetadata) -> ArcTransforms:
    """The test-time group of an ARC dataset (`ArcTask.from_metadata`)."""
    return ArcTask.from_metadata(metadata, "dataset.json").transforms


# ------------------------------------------------------------------------------------------------- test split


@dataclass
class ArcTestSet:
    """What voting needs to know about an ARC test split: tasks, answers, and how to undo each identifier's
    augmentation."""

    size: int  # canvas side
    tasks: list[dict[str, Any]]  # builder record entries, in group order
    test_inputs: list[dict[bytes, list[int]]]  # per task: original test input -> its indices
    answers: list[list[bytes | None]]  # per task and test input; None when the answers are hidden
    task_of: np.ndarray  # [num_identifiers] task index, -1 for identifiers outside the test split
    transform_of: np.ndarray  # [num_identifiers]
    inverse_colours: np.ndarray  # [num_identifiers, 10]

    @classmethod
    def from_split(cls, split: PuzzleSplit) -> ArcTestSet:
        """From our builder record, or (a dataset the original builder wrote: no record) from the layout itself."""
        builder = split.metadata.builder if split.metadata.builder is not None else layout_record(split)
        where = split.path / "dataset.json"
        if builder.get("name") != "arc" or "tasks" not in builder or "grid_size" not in builder:
            raise UserError(
                f"{where}: not an ARC dataset built by `hrm build-data arc` (builder.name 'arc' with a task list)"
            )
        if builder.get("translation", False):
            raise UserError(f"{where}: this split is translated; voting needs grids at the top-left (the test split)")
        if list(split.sets) != ["all"]:
            raise UserError(f"{where}: expected the one set 'all', found {list(split.sets)}")
        ids_path = split.path.parent / "identifiers.json"
        names = read_json(ids_path, "ARC voting reads the augmentation of each puzzle from it")
        s, size, tasks = split.sets["all"], int(builder["grid_size"]), list(builder["tasks"])
        if len(tasks) != s.group_indices.size - 1:
            raise UserError(
                f"{where}: builder.tasks lists {len(tasks)} tasks but the split has {s.group_indices.size - 1} groups"
            )
        n_ids = len(names)
        task_of = np.full(n_ids, -1, dtype=np.int64)
        transform_of = np.zeros(n_ids, dtype=np.int64)
        inverse_colours = np.tile(IDENTITY_COLOURS, (n_ids, 1))
        test_inputs, answers = [], []
        for g, task in enumerate(tasks):
            puzzles = range(int(s.group_indices[g]), int(s.group_indices[g + 1]))
            for p in puzzles:
                ident = int(s.puzzle_identifiers[p])
                name, t, colours = parse_identifier(names[ident]) if 0 < ident < n_ids else (None, 0, IDENTITY_COLOURS)
                if name != task["name"]:
                    raise UserError(
                        f"{ids_path}: identifier {ident} is {names[ident] if ident < n_ids else '?'!r}, expected a variant of task {task['name']!r}"
                    )
                task_of[ident], transform_of[ident], inverse_colours[ident] = g, t, np.argsort(colours)
            first = puzzles[0]
            if names[int(s.puzzle_identifiers[first])] != task["name"]:
                raise UserError(f"{ids_path}: the first puzzle of task {task['name']!r} is not its original")
            rows = slice(int(s.puzzle_indices[first]), int(s.puzzle_indices[first + 1]))
            x = np.asarray(s.inputs[rows]).reshape(-1, size, size)
            y = np.asarray(s.labels[rows]).reshape(-1, size, size)
            by_input: dict[bytes, list[int]] = {}
            for k in range(x.shape[0]):
                by_input.setdefault(grid_key(crop(x[k])), []).append(k)
            test_inputs.append(by_input)
            answers.append([grid_key(crop(y[k])) if task.get("answers", True) else None for k in range(y.shape[0])])
        return cls(size, tasks, test_inputs, answers, task_of, transform_of, inverse_colours)


def in_eos_layout(tokens: np.ndarray) -> np.ndarray:
    """[n, S, S] canvases -> [n] bool: one grid at the top-left in the EOS layout (colours, an EOS row below it and an
    EOS column right of it inside the canvas, PAD everywhere else), as an untranslated test example is written."""
    size = tokens.shape[-1]
    h, w = crop_sizes(tokens)
    r = np.arange(size)[None, :, None]
    c = np.arange(size)[None, None, :]
    h, w = h[:, None, None], w[:, None, None]
    grid = (r < h) & (c < w)
    eos = ((r == h) & (c < w)) | ((c == w) & (r < h))
    ok = np.where(grid, True, np.where(eos, tokens == EOS, tokens == PAD))
    return (h[:, 0, 0] > 0) & ok.reshape(ok.shape[0], -1).all(1)


def layout_record(split: PuzzleSplit) -> dict[str, Any]:
    """What voting reads of the builder record, derived from the layout of a dataset the original HRM builder wrote
    (docs/training.md, "Task metrics of datasets without a builder record"): the canvas side from seq_len; task g's
    name from the identifiers.json name of group g's first puzzle (the original, named without a `_t` suffix); no
    translation, checked on the originals' test examples (each at the top-left in the EOS layout). Whether a task's
    answers are hidden cannot be derived (a hidden answer is a stand-in grid); they are taken as known, as the
    original builder requires them."""
    where, meta = split.path / "dataset.json", split.metadata
    size = int(np.sqrt(meta.seq_len))
    if size * size != meta.seq_len or size > MAX_SIZE or meta.vocab_size != VOCAB_SIZE or meta.pad_id != PAD:
        raise UserError(
            f"{where}: not the ARC layout (a square canvas of side <= {MAX_SIZE}, vocab_size {VOCAB_SIZE}, PAD 0); "
            f"got seq_len {meta.seq_len}, vocab_size {meta.vocab_size}"
        )
    if list(split.sets) != ["all"]:
        raise UserError(f"{where}: expected the one set 'all', found {list(split.sets)}")
    ids_path = split.path.parent / "identifiers.json"
    names = read_json(ids_path, "ARC voting reads the task and augmentation of each puzzle from it")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise UserError(f"{ids_path}: expected a list of puzzle names")
    s, tasks = split.sets["all"], []
    for g in range(s.group_indices.size - 1):
        first = int(s.group_indices[g])
        ident = int(s.puzzle_identifiers[first])
        name = names[ident] if 0 < ident < len(names) else None
        if name is None or AUG_NAME.match(name):
            raise UserError(f"{ids_path}: the first puzzle of group {g} is {name!r}, not an original task's name")
        rows = slice(int(s.puzzle_indices[first]), int(s.puzzle_indices[first + 1]))
        for array in (s.inputs, s.labels):
            if not in_eos_layout(np.asarray(array[rows]).reshape(-1, size, size)).all():
                raise UserError(f"{where}: a test grid of task {name!r} is not at the top-left in the EOS layout")
        tasks.append({"name": name})
    if not tasks:
        raise UserError(f"{where}: no tasks")
    return {"name": "arc", "grid_size": size, "translation": False, "tasks": tasks}


# ------------------------------------------------------------------------------------------------------ voting

VoteTable = dict[tuple[int, int], dict[bytes, list[float]]]  # (task, test input) -> grid -> [votes, sum of q]


def rank_candidates(table: dict[bytes, list[float]]) -> list[tuple[bytes, int, float]]:
    """(grid, votes, mean q), best first: the ranking of every vote (tasks/base.py `vote_order`: most votes, then highest
    mean q), full ties in grid-bytes order."""
    keys = sorted(table)
    counts = torch.tensor([int(table[k][0]) for k in keys], dtype=torch.int64)
    mean_q = torch.tensor([table[k][1] / table[k][0] for k in keys], dtype=torch.float64)
    return [(keys[i], int(counts[i]), float(mean_q[i])) for i in vote_order(counts, mean_q).tolist()]


def merge_votes(tables: list[VoteTable]) -> VoteTable:
    merged: VoteTable = {}
    for table in tables:
        for slot, candidates in table.items():
            into = merged.setdefault(slot, {})
            for key, (c, q) in candidates.items():
                entry = into.setdefault(key, [0, 0.0])
                entry[0] += c
                entry[1] += q
    return merged


def score(
    testset: ArcTestSet, votes: VoteTable, pass_ks: tuple[int, ...] = PASS_KS
) -> tuple[dict[str, float], dict[str, Any], dict[str, Any]]:
    """pass@k over the tasks with known answers, per-task results and the Kaggle submission."""
    solved_counts = dict.fromkeys(pass_ks, 0)
    scored = 0
    per_task: dict[str, Any] = {}
    submission: dict[str, Any] = {}
    for g, task in enumerate(testset.tasks):
        tests, attempts = [], []
        for k in range(len(testset.answers[g])):
            ranked = rank_candidates(votes.get((g, k), {}))
            answer = testset.answers[g][k]
            rank = next((i + 1 for i, (key, _, _) in enumerate(ranked) if key == answer), None)
            tests.append(
                {
                    "answer_rank": rank,
                    "votes": sum(c for _, c, _ in ranked),
                    "candidates": len(ranked),
                    "top": [
                        {"votes": c, "mean_q": round(q, 6), "correct": key == answer if answer is not None else None}
                        for key, c, q in ranked[:SUBMISSION_ATTEMPTS]
                    ],
                }
            )
            grids = [grid_from_key(key) for key, _, _ in ranked[:SUBMISSION_ATTEMPTS]]
            grids = [g_ if g_.size else np.zeros((1, 1), dtype=np.uint8) for g_ in grids]  # an empty crop is no grid
            grids += [grids[0] if grids else np.zeros((1, 1), dtype=np.uint8)] * (SUBMISSION_ATTEMPTS - len(grids))
            attempts.append({f"attempt_{i + 1}": grid.tolist() for i, grid in enumerate(grids)})
        submission[task["name"]] = attempts
        known = task.get("answers", True)
        solved = {
            str(K): known and all(t["answer_rank"] is not None and t["answer_rank"] <= K for t in tests)
            for K in pass_ks
        }
        if known:
            scored += 1
            for K in pass_ks:
                solved_counts[K] += solved[str(K)]
        per_task[task["name"]] = {
            "id": task.get("id", task["name"]),
            "answers_known": known,
            "solved": solved,
            "test_inputs": tests,
        }
    metrics = {f"pass@{K}": solved_counts[K] / scored if scored else 0.0 for K in pass_ks}
    return metrics, per_task, submission


class ArcVoting:
    """The ARC SegmentMetric: votes from the final segment only; one fresh object per evaluation."""

    def __init__(self, testset: ArcTestSet, mmax: int, pass_ks: tuple[int, ...] = PASS_KS) -> None:
        self.testset, self.final_segment, self.pass_ks = testset, mmax - 1, pass_ks
        self.votes: VoteTable = {}
        self.rows = 0
        self.unmatched = 0  # rows whose input did not map back to a known test input (should stay 0)

    def update(self, segment: int, preds: Tensor, out: ACTOutput, batch: dict[str, Tensor], valid: Tensor) -> None:
        if segment != self.final_segment:
            return
        rows = valid.nonzero().squeeze(1)
        if rows.numel() == 0:
            return
        size, ts = self.testset.size, self.testset
        ids = batch["puzzle_identifiers"][rows].cpu().numpy()
        x = batch["inputs"][rows].cpu().numpy().astype(np.uint8).reshape(-1, size, size)
        y = preds[rows].cpu().numpy().astype(np.uint8).reshape(-1, size, size)
        q = torch.sigmoid(out.q_halt_logits[rows].double()).cpu().numpy()
        xh, xw = crop_sizes(x)
        yh, yw = crop_sizes(y)
        for i, ident in enumerate(ids.tolist()):
            self.rows += 1
            g = int(ts.task_of[ident]) if 0 <= ident < ts.task_of.size else -1
            if g < 0:
                self.unmatched += 1
                continue
            t, inv = int(ts.transform_of[ident]), ts.inverse_colours[ident]
            original_input = inverse_augment(x[i, : xh[i], : xw[i]] - 2, t, inv)
            ks = ts.test_inputs[g].get(grid_key(original_input))
            if ks is None:
                self.unmatched += 1
                continue
            prediction = grid_key(inverse_augment(y[i, : yh[i], : yw[i]] - 2, t, inv))
            for k in ks:
                entry = self.votes.setdefault((g, k), {}).setdefault(prediction, [0, 0.0])
                entry[0] += 1
                entry[1] += float(q[i])

    def result(self, world_size: int) -> dict[str, Any]:
        votes, rows, unmatched = self.votes, self.rows, self.unmatched
        if world_size > 1:
            gathered: list[Any] = [None] * world_size
            torch.distributed.all_gather_object(gathered, (self.votes, self.rows, self.unmatched))
            votes = merge_votes([v for v, _, _ in gathered])
            rows, unmatched = sum(r for _, r, _ in gathered), sum(u for _, _, u in gathered)
        metrics, per_task, submission = score(self.testset, votes, self.pass_ks)
        return {
            **metrics,
            "arc_voting": {
                "tasks_scored": sum(t["answers_known"] for t in per_task.values()),
                "rows": rows,
                "unmatched_rows": unmatched,
                "pass_ks": list(self.pass_ks),
                "tasks": per_task,
            },
            "arc_submission": submission,
        }


def segment_metrics(split: PuzzleSplit, mmax: int) -> list[ArcVoting]:
    """Voting over the split's augmented variants: built for each evaluation, so votes never carry over."""
    return [ArcVoting(ArcTestSet.from_split(split), mmax)]


def require_arc_dataset(data_dir: str | Path, flag: str) -> None:
    """Fail before a long evaluation when an ARC-only option is given for another dataset."""
    meta = Path(data_dir) / "test" / "dataset.json"
    try:
        record = json.loads(meta.read_text())
    except (OSError, ValueError, RecursionError):  # ValueError: bad JSON or not UTF-8
        return  # the evaluation itself reports a missing or broken dataset
    if not isinstance(record, dict):
        return
    builder = record.get("builder")
    name = builder.get("name") if isinstance(builder, dict) else None
    if record.get("builder") is None:  # built by the original code: ARC when its layout is
        try:
            layout_record(load_split(data_dir, "test"))
            return
        except UserError:
            pass
    if name != "arc":
        why = f"builder.name {name!r}" if record.get("builder") is not None else "no builder record, not ARC's layout"
        raise UserError(f"{flag}: {meta} is not an ARC dataset ({why}); build one with hrm build-data arc")


# ---------------------------------------------------------------------------------------------------------- the task

# The standard ARC ten-colour palette (colour 0..9), as in the ARC testing interface; beige for the EOS border.
PALETTE = ("#000000", "#0074D9", "#FF4136", "#2ECC40", "#FFDC00", "#AAAAAA", "#F012BE", "#FF851B", "#7FDBFF", "#870C25")
EOS_COLOUR = "#e9e3d6"


@dataclass(frozen=True)
class ArcTask(Task):
    """ARC on a `size` x `size` EOS canvas (tasks/base.py `Task`). `identifiers`: task name (and source id) -> the
    puzzle identifier of its original, unaugmented puzzle, for `hrm solve`."""

    size: int
    blank_identifier: int = 0
    identifiers: dict[str, int] = field(default_factory=dict, compare=False)
    testset: ArcTestSet | None = field(default=None, compare=False, repr=False)  # read by `layout_of`, for its split
    owner: ClassVar[str] = "ARC's"
    kind: ClassVar[str] = "arc"
    metric_name: ClassVar[str | None] = "ARC voting (pass@k)"

    @classmethod
    def from_metadata(cls, metadata: PuzzleDatasetMetadata, where: str, names: list[str] | None = None) -> ArcTask:
        """A canvas of the builder record's grid_size (else the side of seq_len) over ARC's 12 tokens; `names`
        (identifiers.json) give the identifier of each task's original puzzle."""
        builder = metadata.builder or {}
        side = math.isqrt(metadata.seq_len)
        size = int(builder.get("grid_size", side))
        if size * size != metadata.seq_len or metadata.vocab_size != VOCAB_SIZE:
            raise UserError(
                f"{where}: an ARC dataset needs seq_len grid_size^2 and vocab_size {VOCAB_SIZE}, got seq_len "
                f"{metadata.seq_len}, grid_size {size} and vocab_size {metadata.vocab_size}"
            )
        blank = metadata.blank_identifier_id
        identifiers: dict[str, int] = {}
        for i, n in enumerate(names or []):
            if i != blank and AUG_NAME.match(n) is None:
                identifiers.setdefault(n, i)
        for task in builder.get("tasks", []):  # a source id that differs from the unique name it was given
            if isinstance(task, dict) and task.get("name") in identifiers:
                identifiers.setdefault(str(task.get("id")), identifiers[task["name"]])
        return cls(size, blank, identifiers)

    @classmethod
    def fits_shape(cls, seq_len: int, vocab_size: int) -> bool:
        """ARC's 30x30 canvas of 12 tokens."""
        return seq_len == MAX_SIZE**2 and vocab_size == VOCAB_SIZE

    @classmethod
    def layout_of(cls, split: PuzzleSplit) -> tuple[ArcTask, str] | None:
        """ARC when voting can read the split (`layout_record`: identifiers.json names and the EOS canvas)."""
        try:
            testset = ArcTestSet.from_split(split)
        except UserError:
            return None
        task = cls(testset.size, split.metadata.blank_identifier_id, testset=testset)
        return task, "identifiers.json names and the EOS canvas match the ARC layout"

    @property
    def transforms(self) -> ArcTransforms:
        return ArcTransforms(self.size)

    def segment_metrics(self, split: PuzzleSplit, mmax: int) -> list[ArcVoting]:
        testset = self.testset if self.testset is not None else ArcTestSet.from_split(split)
        return [ArcVoting(testset, mmax)]

    @property
    def symmetry_name(self) -> str:
        return f"ARC's {self.size}x{self.size} layout, whose augmentations are copies on disk with their own puzzle identifiers"

    @property
    def look(self) -> GridLook:
        colours = {PAD: "#ffffff", EOS: EOS_COLOUR, **{i + COLOUR_OFFSET: c for i, c in enumerate(PALETTE)}}
        return GridLook(
            puzzle_legend="the ten ARC colours;  beige: end-of-grid marker",
            legend="hatched: changed since the previous segment;  white cross: differs from the answer;  "
            "beige: end-of-grid marker (part of the answer)",
            panel_inches=(2.2, 1.5),
            colours=colours,
            grid_lines=True,
            crosses=True,
            content_token=PAD,
        )

    # --- hrm solve

    def describe(self) -> str:
        return f"ARC model ({self.size}x{self.size} canvas)"

    def parse(self, text: str, source: str, stem: str | None = None) -> list[Puzzle]:
        """An ARC task JSON ({"test": [{"input": grid, "output": grid?}, ...], "train": ...}: its test inputs), or
        one bare grid (a list of rows). The task is recognised by its file name (the task id)."""
        data = parse_json(text, source)
        if isinstance(data, list):
            items = [{"input": data}]
        elif isinstance(data, dict) and isinstance(data.get("test"), list) and data["test"]:
            items = data["test"]
        else:
            raise UserError(f"{source}: expected an ARC task (an object with a non-empty 'test' list) or one grid")
        identifier, notes = self.blank_identifier, []
        if stem is not None and stem in self.identifiers:
            identifier = self.identifiers[stem]
        else:
            what = f"task {stem!r} is" if stem is not None else "the task (read without a file name) is"
            notes.append(f"{what} not among the model's puzzles: the blank puzzle identifier is used")
        puzzles = []
        for k, item in enumerate(items):
            name = f"{source} test {k}"
            if not isinstance(item, dict) or "input" not in item:
                raise UserError(f"{name}: no 'input' grid")
            canvas = f"the model's {self.size}x{self.size} canvas"
            grid = parse_grid(item["input"], f"{name} input", self.size, canvas)
            expected = parse_grid(item["output"], f"{name} output", self.size, canvas) if "output" in item else None
            x, _ = encode_pairs([(grid, grid)], [(0, IDENTITY_COLOURS)], self.size, None)
            puzzles.append(Puzzle(name, x[0].astype(np.int32), identifier, expected=expected, notes=list(notes)))
        return puzzles

    def answer(self, puzzle: Puzzle, tokens: np.ndarray) -> Reading:
        """The grid cropped at its EOS border, compared with the task's test output when the file gives it (ARC has
        no rules to check an answer against)."""
        grid = crop(tokens.reshape(self.size, self.size).astype(np.int64)).astype(np.int64)
        text = "\n".join("".join(str(v) for v in row) for row in grid) if grid.size else "(empty grid)"
        if puzzle.expected is None:
            check = f"no answer to check against ({grid.shape[0]}x{grid.shape[1]} grid)"
        elif np.array_equal(grid, puzzle.expected):
            check = "matches the task's test output"
        else:
            check = "differs from the task's test output"
        return Reading(text, grid.tolist(), None, check)
