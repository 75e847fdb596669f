"""`hrm build-data file`: a dataset in the original HRM format from a user's own examples (docs/tasks.md).

Everything about the file is checked before anything is written: each value's form (hrm_reason/tasks/example_files.py),
the symbols, the layout's bound, the split (no group and no example on both sides), and the user's rules on every
example. Then the declaration (hrm_reason/tasks/declared.py `Declaration`) is fixed, every example encoded through the
declared task, the training examples augmented under the declared symmetries, and the dataset written atomically:
{train,test,val}/ as the Sudoku and maze builders write them (every example its own puzzle, identifier 0; each
original and its copies one group), identifiers.json, the user's check file as check.py, and the test split's
examples as JSON Lines (test_examples.jsonl, for hrm solve --file).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from datasets_build.hrm_format import (
    check_out,
    record_head,
    write_identifiers,
    write_split,
    write_val_split,
)
from datasets_build.options import FileBuildOptions
from hrm_reason.atomic import atomic_directory
from hrm_reason.data.puzzle import PuzzleDatasetMetadata
from hrm_reason.errors import UserError
from hrm_reason.limits import FILE_SYMBOLS, FILE_TOKENS
from hrm_reason.runtime.logs import progress_bar
from hrm_reason.tasks import task_class
from hrm_reason.tasks.declared import (
    CHECK_FILE,
    FIRST_SYMBOL,
    KIND,
    Check,
    CheckRef,
    Declaration,
    DeclaredTask,
    is_int,
    load_check,
    run_rules,
    sha256_of,
    symbol_list,
    value_grid,
)
from hrm_reason.tasks.example_files import RawExample, check_value, form_of, read_examples

VERSION = "1"
GENERIC_STEMS = {"train", "test", "examples", "data", "all"}  # a stem that names no task: the folder's name does


TEST_EXAMPLES = "test_examples.jsonl"  # the test split's examples as the files wrote them, for hrm solve --file


def build_file(opts: FileBuildOptions) -> Path:
    """Build the dataset `opts` describe and return its directory (written atomically: all or nothing)."""
    if (opts.test is None) == (opts.test_fraction is None):
        raise UserError(
            "--test / --test-fraction: give the test examples with --test FILE, or hold some out with "
            "--test-fraction F (one of the two)"
        )
    cls = task_type(opts.task)
    out = Path(opts.out) if opts.out is not None else default_out(opts.examples)
    check_out(out, opts.overwrite, "file")
    train = read_examples(opts.examples, "EXAMPLES", opts.input_col, opts.output_col)
    if opts.test is not None:
        test = read_examples(opts.test, "--test", opts.input_col, opts.output_col)
        check_groups(train, test)
        declaration = declare(opts, train + test, not opts.quiet)
    else:  # declared in the file's order, so that an error names the first line that has it; then split
        assert opts.test_fraction is not None
        declaration = declare(opts, train, not opts.quiet)
        train, test = split_by_group(train, opts.test_fraction, opts.seed, opts.examples)
    task = cls(declaration)
    train_x, train_y = encode(task, train, not opts.quiet)
    test_x, test_y = encode(task, test, not opts.quiet)
    split_flag = "--test" if opts.test is not None else "--test-fraction"
    check_overlap(split_flag, train, test, train_x, train_y, test_x, test_y)
    inputs, outputs = (train_x, test_x), (train_y, test_y)
    if opts.check is not None:
        declaration.check, rules = check_rules(task, opts.check, train + test, inputs, outputs)
        what = f"--check {opts.check}"
    elif task.has_rules:  # a task of the user's package with its own rules: they accept the file's answers
        rules, what = task.valid, "the task's valid()"
        check_examples(task, rules, what, train + test, inputs, outputs)
    if (opts.check is not None or task.has_rules) and task.transforms.group_size > 1:
        check_symmetries(task, rules, what, train, train_x, train_y, np.random.default_rng(opts.seed))
    train_x, train_y, sizes = augment(
        task, train_x, train_y, opts.num_aug, np.random.default_rng(opts.seed), not opts.quiet
    )
    splits = {
        "train": (train_x, train_y, sizes, len(train)),
        "test": (test_x, test_y, np.ones(len(test), dtype=np.int64), len(test)),
    }
    with atomic_directory(out, overwrite=opts.overwrite) as tmp:
        for split, (x, y, group_sizes, originals) in splits.items():
            head = record_head(cls.kind, VERSION, split, "file", source_detail(opts), opts.record(), opts.seed)
            record = {
                "declaration": declaration.model_dump(mode="json"),
                "counts": {"originals": originals, "examples": int(x.shape[0])},
            }
            write_examples(tmp / split, x, y, group_sizes, declaration, head | record)
        write_identifiers(tmp, ["<blank>"])
        write_val_split(tmp)
        if opts.check is not None:
            shutil.copyfile(check_path(opts.check), tmp / CHECK_FILE)
        (tmp / TEST_EXAMPLES).write_text("".join(json.dumps(held_out(e), ensure_ascii=False) + "\n" for e in test))
    return out


def held_out(example: RawExample) -> dict[str, Any]:
    """A test example as JSON Lines, its values as its file wrote them: what `hrm solve --file` reads and compares."""
    extra = {k: v for k, v in (("id", example.ident), ("group", example.group)) if v is not None}
    return {"input": example.input, "output": example.output, **extra}


def write_examples(
    split_dir: Path, x: np.ndarray, y: np.ndarray, group_sizes: np.ndarray, d: Declaration, builder: dict[str, Any]
) -> None:
    """One split in the layout of the Sudoku and maze builders: set "all", every example its own puzzle under the
    blank identifier, each original and its copies one group."""
    write_split(
        split_dir,
        "all",
        x,
        y,
        puzzle_identifiers=np.zeros(x.shape[0], dtype=np.int32),
        puzzle_indices=np.arange(x.shape[0] + 1, dtype=np.int32),
        group_indices=np.concatenate([[0], np.cumsum(group_sizes)]).astype(np.int32),
        metadata=PuzzleDatasetMetadata(
            pad_id=0,
            ignore_label_id=0,
            blank_identifier_id=0,
            vocab_size=d.vocab_size,
            seq_len=d.seq_len,
            num_puzzle_identifiers=1,
            total_groups=len(group_sizes),
            mean_puzzle_examples=1.0,
            sets=["all"],
            builder=builder,
        ),
    )


def task_type(kind: str | None) -> type[DeclaredTask]:
    """The declared task class: the built-in one, or `--task KIND` of the user's package (a DeclaredTask subclass)."""
    if kind is None:
        return DeclaredTask
    cls = task_class(kind)
    if cls is None or kind == KIND:
        raise UserError(
            f"--task {kind}: no task of that kind is registered (entry point group hrm_reason.tasks; "
            'docs/tasks.md, "A task of your own")'
        )
    if not issubclass(cls, DeclaredTask):
        raise UserError(
            f"--task {kind}: {cls.__module__}.{cls.__name__} is not a DeclaredTask subclass, so its "
            "datasets are not built from a file of examples"
        )
    return cls


