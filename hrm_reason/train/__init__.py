"""Training: the one loop of every model family (`loop`), each family's part of a step behind `TrainTask` (`act`:
the ACT puzzle models; `lm`: the language-model heads), and the recipe's pieces (`optim`, `ema`, `curriculum`)."""

from hrm_reason.train.loop import TrainTask, train

__all__ = ["TrainTask", "train"]
