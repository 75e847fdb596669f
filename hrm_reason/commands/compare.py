"""`hrm compare`: train several configs for several seeds, evaluate every run with the same segment budget, and
summarise them side by side (mean ± std over seeds): results.json, results.md and plots.

Layout of the output directory:
    runs/<label>/seed<k>/   an ordinary run directory of `hrm train`, plus compare.json (its evaluation) once done
    results.json            every run, and per config: the final evaluation (at the trained segments, after each m,
                            with ACT), parameters, steps, and the CPU time, steps, training FLOPs and wall time to
                            reach each --targets accuracy (commands/compare_tables.py)
    results.md              the same as tables; `tables` in results.json holds each one by name
    plots/*.png             when matplotlib is installed
<label> is the config file's name without .yaml. Runs are trained one after the other (or `jobs` at a time); a rerun
skips the runs that have their compare.json, resumes those with a checkpoint and starts the others again, so an
interrupted study continues where it stopped. Overrides (key=value) apply to every config: `max_seconds=600
budget_clock=cpu schedule_over=seconds` gives every run the same CPU-time budget and a full LR schedule within it.

`hrm compare --runs DIR...` trains nothing: it reads run directories already made by `hrm train` or `hrm compare` (or
whole study directories, or their kept records under benchmarks/) and writes the same files: the final evaluation of
compare.json where a run has one, else of the `hrm eval --json` output kept in the run directory (`eval_json`: the
one of the final checkpoint on the run's data with the most segments), else the last evaluation of its metrics.jsonl.
Runs are grouped by label (a study's runs/<label>/seed<k>, or a run directory's name less -seed<k>) and, within a
label, by config: seeds of one config are averaged.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import typer

from hrm_reason.atomic import atomic_write_text
from hrm_reason.checkpoint import find_checkpoint, read_state
from hrm_reason.commands.compare_tables import markdown, run_progress, summarise, tables, time_to_accuracy
from hrm_reason.config import TrainConfig, load_config
from hrm_reason.errors import UserError
from hrm_reason.evaluate.act import check_mmax, evaluate
from hrm_reason.evaluate.run import load_model_for_eval
from hrm_reason.limits import COMPARE_JOBS, COMPARE_SEEDS
from hrm_reason.models.registry import family_spec
from hrm_reason.outputs import Output, claim, folder_of, read_own_json
from hrm_reason.readers import read_json, read_jsonl
from hrm_reason.tasks import task_metrics
from hrm_reason.train.loop import train

RUN_RESULT = "compare.json"
RESERVED_KEYS = ("seed", "run_dir")  # set by hrm compare for every run
DEFAULT_TARGETS = (0.5, 0.8)
# Keys of a run's config that do not make it another experiment: its seeds are averaged together.
BOOKKEEPING_KEYS = ("seed", "run_dir", "run_name", "project_name")


@dataclass
class RunSpec:
    label: str
    config_path: Path
    seed: int
    config: TrainConfig

    @property
    def run_dir(self) -> Path:
        return Path(self.config.run_dir)  # type: ignore[arg-type]


def plan_runs(configs: list[Path], seeds: int, out: Path, overrides: list[str]) -> list[RunSpec]:
    """Every (config, seed) run, with all configs validated before anything trains."""
    if not configs:
        raise UserError("give at least one CONFIG file")
    COMPARE_SEEDS.check(seeds)
    for item in overrides:
        if item.partition("=")[0].strip() in RESERVED_KEYS:
            raise UserError(f"override '{item}': hrm compare sets seed (0..--seeds-1) and run_dir (under --out) itself")
    labels = [Path(c).name.removesuffix(".yaml").removesuffix(".yml") for c in configs]
    for label in labels:
        if labels.count(label) > 1:
            raise UserError(f"two configs are named {label}: the file names label the results, so they must differ")
    specs = []
    for path, label in zip(configs, labels):
        for seed in range(seeds):
            run_dir = out / "runs" / label / f"seed{seed}"
            config = load_config(path, [*overrides, f"seed={seed}", f"run_dir={run_dir}"])
            if not family_spec(config.family).segments:
                raise UserError(
                    f"{path}: arch.name={config.model_name}: hrm compare studies the ACT puzzle models only"
                )
            specs.append(RunSpec(label, Path(path), seed, config))
    return specs


def _own_study(out: Path) -> str | None:
    """A study of hrm compare: its results.json (when written) is compare's, and runs/ holds runs/<label>/seed<k>/."""
    if (out / "results.json").exists():
        results = read_own_json(out / "results.json")
        if not isinstance(results, dict) or not str(results.get("command", "")).startswith("hrm compare"):
            return "a results.json that hrm compare did not write"
    runs = out / "runs"
    if runs.exists() and not _study_runs(runs):
        return "a runs/ folder that is not runs/<config>/seed<k>/"
    return None


