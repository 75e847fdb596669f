"""`hrm adapt`: test-time adaptation of the puzzle embedding for ARC tasks the model never saw (issue 33).

An ACT puzzle model (HRM, TRM, the ACT transformer, UniTF) meets an ARC task only through a learned puzzle-embedding row
per augmented variant; a new task has none. `adapt` builds the new task's variants as the builder does (the builder's
dihedral + colour-map draws and identifier names, tasks/arc.py), appends one new row per variant to the model's table,
initialised at the mean of the rows that trained, and trains them on the task's demonstration pairs only with the
family's loss (train/act.py: one ACT segment per step, deep supervision, the Q halting loss; SignSGD on the rows, as in
training). The network is frozen unless `whole`. The test inputs are then answered by ARC voting (ArcVoting, as `hrm
eval`): every variant's prediction mapped back, two attempts per test input, a Kaggle submission.

Test outputs are never read to adapt or to answer: the task file's `test[k].output` is parsed only after voting, to
say whether an attempt matches it (a value that is no grid is left unchecked). docs/commands.md, "hrm adapt".
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save as save_safetensors

from hrm_reason.atomic import atomic_directory, atomic_write_text
from hrm_reason.commands.cli_options import write_json
from hrm_reason.commands.solver import task_for
from hrm_reason.data.puzzle import PuzzleDatasetMetadata, dataset_kind, load_split
from hrm_reason.errors import UserError
from hrm_reason.evaluate.act import check_mmax, plain_segments
from hrm_reason.limits import ADAPT_LR, ADAPT_LR_WHOLE, ADAPT_SEED, ADAPT_STEPS, NUM_AUG
from hrm_reason.load import load_run, run_config
from hrm_reason.models.act import act_loss
from hrm_reason.models.registry import family_spec
from hrm_reason.models.sparse_embedding import SparseSignSGD
from hrm_reason.outputs import (
    EVAL_JSON,
    SUBMISSION_OUT,
    Output,
    checked_text,
    claim,
    folder_of,
    json_object_with,
    read_own_json,
)
from hrm_reason.provenance import provenance
from hrm_reason.readers import read_json, read_json_model, read_safetensors
from hrm_reason.runtime.device import resolve_device
from hrm_reason.runtime.logs import progress_bar
from hrm_reason.tasks import arc, task_class
from hrm_reason.tasks.arc import ArcTask
from hrm_reason.train.act import exploration_generator
from hrm_reason.train.optim import make_optimizer, set_lr

RECORD = "adapted.json"
ROWS = "adapted.safetensors"
SUBMISSION = "submission.json"
LR_WHOLE = 1e-4  # --lr-whole's default under --whole

Pair = tuple[np.ndarray, np.ndarray]


@dataclass
class AdaptOptions:
    steps: int = 200
    seed: int = 0
    num_aug: int | None = None  # None: the run's dataset's (builder.options.num_aug)
    whole: bool = False  # the network trains too, at lr_whole
    lr: float | None = None  # the rows' SignSGD rate; None: the run's puzzle_emb_lr
    lr_whole: float | None = None  # the network's rate under whole; None: LR_WHOLE (given without whole: refused)
    batch_size: int | None = None  # None: the run's global_batch_size, at most the number of examples
    mmax: int | None = None  # segments of the answer; None: the trained halt_max_steps
    init: str = "mean"  # "mean" of the trained rows or the "blank" row (steps 0: as --puzzle-id blank)
    curve: tuple[int, ...] = ()  # also answer after these many steps (pass@k per step count: the adaptation curve)


@dataclass
class AdaptTask:
    """An ARC task as adapt reads it: demonstrations and test inputs; the test outputs stay raw, unread until voted."""

    name: str
    path: Path
    train: list[Pair]
    test_inputs: list[np.ndarray]
    raw_outputs: list[Any]  # test[k].get("output"): looked at only after the attempts are chosen

    def digest(self) -> str:
        """What the adaptation and the answers depend on: name, demonstrations and test inputs (never the outputs)."""
        h = hashlib.sha256(self.name.encode())
        for grid in [g for pair in self.train for g in pair] + self.test_inputs:
            h.update(arc.grid_key(grid))
        return h.hexdigest()


@dataclass
class AdaptResult:
    out: Path
    loaded: bool  # the rows were read from a previous call's adapted.safetensors
    losses: list[float]  # mean lm loss per adaptation step (empty when loaded)
    submission: dict[str, Any]
    tests: list[dict[str, Any]]  # per task and test input: attempts, votes, check
    record: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)  # pass@k over tasks whose outputs are grids
    curve: dict[int, dict[str, float]] = field(default_factory=dict)  # steps -> pass@k (options.curve)
    cpu_seconds: float = 0.0  # process CPU time of the adaptation steps (answers excluded)

    def to_dict(self) -> dict[str, Any]:
        """What `hrm adapt --json` writes: the record, pass@k (also per step count), times and each test's attempts."""
        return {
            "record": self.record,
            "loaded": self.loaded,
            "metrics": self.metrics,
            "curve": {str(k): v for k, v in self.curve.items()},
            "adapt_cpu_seconds": self.cpu_seconds,
            "tasks": len(self.record.get("tasks", [])),
            "losses": self.losses,
            "tests": self.tests,
            "provenance": provenance(),
        }


