"""What the `hrm` commands do beyond train, eval and build-data, one module each: `solve` (your own puzzles),
`compare` (several configs and seeds, side by side), `bench` (speed and MFU), `convert` (HRM-Text checkpoints to and
from `transformers`), `generate` (text from an LM head), `quickstart` (where `./run quickstart` trains), `cli_help`
(what `--help` shows beyond typer's). The library below them knows nothing of these."""
