"""The bounds of the counts and rates the commands take (issue 43), each with its reason, checked before any work.

A count of 10^9 once hung a command (adapt --steps, bench --steps/--warmup, compare --seeds, build-data arc
--rung-tasks) or asked for 37 GiB at once (--num-aug); a rate of nan or -1 trained and wrote a submission. Each option
type is bounded here once (--tta alone is bounded by the task's symmetry group, in evaluate/tta.py): `Count.check` and
`Rate.check` raise the one line naming the flag, `problem` gives the reason alone (for the builders' pydantic
validators, whose errors the CLI prefixes with the flag). A flag of cli.py declares its bound with it
(commands/cli_options.py `bounded`), checked as the command line is parsed, so that no default filled in later (a 0
read as "not given") can skip it; tests/commands/test_bounds.py fails on a numeric flag or run-config key that is
neither bounded nor listed with its reason. Only the standard library and hrm_reason.errors are imported: `hrm --help`
and the builders' option models read this module without loading torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hrm_reason.errors import UserError


@dataclass(frozen=True)
class Count:
    """A whole number of things a command does or makes, from `low` to `high`; `why` says what each one costs."""

    flag: str
    low: int
    high: int
    why: str

    def problem(self, value: int) -> str | None:
        """None when `value` is in range, else what was expected and why."""
        if self.low <= value <= self.high:
            return None
        return f"expected {self.low} to {self.high:,} ({self.why})"

    def check(self, value: int | None, flag: str | None = None) -> int | None:
        """`value` (None: not given) when in range; else a UserError naming the flag (`flag`: another that gives the
        same count, e.g. hrm eval's --adapt STEPS)."""
        if value is not None and (why := self.problem(value)) is not None:
            raise UserError(f"{flag or self.flag} {value}: {why}")
        return value


@dataclass(frozen=True)
class Rate:
    """A finite rate above 0 (or at 0 with `zero`) and at most `high`; `why` says what it moves."""

    flag: str
    high: float
    why: str
    zero: bool = False

    def problem(self, value: float) -> str | None:
        low_ok = value >= 0 if self.zero else value > 0
        if math.isfinite(value) and low_ok and value <= self.high:
            return None
        low = "[0" if self.zero else "(0"
        return f"expected a finite rate in {low}, {self.high:g}] ({self.why})"

    def check(self, value: float | None, flag: str | None = None) -> float | None:
        """`value` (None: not given) when in range; else a UserError naming the flag (`flag`: another that gives the
        same rate)."""
        if value is not None and (why := self.problem(value)) is not None:
            raise UserError(f"{flag or self.flag} {value}: {why}")
        return value


# --- hrm adapt (also solve --adapt, eval --adapt) and the ARC builder
ADAPT_STEPS = Count(
    "--steps", 0, 100_000, "each step is one ACT segment on a batch of demonstrations; 500 times the default 200"
)
ADAPT_SEED = Count("--seed", 0, 2**32 - 1, "it seeds numpy's and torch's generators, as a config's seed does")
NUM_AUG = Count(
    "--num-aug",
    0,
    10_000,
    "ten times the paper's 1000: each variant is a puzzle-embedding row and a copy of every pair of its task, and "
    "5 draws are made for each",
)
SUDOKU_NUM_AUG = Count(
    "--num-aug", 0, 10_000, "each copy is one more training example of every puzzle; the paper's 1000 gives a million"
)
ADAPT_LR = Rate(
    "--lr", 1.0, "SignSGD moves every coordinate of a new row by the rate each step; trained rows are of order 1"
)
ADAPT_LR_WHOLE = Rate("--lr-whole", 1.0, "the network's optimizer rate under --whole; training uses 1e-4 to 1e-3")
RUNG_TASKS = Count(
    "--rung-tasks", 0, 10_000, "each task is generated, silently, then copied --num-aug times; 50 times the default 200"
)
RUNG_EVAL_TASKS = Count("--rung-eval-tasks", 1, 10_000, "each task is generated, then copied --num-aug times")

# --- hrm build-data sudoku and maze
GENERATED = Count(
    "--train-size",
    1,
    10_000_000,
    "each puzzle is generated and checked (a 9x9 Sudoku or a 30x30 maze takes ms); "
    "hf and csv cap their rows by it; ten times Kaggle's million",
)

# --- hrm build-data file (a user's examples)
FILE_NUM_AUG = Count(
    "--num-aug", 0, 10_000, "each copy is one more training example of every example; 10,000 of 10,000 make 10^8"
)
FILE_TOKENS = Count(
    "tokens", 1, 8_192, "a sequence's attention holds seq_len^2 scores per head and example; ARC's canvas has 900"
)
FILE_SYMBOLS = Count("symbols", 1, 4_096, "every symbol is an embedding row and an output logit of the model")

WORKERS = Count("--workers", 0, 256, "each worker is a process of its own, all started at once; 0 gives one per core")

# --- hrm eval and hrm solve (also adapt --mmax, compare --mmax, viz --mmax)
MMAX = Count(
    "--mmax",
    1,
    1024,
    "segments, each a run of the model on every puzzle; 64 times the default halt_max_steps of 16",
)
SAMPLES = Count(
    "--samples", 1, 256, "trajectories per copy, each a run of every segment; copies x samples at most 1,024"
)
EVAL_BATCH = Count(
    "--batch-size",
    1,
    1 << 16,
    "a batch is padded to this many examples and allocated at once; the default is at most 1,024",
)
EVAL_SEQ_LEN = Count("--seq-len", 1, 1 << 16, "a window's attention holds seq_len^2 scores per head")

# --- hrm generate
GENERATE_TOKENS = Count(
    "--max-new-tokens", 1, 100_000, "each token is one run of the model on the text so far; 500 times the default 200"
)

# --- hrm bench
BENCH_STEPS = Count("--steps", 1, 10_000, "timed steps, each a full training step and an evaluation segment")
BENCH_WARMUP = Count("--warmup", 1, 1_000, "untimed steps that absorb compile time; a few do")
BENCH_SEQ_LEN = Count("--seq-len", 1, 1 << 16, "attention holds seq_len^2 scores per head and example")
BENCH_VOCAB = Count(
    "--vocab-size", 2, 1 << 20, "every token is an embedding row and an output logit; tokenizers have up to ~256k"
)

# --- hrm compare
COMPARE_SEEDS = Count("--seeds", 1, 1_000, "each seed trains and evaluates every config once")
COMPARE_JOBS = Count("--jobs", 1, 256, "each job is a training process of its own")

# --- hrm viz
VIZ_COUNT = Count("--count", 1, 10_000, "one picture each")
VIZ_STRIPS = Count("--count", 0, 100, "prediction strips of one page, each a model run over every segment")