# ------------------------------------------------------------------------------------------------------- tasks


def task_files(paths: Sequence[Path]) -> list[Path]:
    """The task files named, a folder standing for its *.json files (sorted)."""
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            inside = sorted(p.glob("*.json"))
            if not inside:
                raise UserError(f"{p}: a folder without ARC task files (*.json)")
            files += inside
        else:
            files.append(p)
    if not files:
        raise UserError("give at least one ARC task file or folder of them")
    names = [Path(checked_text(str(f), "task file")).stem for f in files]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UserError(f"task {twice[0]!r} is named twice: task ids are file names and must differ")
    return files


def read_task(path: Path, size: int) -> AdaptTask:
    """One ARC task JSON: its demonstrations (input and output) and test inputs, every grid within the canvas."""
    data = read_json(path, "expected an ARC task JSON file")
    name = path.stem
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected an ARC task (an object with 'train' and 'test' lists)")
    train, test = data.get("train"), data.get("test")
    if not isinstance(train, list) or not train:
        raise UserError(f"{path}: task {name!r} has no demonstration pairs ('train' must be a non-empty list)")
    if not isinstance(test, list) or not test:
        raise UserError(f"{path}: task {name!r} has no test input ('test' must be a non-empty list)")
    canvas = f"the model's {size}x{size} canvas (task {name!r})"
    pairs = []
    for k, item in enumerate(train):
        if not isinstance(item, dict) or "input" not in item or "output" not in item:
            raise UserError(f"{path}: train[{k}] is not a pair with 'input' and 'output'")
        pairs.append(
            tuple(
                arc.parse_grid(item[part], f"{path}: train[{k}].{part}", size, canvas) for part in ("input", "output")
            )
        )
    inputs, outputs = [], []
    for k, item in enumerate(test):
        if not isinstance(item, dict) or "input" not in item:
            raise UserError(f"{path}: test[{k}] has no 'input'")
        inputs.append(arc.parse_grid(item["input"], f"{path}: test[{k}].input", size, canvas))
        outputs.append(item.get("output"))
    if arc.AUG_NAME.match(name):
        raise UserError(f"{path}: task id {name!r} looks like an augmented identifier (ends in _t<T>_<colours>)")
    return AdaptTask(name, path, pairs, inputs, outputs)  # type: ignore[arg-type]


def plan_augmentations(task: AdaptTask, num_aug: int, seed: int) -> list[tuple[int, np.ndarray]]:
    """The builder's variants (tasks/arc.py `plan_augmentations`) over what adapt reads of the task: the demonstrations
    and the test inputs, each test input paired with itself."""
    return arc.plan_augmentations(task.name, task.train + [(x, x) for x in task.test_inputs], num_aug, seed)


# ------------------------------------------------------------------------------------------------------- model


@dataclass
class AdaptRun:
    model: torch.nn.Module
    config: Any
    arc: ArcTask
    builder: dict[str, Any]
    trained_ids: np.ndarray  # identifiers the train split holds (the rows training moved)
    checkpoint: Path
    device: torch.device


