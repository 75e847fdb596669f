"""docs/commands.md describes every option of every `hrm` command and every run-config key, and every bound it states
is the code's (issue 59, item 2): the page says it lists every option, and once missed about twenty. The options are
walked from typer itself (typer.main.get_command on cli.app, into every group), the keys from the config models.

How the page is read (its opening says so too):
- A section runs from a `## ` heading to the next; fenced code blocks are examples, and a line starting `<!--` the
  page's note of this reading: both are left out. A block is a paragraph, a list item or a table row.
- A section is of the commands its heading names in a code span: `hrm eval ...`, or `hrm viz` (a group: every one of
  its subcommands); the words after `hrm` are read up to the first that is not a command's name. A block that starts
  with such a span (`hrm build-data text --input ...`: ...) is of that command instead. The opening, before the first
  section, is of `hrm` itself (`--version`).
- An option is described when its long flag appears as a word in a code span of a block of its command (a synopsis
  `hrm viz html RUN [--index N]`, a row `--top-k K`, prose `--quiet`).
- A run-config key (TrainConfig's fields, depth_curriculum's stage fields, the ACT puzzle models' arch options) is
  described when a code span of a section of `hrm train`, or of one whose heading names `arch.name`, holds it as a
  config writes it (`arch.hidden_size`) or without its first part (`hidden_size`). The language-model heads' own arch
  options are documented in docs/models.md, not here.
- A bound is stated as `LOW to HIGH`, `at most HIGH` or `in (0, HIGH]` right after a flag's code span (or several,
  joined by `/`, `,` or `and`; `is` or `(` may come between), or else as `LOW to HIGH` in a table row whose first
  cell names one flag. The flag is the command's its span names (`hrm adapt --steps`), else that of the nearest such span
  before it in the block, else the block's commands'; each of them that takes the flag must declare that very bound
  (hrm_reason/limits.py through commands/cli_options.py `bounded`, or typer's min and max; for hrm build-data its
  options model, tried at the ends). test_the_page_is_read_as_its_opening_says shows each rule on a small page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel
from typer.main import get_command

import cli
from hrm_reason import limits
from hrm_reason.config import DepthStage, TrainConfig
from hrm_reason.models import registry
from tests.helpers import REPO, cli_commands, declared, refuses

DOC = REPO / "docs" / "commands.md"
CommandPath = tuple[str, ...]

ROOT = get_command(cli.app)
COMMANDS: dict[CommandPath, Any] = {(): ROOT, **dict(cli_commands(ROOT))}  # () is `hrm` itself (--version)
GROUPS = {path[:i] for path in COMMANDS for i in range(1, len(path))}  # ("build-data",), ("viz",)
OPTIONS = {
    (path, max(param.opts, key=len)): param
    for path, command in COMMANDS.items()
    for param in command.params
    if param.param_type_name == "option" and not param.hidden
}

SPAN = re.compile(r"`([^`]+)`")
FLAG = re.compile(r"(?<![\w-])--[a-z][\w-]*")


def words(flag_or_key: str) -> re.Pattern[str]:
    """`flag_or_key` as a whole word of a code span: --seed is not --tta-seed, seed not arch.seed, lr not lr_min_ratio."""
    return re.compile(rf"(?<![\w.-]){re.escape(flag_or_key)}(?![\w-])")


def command_of(span: str) -> CommandPath | None:
    """The command or group a code span `hrm build-data text --input ...` names: the words after `hrm` up to the first
    that is not a command's name; None when the span names none."""
    parts = span.split()
    if len(parts) < 2 or parts[0] != "hrm":
        return None
    named = None
    for i in range(2, len(parts) + 1):
        if tuple(parts[1:i]) in COMMANDS or tuple(parts[1:i]) in GROUPS:
            named = tuple(parts[1:i])
    return named


def leaves(path: CommandPath) -> list[CommandPath]:
    """The commands of `path`: itself, or every command of a group."""
    return [p for p in COMMANDS if p == path or (p[: len(path)] == path and path in GROUPS)]


@dataclass
class Block:
    line: int  # of the page, 1-based
    text: str
    commands: list[CommandPath]

    @property
    def spans(self) -> list[str]:
        return [" ".join(s.split()) for s in SPAN.findall(self.text)]


@dataclass
class Section:
    heading: str
    blocks: list[Block]
    commands: list[CommandPath]


