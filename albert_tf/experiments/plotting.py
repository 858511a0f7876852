"""What every PNG of a reproduction run shares: a grid of panels, each with its axis labels, one legend for all of
them outside the data, a title, a layout that keeps them apart, and a file at a small resolution (a report's plots
are committed beside it and must stay under about 1 MB together).

Example:
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "demo.png")
>>> with panels(path, "Demo", [("step", "accuracy (fraction)")]) as (axis,):
...     _ = axis.plot([1, 2], [0.1, 0.2], label="arm")
>>> os.path.getsize(path) > 0
True
"""

import contextlib
import math
import textwrap
from typing import Iterator, Optional, Sequence, Tuple

import matplotlib

matplotlib.use("Agg")  # files only: no display on the machines this runs on
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen before pyplot is imported)

DPI = 80
TITLE_FONT_SIZE = 11
PANEL_TITLE_FONT_SIZE = 10
LEGEND_FONT_SIZE = 9


def _fit_to_width(figure, text: str, font_size: float) -> str:
    """`text` wrapped at the most characters a line whose rendered width fits inside `figure` at `font_size` (a
    CPU model's name and parentheses are wider than an average character, so a count per inch overflowed)."""
    renderer = figure.canvas.get_renderer()
    limit = 0.96 * figure.bbox.width
    for characters in range(len(text), 9, -1):
        wrapped = textwrap.fill(text, width=characters)
        probe = figure.text(0, 0, wrapped, fontsize=font_size)
        fits = probe.get_window_extent(renderer).width <= limit
        probe.remove()
        if fits:
            return wrapped
    return textwrap.fill(text, width=10)


@contextlib.contextmanager
def panels(path: str, title: str, axis_labels: Sequence[Tuple[str, str]], panel_size: Tuple[float, float] = (4, 3.2),
           ylabel_font_size: Optional[float] = None, legend_title: Optional[str] = None,
           columns: Optional[int] = None, note: str = "") -> Iterator[Sequence]:
    """Yields one matplotlib axis per (xlabel, ylabel) of `axis_labels`, `columns` to a row (all in one row by
    default), `panel_size` inches each; when the caller has drawn on them, labels each, gathers the labelled lines
    and bars of all of them into one legend (each label once, titled `legend_title`) in the grid's first free cell
    or else below the panels, titles the figure (`note` on a line of its own under the title) and saves it to
    `path`. The figure is closed even when drawing fails."""
    columns = columns or len(axis_labels)
    rows = math.ceil(len(axis_labels) / columns)
    width, height = panel_size
    figure, grid = plt.subplots(rows, columns, figsize=(width * columns, height * rows), squeeze=False,
                                layout="constrained")
    cells = list(grid.flat)
    axes, free = cells[:len(axis_labels)], cells[len(axis_labels):]
    try:
        yield axes
        for axis, (xlabel, ylabel) in zip(axes, axis_labels):
            axis.set_xlabel(xlabel)
            axis.set_ylabel(ylabel, fontsize=ylabel_font_size)
        handles = {}
        for axis in axes:
            for handle, label in zip(*axis.get_legend_handles_labels()):
                handles.setdefault(label, handle)
        for cell in free:
            cell.axis("off")
        if handles:
            legend = dict(fontsize=LEGEND_FONT_SIZE, title=legend_title, title_fontsize=LEGEND_FONT_SIZE)
            if free:
                free[0].legend(handles.values(), handles.keys(), loc="center", **legend)
            else:
                # As many columns as the figure's width holds at about 11 characters of the legend's font to an
                # inch, with the marker and the gap taking about 8 (measured on the report's plots).
                fits = int(11 * width * columns / (max(len(label) for label in handles) + 8))
                figure.legend(handles.values(), handles.keys(), loc="outside lower center",
                              ncol=max(1, min(len(handles), fits)), **legend)
        lines = [_fit_to_width(figure, line, TITLE_FONT_SIZE) for line in (title, note) if line]
        figure.suptitle("\n".join(lines), fontsize=TITLE_FONT_SIZE)
        figure.savefig(path, dpi=DPI)
    finally:
        plt.close(figure)