def load_adapt_run(path: Path, device_name: str) -> AdaptRun:
    """The run's model and its ARC dataset; a one-line UserError for a model without a puzzle table or other data."""
    device = resolve_device(device_name)
    loaded = load_run(path, device)
    config = loaded.config
    if not family_spec(loaded.family).segments or config is None:
        raise UserError(f"{path}: a language-model head; hrm adapt needs an ACT puzzle model (hrm, trm, ...)")
    if loaded.model.puzzle_emb is None:
        raise UserError(
            f"{path}: {config.arch.name} without a puzzle embedding (puzzle_emb_ndim 0): nothing for hrm adapt to adapt"
        )
    data = Path(config.data_path)
    if dataset_kind(data) != "puzzle":
        raise UserError(
            f"{path}: its dataset {data} is not on disk; hrm adapt needs the ARC dataset the run trained on"
        )
    meta = read_json_model(data / "test" / "dataset.json", PuzzleDatasetMetadata, "the dataset the run trained on")
    names = read_json(data / "identifiers.json", "the ARC dataset's puzzle names")
    builder = meta.builder or {}
    if task_class(builder.get("name")) is not ArcTask:
        raise UserError(
            f"{path}: trained on {data} (builder.name {builder.get('name')!r}), not ARC data built by "
            "hrm build-data arc; hrm adapt answers ARC tasks"
        )
    task = task_for(meta, names if isinstance(names, list) else None, str(data / "test" / "dataset.json"))
    assert isinstance(task, ArcTask)
    train = load_split(data, "train")
    trained = np.unique(np.concatenate([np.asarray(s.puzzle_identifiers) for s in train.sets.values()]))
    trained = trained[trained != meta.blank_identifier_id]
    return AdaptRun(loaded.model, config, task, builder, trained, loaded.checkpoint, device)


def _table(run: AdaptRun) -> Any:
    return run.model.puzzle_emb


def mean_rows(run: AdaptRun, count: int) -> torch.Tensor:
    """`count` copies of the mean of the trained rows: a new task starts at the centre of the tasks the model knows
    (docs/commands.md, "hrm adapt")."""
    weights = _table(run).weights
    trained = torch.as_tensor(run.trained_ids, dtype=torch.long, device=weights.device)
    return weights[trained].mean(0, keepdim=True).expand(count, -1).clone()


def blank_rows(run: AdaptRun, count: int) -> torch.Tensor:
    """`count` copies of the blank identifier's row: with no step, the answers of feeding the blank identifier, the
    baseline that adaptation is measured against (docs/results.md, "The ARC rung")."""
    row = _table(run).weights[run.arc.blank_identifier : run.arc.blank_identifier + 1]
    return row.expand(count, -1).clone()


INITS = {"mean": mean_rows, "blank": blank_rows}


def append_rows(run: AdaptRun, rows: torch.Tensor) -> int:
    """The rows appended to the model's puzzle table; returns the identifier of the first."""
    table = _table(run)
    first = int(table.weights.shape[0])
    table.weights = torch.cat([table.weights, rows.to(table.weights)])
    return first


# ------------------------------------------------------------------------------------------------------ adapting


def _examples(
    tasks: list[AdaptTask], plans: list[list[tuple[int, np.ndarray]]], first_id: int, size: int, seed: int, test: bool
) -> dict[str, np.ndarray]:
    """Every variant of every demonstration (translated as the builder's train split, seeded) or test input (at the
    top-left) in the canvas, with its variant's new identifier."""
    xs, ys, ids = [], [], []
    ident = first_id
    for task, plan in zip(tasks, plans):
        pairs = [(x, x) for x in task.test_inputs] if test else task.train
        rng = None if test else np.random.default_rng([seed, arc.STREAM_TRANSLATE, *arc.name_seed(task.name)])
        x, y = arc.encode_pairs(pairs, plan, size, rng)
        xs.append(x)
        ys.append(y)
        ids.append(np.repeat(np.arange(ident, ident + len(plan)), len(pairs)))
        ident += len(plan)
    return {
        "inputs": np.concatenate(xs).astype(np.int32),
        "labels": np.concatenate(ys).astype(np.int32),
        "puzzle_identifiers": np.concatenate(ids).astype(np.int32),
    }


