"""hrm-reason: the Hierarchical Reasoning Model and its language-model heads. `hrm_reason.load(path)` returns the model
stored in a run, a checkpoint, or a `transformers` HrmText directory."""

from hrm_reason.load import load

__all__ = ["load"]
