"""What the `hrm` commands do, one module each, each with the function that cli.py calls: `train` (the run config
from flags and overrides, then the training loop), `eval` (an evaluation, or --adapt's route), `solve` (your own
puzzles, through `solver` or --adapt's route), `adapt` (new puzzle-embedding rows for unseen ARC tasks), `compare`
(several configs and seeds, side by side) and `compare_tables` (its summaries and tables), `bench` (speed and MFU),
`convert` (HRM-Text checkpoints to and from `transformers`), `generate` (text from an LM head), `viz` (the pictures of
`hrm viz`), `quickstart` (where `./run quickstart` trains), `cli_options` (the flags several commands share, the
test-time flags, build-data's flags from its options models) and `cli_help` (what `--help` shows beyond typer's). The
library below them knows nothing of these."""