def adapt_rows(
    run: AdaptRun,
    examples: dict[str, np.ndarray],
    options: AdaptOptions,
    progress: bool = True,
    after: Callable[[int], None] | None = None,
) -> tuple[list[float], float]:
    """options.steps ACT segments on the demonstrations (train/act.py's step: the carry kept between steps, halted slots
    refilled), the loss of `act_loss`; SignSGD on the rows seen, and with `whole` the run's optimizer on the network.
    `after(k)` is called after k steps for k in options.curve (0 before the first), the model in eval mode.
    Returns the mean lm loss of each step and the process CPU-seconds of the steps (`after` excluded)."""
    model, config, device = run.model, run.config, run.device
    n = examples["inputs"].shape[0]
    batch_size = min(options.batch_size or config.global_batch_size, n)
    for p in model.parameters():
        p.requires_grad_(options.whole)
    optimizer = make_optimizer(config, model, device) if options.whole else None
    emb_lr = config.puzzle_emb_lr if options.lr is None else options.lr
    sparse = SparseSignSGD(_table(run), emb_lr, config.puzzle_emb_weight_decay)
    data = {k: torch.from_numpy(v).to(device) for k, v in examples.items()}
    rng = np.random.default_rng([options.seed, 0])
    order: list[int] = []
    generator = torch.Generator(device=device)
    carry, losses, cpu = None, [], 0.0

    def answer_after(k: int) -> None:
        if after is not None and k in options.curve:
            model.eval()
            after(k)
            model.train()

    model.train()
    answer_after(0)
    bar = progress_bar(total=options.steps, desc="adapt", unit="step", enabled=progress, leave=False)
    try:
        for step in range(options.steps):
            started = time.process_time()
            while len(order) < batch_size:
                order += rng.permutation(n).tolist()
            rows, order = torch.tensor(order[:batch_size], device=device), order[batch_size:]
            batch = {k: v[rows] for k, v in data.items()}
            if carry is None:
                carry = model.empty_carry(batch)
            carry, outputs = model(carry, batch, generator=exploration_generator(generator, options.seed, step, 0))
            loss, metrics = act_loss(
                outputs, carry.current_data["labels"], carry.halted, carry.steps, config.arch.loss.loss_type
            )
            (loss / batch_size).backward()
            if optimizer is not None:
                set_lr(optimizer, LR_WHOLE if options.lr_whole is None else options.lr_whole)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            sparse.step()
            sparse.zero_grad()
            losses.append(float(metrics["lm_loss"]) / batch_size)
            cpu += time.process_time() - started
            answer_after(step + 1)
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
    finally:
        bar.close()
        model.eval()
        for p in model.parameters():
            p.requires_grad_(True)
    return losses, cpu


