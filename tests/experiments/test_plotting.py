"""The figure boilerplate the reproduction's plots share: labels, one legend outside the data, title, size and
resolution, and no figure left open; and the experiments' figures beside the paper's, drawn without overlaps."""
import matplotlib.image
import matplotlib.pyplot as plt
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.container import ErrorbarContainer

from albert_tf.experiments.plotting import DPI, panels
from albert_tf.experiments.report import plot_figure


def _renderer(figure):
    """A renderer for a saved and closed figure (closing detaches its canvas), its layout drawn again."""
    FigureCanvasAgg(figure).draw()
    return figure.canvas.get_renderer()


def _overlaps(first, second):
    return not (first.x1 <= second.x0 or second.x1 <= first.x0 or first.y1 <= second.y0 or second.y1 <= first.y0)


def test_panels_label_every_axis_and_save_a_small_png_with_one_legend_below_the_data(tmp_path):
    path = str(tmp_path / "two.png")
    open_before = plt.get_fignums()
    with panels(path, "Two panels", [("step", "accuracy (fraction)"), ("step", "loss (nats)")],
                panel_size=(4, 3), legend_title="arm", note="Measured somewhere.") as axes:
        for axis in axes:
            axis.plot([1, 2], [0.3, 0.2], label="all")
            axis.plot([1, 2], [0.2, 0.1], label="none")
        drawn = list(axes)
    assert [(axis.get_xlabel(), axis.get_ylabel()) for axis in drawn] == [("step", "accuracy (fraction)"),
                                                                         ("step", "loss (nats)")]
    figure = drawn[0].figure
    assert [axis.get_legend() for axis in drawn] == [None, None]
    (legend,) = figure.legends
    assert legend.get_title().get_text() == "arm"
    assert [text.get_text() for text in legend.get_texts()] == ["all", "none"]
    renderer = _renderer(figure)
    box = legend.get_window_extent(renderer)
    assert all(not _overlaps(box, axis.get_tightbbox(renderer)) for axis in drawn)
    assert figure.texts[0].get_text() == "Two panels\nMeasured somewhere."
    height, width, _ = matplotlib.image.imread(path).shape
    assert (width, height) == (2 * 4 * DPI, 3 * DPI)
    assert plt.get_fignums() == open_before


def test_a_caption_wider_than_the_figure_wraps_inside_it(tmp_path):
    caption = ("Ours trained on AMD EPYC (family 26, model 2), Intel(R) Xeon(R) Processor (family 6, model 207) "
               "(2026-12-04 to 2026-12-05).")
    with panels(str(tmp_path / "captioned.png"), "Cross-layer sharing (paper Table 4): learning curves",
                [("step", "accuracy"), ("step", "loss")], panel_size=(4.2, 3.4), note=caption) as axes:
        figure = axes[0].figure
    (title,) = figure.texts
    lines = title.get_text().split("\n")
    assert lines[0] == "Cross-layer sharing (paper Table 4): learning curves"
    assert len(lines) >= 3 and " ".join(lines[1:]) == caption
    box, page = title.get_window_extent(_renderer(figure)), figure.bbox
    assert page.x0 <= box.x0 and box.x1 <= page.x1


def test_a_grid_puts_its_legend_in_the_first_free_cell(tmp_path):
    with panels(str(tmp_path / "grid.png"), "Grid", [("x", "y")] * 3, columns=2) as axes:
        for axis in axes:
            axis.plot([1, 2], [1, 2], label="line")
        figure = axes[0].figure
    free = [axis for axis in figure.axes if axis not in axes]
    assert len(free) == 1 and free[0].get_legend() is not None and not free[0].axison
    assert figure.legends == []


def test_a_plot_that_fails_leaves_no_file_and_no_open_figure(tmp_path):
    path = tmp_path / "broken.png"
    open_before = plt.get_fignums()
    with pytest.raises(ValueError, match="x and y must have same first dimension"):
        with panels(str(path), "Broken", [("x", "y")]) as (axis,):
            axis.plot([1, 2, 3], [1, 2])
    assert not path.exists()
    assert plt.get_fignums() == open_before


def test_a_figure_puts_ours_with_their_intervals_beside_the_papers_and_marks_a_missing_figure(tmp_path, monkeypatch):
    drawn = {}
    original_close = plt.close

    def keep_figure(figure):
        drawn["figure"] = figure
        original_close(figure)

    monkeypatch.setattr(plt, "close", keep_figure)
    spec = {"file": "demo.png", "title": "Demo: each arm minus the reference", "panels": [
        {"kind": "bars", "title": "ours: accuracy", "xlabel": "arm", "ylabel": "points", "categories": ["a", "b"],
         "reference_line": 0.0, "series": [{"label": "ours (paired 95% CI)", "values": [1.0, -2.0],
                                            "errors": [[0.5, 1.0], [0.5, 2.0]], "source": "ours"}]},
        {"kind": "bars", "title": "paper", "xlabel": "arm", "ylabel": "points", "categories": ["a", "b"],
         "series": [{"label": "paper", "values": [0.1, None], "errors": None, "source": "paper"}]}]}
    plot_figure(spec, str(tmp_path / "demo.png"), caption="Ours trained on a test machine (dates not recorded).")
    figure = drawn["figure"]
    ours, paper = figure.axes[:2]
    (error_bars,) = [container for container in ours.containers if isinstance(container, ErrorbarContainer)]
    assert [segment[:, 1].tolist() for segment in error_bars.lines[2][0].get_segments()] == [[0.5, 1.5],
                                                                                             [-3.0, 0.0]]
    assert [patch.get_hatch() for patch in paper.patches] == ["//", "//"]
    assert [text.get_text() for text in paper.texts] == ["no figure"]
    assert "Ours trained on a test machine" in figure.texts[0].get_text()
    renderer = _renderer(figure)
    assert not _overlaps(ours.get_tightbbox(renderer), paper.get_tightbbox(renderer))
    assert all(not _overlaps(figure.legends[0].get_window_extent(renderer), axis.get_tightbbox(renderer))
               for axis in (ours, paper))
