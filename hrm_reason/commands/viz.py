"""`hrm viz`: each picture command from its arguments to what it prints, its output folder (or page) claimed before any
figure is drawn (hrm_reason.outputs). The figures are hrm_reason.viz's; matplotlib is imported only here, by them."""

from __future__ import annotations

from pathlib import Path

from hrm_reason.atomic import atomic_write_text
from hrm_reason.commands.cli_options import one_of, written
from hrm_reason.limits import VIZ_STRIPS
from hrm_reason.outputs import VIZ_FOLDER, VIZ_PAGE, VIZ_PICTURE, claim


def viz_out(out: Path) -> Path:
    """A folder of hrm viz's pictures (new, empty or its own), checked before any figure is drawn."""
    return claim(out, VIZ_FOLDER) or out


def puzzle_pictures(data: Path, split: str, index: int, count: int, out: Path) -> list[str]:
    """`hrm viz puzzle`: the puzzles and their solutions, one PNG each."""
    from hrm_reason.viz.canvas import save_figures
    from hrm_reason.viz.puzzles import puzzle_figures

    return written(save_figures(puzzle_figures(data, split, index, count), viz_out(out)))


def prediction_pictures(
    run: Path | None,
    checkpoint: Path | None,
    config: Path | None,
    data: Path | None,
    index: int,
    count: int,
    mmax: int | None,
    device: str,
    out: Path | None,
) -> list[str]:
    """`hrm viz predictions`: the prediction after every segment, one PNG per example (in RUN/viz by default)."""
    from hrm_reason.viz.canvas import save_figures
    from hrm_reason.viz.predictions import prediction_figures

    out = viz_out(out or (run / "viz" if run is not None else Path("viz")))
    return written(
        save_figures(prediction_figures(one_of(run, checkpoint), config, data, index, count, mmax, device), out)
    )


def run_pictures(run_dir: Path, eval_json: list[Path], out: Path | None) -> list[str]:
    """`hrm viz run`: the training and evaluation curves of a run (in RUN_DIR/viz by default)."""
    from hrm_reason.viz.canvas import save_figures
    from hrm_reason.viz.curves import run_figures

    out = viz_out(out or run_dir / "viz")
    return written(save_figures(run_figures(run_dir, eval_json), out))


def test_time_picture(eval_json: Path, out: Path) -> list[str]:
    """`hrm viz test-time`: exact accuracy against total segments, from an hrm eval --json with --tta or --samples."""
    from hrm_reason.viz.canvas import save_figures
    from hrm_reason.viz.curves import compute_figure, read_eval_json

    out = viz_out(out)
    figure = compute_figure(read_eval_json(eval_json), eval_json.stem, str(eval_json))
    return written(save_figures([("test_time.png", figure)], out))


def run_page_file(
    run_dir: Path,
    eval_json: list[Path],
    out: Path | None,
    device: str,
    data: Path | None,
    index: int,
    count: int,
    mmax: int | None,
) -> str:
    """`hrm viz html`: the run's page written (RUN_DIR/viz/index.html by default); the line that says where."""
    from hrm_reason.viz.html import run_page

    VIZ_STRIPS.check(count)
    path = out or run_dir / "viz" / "index.html"
    claim(path, VIZ_PAGE)
    atomic_write_text(path, run_page(run_dir, eval_json, data, index, count, mmax, device))
    return f"wrote {path}"


def arc_task_picture(data: Path, submission: Path, task: str, eval_json: Path | None, out: Path | None) -> list[str]:
    """`hrm viz arc-task`: one ARC task as the model answered it (viz/arc_task_TASK.png by default); the line that says
    whether it is solved, then where the picture went. The inputs are read (one line naming the flag or file at fault)
    and the output claimed before the figure is drawn."""
    from hrm_reason.viz.arc_task import arc_task_figure, read_arc_task
    from hrm_reason.viz.canvas import save_png

    view = read_arc_task(data, submission, task, eval_json)
    path = claim(out or Path("viz") / f"arc_task_{task}.png", VIZ_PICTURE)
    assert path is not None
    save_png(arc_task_figure(view), path)
    return [view.summary, f"wrote {path}"]