@torch.no_grad()
def answer(
    run: AdaptRun, tasks: list[AdaptTask], examples: dict[str, np.ndarray], plans: list[list], first_id: int, mmax: int
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, float]]:
    """ARC voting over the test inputs' variants (tasks/arc.py ArcVoting): the Kaggle submission, each test input's
    attempts, and pass@k over the tasks whose test outputs are grids (read only here, after the votes)."""
    size, total = run.arc.size, first_id + sum(len(p) for p in plans)
    task_of = np.full(total, -1, dtype=np.int64)
    transform_of = np.zeros(total, dtype=np.int64)
    inverse = np.tile(arc.IDENTITY_COLOURS, (total, 1))
    ident, records, test_inputs = first_id, [], []
    for g, (task, plan) in enumerate(zip(tasks, plans)):
        for t, colours in plan:
            task_of[ident], transform_of[ident], inverse[ident] = g, t, np.argsort(colours)
            ident += 1
        by_input: dict[bytes, list[int]] = {}
        for k, x in enumerate(task.test_inputs):
            by_input.setdefault(arc.grid_key(x), []).append(k)
        test_inputs.append(by_input)
        records.append({"name": task.name, "answers": False})
    testset = arc.ArcTestSet(
        size, records, test_inputs, [[None] * len(t.test_inputs) for t in tasks], task_of, transform_of, inverse
    )
    voting = arc.ArcVoting(testset, mmax)
    data = {k: torch.from_numpy(examples[k]).to(run.device) for k in ("inputs", "puzzle_identifiers")}
    n, bs = data["inputs"].shape[0], max(1, run.config.eval_global_batch_size or run.config.global_batch_size)
    for start in range(0, n, bs):
        batch = {k: v[start : start + bs] for k, v in data.items()}
        valid = torch.ones(batch["inputs"].shape[0], dtype=torch.bool, device=run.device)
        for m, out in enumerate(plain_segments(run.model, batch, mmax)):
            voting.update(m, out.logits.argmax(-1), out, batch, valid)
    # Only now the test outputs: the answers for pass@k and the check of each attempt.
    for g, task in enumerate(tasks):
        expected = [_grid_or_none(v) for v in task.raw_outputs]
        if all(e is not None for e in expected):
            testset.answers[g] = [arc.grid_key(e) for e in expected]  # type: ignore[arg-type]
            records[g]["answers"] = True
    result = voting.result(1)
    submission = result["arc_submission"]
    tests = []
    for task in tasks:
        per = result["arc_voting"]["tasks"][task.name]["test_inputs"]
        for k, attempts in enumerate(submission[task.name]):
            expected = _grid_or_none(task.raw_outputs[k])
            grids = [attempts[f"attempt_{i + 1}"] for i in range(arc.SUBMISSION_ATTEMPTS)]
            match = None if expected is None else [g_ == expected.tolist() for g_ in grids]
            tests.append({"task": task.name, "test": k, "attempts": grids, "top": per[k]["top"], "matches": match})
    metrics = {k: v for k, v in result.items() if k.startswith("pass@")} if any(r["answers"] for r in records) else {}
    return submission, tests, metrics


def _grid_or_none(value: Any) -> np.ndarray | None:
    try:
        return arc.parse_grid(value, "test output") if value is not None else None
    except UserError:
        return None


# ---------------------------------------------------------------------------------------------------------- entry


def _own_record(out: Path) -> str | None:
    """hrm adapt's folder has its record, adapted.json, naming its tasks and identifiers."""
    record = read_own_json(out / RECORD)
    return None if isinstance(record, dict) and {"tasks", "identifiers"} <= set(record) else f"no {RECORD} of it"


# What hrm adapt writes: OUT (replaced whole, atomically, by a call with other tasks or options) and --json.
OUT = Output("--out", "hrm adapt", folder_of((RECORD, ROWS, SUBMISSION), "hrm adapt", _own_record), folder=True)
JSON_OUT = Output(
    "--json", "hrm adapt", json_object_with(("record", "tests", "provenance"), what="a result of hrm adapt --json")
)


def check_options(options: AdaptOptions) -> AdaptOptions:
    """The options checked before any work, each count and rate in its bounds (hrm_reason.limits); --lr-whole's
    default filled in (the record names the rate used)."""
    ADAPT_STEPS.check(options.steps)
    ADAPT_SEED.check(options.seed)
    NUM_AUG.check(options.num_aug)
    ADAPT_LR.check(options.lr)
    ADAPT_LR_WHOLE.check(options.lr_whole)
    if options.lr_whole is not None and not options.whole:
        raise UserError(f"--lr-whole {options.lr_whole}: only with --whole (without it the network does not train)")
    late = [k for k in options.curve if not 0 <= k <= options.steps]
    if late:
        raise UserError(f"--curve {late[0]}: expected step counts from 0 to --steps {options.steps}")
    if options.init not in INITS:
        raise UserError(f"--init {options.init!r}: expected one of {', '.join(INITS)}")
    if options.mmax is not None:
        check_mmax(options.mmax)
    return replace(options, lr_whole=LR_WHOLE if options.lr_whole is None else options.lr_whole)


def default_out(run_path: Path, names: list[str]) -> Path:
    base = run_path if run_path.is_dir() else run_path.parent
    if len(names) == 1:
        return base / "adapt" / names[0]
    digest = hashlib.sha256("\n".join(names).encode()).hexdigest()[:8]
    return base / "adapt" / f"{len(names)}-tasks-{digest}"


