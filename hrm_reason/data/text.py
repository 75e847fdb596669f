"""Text datasets for the language-model heads: tokenizers, the on-disk layout, and the batches the LM trainer reads.

Layout written by `hrm build-data text` (datasets_build/text.py):
    <dir>/dataset.json                      kind "text", vocab, dtype, tokenizer record, shards per split, builder
                                            record
    <dir>/{train,val}/shard_NNNNN.npy       1-D uint16 (vocab <= 65536) or uint32 token arrays; every document is
                                            followed by the tokenizer's end-of-document id
    <dir>/tokenizer.json                    only for a Hugging Face `tokenizers` tokenizer (the byte one needs no file)

A split is read as one long token stream (documents back to back, the shards concatenated), as nanoGPT does: a window
may span the end of one document and the start of the next, with the end-of-document id between them.
Training batches are random windows of seq_len + 1 tokens drawn from a generator seeded by (seed, step), so a run that
resumes at step s sees the batches an uninterrupted run would; validation walks the split in contiguous windows that
overlap by one token, so every token but the first is predicted exactly once.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field

from hrm_reason.errors import UserError
from hrm_reason.readers import read_json_model, read_npy

DATASET_FILE = "dataset.json"
HF_TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_META = "tokenizer_meta.json"  # a run's copy of its dataset's tokenizer record
SPLITS = ("train", "val")


# ------------------------------------------------------------------------------------------------------- tokenizers


class Tokenizer(Protocol):
    vocab_size: int
    eos_id: int

    def encode(self, text: str) -> list[int]: ...
    def decode(self, ids: Sequence[int]) -> str: ...
    def record(self) -> dict[str, Any]: ...


class ByteTokenizer:
    """UTF-8 bytes as ids 0..255, then three special ids. Needs no file and no download; every string round-trips."""

    kind = "byte"
    BOS, EOS, PAD = 256, 257, 258
    vocab_size = 259
    eos_id = EOS

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def encode_bytes(self, data: bytes) -> np.ndarray:
        return np.frombuffer(data, dtype=np.uint8)

    def decode(self, ids: Sequence[int]) -> str:
        """Special ids are dropped; a byte sequence cut inside a character decodes with U+FFFD in its place."""
        return bytes(int(i) for i in ids if 0 <= int(i) < 256).decode("utf-8", errors="replace")

    def record(self) -> dict[str, Any]:
        return dict(kind=self.kind, vocab_size=self.vocab_size, bos_id=self.BOS, eos_id=self.EOS, pad_id=self.PAD)


EOS_CANDIDATES = ("<|endoftext|>", "</s>", "<eos>", "<|eos|>", "[SEP]", "<|end_of_text|>")


class HFTokenizer:
    """A local Hugging Face `tokenizers` JSON file (optional extra `[text]`); never fetched from the Hub."""

    kind = "tokenizers"

    def __init__(self, path: str | Path, eos_token: str | None = None) -> None:
        try:
            from tokenizers import Tokenizer as _Tokenizer
        except ImportError:
            raise UserError(
                f"--tokenizer {path}: needs the 'tokenizers' package (pip install 'hrm-reason[text]')"
            ) from None
        self.path = Path(path)
        if not self.path.is_file():
            raise UserError(f"--tokenizer {path}: file not found")
        try:
            self.impl = _Tokenizer.from_file(str(self.path))
        except Exception as e:  # tokenizers raises a bare Exception for a malformed file
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise UserError(f"--tokenizer {path}: not a Hugging Face tokenizers JSON file ({first})") from None
        self.vocab_size = self.impl.get_vocab_size(with_added_tokens=True)
        names = [eos_token] if eos_token is not None else list(EOS_CANDIDATES)
        ids = [(name, self.impl.token_to_id(name)) for name in names]
        found = [(name, i) for name, i in ids if i is not None]
        if not found:
            want = f"token {eos_token!r}" if eos_token is not None else f"any of {', '.join(EOS_CANDIDATES)}"
            raise UserError(
                f"--tokenizer {path}: no end-of-document token ({want} not in its vocabulary); pass --eos-token"
            )
        self.eos_token, self.eos_id = found[0]

    def encode(self, text: str) -> list[int]:
        return self.impl.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int]) -> str:
        return self.impl.decode([int(i) for i in ids], skip_special_tokens=True)

    def record(self) -> dict[str, Any]:
        return dict(
            kind=self.kind,
            vocab_size=self.vocab_size,
            eos_id=self.eos_id,
            eos_token=self.eos_token,
            file=HF_TOKENIZER_FILE,
        )


def save_tokenizer(tokenizer: Tokenizer, directory: Path) -> None:
    """Keep what is needed to decode beside a dataset or a run: the JSON file of a `tokenizers` tokenizer."""
    if isinstance(tokenizer, HFTokenizer):
        shutil.copyfile(tokenizer.path, directory / HF_TOKENIZER_FILE)


def tokenizer_from_record(record: dict[str, Any], directory: Path) -> Tokenizer:
    """The tokenizer a dataset.json record describes; a `tokenizers` one is read from `directory`."""
    if record.get("kind") == ByteTokenizer.kind:
        return ByteTokenizer()
    if record.get("kind") == HFTokenizer.kind:
        path = directory / record.get("file", HF_TOKENIZER_FILE)
        if not path.is_file():
            raise UserError(f"{path}: the dataset's tokenizer file is missing")
        return HFTokenizer(path, record.get("eos_token"))
    raise UserError(
        f"{directory / DATASET_FILE}: unknown tokenizer kind {record.get('kind')!r} (expected byte or tokenizers)"
    )


# ------------------------------------------------------------------------------------------------------- metadata


class SplitRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    shards: list[str] = Field(min_length=1)
    tokens: int = Field(ge=0)
    documents: int = Field(ge=0)


class TextDatasetMetadata(BaseModel):
    """`dataset.json` of a text dataset (one file for both splits, unlike the puzzle layout's one per split)."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["text"]
    format_version: Literal[1] = 1
    vocab_size: int = Field(ge=2)
    dtype: Literal["uint16", "uint32"]
    tokenizer: dict[str, Any]
    splits: dict[Literal["train", "val"], SplitRecord]
    builder: dict[str, Any] | None = None


class TokenStream:
    """One split as a single sequence of token ids over memory-mapped shards; slices are copied out as int64."""

    def __init__(self, shards: list[np.ndarray]) -> None:
        self.shards = shards
        self.offsets = np.cumsum([0] + [len(s) for s in shards])

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def slice(self, start: int, stop: int) -> np.ndarray:
        if not 0 <= start <= stop <= len(self):
            raise IndexError(f"slice [{start}, {stop}) outside a stream of {len(self)} tokens")
        parts, pos = [], start
        while pos < stop:
            k = int(np.searchsorted(self.offsets, pos, side="right")) - 1
            end = min(stop, int(self.offsets[k + 1]))
            parts.append(self.shards[k][pos - self.offsets[k] : end - self.offsets[k]])
            pos = end
        return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)


