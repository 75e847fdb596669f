"""The language-model heads' comparison (benchmarks/lm_study.py): its table reads each kept run's last evaluation,
and its claims follow benchmarks/claims.py's rule with the effect in nats."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import lm_study  # noqa: E402


def kept(root: Path, head: str, seed: int, ces: list[float], params: int = 1_000_000) -> None:
    """A kept run as benchmarks/keep_records.py leaves it: the header and one line per evaluation (250 steps apart)."""
    run = root / "runs" / head / f"seed{seed}"
    run.mkdir(parents=True)
    lines = [{"step": 0, "num_params": params, "train_flops_per_step": 1e10}]
    for i, ce in enumerate(ces, start=1):
        lines.append(
            {
                "step": 250 * i,
                "eval/ce": ce,
                "train_cpu_seconds": 100.0 * i,
                "train_flops": 2.5e12 * i,
                "eval/tokens": 8,
            }
        )
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def rows(table: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()[2:]]


def test_the_table_reads_each_runs_last_evaluation(tmp_path: Path) -> None:
    for seed, last in enumerate([2.0, 2.2, 2.1]):
        kept(tmp_path, "hrm_lm", seed, [3.0, last])
    kept(tmp_path, "transformer_lm", 0, [2.5, 2.4, 1.9], params=1_082_752)
    (hrm, transformer) = rows(lm_study.lm(tmp_path))
    assert hrm[:6] == ["HRM-LM", "1,000,000", "3", "500 ± 0", "0.400 ± 0.000", "5.0 ± 0.0"]
    assert hrm[6:8] == ["2.000 / 2.200 / 2.100", "2.100 ± 0.100"]
    assert hrm[8] == f"{2.1 / math.log(2):.3f} ± {0.1 / math.log(2):.3f}"
    assert transformer[:4] == ["Transformer-LM (T-L4)", "1,082,752", "1", "750"] and transformer[7] == "1.900"


@pytest.mark.parametrize(
    ("control", "says"),
    [
        ([2.50, 2.52, 2.48], "**held**: HRM-LM 2.100 ± 0.010, UniTF-LM 2.500 ± 0.020 nats (+0.400 ± 0.013 SE nats"),
        ([2.05, 2.06, 2.07], "**did not hold**"),  # the control is better: no gain of 0.01 nats is plausible
        ([2.00, 2.15, 2.30], "**not decided**: "),  # 0.05 nats better on average, seeds spread over 0.3
        ([2.50], "**not decided** (1 seed)"),
    ],
)
def test_a_claim_is_decided_by_the_rule_in_nats(tmp_path: Path, control: list[float], says: str) -> None:
    for seed, ce in enumerate([2.09, 2.10, 2.11]):
        kept(tmp_path, "hrm_lm", seed, [ce])
    for seed, ce in enumerate(control):
        kept(tmp_path, "unitf_lm", seed, [ce])
    unitf, transformer, *wide = rows(lm_study.lmclaims(tmp_path))
    assert unitf[1].startswith(says) and transformer[1] == "not run" and [row[1] for row in wide] == ["not run"] * 2


def test_a_run_without_an_evaluation_is_named(tmp_path: Path) -> None:
    kept(tmp_path, "unitf_lm", 0, [])
    with pytest.raises(SystemExit, match=r"unitf_lm/seed0/metrics.jsonl: no evaluation"):
        lm_study.lm(tmp_path)


def test_the_heads_compared_have_about_equal_parameters() -> None:
    """The study's premise: its three quick presets within 10% of each other's parameter count at the byte vocabulary."""
    from hrm_reason.config import load_config
    from hrm_reason.data.text import ByteTokenizer
    from hrm_reason.models import registry

    counts = {}
    for head in ("hrm_lm", "unitf_lm", "transformer_lm"):
        arch = load_config(ROOT / "configs" / f"{head}_quick.yaml").arch
        counts[head] = sum(p.numel() for p in registry.build_lm(arch, ByteTokenizer.vocab_size).parameters())
    assert max(counts.values()) / min(counts.values()) < 1.1, counts


def test_the_study_script_refuses_a_job_it_does_not_know() -> None:
    done = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "lm_study.sh"), "hrm_lm-0", "gpt-1"], capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stderr.strip() == (
        "error: ARM-SEED: gpt-1 is not one of hrm_lm unitf_lm transformer_lm hrm_lm-wc with a seed, e.g. hrm_lm-0"
    )


def test_the_width_corrected_arm_is_compared_with_each_control(tmp_path: Path) -> None:
    for seed, (wide, t) in enumerate([(1.50, 1.60), (1.52, 1.61), (1.51, 1.62)]):
        kept(tmp_path, "hrm_lm-wc", seed, [wide])
        kept(tmp_path, "transformer_lm", seed, [t])
    claims = rows(lm_study.lmclaims(tmp_path))
    assert [row[1] for row in claims[:3]] == ["not run"] * 3
    assert claims[3][1].startswith("**held**: HRM-LM, width-corrected init 1.510 ± 0.010, Transformer-LM (T-L4) 1.610")