def adapt(
    run_path: Path,
    task_paths: Sequence[Path],
    options: AdaptOptions,
    out: Path | None = None,
    device: str = "cpu",
    progress: bool = True,
) -> AdaptResult:
    """Adapt new puzzle-embedding rows to the tasks (or load the rows a previous call with the same tasks and options
    wrote to `out`), answer the test inputs by voting, write submission.json, adapted.safetensors and adapted.json.
    Options, task file names and `out` are checked before the model loads; `out` is new, empty or this command's."""
    options = check_options(options)
    files = task_files(task_paths)
    out = claim(out or default_out(run_path, [f.stem for f in files]), OUT)
    assert out is not None
    run = load_adapt_run(run_path, device)
    tasks = [read_task(p, run.arc.size) for p in files]
    build = run.builder.get("options") or {}
    num_aug = options.num_aug if options.num_aug is not None else int(build.get("num_aug", 0))
    aug_seed = int(run.builder.get("seed", build.get("seed", 0)))
    plans = [plan_augmentations(t, num_aug, aug_seed) for t in tasks]
    table = _table(run)
    first_id = int(table.weights.shape[0])
    mmax = options.mmax or run.config.arch.halt_max_steps
    check_mmax(mmax, run.config.arch.halt_max_steps)
    record = _record(run, tasks, plans, options, num_aug, aug_seed, first_id, mmax)
    previous = _previous(out, record, run)
    losses: list[float] = []
    if previous is not None:
        rows, net = previous
        if net:
            run.model.load_state_dict(net, strict=False)
        append_rows(run, rows)
    else:
        append_rows(run, INITS[options.init](run, len(record["identifiers"])))
    size = run.arc.size
    test_examples = _examples(tasks, plans, first_id, size, options.seed, test=True)
    curve: dict[int, dict[str, float]] = {}
    cpu = 0.0
    if previous is None:
        train_examples = _examples(tasks, plans, first_id, size, options.seed, test=False)

        def after(k: int) -> None:
            curve[k] = answer(run, tasks, test_examples, plans, first_id, mmax)[2]

        losses, cpu = adapt_rows(run, train_examples, options, progress, after)
        record["losses"] = losses
    submission, tests, metrics = answer(run, tasks, test_examples, plans, first_id, mmax)
    _write(out, run, record, submission, options.whole, first_id, loaded=previous is not None)
    return AdaptResult(out, previous is not None, losses, submission, tests, record, metrics, curve, cpu)


def _record(
    run: AdaptRun,
    tasks: list[AdaptTask],
    plans: list[list[tuple[int, np.ndarray]]],
    options: AdaptOptions,
    num_aug: int,
    aug_seed: int,
    first_id: int,
    mmax: int,
) -> dict[str, Any]:
    """adapted.json: what decides the rows (the tasks' content, the options, the seeds, the checkpoint) and the new
    identifiers' names."""
    names = [
        name
        for t, plan in zip(tasks, plans)
        for name in [t.name] + [arc.augmentation_name(t.name, tt, c) for tt, c in plan[1:]]
    ]
    return {
        "tasks": [
            {"name": t.name, "file": str(t.path), "sha256": t.digest(), "variants": len(p)}
            for t, p in zip(tasks, plans)
        ],
        "options": {**asdict(options), "num_aug": num_aug, "mmax": mmax},
        "seed": options.seed,
        "augmentation_seed": aug_seed,
        "checkpoint": str(run.checkpoint.resolve()),
        "first_row": first_id,
        "identifiers": names,
    }


def _write(
    out: Path,
    run: AdaptRun,
    record: dict[str, Any],
    submission: dict[str, Any],
    whole: bool,
    first_id: int,
    loaded: bool,
) -> None:
    """OUT's three files at once (a new adaptation), or its submission.json alone (the rows were loaded)."""
    text = json.dumps(submission)
    if loaded:
        atomic_write_text(out / SUBMISSION, text)
        return
    tensors = {"rows": _table(run).weights[first_id:].detach().cpu().contiguous()}
    if whole:
        state = run.model.state_dict()
        tensors |= {f"model.{k}": v.detach().cpu().contiguous() for k, v in state.items() if "puzzle_emb" not in k}
    with atomic_directory(out, overwrite=True) as tmp:
        (tmp / ROWS).write_bytes(save_safetensors(tensors))
        (tmp / RECORD).write_text(json.dumps(record, indent=2))
        (tmp / SUBMISSION).write_text(text)


