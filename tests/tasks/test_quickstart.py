"""The demo's closing table (albert_tf/tasks/quickstart.py): each metric beside a baseline computed from the data."""
from albert_tf.tasks.quickstart import summary_text


def test_the_table_shows_both_majority_baselines_with_their_source():
    summary = {"output_dir": "/tmp/demo", "seconds": 431,
               "eval": {"masked_lm_accuracy": 0.1453, "sentence_order_accuracy": 0.7841},
               "masked_lm_majority_baseline": {"token_id": 9, "accuracy": 0.0562, "piece": "."},
               "sentence_order_majority_baseline": {"label": 1, "accuracy": 0.5804}}
    assert summary_text(summary).splitlines() == [
        "", "ALBERT demo finished in 431 s; everything is under /tmp/demo", "",
        "| metric (held-out) | ALBERT | trivial baseline |",
        "|---|---|---|",
        "| masked_lm_accuracy | 0.145 | 0.056 (always '.', the most frequent masked training token) |",
        "| sentence_order_accuracy | 0.784 | 0.580 (always 'swapped or random B', the majority label of the held-out "
        "instances) |"]
    summary["sentence_order_majority_baseline"] = {"label": 0, "accuracy": 0.51}
    assert "| 0.510 (always 'in order', the majority label of the held-out instances) |" in summary_text(summary)