def default_out(examples: Path) -> Path:
    stem = examples.stem
    name = examples.resolve().parent.name if stem.lower() in GENERIC_STEMS else stem
    return Path("data") / (name or stem)


def source_detail(opts: FileBuildOptions) -> dict[str, Any]:
    """Where the examples came from, and the sha256 of each file (a rebuild from other bytes is told apart)."""
    files = {"examples": opts.examples, **({"test": opts.test} if opts.test is not None else {})}
    return {name: {"path": str(path), "sha256": sha256_of(path)} for name, path in files.items()}


# ------------------------------------------------------------------------------------------------- the split


def group_of(example: RawExample) -> str:
    """The example's group: its own, else its identical copies (the same input and output) and itself, so that a
    file's duplicates never sit on both sides of a split."""
    if example.group is not None:
        return f"group {example.group}"
    return "same " + json.dumps([example.input, example.output], ensure_ascii=False)


def check_groups(train: list[RawExample], test: list[RawExample]) -> None:
    """No group on both sides of the split: the test examples are held out from every equivalent training one."""
    train_groups = {str(e.group) for e in train if e.group is not None}
    shared = [e for e in test if e.group is not None and str(e.group) in train_groups]
    if shared:
        n = len({str(e.group) for e in shared})
        raise UserError(
            f"--test: {n} group{'s' * (n > 1)} on both sides of the split (first: group {str(shared[0].group)!r} at "
            f"{shared[0].where}); a group's examples are all train or all test"
        )


