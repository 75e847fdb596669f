"""Figures without pyplot: a Figure on an Agg canvas, written as PNG bytes or atomically to a file."""

from __future__ import annotations

import io
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from hrm_reason.atomic import atomic_write_bytes
from hrm_reason.outputs import PNG_MARKER

DPI = 100


def new_figure(width: float, height: float) -> Figure:
    """A figure of width x height inches at DPI; the PNG is exactly (width*DPI, height*DPI) pixels (no tight crop)."""
    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig: Figure) -> bytes:
    """The figure as a 256-colour PNG: these pictures have few colours, and the files are a third of full RGBA. Its
    Software text chunk is our marker (hrm_reason.outputs.PNG_MARKER): a later call replaces its own pictures and
    refuses a folder holding others'."""
    from PIL import Image  # a dependency of matplotlib
    from PIL.PngImagePlugin import PngInfo

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, facecolor="white")
    image = Image.open(buffer).convert("RGB").quantize(colors=256, dither=Image.Dither.NONE)
    info = PngInfo()
    info.add_text("Software", PNG_MARKER.decode())
    out = io.BytesIO()
    image.save(out, format="png", optimize=True, pnginfo=info)
    return out.getvalue()


def save_png(fig: Figure, path: Path) -> Path:
    atomic_write_bytes(path, png_bytes(fig))
    return path


def save_figures(figures: list[tuple[str, Figure]], out_dir: Path) -> list[Path]:
    """Write (file name, figure) pairs under out_dir, each file atomically."""
    return [save_png(fig, Path(out_dir) / name) for name, fig in figures]


def panel_figure(
    n_panels: int,
    ncols: int,
    panel: float,
    *,
    title_h: float = 0.45,
    header: str = "",
    footer: str = "",
    extra_h: float = 0.0,
) -> tuple[Figure, list, float]:
    """A figure with a header line, a grid of square panels (each with room for a title above it), a footer text and
    an optional strip of height extra_h at the bottom; returns the figure, the panel axes and the strip's top (in
    figure fractions, 0 when there is none). Positions are fixed here, so a panel's size is known before drawing."""
    import textwrap

    ncols = max(1, min(ncols, n_panels))
    nrows = -(-n_panels // ncols)
    gap, margin = 0.12, 0.15
    width = 2 * margin + ncols * panel + (ncols - 1) * gap
    chars = max(20, int(width * 72 / (8 * 0.55)))
    footer_lines = textwrap.wrap(footer, chars) if footer else []
    header_h = 0.35 if header else 0.05
    footer_h = 0.08 + 0.16 * len(footer_lines)
    height = header_h + nrows * (title_h + panel) + (nrows - 1) * gap + footer_h + extra_h
    fig = new_figure(width, height)
    if header:
        fig.text(0.5, 1 - 0.2 / height, header, ha="center", va="center", fontsize=11, fontweight="bold")
    axes = []
    for i in range(n_panels):
        r, c = divmod(i, ncols)
        left = margin + c * (panel + gap)
        top = header_h + r * (title_h + panel + gap) + title_h
        axes.append(fig.add_axes((left / width, 1 - (top + panel) / height, panel / width, panel / height)))
    if footer_lines:
        fig.text(
            margin / width,
            (extra_h + footer_h - 0.06) / height,
            "\n".join(footer_lines),
            ha="left",
            va="top",
            fontsize=8,
            color="#444444",
        )
    return fig, axes, extra_h / height
