"""albert_tf.benchmarking.tflite_variants: the records benchmark_tflite reports (on a tiny encoder; the figures for
ALBERT-base are run_scripts.benchmark_tflite's, in BUILD_NOTES.md)."""
import os

import pytest

from albert_tf.benchmarking.tflite_variants import benchmark_tflite, tflite_table
from tests.helpers import tiny_config


@pytest.mark.slow
def test_benchmark_tflite_reports_size_latency_and_drift(tmp_path):
    config = tiny_config(hidden_size=64, intermediate_size=128, embedding_size=32, num_attention_heads=4,
                         num_hidden_layers=2, max_position_embeddings=32, initializer_range=0.02)
    [record] = benchmark_tflite(str(tmp_path), config, seq_length=16, variants=["int8"], num_runs=3)
    assert record["variant"] == "int8" and record["seq_length"] == 16 and record["num_threads"] == 1
    assert record["bytes"] == os.path.getsize(tmp_path / "encoder_int8.tflite")
    # int8 weights: well under the float32 variables' bytes.
    assert record["bytes"] < 0.7 * record["saved_model_variables_bytes"], record
    assert 0 < record["latency_ms_min"] <= record["latency_ms_median"] <= record["latency_ms_max"]
    assert 0 < record["max_abs_diff/pooled_output"] < 0.1 and 0 < record["max_abs_diff/sequence_output"] < 0.5
    assert "| int8 |" in tflite_table([record])
    with pytest.raises(FileExistsError, match="encoder exists; give an empty --output_dir"):
        benchmark_tflite(str(tmp_path), config, seq_length=16, variants=["int8"])
    with pytest.raises(ValueError, match="seq_length=64 exceeds the config's max_position_embeddings=32"):
        benchmark_tflite(str(tmp_path / "other"), config, seq_length=64)