def _study_runs(runs: Path) -> bool:
    """runs/ of a study: folders of configs, each holding seed<k>/ run folders only."""
    if not runs.is_dir():
        return False
    for label in runs.iterdir():
        if not label.is_dir() or any(not p.is_dir() or not re.fullmatch(r"seed\d+", p.name) for p in label.iterdir()):
            return False
    return True


# --out of hrm compare: a study (resumed by a rerun, its summary files replaced by --runs).
STUDY = Output(
    "--out",
    "hrm compare",
    folder_of(("runs", "results.json", "results.md", "plots"), "a study of hrm compare", _own_study),
    folder=True,
    into=True,
)


def read_record(run_dir: Path) -> dict[str, Any]:
    """A finished study run's compare.json; one line naming it when it is damaged."""
    record = read_json(run_dir / RUN_RESULT, None)
    if not isinstance(record, dict) or "eval" not in record:
        raise UserError(f"{run_dir / RUN_RESULT}: not a record written by hrm compare (delete it to evaluate again)")
    return record


def run_and_evaluate(spec: RunSpec, mmax: int | None, progress: bool) -> dict[str, Any]:
    """Train (or resume) one run, evaluate its final checkpoint, write its compare.json; returns that record."""
    run_dir = spec.run_dir
    if (run_dir / RUN_RESULT).is_file():
        return read_record(run_dir)
    resume = (run_dir / "checkpoints" / "latest").is_file()
    train(spec.config, resume=resume, progress=progress)  # a run killed before its first checkpoint starts again

    model, config, split, device = load_model_for_eval(run_dir, None, None, spec.config.device)
    m = mmax or 2 * config.arch.halt_max_steps
    result = evaluate(
        model,
        split,
        m,
        config.eval_global_batch_size or config.global_batch_size,
        device,
        config.arch.loss.loss_type,
        config.eval_max_examples,
        progress=progress,
        metrics=task_metrics(split, m),
    )
    result.extra.pop("arc_submission", None)
    state = read_state(find_checkpoint(run_dir))
    record = {
        "label": spec.label,
        "config": str(spec.config_path),
        "arch": config.arch.name,
        "data_path": config.data_path,
        "seed": spec.seed,
        "num_params": sum(p.numel() for p in model.parameters()),
        "halt_max_steps": config.arch.halt_max_steps,
        "steps": state["step"],
        "train_seconds": state.get("train_seconds"),
        "eval": result.to_dict(),
        **run_progress(run_dir),
    }
    atomic_write_text(run_dir / RUN_RESULT, json.dumps(record, indent=2))
    return record


def _init_worker(threads: int) -> None:
    torch.set_num_threads(threads)


def split_arguments(items: list[str]) -> tuple[list[Path], list[str]]:
    """`hrm compare CONFIG... KEY=VALUE...`: the config files, and the overrides (an argument with "=" is a config
    when it names a file)."""
    configs = [Path(i) for i in items if "=" not in i or Path(i).is_file()]
    return configs, [i for i in items if "=" in i and not Path(i).is_file()]


def parse_targets(text: str) -> list[float]:
    """--targets "0.5,0.8": accuracies in (0, 1]."""
    try:
        targets = [float(item) for item in text.split(",") if item.strip()]
    except ValueError:
        targets = []
    if not targets or not all(0 < t <= 1 for t in targets):
        raise UserError(f"--targets {text}: expected accuracies in (0, 1] separated by commas, e.g. 0.5,0.8")
    return sorted(set(targets))


