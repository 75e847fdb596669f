"""Where the Sudoku and maze builders read their originals: a Hugging Face dataset, a folder of CSVs, or a generator.

Both published sets are a `train.csv` and a `test.csv` with the columns `source, <question>, <answer>, rating` and a
header row (docs/data.md, "Sources"). `--source auto` takes a CSV folder when given, else the hub when it can be
reached (and holds the asked-for size), else generates; a failed download under `auto` falls back to generating.
"""

from __future__ import annotations

import csv
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import urlparse

import numpy as np

from datasets_build.hrm_format import check_out
from hrm_reason.errors import UserError

OFFLINE_ENV = ("HRM_OFFLINE", "HF_HUB_OFFLINE")
# Random streams shared by the builders (each builder numbers its own others): the same seed draws the same rows.
STREAM_SUBSAMPLE, STREAM_SIZE = 3, 5


class SourceOptions(Protocol):
    """What the functions below read of a builder's options."""

    out: Path | None
    source: str
    csv_dir: Path | None
    subsample_size: int | None
    seed: int
    train_size: int | None
    test_size: int | None
    overwrite: bool
    builder: str  # the builder's name (a class variable of its options)


@dataclass
class Source:
    name: str  # "hf", "csv" or "generate"
    reason: str
    csvs: tuple[Path, Path] | None = None  # train.csv and test.csv, unless generated
    detail: dict[str, Any] = field(default_factory=dict)  # the builder record's `source_detail` for CSV data


def hub_reachable(timeout: float = 3.0) -> bool:
    """Can the Hugging Face Hub be reached? False at once when HRM_OFFLINE or HF_HUB_OFFLINE is set (tests, air
    gaps)."""
    if any(os.environ.get(k, "").strip().lower() not in ("", "0", "false", "no") for k in OFFLINE_ENV):
        return False
    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    try:
        with socket.create_connection(
            (url.hostname or "huggingface.co", url.port or (443 if url.scheme == "https" else 80)), timeout=timeout
        ):
            return True
    except OSError:
        return False


def download_csvs(repo: str) -> tuple[Path, Path, str]:
    """Fetch train.csv/test.csv of a dataset repo into the Hugging Face cache; returns the paths and the revision."""
    from huggingface_hub import hf_hub_download

    try:
        paths = [
            Path(hf_hub_download(repo, name, repo_type="dataset", etag_timeout=10))
            for name in ("train.csv", "test.csv")
        ]
    except Exception as e:  # noqa: BLE001 -- network, auth, disk: all mean "this source is unavailable"
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(
            f"--source hf: could not download {repo} ({msg}); use --source csv --csv-dir DIR or --source generate"
        ) from None
    return paths[0], paths[1], paths[0].parent.name


def resolve_source(
    opts: SourceOptions, repo: str, hub_probe: Callable[[], bool], generate_because: str | None
) -> tuple[str, str]:
    """(source, reason). `generate_because`: why `auto` must generate even when the hub is reachable, or None."""
    if opts.source != "auto":
        return opts.source, "requested"
    if opts.csv_dir is not None:
        return "csv", "--csv-dir given"
    if generate_because is not None:
        return "generate", generate_because
    if hub_probe():
        return "hf", f"{repo} reachable"
    return "generate", "Hugging Face Hub not reachable or offline mode set"


def open_source(opts: SourceOptions, source: str, reason: str, repo: str) -> Source:
    """Check the CSV options against the source, refuse an existing --out before a long download or generation, and
    download under `hf` (falling back to generating when `auto` chose the hub)."""
    if source == "csv" and opts.csv_dir is None:
        raise UserError("--csv-dir: required with --source csv (a folder with train.csv and test.csv)")
    if source != "csv" and opts.csv_dir is not None:
        raise UserError(f"--csv-dir: only used with --source csv (got --source {opts.source})")
    if opts.out is not None:
        check_out(Path(opts.out), opts.overwrite, opts.builder)
    if source == "csv":
        assert opts.csv_dir is not None
        return Source(
            source,
            reason,
            (Path(opts.csv_dir) / "train.csv", Path(opts.csv_dir) / "test.csv"),
            {"csv_dir": str(opts.csv_dir)},
        )
    if source == "hf":
        try:
            train_csv, test_csv, revision = download_csvs(repo)
        except UserError as e:
            if opts.source != "auto":
                raise
            return Source("generate", f"download failed: {e}")
        return Source(source, reason, (train_csv, test_csv), {"repo": repo, "revision": revision})
    return Source(source, reason)


