"""The bounds of the counts and rates the commands take (issue 43), each with its reason, checked before any work.

A count of 10^9 once hung a command (adapt --steps, bench --steps/--warmup, compare --seeds, build-data arc
--rung-tasks) or asked for 37 GiB at once (--num-aug); a rate of nan or -1 trained and wrote a submission. Each option
type is bounded here once (--tta alone is bounded by the task's symmetry group, in evaluate/tta.py): `Count.check` and
`Rate.check` raise the one line naming the flag, `problem` gives the reason alone (for the builders' pydantic
validators, whose errors the CLI prefixes with the flag). A flag of cli.py declares its bound with it
(commands/cli_options.py `bounded`), checked as the command line is parsed, so that no default filled in later (a 0
read as "not given") can skip it; tests/commands/test_bounds.py fails on a numeric flag or run-config key that is
neither bounded nor listed with its reason. A key of a model's config (arch.H_cycles, ...) declares its bound in its
annotation (`H_cycles: Annotated[int, CYCLES]`, read by pydantic through `__get_pydantic_core_schema__`), checked as
the config is read, so that 2**62 is one line naming the key before anything is built; the test walks every numeric
field of every registered model. Only the standard library and hrm_reason.errors are imported (pydantic's core
only when a config class is made): `hrm --help` and the builders' option models read this module without loading
torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hrm_reason.errors import UserError


class _Bound:
    """What a Count and a Rate share: their `problem(value)` turned into a CLI error, a config error, and pydantic's
    check of a field annotated with the bound (`H_cycles: Annotated[int, CYCLES]`)."""

    flag: str

    def problem(self, value: Any) -> str | None:
        raise NotImplementedError

    def check(self, value: Any, flag: str | None = None) -> Any:
        """`value` (None: not given) when in range; else a UserError naming the flag (`flag`: another that gives the
        same count or rate, e.g. hrm eval's --adapt STEPS)."""
        if value is not None and (why := self.problem(value)) is not None:
            raise UserError(f"{flag or self.flag} {value}: {why}")
        return value

    def valid(self, value: Any) -> Any:
        """`value` when in range; else a ValueError of the reason alone, which a config's error names with its key."""
        if (why := self.problem(value)) is not None:
            raise ValueError(why)
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        """The bound in a field's annotation: the field's own validation, then `valid` (pydantic-core is imported
        here, when a config class is made)."""
        from pydantic_core import core_schema

        return core_schema.no_info_after_validator_function(self.valid, handler(source))


@dataclass(frozen=True)
class Count(_Bound):
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


@dataclass(frozen=True)
class Rate(_Bound):
    """A finite rate above 0 (or at 0 with `zero`) and at most `high`; `why` says what it moves."""

    flag: str
    high: float
    why: str
    zero: bool = False
    what: str = "rate"  # what the message calls it: a model config's bounded float is not always a rate

    def problem(self, value: float) -> str | None:
        low_ok = value >= 0 if self.zero else value > 0
        if math.isfinite(value) and low_ok and value <= self.high:
            return None
        low = "[0" if self.zero else "(0"
        return f"expected a finite {self.what} in {low}, {self.high:g}] ({self.why})"


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

# --- the models' configs (arch.*): each kind of key bounded once and declared with the field it bounds, in its
# annotation (`H_cycles: Annotated[int, CYCLES]`). What no memory check sees (a cycle, a segment, a layer before the
# model is built: arch.H_layers 20000 took minutes to be refused) is bounded near what the papers use; a size (a width,
# the vocabulary, positions) loosely, far past any published model: the memory check of a run (train/run_memory.py)
# refuses much less, naming the key, once the dataset and the device are known.
CYCLES = Count(
    "arch cycles",
    1,
    1_000,
    "each is one more run of a module's blocks in every segment (an LM head's: for every token), which no memory check "
    "sees; the papers use 1 to 16",
)
GRAD_STEPS = Count(
    "arch.K",
    1,
    CYCLES.high**2,
    "a cap: the last K recurrent steps carry gradient, all of them past M (at most N x T, each at most 1,000)",
)
LAYERS = Count(
    "arch layers", 1, 1_024, "each block holds weights of its own and runs in every cycle; published models have ~130"
)
STACK_SLOTS = Count(
    "arch.num_hidden_layers",
    1,
    LAYERS.high * CYCLES.high * (CYCLES.high + 1),
    "hrm_text: the layers of a stack, or in a written config its cache slots, layers x H_cycles x (L_cycles + 1)",
)
SEGMENTS = Count(
    "arch.halt_max_steps",
    1,
    1_024,
    "segments of deep supervision, each a run of the model and a term of the loss; the papers' 16 (as hrm eval --mmax)",
)
WIDTH = Count(
    "arch widths",
    1,
    1 << 24,
    "a weight matrix holds up to width^2 numbers; a thousand times the widest published model, and the memory check "
    "refuses far less, naming the key",
)
HEADS = Count(
    "arch heads", 1, 4_096, "each head is an attention map of seq_len^2 scores per example; published models have 128"
)
POSITIONS = Count(
    "arch positions",
    1,
    1 << 20,
    "a sequence's positions: RoPE tables are built for all of them at once and attention holds seq_len^2 scores per "
    "head; a million is the longest published context",
)
PREFIX = Count(
    "arch.puzzle_emb_len", 0, POSITIONS.high, "positions before the grid, each attended as a token; TRM's 16"
)
PUZZLE_EMB = Count(
    "arch.puzzle_emb_ndim",
    0,
    POSITIONS.high * WIDTH.high,
    "0: no puzzle embedding; a puzzle's row fills ceil(ndim / hidden_size) prefix positions, so at most a sequence's "
    "positions of the widest width",
)
VOCAB = Count(
    "arch.vocab_size", 1, 1 << 20, "every token is an embedding row and an output logit; tokenizers have up to ~256k"
)
TOKEN_ID = Count("arch.pad_token_id", 0, VOCAB.high - 1, "a token id: a row of the embedding")
PUZZLES = Count(
    "arch.num_puzzle_identifiers",
    1,
    1 << 30,
    "from the dataset: each is a row of the puzzle-embedding table; the builders make at most 10^8 (10,000 copies of "
    "10,000 tasks)",
)
CONV = Count(
    "arch.conv_size",
    1,
    256,
    "taps of the depthwise causal convolutions, each a pass over every channel of every token; Gated DeltaNet's 4",
)
CHUNK = Count(
    "arch.chunk_size",
    1,
    1 << 12,
    "tokens of one chunk of the delta-rule recurrence, which builds a chunk x chunk matrix per head at once; 64 in "
    "practice",
)
ARCH_SEED = Count(
    "arch.seed", 0, 2**32 - 1, "it seeds the weight init's generator, as a run's seed does (which it is, unless set)"
)
EXPANSION = Rate("arch.expansion", 64.0, "the MLP is expansion x hidden_size wide; HRM's 4", what="ratio")
EPS = Rate(
    "arch eps",
    1.0,
    "added so that no norm divides by 0: 1e-5 to 1e-8 in practice; past 1 it swamps the values",
    what="number",
)
ROPE_THETA = Rate(
    "arch.rope_theta",
    1e9,
    "RoPE's base wavelength: 10^4 (HRM) to 5x10^5 (Llama 3, HAM); 10^9 spans any context",
    what="number",
)
INIT_STD = Rate(
    "arch.init_std",
    1.0,
    "the standard deviation of the initial weights: 0.02 in practice; past 1 the first activations explode",
    zero=True,
    what="number",
)
INIT_C = Rate(
    "arch.init_c",
    1e4,
    "the safety factor c of the width-corrected init, init_std / sqrt(c x M x d / 4096): 1 or 2 in practice",
    what="number",
)
LOSS_WEIGHT = Rate(
    "arch.entropy_weight",
    100.0,
    "lambda of the loss term -lambda x H(mean gate): 0.01 by default; past 100 it outweighs the cross-entropy",
    zero=True,
    what="weight",
)
EMBEDDING_SCALE = Rate(
    "arch.embedding_scale", 1e6, "the input embedding's factor: 1 / initializer_range by default (50)", what="number"
)
KV_SHARE = Rate(
    "arch.kv_target",
    1.0,
    "the share of tokens the KV path keeps (rho_KV), which the controller steers to",
    zero=True,
    what="share",
)
THRESHOLD_LR = Rate("arch.threshold_lr", 1.0, "the AdamW rate of the routing threshold: the paper's 2.5e-4", zero=True)
THRESHOLD_CONTROL = Rate(
    "arch threshold_gain, threshold_clip",
    1e3,
    "the controller's gain and clip of the threshold's synthetic gradient: 1 by default",
    zero=True,
    what="number",
)