def split_by_group(
    examples: list[RawExample], fraction: float, seed: int, path: Path
) -> tuple[list[RawExample], list[RawExample]]:
    """Whole groups, in a seeded order, to test until it holds `fraction` of the examples; the rest train."""
    groups: dict[str, list[RawExample]] = {}
    for e in examples:
        groups.setdefault(group_of(e), []).append(e)
    order = np.random.default_rng(seed).permutation(len(groups))
    keys = list(groups)
    want = round(fraction * len(examples))
    test_keys: set[str] = set()
    held = 0
    for k in order.tolist():
        if held >= want:
            break
        test_keys.add(keys[k])
        held += len(groups[keys[k]])
    test = [e for e in examples if group_of(e) in test_keys]
    train = [e for e in examples if group_of(e) not in test_keys]
    if not test or not train:
        side = "test" if not test else "training"
        raise UserError(
            f"--test-fraction {fraction}: the {side} split of {path} would be empty ({len(examples)} examples in "
            f"{len(groups)} groups)"
        )
    return train, test


def check_overlap(flag: str, train: list[RawExample], test: list[RawExample], *arrays: np.ndarray) -> None:
    """The same example (input and output) on both sides is refused, with the count and the first pair."""
    train_x, train_y, test_x, test_y = arrays
    seen = {x.tobytes() + y.tobytes(): i for i, (x, y) in enumerate(zip(train_x, train_y))}
    both = [(j, seen[k]) for j, k in enumerate(x.tobytes() + y.tobytes() for x, y in zip(test_x, test_y)) if k in seen]
    if both:
        j, i = both[0]
        raise UserError(
            f"{flag}: {len(both)} test example{'s are' if len(both) > 1 else ' is'} also in training (first: "
            f"{test[j].where} = {train[i].where}); "
            + ("remove them from one of the files" if flag == "--test" else "their groups differ: give them one group")
        )


# ------------------------------------------------------------------------------------------ the declaration


