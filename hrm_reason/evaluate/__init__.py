"""Evaluation: one entry for every run (`run`, `hrm eval`), the ACT models' accuracy per segment (`act`) with
test-time augmentation and voting (`tta`), and the language-model heads' validation (`lm`, `prefix_lm`)."""

from hrm_reason.evaluate.act import EvalResult, evaluate

__all__ = ["EvalResult", "evaluate"]
