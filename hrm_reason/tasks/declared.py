"""A task declared by its data: any grid or sequence task a user brings as a file of examples (docs/tasks.md).

`hrm build-data file` reads the examples (hrm_reason/tasks/example_files.py), and writes the original HRM format with a
builder record whose `declaration` (`Declaration`) says everything every command needs to treat the dataset as a task
and not as anonymous tokens: the symbols and how the file writes them, the token layout, the symmetries the task keeps
and the user's rules (`--check`). `DeclaredTask` is that task as the other layers meet it (tasks/base.py `Task`); a
user's own package can subclass it and register it through the `hrm_reason.tasks` entry-point group
(hrm_reason/tasks/__init__.py).

Every value is a grid of symbols inside: a 2-D list is one, a string is a grid of one row (or of the `--grid` shape).
Tokens: PAD 0 (never a label: the loss ignores it), EOS 1, symbol i -> i + 2. The layout is the simplest that holds
every grid of the dataset (docs/tasks.md, "Layouts"):
- fixed: every grid has one shape (square where the square's symmetries are declared): the cells row-major, no marker;
- strip: every grid is one row of varying length: the symbols, one EOS, then PAD (room for shape[1] - 1 symbols);
- canvas: anything else: a square canvas, the grid at its top-left with an EOS row below and an EOS column to its right
  (the corner stays PAD), as ARC's (tasks/arc.py). A prediction is read back by the same crop as ARC's.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from hrm_reason.errors import UserError
from hrm_reason.tasks.base import MARKS, GridLook, Puzzle, Reading, Task, text_lines
from hrm_reason.tasks.dihedral import DIHEDRAL_INVERSE, dihedral_transform
from hrm_reason.tasks.example_files import RawExample, check_value, parse_json_values, read_examples, split_text

if TYPE_CHECKING:
    import torch

    from hrm_reason.data.puzzle import Augmentation, PuzzleDatasetMetadata, PuzzleSplit
    from hrm_reason.models.act import ACTOutput

PAD, EOS, FIRST_SYMBOL = 0, 1, 2
KIND = "file"  # builder.name of a dataset `hrm build-data file` wrote without --task
CHECK_FILE = "check.py"  # the user's rules, copied into the dataset by the builder
Form = Literal["grid", "text", "flat"]  # how the file writes a value: a 2-D list, a string, a string of a --grid shape
Layout = Literal["fixed", "strip", "canvas"]


class CheckRef(BaseModel):
    """The user's rules: `function` of the dataset's check.py (a copy of `source`, whose bytes hash to `sha256`)."""

    model_config = ConfigDict(extra="forbid")

    source: str
    function: str
    sha256: str


class Declaration(BaseModel):
    """What a dataset built from a file declares: the builder record's `declaration` (docs/tasks.md)."""

    model_config = ConfigDict(extra="forbid")

    input_form: Form
    output_form: Form
    cells: Literal["int", "str"]  # grids: what the file's cells are (JSON ints, or one-character strings)
    output_cells: Literal["int", "str"] | None = None  # the outputs' cells where they differ from the inputs' kind
    answer_symbols: list[str] | None = None  # the symbols an output may hold, where not all (those the examples' use)
    separator: str | None  # text: None, one symbol a character; else the symbols are separated by it (" ": whitespace)
    grid: tuple[int, int] | None  # flat values: rows x columns of the grid a string is read into, row-major
    symbols: list[str]  # token i + 2 is symbols[i]
    blank: str | None  # the symbol of a cell to fill (drawn apart from the givens), if any
    layout: Layout
    shape: tuple[int, int]  # fixed: every grid's; strip: (1, longest + 1 or the common length); canvas: (side, side)
    dihedral: bool  # the square's 8 symmetries keep the task
    permute: list[str]  # symbols that any permutation among themselves keeps the task (the others stay)
    check: CheckRef | None

    @property
    def seq_len(self) -> int:
        return self.shape[0] * self.shape[1]

    @property
    def vocab_size(self) -> int:
        return len(self.symbols) + FIRST_SYMBOL

    def cells_of(self, which: Literal["input", "output"]) -> Literal["int", "str"]:
        return self.output_cells or self.cells if which == "output" else self.cells