def write_results(
    records: list[dict[str, Any]], out: Path, command: str, targets: list[float], metric: str, header: dict[str, Any]
) -> dict[str, Any]:
    """results.json, results.md and the plots (commands/compare_tables.py): each config's final evaluation and time to
    accuracy."""
    check_metric(records, metric)
    summary = summarise(records, metric)
    tta = time_to_accuracy(records, targets, metric)
    results = {
        "command": command,
        **header,
        "summary": summary,
        "time_to_accuracy": tta,
        "tables": tables(summary, tta),
        "runs": records,
    }
    atomic_write_text(out / "results.json", json.dumps(results, indent=2))
    atomic_write_text(out / "results.md", markdown(summary, tta, results["tables"], command))
    results["plots"] = [str(p) for p in plot_all(records, summary, tta, out / "plots", metric)]
    return results


def check_metric(records: list[dict[str, Any]], metric: str) -> None:
    key = f"eval/{metric}"
    logged = [p for r in records for p in r["curve"]]
    if logged and not any(key in p for p in logged):
        known = sorted({k.removeprefix("eval/") for p in logged for k in p if k.startswith("eval/")})
        raise UserError(f"--metric {metric}: no evaluation of these runs logs {key} (they log: {', '.join(known)})")


def plot_all(
    records: list[dict[str, Any]], summary: dict[str, Any], tta: dict[str, Any], out_dir: Path, metric: str
) -> list[Path]:
    """The study's pictures (viz/compare_plots.py); none without matplotlib (the viz extra)."""
    try:
        from hrm_reason.viz.compare_plots import plot, plot_time_to_accuracy
    except (ImportError, UserError):
        return []
    return [*plot(summary, out_dir, metric), *plot_time_to_accuracy(records, tta, out_dir)]