def read_page(text: str) -> list[Section]:
    """The page's sections and blocks, each block with its commands (the module's docstring says how)."""
    sections = [Section("", [], [()])]
    lines, fenced, current = text.splitlines(), False, None
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            fenced, current = not fenced, None
            continue
        if fenced or line.startswith("<!--"):  # an example, or the page's note of this reading
            continue
        if line.startswith("## "):
            sections.append(Section(line, [Block(number, line, [])], []))
            current = None
            continue
        starts = line.lstrip().startswith("|") or re.match(r"\s*(?:[-*]|\d+\.)\s", line)
        if not line.strip():
            current = None
        elif current is None or starts or current.text.lstrip().startswith("|"):
            current = Block(number, line, [])
            sections[-1].blocks.append(current)
        else:
            current.text += "\n" + line
    for section in sections[1:]:
        named = [p for s in SPAN.findall(section.heading) if (p := command_of(" ".join(s.split()))) is not None]
        section.commands = [leaf for path in named for leaf in leaves(path)]
    for section in sections:
        for block in section.blocks:
            first = re.match(r"\s*(?:\|\s*|[-*]\s+|\d+\.\s+)?`([^`]+)`", block.text)
            path = command_of(" ".join(first.group(1).split())) if first and block.text != section.heading else None
            block.commands = leaves(path) if path is not None else section.commands
    return sections


PAGE = read_page(DOC.read_text())


def described(path: CommandPath) -> list[str]:
    """The code spans of every block of the command `path`."""
    return [span for section in PAGE for block in section.blocks if path in block.commands for span in block.spans]


def test_every_command_has_a_section() -> None:
    """Every command is named by a heading or by the start of a block: the page's walk sees each of them."""
    missing = [" ".join(path) for path in COMMANDS if path and not described(path)]
    assert not missing, f"docs/commands.md has no section or block of: hrm {', hrm '.join(missing)}"


@pytest.mark.parametrize("command_flag", sorted(f"{' '.join(p)} {f}".strip() for p, f in OPTIONS))
def test_every_option_is_described_under_its_command(command_flag: str) -> None:
    *path, flag = command_flag.split()
    spans = described(tuple(path))
    where = f"`hrm {' '.join(path)}` (a section whose heading names it, or a block that starts with it)"
    assert any(words(flag).search(span) for span in spans), (
        f"docs/commands.md does not describe `hrm {command_flag}`: no code span under "
        f"{where if path else 'the opening, before the first section,'} holds {flag}"
    )


# --- run-config keys

FROM_DATASET = {"seq_len", "vocab_size", "num_puzzle_identifiers"}  # arch fields the dataset fills, not a user's keys


def nested_keys(prefix: str, model: type[BaseModel]) -> list[str]:
    """`prefix`.field for every field of `model`, a field that is a model itself (arch.loss) by its own fields."""
    keys = []
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            keys += nested_keys(f"{prefix}.{name}", kind)
        else:
            keys.append(f"{prefix}.{name}")
    return keys


ACT_MODELS = [m.SPEC.config for m in registry.models().values() if m.SPEC.family == "act"]
RUN_CONFIG_KEYS = sorted(
    {
        *TrainConfig.model_fields,
        *nested_keys("depth_curriculum", DepthStage),
        *(key for model in ACT_MODELS for key in nested_keys("arch", model) if key[5:] not in FROM_DATASET),
    }
)
KEY_SPANS = [
    span
    for section in PAGE
    if ("train",) in section.commands or any(s.startswith("arch.") for s in SPAN.findall(section.heading))
    for block in section.blocks
    for span in block.spans
]


def test_the_key_walk_sees_the_models() -> None:
    assert {"arch.H_cycles", "arch.num_layers", "arch.mlp_t", "arch.loss.loss_type", "ema_warmup"} <= set(
        RUN_CONFIG_KEYS
    )
    assert KEY_SPANS


@pytest.mark.parametrize("key", RUN_CONFIG_KEYS)
def test_every_run_config_key_is_described(key: str) -> None:
    spellings = [key] + ([key.partition(".")[2]] if "." in key else [])
    assert any(words(s).search(span) for s in spellings for span in KEY_SPANS), (
        f"docs/commands.md does not describe the run-config key `{key}`: no code span of a section of `hrm train` (or "
        f"of the architectures' section) holds {' or '.join(spellings)}"
    )


# --- bounds stated on the page