@dataclass
class TextDataset:
    """A text dataset as read: its folder, its dataset.json and one token stream per split."""

    path: Path
    metadata: TextDatasetMetadata
    splits: dict[str, TokenStream]

    def tokenizer(self) -> Tokenizer:
        return tokenizer_from_record(self.metadata.tokenizer, self.path)

    @property
    def vocab_size(self) -> int:
        return self.metadata.vocab_size


def load_text_dataset(path: str | Path) -> TextDataset:
    """Read and check a text dataset; every inconsistency is a one-line UserError naming the file."""
    path = Path(path)
    if not path.is_dir():
        raise UserError(
            f"dataset directory {path} does not exist (build one with: hrm build-data text --input stdlib --out {path})"
        )
    meta_path = path / DATASET_FILE
    meta = read_json_model(meta_path, TextDatasetMetadata, "expected a text dataset written by hrm build-data text")
    splits = {}
    for name in SPLITS:
        if name not in meta.splits:
            raise UserError(f"{meta_path}: no '{name}' split")
        rec = meta.splits[name]
        shards = []
        for rel in rec.shards:
            file = path / rel
            arr = read_npy(file, f"a token shard of split '{name}' in {meta_path}", mmap=True)
            if arr.ndim != 1 or arr.dtype != np.dtype(meta.dtype):
                raise UserError(f"{file}: expected a 1-D {meta.dtype} array, got {arr.ndim}-D {arr.dtype}")
            if arr.size and int(arr.max()) >= meta.vocab_size:
                raise UserError(f"{file}: token id {int(arr.max())} is outside the vocabulary of {meta.vocab_size}")
            shards.append(arr)
        stream = TokenStream(shards)
        if len(stream) != rec.tokens:
            raise UserError(f"{meta_path}: split '{name}' lists {rec.tokens} tokens but its shards hold {len(stream)}")
        splits[name] = stream
    return TextDataset(path, meta, splits)


# ---------------------------------------------------------------------------------------------------------- batches


def step_generator(seed: int, step: int) -> np.random.Generator:
    """The draws of training step `step` depend on (seed, step) only: resuming needs no saved sampler state."""
    return np.random.default_rng([seed, step])


def random_windows(stream: TokenStream, batch_size: int, length: int, rng: np.random.Generator) -> torch.Tensor:
    """`batch_size` windows of `length` consecutive tokens at uniform random starts, as int64 [batch, length]."""
    if len(stream) < length:
        raise UserError(
            f"the training split has {len(stream)} tokens, fewer than seq_len + 1 = {length}; lower seq_len or add text"
        )
    starts = rng.integers(0, len(stream) - length + 1, size=batch_size)
    return torch.from_numpy(np.stack([stream.slice(int(s), int(s) + length) for s in starts]))


def train_batch(stream: TokenStream, batch_size: int, seq_len: int, seed: int, step: int) -> torch.Tensor:
    """The input_ids of training step `step` (0-based): [batch, seq_len + 1]; labels are the same ids (unshifted)."""
    return random_windows(stream, batch_size, seq_len + 1, step_generator(seed, step))


def validation_windows(stream: TokenStream, seq_len: int, max_tokens: int | None = None) -> list[tuple[int, int]]:
    """[start, stop) of contiguous windows of up to seq_len + 1 tokens overlapping by one token; together they predict
    every token after the first once (up to `max_tokens` predicted tokens)."""
    total = len(stream) - 1  # predicted tokens
    if max_tokens is not None:
        total = min(total, max_tokens)
    return [(s, min(s + seq_len, total) + 1) for s in range(0, max(total, 0), seq_len)]


def validation_batches(
    stream: TokenStream, seq_len: int, batch_size: int, max_tokens: int | None = None
) -> Iterator[torch.Tensor]:
    """Batches of validation windows as int64 [batch, length]; full windows first, the one shorter tail alone."""
    windows = validation_windows(stream, seq_len, max_tokens)
    full = [w for w in windows if w[1] - w[0] == seq_len + 1]
    tail = [w for w in windows if w[1] - w[0] != seq_len + 1]
    for i in range(0, len(full), batch_size):
        yield torch.from_numpy(np.stack([stream.slice(a, b) for a, b in full[i : i + batch_size]]))
    for a, b in tail:
        yield torch.from_numpy(stream.slice(a, b)[None])