def declare(opts: FileBuildOptions, examples: Sequence[RawExample], progress: bool = False) -> Declaration:
    """The declaration of `examples`: forms, symbols, layout and symmetries, every value checked on the way."""
    forms: dict[str, tuple[str, str]] = {}  # field -> (form, the first example's place)
    cells: dict[str, tuple[str, str]] = {}  # field -> (its grids' cells: int or str, the first grid's place)
    shapes: list[tuple[int, int, str]] = []
    used: dict[str, str] = {}  # symbol -> where it is first used
    answered: set[str] = set()  # the symbols outputs use
    for e in progress_bar(enabled=progress, iterable=examples, desc="reading", unit="example"):
        for name, value in (("input", e.input), ("output", e.output)):
            where = f"{e.where}: field {name!r}"
            form = form_of(value, where, opts.grid)
            first = forms.setdefault(name, (form, e.where))
            if form != first[0]:
                raise UserError(f"{where}: {_form_words(form)}, where {first[1]} has {_form_words(first[0])}")
            check_value(value, where, form, opts.grid, opts.separator)
            if form == "grid":
                kind = "int" if isinstance(value[0][0], int) else "str"
                seen = cells.setdefault(name, (kind, e.where))
                mixed = any(
                    (isinstance(c, int) and not isinstance(c, bool)) != (kind == "int") for row in value for c in row
                )
                if kind != seen[0] or mixed:
                    raise UserError(
                        f"{where}: mixes integer and character cells (its grids are of {_cells_words(seen[0])} at "
                        f"{seen[1]})"
                    )
            rows = value_grid(value, form, opts.separator, opts.grid)
            shapes.append((len(rows), len(rows[0]) if rows else 0, where))
            for row in rows:
                for s in row:
                    used.setdefault(s, where)
                    if name == "output":
                        answered.add(s)
    symbols = declared_symbols(opts, used)
    input_form, output_form = forms["input"][0], forms["output"][0]
    if opts.dihedral and all(h == 1 for h, _, _ in shapes):
        raise UserError("--dihedral: the examples are sequences, not grids (the square's symmetries move grids)")
    strings = [name for name, form in (("inputs", input_form), ("outputs", output_form)) if form == "text"]
    if opts.dihedral and strings:
        raise UserError(
            f"--dihedral: the {' and '.join(strings)} are strings (sequences), which the square's symmetries do not "
            "move; write them as grids (2-D lists, or --grid RxC), or declare no --dihedral"
        )
    layout, shape = choose_layout(opts, shapes, "grid" in (input_form, output_form))
    for name, value in (("--blank", [opts.blank] if opts.blank is not None else []), ("--permute", opts.permute or [])):
        missing = next((s for s in value if s not in symbols), None)
        if missing is not None:
            raise UserError(f"{name}: {missing!r} is not one of the task's symbols ({symbol_list(symbols)})")
    if opts.permute is not None and len(opts.permute) < 2:
        raise UserError("--permute: name at least two symbols to permute among themselves")
    if opts.dihedral and layout == "fixed" and shape[0] != shape[1]:
        raise AssertionError("choose_layout puts non-square grids on a canvas under --dihedral")
    if opts.num_aug and not opts.dihedral and not opts.permute:
        raise UserError(
            f"--num-aug {opts.num_aug}: no symmetry is declared to draw copies from (--dihedral, --permute)"
        )
    out_cells = cells.get("output", ("str", ""))[0]
    if answered & set(opts.permute or []):  # an output's symbol may become any other the permutations move it to
        answered |= set(opts.permute or [])
    return Declaration(
        input_form=input_form,
        output_form=output_form,
        cells=cells.get("input", cells.get("output", ("str", "")))[0],
        output_cells=out_cells if out_cells != cells.get("input", (out_cells,))[0] else None,
        answer_symbols=[s for s in symbols if s in answered] if answered != set(symbols) else None,
        separator=opts.separator,
        grid=opts.grid,
        symbols=symbols,
        blank=opts.blank,
        layout=layout,
        shape=shape,
        dihedral=opts.dihedral,
        permute=opts.permute or [],
        check=None,
    )


def _cells_words(kind: str) -> str:
    return "integer cells" if kind == "int" else "character cells"


def _form_words(form: str) -> str:
    return {"grid": "a grid (2-D list)", "text": "a string", "flat": "a string"}[form]


def declared_symbols(opts: FileBuildOptions, used: dict[str, str]) -> list[str]:
    """--symbols, every used one among them; else the used ones sorted (as numbers where all are integers)."""
    if opts.symbols is not None:
        stray = next((s for s in used if s not in opts.symbols), None)
        if stray is not None:
            raise UserError(f"{used[stray]}: symbol {stray!r} is not one of --symbols ({symbol_list(opts.symbols)})")
        symbols = list(opts.symbols)
    else:
        numeric = all(is_int(s) for s in used)
        symbols = sorted(used, key=lambda s: (int(s), s) if numeric else (0, s))
    if (why := FILE_SYMBOLS.problem(len(symbols))) is not None:
        raise UserError(f"{opts.examples}: {len(symbols):,} symbols: {why}")
    return symbols


