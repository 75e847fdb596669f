"""A torchrun process (LOCAL_RANK set) ends without the interpreter's teardown, where gloo's worker threads can abort
it, and keeps its command's exit code and output; any other process ends normally."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TEARDOWN = "teardown ran"


def run_cli(args: list[str], torchrun: bool) -> subprocess.CompletedProcess[str]:
    """cli.main() in a fresh interpreter with an exit handler that says whether the teardown ran."""
    code = (
        "import atexit, sys\n"
        f"atexit.register(lambda: print({TEARDOWN!r}, file=sys.stderr))\n"
        f"sys.argv = ['hrm', *{args!r}]\n"
        "import cli\n"
        "print('before the end', flush=False)\n"
        "cli.main()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "LOCAL_RANK"} | {"PYTHONPATH": str(REPO)}
    if torchrun:
        env["LOCAL_RANK"] = "0"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=REPO)


@pytest.mark.parametrize(
    ("args", "code", "says", "torchrun"),
    [
        (["train", "--help"], 0, "Usage: hrm train", True),
        (["train", "--no-such-flag"], 2, "error: unknown option --no-such-flag", True),
        (["train", "--config", "no/such/config.yaml"], 2, "error: ", True),
        (["train", "--no-such-flag"], 2, "error: unknown option --no-such-flag", False),
    ],
)
def test_torchrun_process_skips_the_teardown_and_keeps_code_and_output(
    args: list[str], code: int, says: str, torchrun: bool
) -> None:
    proc = run_cli(args, torchrun)
    assert proc.returncode == code, proc.stderr
    assert says in proc.stdout + proc.stderr
    assert "before the end" in proc.stdout  # buffered output is flushed before the process ends
    assert (TEARDOWN in proc.stderr) is not torchrun
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("raised", "code", "stderr"), [("None", 0, ""), ("143", 143, ""), ("'why'", 1, "why\n")])
def test_exit_without_teardown_keeps_a_system_exits_code(raised: str, code: int, stderr: str) -> None:
    script = (
        "import atexit, sys\n"
        f"atexit.register(lambda: print({TEARDOWN!r}, file=sys.stderr))\n"
        "from hrm_reason.runtime.distributed import exit_without_teardown\n"
        "def main():\n"
        f"    raise SystemExit({raised})\n"
        "exit_without_teardown(main)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert (proc.returncode, proc.stderr) == (code, stderr)