def adapt_test_split(
    run_path: Path, data: Path | None, options: AdaptOptions, device: str = "cpu", progress: bool = True
) -> AdaptResult:
    """`hrm eval --adapt`: `adapt` on the tasks of an ARC build's test split (`data`, by default the run's dataset),
    read from the task files the builder writes beside the split (tasks/arc.py TEST_TASKS), rows in RUN/adapt/."""
    check_options(options)
    if data is None:
        data = Path(run_config(run_path).data_path)
    if not (data / "test" / "dataset.json").is_file():
        raise UserError(f"--adapt: {data}: no dataset there (test/dataset.json not found)")
    arc.require_arc_dataset(data, "--adapt")
    folder = data / arc.TEST_TASKS
    if not folder.is_dir():
        raise UserError(
            f"--adapt: {data} has no {arc.TEST_TASKS}/ folder (its test split's tasks as ARC task files, which hrm "
            "build-data arc writes; builds before 2026-11-26 lack it): rebuild it, or give the task files to hrm adapt"
        )
    return adapt(run_path, [folder], options, None, device, progress)


def _key(record: dict[str, Any]) -> dict[str, Any]:
    """What decides the rows: the tasks' content (not where their files lie), the options, the seeds, the model."""
    key = {k: record.get(k) for k in ("options", "seed", "augmentation_seed", "checkpoint", "first_row")}
    tasks = record.get("tasks")
    key["tasks"] = (
        [{k: t.get(k) for k in ("name", "sha256", "variants")} for t in tasks if isinstance(t, dict)]
        if isinstance(tasks, list)
        else None
    )
    return key


def _previous(out: Path, record: dict[str, Any], run: AdaptRun) -> tuple[torch.Tensor, dict[str, torch.Tensor]] | None:
    """The rows (and with --whole the network) a previous call with the same tasks and options wrote, else None. Its
    adapted.safetensors is read through the checked reader and must fit the run: a damaged file is one line naming
    it, never a traceback."""
    if not (out / RECORD).is_file() or not (out / ROWS).is_file():
        return None
    old = read_own_json(out / RECORD)
    if not isinstance(old, dict) or _key(old) != _key(json.loads(json.dumps(record))):
        return None
    tensors, _ = read_safetensors(out / ROWS)
    rows = tensors.pop("rows", None)
    fix = f"delete {out} to adapt again"
    width = _table(run).weights.shape[1]
    expected = (len(record["identifiers"]), width)
    if not isinstance(rows, torch.Tensor) or tuple(rows.shape) != expected or not rows.is_floating_point():
        got = f"rows of shape {tuple(rows.shape)}" if isinstance(rows, torch.Tensor) else "no tensor 'rows'"
        raise UserError(f"{out / ROWS}: holds {got}, expected {expected} float rows for this run ({fix})")
    net = {k.removeprefix("model."): v for k, v in tensors.items()}
    own = run.model.state_dict()
    for key, value in net.items():
        if key not in own or own[key].shape != value.shape:
            raise UserError(f"{out / ROWS}: tensor 'model.{key}' does not fit this run's network ({fix})")
    return rows, net


# ------------------------------------------------------------------------------------------- the three commands


def step_counts(text: str | None) -> tuple[int, ...]:
    """--curve's step counts (none without it): comma-separated, sorted, each once."""
    if not text:
        return ()
    try:
        counts = tuple(sorted({int(k) for k in text.split(",") if k.strip()}))
    except ValueError:
        counts = ()
    if not counts:
        raise UserError(f"--curve {text!r}: expected comma-separated step counts, e.g. 0,50,100")
    return counts


def adapt_command(
    run: Path,
    tasks: Sequence[Path],
    options: AdaptOptions,
    out: Path | None,
    json_out: Path | None,
    device: str,
    progress: bool,
) -> str:
    """`hrm adapt`: --json claimed before any work, then `adapt`; returns what the command prints."""
    claim(json_out, JSON_OUT)
    result = adapt(run, tasks, options, out, device, progress)
    lines = [report(result, options.steps)]
    if json_out is not None:
        lines.append(write_json(json_out, result.to_dict()))
    return "\n".join(lines)


