"""`hrm viz puzzle`: a dataset's puzzles beside their solutions, one PNG per example."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from hrm_reason.data.puzzle import PuzzleSplit, load_split
from hrm_reason.errors import UserError
from hrm_reason.limits import VIZ_COUNT
from hrm_reason.readers import read_json
from hrm_reason.viz.canvas import panel_figure
from hrm_reason.viz.grids import GridSpec, content_window, draw_grid, given_cells, grid_spec


@dataclass
class Example:
    """One example of a split: its tokens, and where it comes from (for titles)."""

    index: int  # over the split's sets in order, as `hrm eval` walks them
    set_name: str
    inputs: np.ndarray
    labels: np.ndarray
    puzzle_identifier: int
    name: str  # identifiers.json entry of the puzzle ("" for the blank identifier)


def get_example(split: PuzzleSplit, index: int, split_name: str, identifiers: list[str] | None = None) -> Example:
    """The index-th example of the split; an index out of range is a one-line error naming --index."""
    offset = 0
    for set_name, s in split.sets.items():
        n = s.inputs.shape[0]
        if 0 <= index - offset < n:
            local = index - offset
            puzzle = int(np.searchsorted(s.puzzle_indices, local, side="right") - 1)
            ident = int(s.puzzle_identifiers[puzzle])
            name = (
                identifiers[ident]
                if identifiers and ident < len(identifiers) and ident != split.metadata.blank_identifier_id
                else ""
            )
            return Example(index, set_name, np.asarray(s.inputs[local]), np.asarray(s.labels[local]), ident, name)
        offset += n
    raise UserError(
        f"--index {index}: the {split_name} split of {split.path.parent} has {split.num_examples} examples (0..{split.num_examples - 1})"
    )


def read_identifiers(data_dir: Path) -> list[str] | None:
    """The puzzle names of identifiers.json, for titles only: without a readable one the titles go without."""
    try:
        names = read_json(Path(data_dir) / "identifiers.json", None)
    except UserError:
        return None
    return [str(v) for v in names] if isinstance(names, list) else None


def example_title(split_name: str, example: Example) -> str:
    title = f"{split_name} example {example.index}"
    return f"{title}  ({example.name})" if example.name else title


def puzzle_figure(spec: GridSpec, example: Example, title: str) -> Figure:
    look = spec.look
    fig, (ax_in, ax_out), _ = panel_figure(
        2, 2, look.panel_inches[0], title_h=0.3, header=title, footer=look.puzzle_legend
    )
    givens = given_cells(spec, example.inputs)
    windows = content_window(spec, example.inputs), content_window(spec, example.labels)
    frame = max(w[0].stop - w[0].start for w in windows), max(w[1].stop - w[1].start for w in windows)
    draw_grid(ax_in, spec, example.inputs, givens=givens, window=windows[0], frame=frame)
    draw_grid(ax_out, spec, example.labels, givens=givens, window=windows[1], frame=frame)
    ax_in.set_title("puzzle", fontsize=10)
    ax_out.set_title("solution", fontsize=10)
    return fig


def get_examples(
    split: PuzzleSplit, start: int, count: int, split_name: str, identifiers: list[str] | None = None
) -> list[Example]:
    """Examples start..start+count-1: a start out of range names --index, a count past the split's end --count."""
    first = get_example(split, start, split_name, identifiers)
    if start + count > split.num_examples:
        raise UserError(
            f"--count {count}: the {split_name} split of {split.path.parent} has {split.num_examples} examples, "
            f"{split.num_examples - start} of them from --index {start}"
        )
    return [first] + [get_example(split, i, split_name, identifiers) for i in range(start + 1, start + count)]


def puzzle_figures(data_dir: Path, split_name: str, start: int, count: int) -> list[tuple[str, Figure]]:
    """Examples start..start+count-1 of the split, each as (file name, figure)."""
    if split_name not in ("train", "test"):
        raise UserError(f"--split {split_name}: expected train or test")
    VIZ_COUNT.check(count)
    split = load_split(data_dir, split_name)
    spec = grid_spec(split.metadata, str(split.path / "dataset.json"))
    identifiers = read_identifiers(data_dir)
    examples = get_examples(split, start, count, split_name, identifiers)
    return [
        (f"puzzle_{split_name}_{ex.index:06d}.png", puzzle_figure(spec, ex, example_title(split_name, ex)))
        for ex in examples
    ]
