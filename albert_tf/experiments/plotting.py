"""What every PNG of a reproduction run shares: a row of panels, each with its axis labels and legend, a title, a
tight layout, and a file at a small resolution (the README's plots must stay under 1 MB together).

Example:
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "demo.png")
>>> with panels(path, "Demo", [("step", "accuracy (fraction)")]) as (axis,):
...     _ = axis.plot([1, 2], [0.1, 0.2], label="arm")
>>> os.path.getsize(path) > 0
True
"""

import contextlib
from typing import Iterator, Optional, Sequence, Tuple

import matplotlib

matplotlib.use("Agg")  # files only: no display on the machines this runs on
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen before pyplot is imported)

DPI = 80
TITLE_FONT_SIZE = 9
LEGEND_FONT_SIZE = 7


@contextlib.contextmanager
def panels(path: str, title: str, axis_labels: Sequence[Tuple[str, str]], panel_size: Tuple[float, float] = (4, 3.2),
           ylabel_font_size: Optional[float] = None, legend_title: Optional[str] = None) -> Iterator[Sequence]:
    """Yields one matplotlib axis per (xlabel, ylabel) of `axis_labels`, side by side, `panel_size` inches each;
    when the caller has drawn on them, labels each and gives it a legend, titles the figure and saves it to
    `path`. The figure is closed even when drawing fails."""
    width, height = panel_size
    figure, axes = plt.subplots(1, len(axis_labels), figsize=(width * len(axis_labels), height), squeeze=False)
    try:
        yield axes[0]
        for axis, (xlabel, ylabel) in zip(axes[0], axis_labels):
            axis.set_xlabel(xlabel)
            axis.set_ylabel(ylabel, fontsize=ylabel_font_size)
            axis.legend(fontsize=LEGEND_FONT_SIZE, title=legend_title, title_fontsize=LEGEND_FONT_SIZE)
        figure.suptitle(title, fontsize=TITLE_FONT_SIZE)
        figure.tight_layout()
        figure.savefig(path, dpi=DPI)
    finally:
        plt.close(figure)