def csv_rows(path: Path, header: tuple[str, ...]) -> Iterator[tuple[str, int, list[str]]]:
    """(where, line number, row) for every non-blank row after the header, each with len(header) columns; `where`
    names the file and line for errors. A missing, empty or unreadable file is a UserError naming it."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: file not found (expected a CSV with columns {','.join(header)})")
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        try:
            if next(reader, None) is None:
                raise UserError(f"{path}: empty file, expected a header {','.join(header)} and rows")
            for row in reader:
                if not row:
                    continue  # blank line
                where = f"{path} line {reader.line_num}"
                if len(row) != len(header):
                    raise UserError(f"{where}: expected {len(header)} columns {','.join(header)}, got {len(row)}")
                yield where, reader.line_num, row
        except (csv.Error, UnicodeDecodeError) as e:
            raise UserError(f"{path} line {reader.line_num}: not readable as CSV ({e})") from None


class _Rows(Protocol):
    def __len__(self) -> int: ...
    def take(self, index: np.ndarray) -> Any: ...


RowsT = TypeVar("RowsT", bound=_Rows)


def sample_rows(rows: RowsT, size: int | None, rng: np.random.Generator) -> RowsT:
    """At most `size` rows, drawn without replacement, in file order."""
    if size is None or size >= len(rows):
        return rows
    return rows.take(np.sort(rng.choice(len(rows), size=size, replace=False)))


def sample_splits(train: RowsT, test: RowsT, opts: SourceOptions) -> tuple[RowsT, RowsT]:
    """--train-size / --test-size on CSV rows: seeded draws, kept in file order."""
    return (
        sample_rows(train, opts.train_size, np.random.default_rng([opts.seed, STREAM_SIZE, 0])),
        sample_rows(test, opts.test_size, np.random.default_rng([opts.seed, STREAM_SIZE, 1])),
    )


def check_subsample(opts: SourceOptions, source: str, generated_train: int, what: str) -> None:
    """Refuse a --subsample-size above the training count it samples from, when that count is known before reading:
    --train-size, or the `generated_train` a generator makes by default. Sampling 50 of 20 cannot be meant; keeping
    all 20 silently would hide the mistake. Of hf/csv rows without --train-size, it keeps them all when there are
    fewer (the original's behaviour: the count is the file's)."""
    if opts.subsample_size is None:
        return
    if opts.train_size is not None:
        limit, flag = opts.train_size, f"--train-size {opts.train_size}"
    elif source == "generate":
        limit, flag = generated_train, f"--train-size {generated_train} (the default of --source generate)"
    else:
        return
    if opts.subsample_size > limit:
        raise UserError(
            f"--subsample-size {opts.subsample_size}: more than the {limit} training {what} of {flag}; give at most "
            f"{limit}, or raise --train-size"
        )


def subsample_train(train: RowsT, test: RowsT, opts: SourceOptions, why_empty: str | None, what: str) -> RowsT:
    """The original's train-only --subsample-size (random order), but seeded; then refuse an empty split, naming the
    option that emptied it (`why_empty`) or the CSV file."""
    if opts.subsample_size is not None and opts.subsample_size < len(train):
        rng = np.random.default_rng([opts.seed, STREAM_SUBSAMPLE])
        train = train.take(rng.choice(len(train), size=opts.subsample_size, replace=False))
    for split, rows in (("train", train), ("test", test)):
        if len(rows) == 0:
            raise UserError(f"{why_empty or f'{split}.csv'}: no {split} {what} left to build from")
    return train
