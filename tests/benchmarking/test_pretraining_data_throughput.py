"""Measuring create_pretraining_data: the synthetic corpus, and the generator's rate and memory in a child process."""
import pytest
import tensorflow as tf

from albert_tf.benchmarking.pretraining_data_throughput import measure_throughput, write_synthetic_corpus
from tests.helpers import run_python


def _documents(path):
    with open(path, encoding="utf-8") as handle:
        return [block.splitlines() for block in handle.read().split("\n\n") if block]


def test_synthetic_corpus_is_documents_of_sentences_repeatable_by_seed(tmp_path):
    first = _documents(write_synthetic_corpus(str(tmp_path / "a.txt"), num_documents=30, seed=1))
    again = _documents(write_synthetic_corpus(str(tmp_path / "b.txt"), num_documents=30, seed=1))
    other = _documents(write_synthetic_corpus(str(tmp_path / "c.txt"), num_documents=30, seed=2))
    assert first == again != other
    assert len(first) == 30 and all(4 <= len(document) <= 40 for document in first)
    assert all(sentence[0].isupper() and sentence.endswith(".") for document in first for sentence in document)
    # Corpora of any seed draw from one vocabulary.
    words = [{word.strip(".").lower() for document in corpus for sentence in document for word in sentence.split()}
             for corpus in (first, other)]
    assert len(words[0] & words[1]) > 0.5 * min(map(len, words))


@pytest.mark.slow
def test_measure_throughput_runs_the_generator_in_a_child_and_reports_its_rate_and_peak_memory(tmp_path,
                                                                                              spm_model_file):
    corpus = write_synthetic_corpus(str(tmp_path / "corpus.txt"), num_documents=40)
    result = measure_throughput(corpus, str(tmp_path / "out"), spm_model_file, num_workers=2, num_output_shards=2,
                                max_seq_length=64, max_predictions_per_seq=5, dupe_factor=2)
    shards = [str(tmp_path / "out" / f"measure.tfrecord-0000{index}-of-00002") for index in range(2)]
    assert result["instances"] == sum(sum(1 for _ in tf.data.TFRecordDataset(shard)) for shard in shards) > 0
    assert result["documents"] == 40 and result["num_workers"] == 2
    assert result["instances_per_second"] == result["instances"] / result["seconds"]
    assert result["instances_per_second_per_worker"] == result["instances_per_second"] / 2
    # The child imports TensorFlow to write the summary; PSS shares its libraries' pages with the workers.
    assert result["peak_main_rss_bytes"] > 100e6 and result["peak_pss_bytes"] > 100e6
    assert 50e6 < result["peak_anonymous_bytes"] <= result["peak_pss_bytes"]


@pytest.mark.slow
def test_the_benchmarking_package_imports_neither_data_gen_nor_run_scripts():
    code = ("import sys, albert_tf.benchmarking.pretraining_data_throughput, albert_tf.benchmarking.tables, "
            "albert_tf.benchmarking.workloads\n"
            "print(sorted(name for name in sys.modules if name.split('.')[0] in ('data_gen', 'run_scripts')))")
    result = run_python("-c", code, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "[]"
