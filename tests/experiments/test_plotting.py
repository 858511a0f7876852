"""The figure boilerplate the reproduction's plots share: labels, legends, title, size and resolution, and no
figure left open."""
import matplotlib.image
import matplotlib.pyplot as plt
import pytest

from albert_tf.experiments.plotting import DPI, panels


def test_panels_label_every_axis_and_save_a_small_png(tmp_path):
    path = str(tmp_path / "two.png")
    open_before = plt.get_fignums()
    with panels(path, "Two panels", [("step", "accuracy (fraction)"), ("step", "loss (nats)")],
                panel_size=(4, 3), legend_title="arm") as axes:
        for axis in axes:
            axis.plot([1, 2], [0.3, 0.2], label="all")
        drawn = list(axes)
    assert [(axis.get_xlabel(), axis.get_ylabel()) for axis in drawn] == [("step", "accuracy (fraction)"),
                                                                         ("step", "loss (nats)")]
    assert [axis.get_legend().get_title().get_text() for axis in drawn] == ["arm", "arm"]
    assert drawn[0].figure.texts[0].get_text() == "Two panels"
    height, width, _ = matplotlib.image.imread(path).shape
    assert (width, height) == (2 * 4 * DPI, 3 * DPI)
    assert plt.get_fignums() == open_before


def test_a_plot_that_fails_leaves_no_file_and_no_open_figure(tmp_path):
    path = tmp_path / "broken.png"
    open_before = plt.get_fignums()
    with pytest.raises(ValueError, match="x and y must have same first dimension"):
        with panels(str(path), "Broken", [("x", "y")]) as (axis,):
            axis.plot([1, 2, 3], [1, 2])
    assert not path.exists()
    assert plt.get_fignums() == open_before