def choose_layout(
    opts: FileBuildOptions, shapes: list[tuple[int, int, str]], grids: bool
) -> tuple[str, tuple[int, int]]:
    """The simplest layout holding every grid (hrm_reason/tasks/declared.py): fixed, strip or canvas."""
    distinct = {(h, w) for h, w, _ in shapes}
    if opts.canvas is not None and opts.length is not None:
        raise UserError("--canvas / --length: --canvas is for grids, --length for sequences; give one")
    if not grids and all(h == 1 for h, _ in distinct):
        longest = max(w for _, w in distinct)
        if opts.canvas is not None:
            raise UserError("--canvas: the examples are sequences; --length sets their room")
        if opts.length is None and len(distinct) == 1:
            layout, shape = "fixed", (1, longest)
        else:
            length = opts.length if opts.length is not None else longest + 1
            over = next(((w, where) for _, w, where in shapes if w >= length), None)
            if over is not None:
                raise UserError(
                    f"{over[1]}: {over[0]} symbols, more than --length {length} holds ({length - 1} and the end marker)"
                )
            layout, shape = "strip", (1, length)
    else:
        if opts.length is not None:
            raise UserError("--length: the examples are grids; --canvas sets their room")
        square = all(h == w for h, w in distinct)
        if opts.canvas is None and len(distinct) == 1 and (square or not opts.dihedral):
            layout, shape = "fixed", next(iter(distinct))
        else:
            side = opts.canvas if opts.canvas is not None else max(max(h, w) for h, w in distinct)
            over = next(((h, w, where) for h, w, where in shapes if h > side or w > side), None)
            if over is not None:
                raise UserError(
                    f"{over[2]}: a {over[0]}x{over[1]} grid, larger than the {side}x{side} canvas (--canvas)"
                )
            layout, shape = "canvas", (side, side)
    tokens = shape[0] * shape[1]
    if (why := FILE_TOKENS.problem(tokens)) is not None:
        h, w, where = max(shapes, key=lambda s: max(s[0], s[1]) if layout == "canvas" else s[0] * s[1])
        raise UserError(
            f"{where}: a {h}x{w} value: the examples need {tokens:,} tokens a sequence ({layout} {shape[0]}x{shape[1]})"
            f": {why}"
        )
    return layout, shape


# -------------------------------------------------------------------------------------------- the examples


