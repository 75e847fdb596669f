"""Datasets on disk: the original HRM puzzle format (`puzzle`), text datasets for the language-model heads (`text`),
and puzzles as token sequences for an LM head (`prefix_lm`)."""

from hrm_reason.data.puzzle import PuzzleDatasetMetadata, PuzzleSplit, TrainSampler, load_split

__all__ = ["PuzzleDatasetMetadata", "PuzzleSplit", "TrainSampler", "load_split"]
