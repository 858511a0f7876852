"""The pure, balanced SOP and NSP evaluation sets (albert_tf/experiments/datasets/sentence_pair_eval.py)."""
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.experiments.datasets.sentence_pair_eval import write_sentence_pair_eval_set
from tests.helpers import write_corpus

SEQ, PREDICTIONS = 48, 6


def _records(path):
    spec = {name: tf.io.FixedLenFeature([SEQ], tf.int64) for name in ("input_ids", "segment_ids")}
    spec["next_sentence_labels"] = tf.io.FixedLenFeature([1], tf.int64)
    spec["masked_lm_weights"] = tf.io.FixedLenFeature([PREDICTIONS], tf.float32)
    spec["masked_lm_positions"] = tf.io.FixedLenFeature([PREDICTIONS], tf.int64)
    return [{key: value.numpy() for key, value in tf.io.parse_single_example(record, spec).items()}
            for record in tf.data.TFRecordDataset(path)]


def _segment_lengths(record):
    length = int((record["input_ids"] != 0).sum())
    b_length = int(record["segment_ids"][:length].sum()) - 1
    return length - b_length - 3, b_length


@pytest.mark.parametrize("task", ["sop", "nsp"])
def test_each_pair_gives_one_record_per_label(tmp_path, spm_model_file, task):
    corpus = write_corpus(str(tmp_path / "holdout.txt"), num_documents=20, seed=3)
    counts = write_sentence_pair_eval_set(corpus, str(tmp_path / f"{task}.tfrecord"), spm_model_file, task,
                                          max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS)
    records = _records(str(tmp_path / f"{task}.tfrecord"))
    assert counts["pairs"] > 10 and counts["label_0"] == counts["label_1"] == counts["pairs"]
    assert len(records) == 2 * counts["pairs"]
    assert counts["masked_lm_predictions"] == sum(int(record["masked_lm_weights"].sum()) for record in records)
    for in_order, other in zip(records[0::2], records[1::2]):
        assert (int(in_order["next_sentence_labels"][0]), int(other["next_sentence_labels"][0])) == (0, 1)
        first_a, first_b = _segment_lengths(in_order)
        assert first_a > 0 and first_b > 0
        # SOP swaps the two segments; NSP keeps A and replaces B by as many tokens of another document.
        if task == "sop":
            assert _segment_lengths(other) == (first_b, first_a)
        else:
            assert _segment_lengths(other)[0] == first_a
            unmasked = np.setdiff1d(np.arange(1, first_a + 1),
                                    np.concatenate([in_order["masked_lm_positions"], other["masked_lm_positions"]]))
            np.testing.assert_array_equal(other["input_ids"][unmasked], in_order["input_ids"][unmasked])


def test_unknown_task_and_pairless_text_are_errors(tmp_path, spm_model_file):
    one_sentence_documents = tmp_path / "short.txt"
    one_sentence_documents.write_text("A lone sentence here.\n\nAnother lone sentence.\n", encoding="utf-8")
    with pytest.raises(ValueError, match="task='mlm' is not a sentence-pair task; allowed: sop, nsp"):
        write_sentence_pair_eval_set(str(one_sentence_documents), str(tmp_path / "x"), spm_model_file, "mlm",
                                     max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS)
    with pytest.raises(ValueError, match="no document has two sentences, so there is no sop pair"):
        write_sentence_pair_eval_set(str(one_sentence_documents), str(tmp_path / "x"), spm_model_file, "sop",
                                     max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS)


def test_ram_input_and_output_give_the_local_bytes(tmp_path, spm_model_file, ram_root):
    corpus = write_corpus(str(tmp_path / "holdout.txt"), num_documents=20, seed=3)
    tf.io.gfile.copy(corpus, f"{ram_root}/holdout.txt")
    local = write_sentence_pair_eval_set(corpus, str(tmp_path / "sop.tfrecord"), spm_model_file, "sop",
                                         max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS)
    remote = write_sentence_pair_eval_set(f"{ram_root}/holdout.txt", f"{ram_root}/eval/sop.tfrecord", spm_model_file,
                                          "sop", max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS)
    assert remote == local
    with tf.io.gfile.GFile(f"{ram_root}/eval/sop.tfrecord", "rb") as handle:
        assert handle.read() == (tmp_path / "sop.tfrecord").read_bytes()
    assert tf.io.gfile.listdir(f"{ram_root}/eval") == ["sop.tfrecord"]