# ------------------------------------------------------------------------------------- values <-> symbol grids


def value_grid(value: Any, form: Form, separator: str | None, grid: tuple[int, int] | None) -> list[list[str]]:
    """A value as the file holds it -> rows of symbols (checked by the reader: hrm_reason/tasks/example_files.py)."""
    if form == "grid":
        return [[str(c) for c in row] for row in value]
    symbols = split_text(value, separator)
    if form == "flat":
        assert grid is not None
        rows, cols = grid
        return [symbols[r * cols : (r + 1) * cols] for r in range(rows)]
    return [symbols]


def file_value(rows: list[list[str]], form: Form, cells: str, separator: str | None) -> Any:
    """Rows of symbols -> the value as the file would hold it (what --check functions receive)."""
    if form == "grid":
        return [[int(s) if cells == "int" and is_int(s) else s for s in row] for row in rows]
    symbols = [s for row in rows for s in row]
    return ("" if separator is None else separator).join(symbols)


def is_int(s: str) -> bool:
    """Whether a symbol reads as an integer (a grid of int cells writes it back as one)."""
    try:
        int(s)
    except ValueError:
        return False
    return True


def printed(rows: list[list[str]], form: Form, separator: str | None, wide: bool) -> str:
    """A value as `hrm solve` prints it: a grid row a line (symbols joined by a space where the task has one longer
    than a character: one format for every answer, that solve reads back), a string as the file writes it."""
    if form != "grid":
        return ("" if separator is None else separator).join(s for row in rows for s in row)
    return "\n".join((" " if wide else "").join(row) for row in rows)


# ------------------------------------------------------------------------------------------ the token layout