def refuse_unused(others: dict[str, Any], test_time: Any, why: str) -> None:
    """One line naming every flag given that --adapt (of hrm solve or hrm eval) does not use: `others` maps a flag to
    its value (None or False: not given); test-time options other than the defaults count as given."""
    from hrm_reason.evaluate.tta import TestTimeOptions

    given = [name for name, value in others.items() if value is not None and value is not False]
    if test_time != TestTimeOptions():
        given.append("--tta/--samples/--noise/--select/--puzzle-id")
    if given:
        raise UserError(f"--adapt: not with {', '.join(given)} ({why})")


def solve_adapted(
    run: Path | None, file: Path | None, steps: int, mmax: int | None, as_json: bool, device: str, progress: bool
) -> str:
    """`hrm solve --adapt`: hrm adapt on the one task of --file (rows in RUN/adapt/<task id>); its answers as hrm adapt
    prints them, or the submission as JSON."""
    ADAPT_STEPS.check(steps, flag="--adapt")
    if run is None or file is None or not file.is_file():
        raise UserError("--adapt: expected --run RUN and --file TASK.json, one ARC task (hrm adapt takes several)")
    result = adapt(run, [file], AdaptOptions(steps=steps, mmax=mmax), None, device, progress)
    return json.dumps(result.submission) if as_json else report(result, steps)


def eval_adapted(
    run: Path | None,
    data: Path | None,
    steps: int,
    mmax: int | None,
    json_out: Path | None,
    submission: Path | None,
    device: str,
    progress: bool,
    others: dict[str, Any],
    test_time: Any,
) -> str:
    """`hrm eval --adapt`: hrm adapt on the test split's tasks (the build's test_tasks/), pass@k printed; the flags of
    hrm eval it does not use (`others`, `test_time`) refused, --submission and --json claimed before the work."""
    refuse_unused(others, test_time, "hrm adapt RUN DATA/test_tasks takes its options")
    ADAPT_STEPS.check(steps, flag="--adapt")
    options = AdaptOptions(steps=steps, mmax=mmax)
    if run is None:
        raise UserError("--adapt: expected --run RUN (the run whose rows are adapted)")
    claim(submission, SUBMISSION_OUT)
    claim(json_out, EVAL_JSON)
    result = adapt_test_split(run, data, options, device, progress)
    lines = [report(result, options.steps)]
    if submission is not None:
        lines.append(write_json(submission, result.submission, indent=None))
    if json_out is not None:
        lines.append(write_json(json_out, result.to_dict()))
    return "\n".join(lines)


def report(result: AdaptResult, steps: int) -> str:
    """What the three commands print: loaded or adapted, the attempts, pass@k, where the submission went."""
    if result.loaded:
        head = [f"loaded the adapted rows from {result.out / ROWS} (same tasks and options)"]
    elif result.losses:
        head = [f"adapted {steps} steps: demonstration loss {result.losses[0]:.4f} -> {result.losses[-1]:.4f}"]
    else:
        head = []
    return "\n".join([*head, format_result(result), f"wrote {result.out / SUBMISSION}"])


def format_result(result: AdaptResult) -> str:
    """The two attempts per test input, as digit rows, with their votes and the check against a given output."""
    lines = []
    for t in result.tests:
        head = f"{t['task']} test {t['test']}"
        if t["matches"] is not None:
            which = [i + 1 for i, m in enumerate(t["matches"]) if m]
            head += f": attempt {which[0]} matches the task's test output" if which else ": no attempt matches"
        lines.append(head)
        for i, grid in enumerate(t["attempts"]):
            top = t["top"][i] if i < len(t["top"]) else None
            votes = f"{top['votes']} votes, mean q {top['mean_q']:.3f}" if top else "no second candidate: attempt 1"
            lines.append(f"attempt {i + 1} ({votes}):")
            lines += ["".join(str(v) for v in row) for row in grid]
        lines.append("")
    for k, v in result.metrics.items():
        lines.append(f"{k} {v:.3f}")
    return "\n".join(lines).rstrip()


__all__ = [
    "AdaptOptions",
    "AdaptResult",
    "adapt",
    "adapt_command",
    "adapt_test_split",
    "eval_adapted",
    "format_result",
    "plan_augmentations",
    "read_task",
    "refuse_unused",
    "solve_adapted",
    "step_counts",
]