@dataclass(frozen=True)
class Stated:
    line: int
    commands: tuple[CommandPath, ...]  # where the flag is looked for
    flag: str
    text: str  # as the page writes it: "1 to 10,000", "at most 1,024", "in (0, 1]"
    low: float | None
    high: float
    rate: str | None = None  # a rate's lower end: "(" above 0, "[" from 0

    def __str__(self) -> str:
        return f"{self.line}: hrm {'/'.join(' '.join(p) for p in self.commands)} {self.flag} {self.text}"


NUMBER = r"\d+(?:,\d{3})*"  # 10,000
TAIL = re.compile(
    rf"\s+(?:is\s+|\()?(?:(?P<low>{NUMBER})\s+to\s+(?P<high>{NUMBER})|at\s+most\s+(?P<most>{NUMBER})"
    r"|in\s+(?P<open>[\[(])0,\s*(?P<rate>[\d.]+)\])"
)
JOINED = re.compile(r"\s*(?:/|,|and)\s*")


def number(text: str) -> float:
    return float(text.replace(",", ""))


def stated(match: re.Match[str], line: int, commands: tuple[CommandPath, ...], flag: str) -> Stated:
    text = re.sub(r"^(?:is |\()", "", " ".join(match.group(0).split()))
    if match.group("low") is not None:
        return Stated(line, commands, flag, text, number(match.group("low")), number(match.group("high")))
    if match.group("most") is not None:
        return Stated(line, commands, flag, text, None, number(match.group("most")))
    return Stated(line, commands, flag, text, 0.0, number(match.group("rate")), match.group("open"))


def bounds_in(block: Block) -> list[Stated]:
    """The bounds a block states (the module's docstring says how)."""
    found: list[Stated] = []
    spans = list(SPAN.finditer(block.text))
    context = tuple(block.commands)
    groups: list[list[re.Match[str]]] = []
    for span in spans:
        if groups and JOINED.fullmatch(block.text[groups[-1][-1].end() : span.start()]):
            groups[-1].append(span)
        else:
            groups.append([span])
    for group in groups:
        tail = TAIL.match(block.text, group[-1].end())
        for span in group:
            path = command_of(" ".join(span.group(1).split()))
            context = tuple(leaves(path)) if path is not None else context  # a bare flag after `hrm adapt --steps`
            if tail is not None:
                found += [stated(tail, block.line, context, flag) for flag in FLAG.findall(span.group(1))]
    if not found and block.text.lstrip().startswith("|"):  # a row's range is its one flag's, unless a span has it
        first, _, rest = block.text.strip().strip("|").partition(" | ")
        flags = [f for s in SPAN.findall(first) for f in FLAG.findall(s)]
        plain = SPAN.sub("", rest)
        match = re.search(rf"(?<![\w.,])(?P<low>{NUMBER})\s+to\s+(?P<high>{NUMBER})", plain)
        if len(flags) == 1 and match is not None:
            found.append(
                Stated(block.line, tuple(block.commands), flags[0], match.group(0), *map(number, match.groups()))
            )
    return found


STATED = [bound for section in PAGE for block in section.blocks for bound in bounds_in(block)]


def limit_name(limit: Any) -> str:
    return next(f"limits.py {name}" for name, value in vars(limits).items() if value is limit)


def build_field(path: CommandPath, flag: str) -> tuple[type[BaseModel], str] | None:
    """hrm build-data TASK's options model and the field of `flag`; None for a flag that is no field (--quiet)."""
    model = cli.BUILDERS[path[1]][0]
    field = flag[2:].replace("-", "_")
    return (model, field) if field in model.model_fields else None


def model_bound(model: type[BaseModel], field: str) -> str:
    """The range of whole numbers the options model takes for `field`, found by bisection from its default."""
    default = model.model_fields[field].default
    start = next((v for v in (default, 0, 1) if isinstance(v, int) and not refuses(model, field, v)), None)
    if start is None:
        return "no whole number"
    ends = []
    for sign in (-1, 1):
        inside, outside = start, start + sign * 2**62
        if not refuses(model, field, outside):
            ends.append(None)
            continue
        while abs(outside - inside) > 1:
            middle = (inside + outside) // 2
            inside, outside = (inside, middle) if refuses(model, field, middle) else (middle, outside)
        ends.append(inside)
    low, high = ("no lower end" if ends[0] is None else ends[0]), ("no end" if ends[1] is None else f"{ends[1]:,}")
    return f"{low} to {high} (its options model, datasets_build/options.py)"