def crop_sizes(canvases: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of the grid at the top-left of each [S, S] canvas: the largest-area top-left rectangle of
    symbol tokens, growing row by row while the width can only shrink (the first of equal areas wins), as ARC's."""
    n, size = canvases.shape[0], canvases.shape[-1]
    symbol = canvases >= FIRST_SYMBOL
    first_other = np.where(symbol.all(-1), size, symbol.argmin(-1))
    width = np.minimum.accumulate(first_other, axis=1)
    area = width * np.arange(1, size + 1)
    best = area.argmax(1)
    has = area[np.arange(n), best] > 0
    return np.where(has, best + 1, 0), np.where(has, width[np.arange(n), best], 0)


@dataclass(frozen=True)
class TokenLayout:
    """Grids of token ids <-> token sequences of one layout (module docstring)."""

    layout: Layout
    shape: tuple[int, int]

    @property
    def seq_len(self) -> int:
        return self.shape[0] * self.shape[1]

    def fits(self, grid: np.ndarray) -> str | None:
        """Why `grid` ([h, w] token ids) has no place in the layout, or None."""
        h, w = grid.shape
        rows, cols = self.shape
        if self.layout == "fixed" and (h, w) != self.shape:
            return f"a {h}x{w} grid, where every grid of the task is {rows}x{cols}"
        if self.layout == "strip" and (h != 1 or w >= cols):
            return f"{w} symbols, more than the task's {cols - 1}" if h == 1 else f"a grid of {h} rows, not a sequence"
        if self.layout == "canvas" and (h > rows or w > cols):
            return f"a {h}x{w} grid, larger than the task's {rows}x{cols} canvas"
        return None

    def encode(self, grid: np.ndarray) -> np.ndarray:
        """[h, w] token ids -> [seq_len] tokens (uint16)."""
        grid = np.asarray(grid, dtype=np.uint16)
        if self.layout == "fixed":
            return grid.reshape(-1)
        out = np.full(self.shape, PAD, dtype=np.uint16)
        h, w = grid.shape
        out[:h, :w] = grid
        if self.layout == "strip":
            out[0, w] = EOS
        else:
            if h < self.shape[0]:
                out[h, :w] = EOS
            if w < self.shape[1]:
                out[:h, w] = EOS
        return out.reshape(-1)

    def decode(self, tokens: np.ndarray) -> np.ndarray:
        """[seq_len] tokens -> the [h, w] token ids they hold (a prediction: read as far as its symbols go)."""
        tokens = np.asarray(tokens).reshape(self.shape)
        if self.layout == "fixed":
            return tokens
        if self.layout == "strip":
            row = tokens[0]
            end = int(np.argmin(row >= FIRST_SYMBOL)) if (row < FIRST_SYMBOL).any() else row.size
            return row[None, :end]
        h, w = crop_sizes(tokens[None])
        return tokens[: int(h[0]), : int(w[0])]


# ------------------------------------------------------------------------------------------ the symmetries


@dataclass(frozen=True)
class DeclaredTransforms:
    """The declared group on token sequences (tasks/base.py `TaskTransforms`): a dihedral map of the square grid (or of
    the grid on a canvas, moved back to its top-left) and a permutation of the declared symbols, the others fixed.
    An element is (dihedral ids [rows], token maps [rows, vocab])."""

    layout: TokenLayout
    vocab_size: int
    dihedral: bool
    permuted: tuple[int, ...]  # tokens of the permuted symbols

    @property
    def group_size(self) -> int:
        return (8 if self.dihedral else 1) * math.factorial(len(self.permuted))

    @property
    def group_name(self) -> str:
        parts = ["the square's 8 symmetries"] if self.dihedral else []
        if len(self.permuted) > 1:
            parts.append(f"the {len(self.permuted)} declared symbols' permutations")
        return "the declared symmetries (" + (" x ".join(parts) or "none") + ")"

    def draw(self, rng: np.random.Generator, rows: int, copies: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Copies 1..copies-1; with the square's symmetries alone, each row goes through the 7 non-identity ones in its
        own order before any repeats (8 copies are the whole group)."""
        order = 1 + np.argsort(rng.random((rows, 7)), axis=1) if self.dihedral else None
        elements = []
        for k in range(copies - 1):
            ts = order[:, k % 7] if order is not None else np.zeros(rows, dtype=np.int64)
            elements.append((ts, self._maps(rng, rows)))
        return elements

    def random(self, rng: np.random.Generator, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """`rows` elements drawn uniformly from the whole group (identity included): augmentation."""
        ts = rng.integers(0, 8, rows) if self.dihedral else np.zeros(rows, dtype=np.int64)
        return ts, self._maps(rng, rows)

    def _maps(self, rng: np.random.Generator, rows: int) -> np.ndarray:
        maps = np.tile(np.arange(self.vocab_size, dtype=np.int64), (rows, 1))
        if len(self.permuted) > 1:
            chosen = np.array(self.permuted)
            maps[:, chosen] = rng.permuted(np.tile(chosen, (rows, 1)), axis=1)
        return maps

    def apply(self, tokens: np.ndarray, element: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        ts, maps = element
        return self._move(tokens, ts, maps)

    def invert(self, tokens: np.ndarray, element: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        ts, maps = element
        moved = self._move(tokens, np.array([DIHEDRAL_INVERSE[int(t)] for t in ts], dtype=np.int64), None)
        return _map_rows(moved, np.argsort(maps, axis=1))

    def _move(self, tokens: np.ndarray, ts: np.ndarray, maps: np.ndarray | None) -> np.ndarray:
        """Token maps first (a permutation commutes with places), then the dihedral maps."""
        tokens = np.asarray(tokens)
        out = _map_rows(tokens, maps) if maps is not None else tokens.copy()
        if not self.dihedral or not np.any(ts):
            return out
        lay = self.layout
        if lay.layout == "fixed":
            grids = out.reshape(-1, *lay.shape)
            for t in np.unique(ts).tolist():
                rows = np.flatnonzero(ts == t)
                grids[rows] = dihedral_transform(grids[rows], t)
            return grids.reshape(out.shape)
        for i, t in enumerate(ts.tolist()):
            if t:
                out[i] = lay.encode(dihedral_transform(lay.decode(out[i]), t))
        return out


def _map_rows(tokens: np.ndarray, maps: np.ndarray) -> np.ndarray:
    """Each row's tokens through its own map ([rows, vocab]); tokens outside the vocabulary stay."""
    vocab = maps.shape[1]
    inside = tokens < vocab
    mapped = np.take_along_axis(maps, np.where(inside, tokens, 0).astype(np.int64), axis=1)
    return np.where(inside, mapped, tokens).astype(tokens.dtype)


class DeclaredSymmetry:
    """Augmentation on the fly (hrm_reason/tasks/augment.py): an element drawn uniformly from the declared group for
    every training example, applied to its input and its label together."""

    def __init__(self, transforms: DeclaredTransforms) -> None:
        self.transforms = transforms

    def __call__(
        self, rng: np.random.Generator, inputs: np.ndarray, labels: np.ndarray, rows: slice, count: int
    ) -> tuple[np.ndarray, np.ndarray]:
        ts, maps = self.transforms.random(rng, count)
        element = (ts[rows], maps[rows])
        return self.transforms.apply(inputs, element), self.transforms.apply(labels, element)


# --------------------------------------------------------------------------------------------- the user's rules


Check = Callable[[Any, Any], Any]


def load_check(path: Path, function: str, flag: str = "--check") -> Check:
    """`function` of the Python file `path`: the user's rules, run as their code (docs/tasks.md, "Rules"). A file that
    does not load, or does not define the function, is a one-line UserError naming `flag`."""
    where = f"{flag} {path}:{function}"
    if not path.is_file():
        raise UserError(f"{where}: no such file")
    name = f"hrm_reason_check_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]}"
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as e:
        raise UserError(f"{where}: {path} does not load ({type(e).__name__}: {e})") from None
    check = getattr(module, function, None)
    if not callable(check):
        defined = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise UserError(
            f"{where}: {path} defines no function {function!r} (it defines: {', '.join(defined) or 'none'})"
        )
    return check


def run_rules(check: Check, given: Any, answer: Any) -> tuple[bool, str | None]:
    """The user's rules on one answer: (accepted, the error they raised, if any). Their code raising on an answer is
    the answer's fault (not accepted), never a crash of the command; a UserError of ours passes through."""
    try:
        return bool(check(given, answer)), None
    except UserError:
        raise
    except (Exception, SystemExit) as e:  # sys.exit() in their function is their code failing, not ours ending
        return False, f"{type(e).__name__}: {e}"


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class ValidAnswers:
    """SegmentMetric: the share of answers the task's rules accept (`DeclaredTask.valid`), after every segment and at
    the ACT halting segment. An answer whose check raises counts as invalid; the first such error is kept and said."""

    def __init__(self, task: DeclaredTask, mmax: int) -> None:
        self.task, self.mmax = task, mmax
        self.sums = np.zeros(mmax + 2, dtype=np.float64)  # [0:mmax] valid per segment, [mmax] ACT, [mmax+1] count
        self.raised: list[str] = []
        self._inputs: torch.Tensor | None = None
        self._given: list[Any] = []
        self._last: dict[int, tuple[bytes, bool]] = {}  # row -> (its previous answer, verdict): answers often repeat
        self._act_done: np.ndarray | None = None

    def update(
        self, segment: int, preds: torch.Tensor, out: ACTOutput, batch: dict[str, torch.Tensor], valid: torch.Tensor
    ) -> None:
        inputs = batch["inputs"]
        keep = valid.cpu().numpy()
        if inputs is not self._inputs:  # a new batch
            self._inputs, self._last = inputs, {}
            x = inputs.cpu().numpy()
            self._given = [self.task.file_value(x[i], "input") if keep[i] else None for i in range(x.shape[0])]
            self._act_done = np.zeros(x.shape[0], dtype=bool)
            self.sums[self.mmax + 1] += keep.sum()
        assert self._act_done is not None
        p = preds.cpu().numpy()
        ok = np.zeros(p.shape[0], dtype=bool)
        for i in np.flatnonzero(keep).tolist():
            key = p[i].tobytes()
            last = self._last.get(i)
            if last is None or last[0] != key:
                last = (key, self._verdict(self._given[i], p[i]))
                self._last[i] = last
            ok[i] = last[1]
        self.sums[segment] += ok.sum()
        q_halt, q_continue = out.q_halt_logits.cpu().numpy(), out.q_continue_logits.cpu().numpy()
        halt = keep & ~self._act_done & ((q_halt > q_continue) | (segment == self.mmax - 1))
        self.sums[self.mmax] += (halt & ok).sum()
        self._act_done |= halt

    def _verdict(self, given: Any, tokens: np.ndarray) -> bool:
        if not self.task.well_formed(tokens):  # padding or an end marker inside a fixed grid: not an answer
            return False
        ok, raised = run_rules(self.task.valid, given, self.task.file_value(tokens, "output"))
        if raised is not None and not self.raised:  # counted invalid, said once
            self.raised.append(raised)
        return ok

    def result(self, world_size: int) -> dict[str, Any]:
        import torch
        import torch.distributed as dist

        sums = torch.from_numpy(self.sums)
        if world_size > 1:
            device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
            sums = sums.to(device)
            dist.all_reduce(sums)
            sums = sums.cpu()
        count = max(float(sums[self.mmax + 1]), 1.0)
        if self.raised:
            print(
                f"warning: the task's check raised on a model's answer (counted invalid): {self.raised[0]}",
                file=sys.stderr,
            )
        return {
            "valid_answers": (sums[: self.mmax] / count).tolist(),
            "act_valid_answers": float(sums[self.mmax]) / count,
        }


# ---------------------------------------------------------------------------------------------------- the task

PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")


@dataclass(frozen=True)
class DeclaredTask(Task):
    """A task declared by its dataset (module docstring). Subclass it in your own package to add rules (`valid`), a
    check of puzzles (`problem`), other text (`parse`, `describe`) or pictures (`look`), and register the class under
    the `hrm_reason.tasks` entry-point group; `hrm build-data file --task KIND` then builds datasets of it."""

    declaration: Declaration
    data_dir: Path | None = None  # the dataset's folder, where check.py is
    blank_identifier: int = 0
    columns: tuple[str | None, str | None] = (None, None)  # the CSV columns it was built from (--input-col, ...)
    _check: list[Check] = field(default_factory=list, compare=False, repr=False)  # loaded once, when first asked
    kind: ClassVar[str] = KIND
    owner: ClassVar[str] = "a declared task's"
    metric_name: ClassVar[str | None] = "valid answers (the task's rules)"
    on_the_fly: ClassVar[bool] = True

    @classmethod
    def from_metadata(cls, metadata: PuzzleDatasetMetadata, where: str, names: list[str] | None = None) -> DeclaredTask:
        builder = metadata.builder or {}
        try:
            declaration = Declaration.model_validate(builder.get("declaration"))
        except Exception as e:
            raise UserError(
                f"{where}: builder.declaration of a {cls.kind} dataset does not read ({e})".split("\n")[0]
            ) from None
        if declaration.seq_len != metadata.seq_len or declaration.vocab_size != metadata.vocab_size:
            raise UserError(
                f"{where}: the declaration's layout ({declaration.seq_len} tokens, {declaration.vocab_size} ids) is not "
                f"the dataset's (seq_len {metadata.seq_len}, vocab_size {metadata.vocab_size})"
            )
        data_dir = Path(where).parent.parent if Path(where).name == "dataset.json" else None
        options = builder.get("options") if isinstance(builder.get("options"), dict) else {}
        columns = tuple(
            c if isinstance(c, str) else None for c in (options.get("input_col"), options.get("output_col"))
        )
        return cls(declaration, data_dir, metadata.blank_identifier_id, columns)  # type: ignore[arg-type]

    # --- the layout

    @property
    def layout(self) -> TokenLayout:
        return TokenLayout(self.declaration.layout, self.declaration.shape)

    @cached_property
    def token_index(self) -> dict[str, int]:
        """Symbol -> token, made once (a builder encodes a million examples through it)."""
        return {s: i + FIRST_SYMBOL for i, s in enumerate(self.declaration.symbols)}

    def tokens_of(self, rows: list[list[str]], where: str) -> np.ndarray:
        """Rows of symbols -> [seq_len] tokens; a symbol the task lacks, or a grid the layout has no place for, is a
        UserError naming `where`."""
        index = self.token_index
        unknown = next((s for row in rows for s in row if s not in index), None)
        if unknown is not None:
            raise UserError(
                f"{where}: symbol {unknown!r} is not one of the task's ({symbol_list(self.declaration.symbols)})"
            )
        grid = np.array([[index[s] for s in row] for row in rows], dtype=np.int64).reshape(len(rows), -1)
        why = self.layout.fits(grid)
        if why is not None:
            raise UserError(f"{where}: {why}")
        return self.layout.encode(grid).astype(np.int32)

    def symbol_rows(self, tokens: np.ndarray) -> list[list[str]]:
        """[seq_len] tokens -> the rows of symbols they hold (PAD and EOS inside a fixed grid read as '?')."""
        grid = self.layout.decode(np.asarray(tokens))
        names = ["?", "?", *self.declaration.symbols]
        return [[names[t] if 0 <= t < len(names) else "?" for t in row.tolist()] for row in grid]

    def file_value(self, tokens: np.ndarray, which: Literal["input", "output"]) -> Any:
        """[seq_len] tokens -> the value as the file writes the task's inputs or outputs."""
        d = self.declaration
        form = d.input_form if which == "input" else d.output_form
        rows = self.symbol_rows(tokens)
        return file_value(rows, form, d.cells_of(which), d.separator)

    # --- what evaluation and training ask

    @property
    def transforms(self) -> DeclaredTransforms:
        d = self.declaration
        permuted = tuple(d.symbols.index(s) + FIRST_SYMBOL for s in d.permute)
        return DeclaredTransforms(self.layout, d.vocab_size, d.dihedral, permuted)

    @property
    def has_rules(self) -> bool:
        """Whether answers can be checked: a --check function, or a subclass's own `valid`."""
        return self.declaration.check is not None or type(self).valid is not DeclaredTask.valid

    def segment_metrics(self, split: PuzzleSplit, mmax: int) -> list[ValidAnswers]:
        """Valid answers where the task has rules; the check file is loaded here, before any batch runs."""
        if not self.has_rules:
            return []
        self.check_function()
        return [ValidAnswers(self, mmax)]

    @property
    def symmetry_name(self) -> str:
        return self.transforms.group_name

    def augmentation(self, kind: str, split: PuzzleSplit) -> Augmentation | None:
        """The declared group; a dataset that declares none trains without augmentation on the fly, said in one line
        (so that the default config's augment=symmetry runs on any dataset, as on one with no builder record)."""
        transforms = self.transforms
        if transforms.group_size == 1:
            print(
                f"augment={kind}: {split.path / 'dataset.json'} declares no symmetry (hrm build-data file --dihedral, "
                "--permute): training without augmentation on the fly",
                file=sys.stderr,
            )
            return None
        return DeclaredSymmetry(transforms)

    def givens(self, inputs: np.ndarray) -> np.ndarray | None:
        """The cells the input fills, where a blank symbol is declared and the layout is one grid for both."""
        d = self.declaration
        if d.blank is None or d.layout != "fixed":
            return None
        return np.asarray(inputs).reshape(-1) != d.symbols.index(d.blank) + FIRST_SYMBOL

    # --- the rules

    def valid(self, given: Any, answer: Any) -> bool | None:
        """Whether `answer` is a valid answer to `given` (both as the file writes them); None: no rules declared. The
        default runs the dataset's --check function (the user's code, docs/tasks.md "Rules")."""
        check = self.check_function()
        return None if check is None else bool(check(given, answer))

    def check_function(self) -> Check | None:
        """The dataset's --check function (None: none declared), loaded once; a check.py missing or changed since the
        build is a one-line UserError."""
        check = self.declaration.check
        if check is None:
            return None
        if not self._check:
            if self.data_dir is None:
                raise UserError(
                    f"the task's check ({check.source}:{check.function}) is in its dataset, which is not at hand"
                )
            path = self.data_dir / CHECK_FILE
            if path.is_file() and sha256_of(path) != check.sha256:
                raise UserError(
                    f"{path}: changed since the dataset was built (its sha256 differs from builder.declaration.check)"
                )
            self._check.append(load_check(path, check.function, "dataset check"))
        return self._check[0]

    # --- hrm solve

    def describe(self) -> str:
        d = self.declaration
        rows, cols = d.shape
        shape = {
            "fixed": f"{rows}x{cols} grids",
            "strip": f"sequences of up to {cols - 1} symbols",
            "canvas": f"grids up to {rows}x{cols}",
        }[d.layout]
        return f"{self.kind} task ({shape} of {symbol_list(d.symbols)})"

    def parse(self, text: str, source: str, stem: str | None = None) -> list[Puzzle]:
        """Inputs as the examples file writes them: JSON Lines of {"input": ..., "output": ...} (the output, when
        given, is what the answer is compared with), one JSON value, or plain text: a string a line, or for grids a
        row a line with an empty line between grids (one line holding a whole fixed grid row-major also reads)."""
        d = self.declaration
        values = parse_json_values(text, source, grids=d.input_form == "grid")
        return self._puzzles(values if values is not None else self._text_values(text, source))

    def parse_file(self, path: Path) -> list[Puzzle] | None:
        """A CSV file (the columns the dataset was built from) or an .npz file of examples, read as the builder reads
        them (their outputs optional: given, they are compared with the answers); None for the text formats."""
        if path.suffix.lower() not in (".csv", ".npz"):
            return None
        columns = self.columns if path.suffix.lower() == ".csv" else (None, None)
        built_from = ("the dataset's input column (--input-col at its build)", "its output column")
        return self._puzzles(read_examples(path, "--file", *columns, need_output=False, column_flags=built_from))

    def _puzzles(self, examples: list[RawExample]) -> list[Puzzle]:
        d = self.declaration
        puzzles = []
        for e in examples:
            rows = self._read(e.input, f"{e.where}: field 'input'", d.input_form)
            tokens = self.tokens_of(rows, f"{e.where}: field 'input'")
            exp = None
            if e.output is not None:
                exp_rows = self._read(e.output, f"{e.where}: field 'output'", d.output_form)
                exp = np.array(self.tokens_of(exp_rows, f"{e.where}: field 'output'"))
            puzzles.append(Puzzle(e.where, tokens, self.blank_identifier, expected=exp, ident=e.ident))
        return puzzles

    def answer_tokens(self) -> np.ndarray | None:
        """The symbols an output holds (all, or the declaration's answer_symbols), and where the layout ends an answer
        with a marker, the end marker and padding: no padding in the middle of a fixed grid, no symbol only inputs
        use (an integer grid's answer stays integers)."""
        d = self.declaration
        symbols = d.answer_symbols if d.answer_symbols is not None else d.symbols
        tokens = [self.token_index[s] for s in symbols] + ([PAD, EOS] if d.layout != "fixed" else [])
        return np.array(sorted(tokens), dtype=np.int64)

    def well_formed(self, tokens: np.ndarray) -> bool:
        """Whether a predicted output is one the file could hold: in the fixed layout every place a symbol (the other
        layouts read an answer as far as its symbols go), and a string one row (on a canvas, a string output is its
        first row: rows below it are not a string)."""
        d = self.declaration
        if d.layout == "fixed":
            return bool((np.asarray(tokens) >= FIRST_SYMBOL).all())
        return d.output_form != "text" or len(self.layout.decode(np.asarray(tokens))) <= 1

    def _read(self, value: Any, where: str, form: Form) -> list[list[str]]:
        d = self.declaration
        if form == "grid" and isinstance(value, str):  # typed as text rows
            value = [self._cells(line) for line in text_lines(value) if self._holds(line)]
        check_value(value, where, form, d.grid, d.separator)
        return value_grid(value, form, d.separator, d.grid)

    def _text_values(self, text: str, source: str) -> list[RawExample]:
        d = self.declaration
        lines = text_lines(text)
        if d.input_form == "text":
            return [RawExample(f"{source} line {i}", line) for i, line in enumerate(lines, 1) if self._holds(line)]
        values, block, first = [], [], 0
        for i, line in enumerate([*lines, ""], 1):
            if not self._holds(line):
                if block:
                    values.extend(self._block_values(block, f"{source} line", first))
                    block = []
                continue
            first = first if block else i
            block.append(line)
        return values

    def _block_values(self, block: list[str], where: str, first: int) -> list[RawExample]:
        """The inputs of lines between empty ones: a grid (rows a line); for a string read into --grid's shape,
        the grid's rows a line, or a whole grid a line."""
        d = self.declaration
        if d.input_form == "grid":
            return [RawExample(f"{where} {first}", self._block(block))]
        assert d.grid is not None
        cells = [self._cells(line) for line in block]
        sep = d.separator or ""
        if len(block) == d.grid[0] and all(len(row) == d.grid[1] for row in cells):
            return [RawExample(f"{where} {first}", sep.join(s for row in cells for s in row))]
        return [RawExample(f"{where} {first + k}", sep.join(row)) for k, row in enumerate(cells)]

    def _holds(self, line: str) -> bool:
        """Whether a line of plain text holds symbols: an empty one never (it ends a grid), one of blanks only where
        the space is one of the task's symbols."""
        return bool(line) if " " in self.declaration.symbols else bool(line.strip())

    def _cells(self, line: str) -> list[str]:
        """The symbols of a typed row: split by the separator (whitespace where a symbol is wider than a character),
        else a character each, where blanks that are none of the task's symbols only space the cells out."""
        d = self.declaration
        sep = d.separator if d.separator is not None else (" " if _wide(d.symbols) else None)
        if sep is None:
            return [c for c in line if not c.isspace() or c in self.token_index]
        return split_text(line if " " in d.symbols else line.strip(), sep)

    def _block(self, block: list[str]) -> list[list[str]]:
        d = self.declaration
        rows = [self._cells(line) for line in block]
        rows_n, cols_n = d.shape
        if d.layout == "fixed" and len(rows) == 1 and len(rows[0]) == rows_n * cols_n and rows_n > 1:
            rows = [rows[0][r * cols_n : (r + 1) * cols_n] for r in range(rows_n)]
        return [[int(s) if d.cells == "int" and is_int(s) else s for s in row] for row in rows]

    def answer(self, puzzle: Puzzle, tokens: np.ndarray) -> Reading:
        d = self.declaration
        rows = self.symbol_rows(tokens)
        text = printed(rows, d.output_form, d.separator, _wide(d.symbols))
        grid = file_value(rows, d.output_form, d.cells_of("output"), d.separator)
        verdicts = []
        valid = None
        if not self.well_formed(tokens):  # in solve (answer_tokens), only a string output spanning rows of a canvas
            verdicts.append(
                "invalid: a cell of the answer holds no symbol"
                if d.layout == "fixed"
                else f"invalid: the answer is not one string (it spans {len(rows)} rows)"
            )
            valid = False if self.has_rules else None
        elif self.has_rules:
            valid, raised = run_rules(self.valid, self.file_value(puzzle.tokens, "input"), grid)
            if raised is not None:  # invalid, as hrm eval counts it
                verdicts.append(f"invalid: the task's rules raised on it ({raised})"[:300])
            else:
                verdicts.append("valid: the task's rules accept it" if valid else "invalid: the task's rules reject it")
        if puzzle.expected is not None:
            same = self.layout.decode(puzzle.expected).tolist() == self.layout.decode(np.asarray(tokens)).tolist()
            verdicts.append("matches the expected output" if same else "differs from the expected output")
        return Reading(text, grid, valid, "; ".join(verdicts) or "no rules to check it against")

    # --- pictures

    def grid_shape(self, seq_len: int) -> tuple[int, int] | None:
        return self.declaration.shape

    @property
    def look(self) -> GridLook:
        d = self.declaration
        colours = {PAD: "#ffffff", EOS: "#e9e3d6"}
        colours |= {i + FIRST_SYMBOL: PALETTE[i % len(PALETTE)] for i in range(len(d.symbols))}
        if d.blank is not None:
            colours[d.symbols.index(d.blank) + FIRST_SYMBOL] = "#ffffff"
        end = ";  beige: end marker" if d.layout != "fixed" else ""
        return GridLook(
            puzzle_legend=f"symbols {symbol_list(d.symbols, 12)}{end}",
            legend=f"{MARKS}{end}",
            panel_inches=(2.2, 1.5),
            colours=colours,
            grid_lines=True,
            symbols={i + FIRST_SYMBOL: s for i, s in enumerate(d.symbols)},
            content_token=PAD if d.layout == "canvas" else None,
        )


def _wide(symbols: list[str]) -> bool:
    return any(len(s) != 1 for s in symbols)


def symbol_list(symbols: list[str], most: int = 20) -> str:
    """Symbols for a message: quoted, the first `most` of them."""
    shown = ", ".join(repr(s) for s in symbols[:most])
    return shown + (f", ... ({len(symbols)} in all)" if len(symbols) > most else "")