def compare(
    configs: list[Path],
    seeds: int,
    out: Path,
    mmax: int | None = None,
    overrides: list[str] | None = None,
    progress: bool = True,
    command: str = "hrm compare",
    jobs: int = 1,
    targets: list[float] | None = None,
    metric: str = "exact_accuracy",
) -> dict[str, Any]:
    """Run the study (skipping finished runs) and write results.json, results.md and plots under `out`.

    jobs > 1 trains that many runs at once, each in its own process with cpu_count // jobs threads (no progress bars):
    small models use a core each better than two threads of one run do. Counts, targets and `out` are checked
    before any training: `out` is new, empty or a study of hrm compare (resumed)."""
    if mmax is not None:
        check_mmax(mmax)  # before any training: the evaluations come last
    COMPARE_SEEDS.check(seeds)
    COMPARE_JOBS.check(jobs)
    claim(out, STUDY)
    specs = plan_runs(configs, seeds, out, overrides or [])
    if jobs > 1:
        pool = ProcessPoolExecutor(
            jobs,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker,
            initargs=(max(1, (os.cpu_count() or 1) // jobs),),
        )
        with pool:
            futures = [pool.submit(run_and_evaluate, spec, mmax, False) for spec in specs]
            for i, (spec, future) in enumerate(zip(specs, futures), 1):
                future.result()
                typer.echo(f"[{i}/{len(specs)}] {spec.label} seed {spec.seed}: done", err=True)
    records = []
    for i, spec in enumerate(specs, 1):
        done = (spec.run_dir / RUN_RESULT).is_file()
        if jobs == 1:
            typer.echo(
                f"[{i}/{len(specs)}] {spec.label} seed {spec.seed}: {'done, skipped' if done else 'training'}", err=True
            )
        record = run_and_evaluate(spec, mmax, progress)
        records.append(record if "curve" in record else {**record, **run_progress(spec.run_dir)})  # an older study
    header = {"seeds": seeds, "mmax": mmax, "overrides": overrides or []}
    return write_results(records, out, command, list(targets or DEFAULT_TARGETS), metric, header)


def find_runs(dirs: list[Path]) -> list[Path]:
    """Run directories (with metrics.jsonl) as given, and the runs/<label>/seed<k>/ of study directories."""

    def order(path: Path) -> tuple[str, int]:
        return path.parent.name, int(path.name.removeprefix("seed"))

    found: list[Path] = []
    for d in map(Path, dirs):
        if (d / "metrics.jsonl").is_file():
            found.append(d)
            continue
        runs = [p.parent for p in (d / "runs").glob("*/seed*/metrics.jsonl") if re.fullmatch(r"seed\d+", p.parent.name)]
        if not runs:
            raise UserError(
                f"{d}: neither a run directory (no metrics.jsonl) nor a study of hrm compare (no runs/*/seed*/)"
            )
        found += sorted(runs, key=order)
    return list({p.resolve(): p for p in found}.values())


def run_label(run_dir: Path) -> str:
    """A study's runs/<label>/seed<k> is <label>; hrm train's <data>-<model>-seed<k> is <data>-<model>: the seeds of
    one config share a label."""
    if re.fullmatch(r"seed\d+", run_dir.name):
        return run_dir.parent.name
    return re.sub(r"-seed\d+$", "", run_dir.name)


def run_record(run_dir: Path) -> dict[str, Any]:
    """compare.json where the run has one (a study's run), else what config.yaml, metrics.jsonl and the run's
    `hrm eval --json` output (`eval_json`) say; with the run's curve and its config's fingerprint (the config less
    BOOKKEEPING_KEYS)."""
    config = load_config(run_dir / "config.yaml")
    if not family_spec(config.family).segments:
        raise UserError(f"{run_dir}: arch.name={config.model_name}: hrm compare studies the ACT puzzle models only")
    settings = config.model_dump(mode="json", exclude=set(BOOKKEEPING_KEYS))
    fingerprint = json.dumps(settings, sort_keys=True)
    if (run_dir / RUN_RESULT).is_file():
        record = read_record(run_dir)
        record = record if "curve" in record else {**record, **run_progress(run_dir)}
        return {**record, "fingerprint": fingerprint}
    records = read_jsonl(run_dir / "metrics.jsonl", "a run directory holds the metrics.jsonl hrm train writes")
    header = records[0] if records else {}  # the run's first record: its parameter count
    progress = run_progress(run_dir)
    last = progress["curve"][-1]["step"] if progress["curve"] else None
    evaluated = eval_json(run_dir, config.data_path, last)
    return {
        "label": run_label(run_dir),
        "config": str(run_dir / "config.yaml"),
        "arch": config.model_name,
        "data_path": config.data_path,
        "seed": config.seed,
        "num_params": header.get("num_params"),
        "halt_max_steps": config.arch.halt_max_steps,
        "run_dir": str(run_dir),
        "fingerprint": fingerprint,
        **progress,
        **({"eval": evaluated[1], "eval_json": evaluated[0]} if evaluated is not None else {}),
    }


EVAL_KEYS = ("count", "mmax", "exact_accuracy", "token_accuracy", "act_exact_accuracy", "act_mean_segments", "extra")


def eval_json(run_dir: Path, data_path: str, step: int | None) -> tuple[str, dict[str, Any]] | None:
    """(file name, result) of the `hrm eval --json` output in `run_dir` that stands for the run's final evaluation:
    a plain evaluation (no --tta, --samples or --puzzle-id blank) of the final checkpoint (`step`) on the run's own
    data, where its provenance says so (outputs written before hrm eval recorded one are taken as they are); of
    several, the one with the most segments, then the most examples. None when there is none."""
    found = []
    for path in sorted(Path(run_dir).glob("*.json")):
        if path.name in ("run.json", RUN_RESULT):
            continue
        try:
            value = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # not an evaluation of ours: other JSON files may sit in a run directory
        if not isinstance(value, dict) or any(k not in value for k in EVAL_KEYS):
            continue
        m, extra = value["mmax"], value["extra"]
        if not isinstance(m, int) or not isinstance(extra, dict) or "test_time" in extra:
            continue
        if not all(isinstance(value[k], list) and len(value[k]) == m for k in ("exact_accuracy", "token_accuracy")):
            continue
        where = value.get("provenance") or {}
        if "data_path" in where and Path(str(where["data_path"])) != Path(data_path):
            continue
        if where.get("step") is not None and step is not None and where["step"] != step:
            continue
        found.append((m, value["count"] or 0, path.name, value))
    if not found:
        return None
    m, count, name, value = max(found, key=lambda f: (f[0], f[1], f[2]))
    return name, value


def group_by_config(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs that share a label but not a config are other experiments: each further config of a label gets
    "<label> [k]". Seeds of one label and config are averaged together by `summarise`."""
    seen: dict[str, list[str]] = {}
    out = []
    for r in records:
        configs = seen.setdefault(r["label"], [])
        if r["fingerprint"] not in configs:
            configs.append(r["fingerprint"])
        k = configs.index(r.pop("fingerprint"))
        out.append({**r, "label": r["label"] if k == 0 else f"{r['label']} [{k + 1}]"})
    return out


def compare_runs(
    dirs: list[Path],
    out: Path,
    targets: list[float] | None = None,
    metric: str = "exact_accuracy",
    command: str = "hrm compare --runs",
) -> dict[str, Any]:
    """The study's files for runs already made (`hrm compare --runs`): nothing trains or evaluates. `out` is new,
    empty or a study of hrm compare (its summary files replaced). The note on runs without an evaluation comes after
    the files are written: a refusal (--metric, a full disk) is its one line alone."""
    claim(out, STUDY)
    records = read_runs(dirs)
    results = write_results(records, out, command, list(targets or DEFAULT_TARGETS), metric, {"from_runs": True})
    bare = [r["run_dir"] for r in records if "eval" not in r and "run_dir" in r]
    if bare:
        typer.echo(
            f"note: {len(bare)} run(s) without an hrm eval --json output in their directory (first: {bare[0]}): @ mmax, "
            "the per-segment table and plots leave them out, and their ACT is capped at the trained segments; "
            "hrm eval --run RUN --mmax M --json RUN/evalM.json adds one",
            err=True,
        )
    return results


def read_runs(dirs: list[Path]) -> list[dict[str, Any]]:
    """The records of run directories, study directories or kept records, grouped by config."""
    if not dirs:
        raise UserError("--runs: give at least one run or study directory")
    records = group_by_config([run_record(d) for d in find_runs(dirs)])
    for r in records:
        if not r["curve"] and "eval" not in r:
            raise UserError(f"{r['run_dir']}: its metrics.jsonl has no evaluation yet: nothing to compare")
    return records


def runs_tables(dirs: list[Path], targets: list[float], metric: str) -> dict[str, str]:
    """The named tables (commands/compare_tables.py) of `hrm compare --runs DIRS --targets ... --metric ...`, written nowhere:
    what benchmarks/docs_tables.py checks docs/ against."""
    records = read_runs(dirs)
    check_metric(records, metric)
    return tables(summarise(records, metric), time_to_accuracy(records, targets, metric))


def compare_command(
    items: list[str],
    runs: bool,
    seeds: int | None,
    out: Path,
    mmax: int | None,
    jobs: int | None,
    targets: str,
    metric: str,
    progress: bool,
    command: str,
) -> list[str]:
    """`hrm compare`: train and compare the configs of `items` (then its key=value overrides), or with `runs` summarise
    the run or study directories it names (the training flags refused); returns what it prints: results.md and the
    files written."""
    wanted = parse_targets(targets)
    if runs:
        if given := [f for f, v in (("--seeds", seeds), ("--mmax", mmax), ("--jobs", jobs)) if v is not None]:
            raise UserError(f"{', '.join(given)}: --runs reads finished runs; it trains and evaluates nothing")
        results = compare_runs([Path(i) for i in items], out, wanted, metric, command)
    else:
        configs, overrides = split_arguments(items)
        # None is "not given": 0 is a count, refused by compare's bounds (`seeds or 3` once trained 3 seeds for 0)
        seeds, jobs = 3 if seeds is None else seeds, 1 if jobs is None else jobs
        results = compare(
            configs, seeds, out, mmax, overrides, progress, command, jobs=jobs, targets=wanted, metric=metric
        )
    paths = [out / "results.json", out / "results.md", *map(Path, results["plots"])]
    return [(out / "results.md").read_text(), *(f"wrote {path}" for path in paths)]