def mismatch(bound: Stated, path: CommandPath) -> str | None:
    """Why `hrm PATH FLAG`'s bound in the code is not the page's; None when it is."""
    if path[0] == "build-data":
        found = build_field(path, bound.flag)
        if found is None:
            return "no bound (not a field of its options model)"
        model, field = found
        if bound.rate is not None:
            low_ok = refuses(model, field, 0.0) == (bound.rate == "(") and refuses(model, field, -1e-9)
            ok = low_ok and not refuses(model, field, bound.high) and refuses(model, field, bound.high * (1 + 1e-9))
            return None if ok else "another range (its options model)"
        inside = [bound.high] + ([bound.low] if bound.low is not None else [])
        outside = [bound.high + 1] + ([bound.low - 1] if bound.low is not None else [])
        ints = [int(v) for v in inside], [int(v) for v in outside]
        ok = not any(refuses(model, field, v) for v in ints[0]) and all(refuses(model, field, v) for v in ints[1])
        return None if ok else model_bound(model, field)
    low, high, limit = declared(OPTIONS[path, bound.flag])
    if isinstance(limit, limits.Rate):
        code = f"in {'[' if limit.zero else '('}0, {limit.high:g}] ({limit_name(limit)})"
        same = bound.rate == ("[" if limit.zero else "(") and bound.high == limit.high
        return None if same else code
    if high is None:
        return "no upper bound" if low is None else f"at least {low:g}, no upper bound"
    code = f"{low:g} to {high:,} ({limit_name(limit) if limit is not None else 'typer min and max'})"
    same = bound.high == high and (bound.low is None or bound.low == low) and bound.rate is None
    return None if same else code


def test_the_bound_walk_sees_the_page_bounds() -> None:
    """The page's bounds are read (a change of wording must fail here, not pass with nothing checked)."""
    seen = {(path, b.flag) for b in STATED for path in b.commands}
    assert {(("adapt",), "--steps"), (("compare",), "--seeds"), (("eval",), "--mmax"), (("adapt",), "--lr")} <= seen
    assert len(STATED) > 15


@pytest.mark.parametrize("bound", STATED, ids=str)
def test_every_stated_bound_is_the_code_bound(bound: Stated) -> None:
    takes = [path for path in bound.commands if (path, bound.flag) in OPTIONS]
    names = ", ".join(f"hrm {' '.join(p)}" for p in bound.commands) or "hrm"
    assert takes, (
        f"docs/commands.md:{bound.line} states {bound.flag} {bound.text!r} for {names}, which has no {bound.flag}"
    )
    wrong = [
        f"hrm {' '.join(path)} {bound.flag}: the page says {bound.text!r}, the code bounds it {why}"
        for path in takes
        if (why := mismatch(bound, path)) is not None
    ]
    assert not wrong, f"docs/commands.md:{bound.line}: " + "; ".join(wrong)


def test_the_page_is_read_as_its_opening_says() -> None:
    """The reading's rules on a small page: the note and the examples left out, a group's heading of every subcommand,
    a row or paragraph starting with `hrm CMD` of CMD alone, and the forms of a bound with the command each is of."""
    page = read_page(
        "<!-- the note: `--eval` -->\n"
        "Opening `--version`.\n\n"
        "## `hrm viz`: pictures\n\n"
        "Shared `--out`.\n\n"
        "```bash\nhrm viz html --eval x\n```\n\n"
        "| `hrm viz html RUN [--index N]` | `--count` (0 to 100) strips |\n"
        "`hrm generate --max-new-tokens` 1 to 100,000, `--top-k`/`--seed` at most 5 and `--lr` in (0, 1]\n"
    )
    opening, (heading, shared, row, paragraph) = page[0].blocks, page[1].blocks
    assert [b.spans for b in opening] == [["--version"]] and opening[0].commands == [()]
    assert heading.commands == shared.commands == leaves(("viz",)) and len(leaves(("viz",))) == 6
    assert row.commands == [("viz", "html")] and paragraph.commands == [("generate",)]
    assert not any("--eval" in span for section in page for block in section.blocks for span in block.spans)
    read = [(b.commands, b.flag, b.low, b.high, b.rate) for block in page[1].blocks for b in bounds_in(block)]
    generate = (("generate",),)
    assert read == [
        ((("viz", "html"),), "--count", 0, 100, None),
        (generate, "--max-new-tokens", 1, 100_000, None),
        (generate, "--top-k", None, 5, None),
        (generate, "--seed", None, 5, None),
        (generate, "--lr", 0, 1, "("),
    ]