def encode(task: DeclaredTask, examples: list[RawExample], progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """[n, seq_len] input and output tokens (uint8 where the vocabulary fits, else uint16)."""
    d = task.declaration
    dtype = np.uint8 if d.vocab_size <= 256 else np.uint16
    x = np.zeros((len(examples), d.seq_len), dtype=dtype)
    y = np.zeros_like(x)
    for i, e in enumerate(progress_bar(enabled=progress, iterable=examples, desc="encoding", unit="example")):
        for arr, name, value, form in ((x, "input", e.input, d.input_form), (y, "output", e.output, d.output_form)):
            rows = value_grid(value, form, d.separator, d.grid)
            arr[i] = task.tokens_of(rows, f"{e.where}: field {name!r}")
    return x, y


def check_path(spec: str) -> Path:
    return Path(spec.rpartition(":")[0])


def check_rules(
    task: DeclaredTask,
    spec: str,
    examples: list[RawExample],
    inputs: tuple[np.ndarray, np.ndarray],
    outputs: tuple[np.ndarray, np.ndarray],
) -> tuple[CheckRef, Check]:
    """--check FILE.py:FUNCTION loaded and run on every example, whose outputs it must accept."""
    path, function = check_path(spec), spec.rpartition(":")[2]
    check = load_check(path, function)
    check_examples(task, check, f"--check {spec}", examples, inputs, outputs)
    return CheckRef(source=str(path), function=function, sha256=sha256_of(path)), check


def check_examples(
    task: DeclaredTask,
    check: Any,
    what: str,
    examples: list[RawExample],
    inputs: tuple[np.ndarray, np.ndarray],
    outputs: tuple[np.ndarray, np.ndarray],
) -> None:
    """Runs the rules on every example as a model's answer would meet them (decoded from its tokens): an example it
    raises on, or whose own output it rejects, is a UserError naming the example's line."""
    x, y = np.concatenate(inputs), np.concatenate(outputs)
    for e, xi, yi in zip(examples, x, y):
        given, answer = task.file_value(xi, "input"), task.file_value(yi, "output")
        ok, raised = run_rules(check, given, answer)
        if raised is not None:
            raise UserError(f"{what}: raised on {e.where} ({raised})")
        if not ok:
            raise UserError(
                f"{what}: rejects the output of {e.where} ({json.dumps(answer)[:60]}); the rules must accept the file's answers"
            )


def check_symmetries(
    task: DeclaredTask,
    check: Any,
    what: str,
    examples: list[RawExample],
    x: np.ndarray,
    y: np.ndarray,
    rng: np.random.Generator,
) -> None:
    """The declared symmetries keep the task: each training example moved by a random element of the declared group
    (as augmentation on disk and on the fly moves it) must still be accepted by the rules; one that is not is a
    UserError naming the example and the symmetries, before anything is written."""
    transforms = task.transforms
    element = transforms.random(rng, x.shape[0])
    cx, cy = transforms.apply(x, element), transforms.apply(y, element)
    for e, xi, yi in zip(examples, cx, cy):
        given, answer = task.file_value(xi, "input"), task.file_value(yi, "output")
        ok, raised = run_rules(check, given, answer)
        why = f" (it raised {raised})" if raised is not None else ""
        if not ok:
            flags = " ".join(
                f for f, on in (("--dihedral", transforms.dihedral), ("--permute", transforms.permuted)) if on
            )
            raise UserError(
                f"{flags}: the task does not keep {transforms.group_name}: {e.where} moved by one of "
                f"them ({json.dumps(given)[:40]} -> {json.dumps(answer)[:40]}) is not valid under {what}{why}; "
                "declare only the symmetries your task keeps"
            )


def augment(
    task: DeclaredTask, x: np.ndarray, y: np.ndarray, num_aug: int, rng: np.random.Generator, progress: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each training example followed by up to `num_aug` copies under random elements of the declared group, none
    equal to the example or an earlier copy (a few draws per copy; a small group gives fewer); returns the examples
    and the size of each example's group."""
    if num_aug == 0:
        return x, y, np.ones(x.shape[0], dtype=np.int64)
    transforms = task.transforms
    xs, ys, sizes = [], [], []
    draws = 5 * num_aug
    with progress_bar(enabled=progress, total=x.shape[0], desc="augmenting", unit="example") as bar:
        for xi, yi in zip(x, y):
            element = transforms.random(rng, draws)
            cx = transforms.apply(np.tile(xi, (draws, 1)), element)
            cy = transforms.apply(np.tile(yi, (draws, 1)), element)
            seen = {xi.tobytes() + yi.tobytes()}
            keep = [xi[None]], [yi[None]]
            for a, b in zip(cx, cy):
                key = a.tobytes() + b.tobytes()
                if key in seen:
                    continue
                seen.add(key)
                keep[0].append(a[None])
                keep[1].append(b[None])
                if len(seen) > num_aug:
                    break
            xs.extend(keep[0])
            ys.extend(keep[1])
            sizes.append(len(keep[0]))
            bar.update(1)
    return np.concatenate(xs), np.concatenate(ys), np.array(sizes, dtype=np.int64)


def summary(out: Path) -> str:
    """One line for the CLI: where the dataset is and what it holds; then a note a line on what training never shows."""
    train = json.loads((out / "train" / "dataset.json").read_text())["builder"]
    test = json.loads((out / "test" / "dataset.json").read_text())["builder"]
    d = Declaration.model_validate(train["declaration"])
    rows, cols = d.shape
    layout = {
        "fixed": f"{rows}x{cols} grids" if rows > 1 else f"sequences of {cols}",
        "strip": f"sequences up to {cols - 1} symbols",
        "canvas": f"grids on a {rows}x{cols} canvas",
    }[d.layout]
    sym = [
        s for s, on in (("the square's 8", d.dihedral), (f"permutations of {len(d.permute)} symbols", d.permute)) if on
    ]
    check = f", check {d.check.source}:{d.check.function}" if d.check else ""
    arrays = {split: split_arrays(out, split) for split in ("train", "test")}
    said = (blank_note(d), unseen_note(arrays, d), larger_note(arrays, d))
    notes = [f"\nnote: {line}" for line in said if line is not None]
    return (
        f"wrote {out}: task {train['name']!r}, {layout}, {len(d.symbols)} symbols ({symbol_list(d.symbols, 10)}); "
        f"train {train['counts']['examples']:,} examples ({train['counts']['originals']:,} originals), test "
        f"{test['counts']['examples']:,}; symmetries: {' x '.join(sym) or 'none'}{check}{''.join(notes)}"
    )


Arrays = dict[str, tuple[np.ndarray, np.ndarray]]  # split -> its inputs and labels, as written


def blank_note(d: Declaration) -> str | None:
    """Symbols that are or hold blanks, said: the strings were split by another separator than the one they use (or by
    character, with none given); None when no symbol holds a blank."""
    blank = [s for s in d.symbols if any(c.isspace() for c in s)]
    if not blank:
        return None
    how = "one symbol a character" if d.separator is None else f"--separator {d.separator!r}"
    return (
        f"blanks are read as symbols or parts of them ({symbol_list(blank, 3)}; {how}): if blanks separate your "
        "symbols, build with --separator ' '"
    )


def unseen_note(arrays: Arrays, d: Declaration) -> str | None:
    """The symbols the test split uses and the (augmented) training split never does, said; None when there are none."""

    def used(split: str) -> set[int]:
        return set().union(*(np.unique(a).tolist() for a in arrays[split]))

    unseen = [d.symbols[t - FIRST_SYMBOL] for t in sorted(used("test") - used("train")) if t >= FIRST_SYMBOL]
    if not unseen:
        return None
    it = "it" if len(unseen) == 1 else "them"
    return (
        f"test examples use {symbol_list(unseen, 10)}, which no training example (nor augmented copy) does: the model "
        f"never sees {it} in training"
    )


def larger_note(arrays: Arrays, d: Declaration) -> str | None:
    """Test examples larger than every (augmented) training example in a dimension, said: the model never trained
    on that size; None when there are none (always, in the fixed layout: one size)."""
    if d.layout == "fixed":
        return None

    def extents(split: str) -> np.ndarray:  # [n, 2]: rows and columns an example's input or output reaches
        rows, cols = d.shape
        sizes = []
        for a in arrays[split]:
            held = a.reshape(len(a), rows, cols) >= FIRST_SYMBOL
            by_row, by_col = held.any(2), held.any(1)
            sizes.append(
                np.stack([rows - np.argmax(by_row[:, ::-1], 1), cols - np.argmax(by_col[:, ::-1], 1)], 1)
                * by_row.any(1, keepdims=True)
            )
        return np.maximum(*sizes)

    train, test = extents("train").max(0), extents("test")
    over = (test > train).any(1)
    if not over.any():
        return None

    def size(rc: np.ndarray) -> str:
        return f"{rc[1]} symbols" if d.layout == "strip" else f"{rc[0]}x{rc[1]}"

    n = int(over.sum())
    return (
        f"{n} test example{'s exceed' if n > 1 else ' exceeds'} the training examples' sizes (test up to "
        f"{size(test.max(0))}, training up to {size(train)}): the model never trains on that size"
    )


def split_arrays(out: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """A written split's inputs and labels."""
    return np.load(out / split / "all__inputs.npy"), np.load(out / split / "all__labels.npy")
