"""optimize_onnx (onnxruntime's transformer fusions on our tf2onnx export) and quantize_onnx_dynamic.

The models are a tiny ALBERT encoder exported as export_to_tfhub exports it, converted by `export_mobile --onnx
--onnx_optimize`, and a tiny classifier's serving export (export_saved_model, as run_classifier --export_dir writes
it, its sequence axis open) converted by convert_to_onnx. Their weights are random and distinct
(tests.helpers.randomize): tf2onnx folds away biases of exact zeros and LayerNorm weights of exact ones, which a
model at its initialisation has, and those layers would not fuse.
"""
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertPretrainer
from albert_tf.export import onnx_optimize
from albert_tf.export.mobile import export_mobile_models
from albert_tf.export.onnx_export import convert_to_onnx, onnx_path
from albert_tf.export.onnx_optimize import (int8_onnx_path, optimize_onnx, optimized_onnx_path,
                                            quantize_onnx_dynamic)
from albert_tf.export.serving import export_saved_model
from albert_tf.export.tfhub_encoder import export_encoder
from albert_tf.export.tflite import output_drift, serving_signature
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.tasks.classification_functions import classification_serving_fn
from albert_tf.tokenization import AlbertTokenizer
from tests.helpers import REPO_ROOT, randomize, run_script, tiny_config
from tests.shared_builds import build_once, run_root

NUM_LAYERS = 4
MODEL_SIZES = dict(hidden_size=128, intermediate_size=256, embedding_size=32, num_attention_heads=4,
                   num_hidden_layers=NUM_LAYERS, max_position_embeddings=32)
SEQ_LENGTH = 16
# The classifier: its last block queries position 0 only and stays unfused.
CLASSIFIER_LAYERS = 3
CLASSIFIER_VOCAB_SIZE = 120
ONNX_EXTRA = ("tf2onnx", "onnx", "onnxruntime")
# Where `make onnx` installs the extra; the export_mobile subprocess needs it on its PYTHONPATH.
ONNX_PACKAGES = os.path.join(REPO_ROOT, ".venv", "onnx")


def _missing_onnx_extra():
    missing = []
    for name in ONNX_EXTRA:
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    return missing


def _inputs(seq_length, vocab_size, seed=0):
    """Five rows of word ids, padded at the end to different lengths, with a masked position inside row 1 (the
    fused attention must read the mask as a mask, not as a length) and segment B in the second half."""
    rng = np.random.default_rng(seed)
    lengths = np.array([seq_length, seq_length - 1, seq_length // 2, seq_length - 3, 2])
    mask = (np.arange(seq_length)[None] < lengths[:, None]).astype(np.int32)
    mask[1, 2] = 0
    type_ids = (np.arange(seq_length)[None] >= seq_length // 2).astype(np.int32) * mask
    return {"input_word_ids": rng.integers(5, vocab_size, mask.shape).astype(np.int32) * mask, "input_mask": mask,
            "input_type_ids": type_ids}


def _saved_model_outputs(saved_model_dir, inputs):
    loaded, signature = serving_signature(saved_model_dir)
    outputs = signature(**{name: tf.constant(value) for name, value in inputs.items()})
    del loaded
    return {name: value.numpy() for name, value in outputs.items()}


def _onnxruntime_outputs(model_path, inputs):
    import onnxruntime
    session = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs)))


def _op_counts(model_path):
    import onnx
    counts = {}
    for node in onnx.load(model_path).graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


def _initializer_bytes(model, data_type):
    import onnx
    return sum(onnx.numpy_helper.to_array(initializer).nbytes for initializer in model.graph.initializer
               if initializer.data_type == data_type)


def _skip_without_onnx_extra():
    missing = _missing_onnx_extra()
    if missing:
        reason = f"the onnx extra is not installed ({', '.join(missing)} missing): run `make onnx`"
        print(f"SKIPPED: {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def encoder_export(tmp_path_factory, spm_model_file):
    """The tiny encoder's SavedModel and what `export_mobile --onnx --onnx_optimize` wrote beside it."""
    _skip_without_onnx_extra()

    def build(directory):
        vocab_size = AlbertTokenizer(spm_model_file=spm_model_file).vocab_size
        model = randomize(AlbertPretrainer(tiny_config(vocab_size=vocab_size, **MODEL_SIZES)))
        encoder_dir = export_encoder(model, os.path.join(directory, "encoder"), spm_model_file)
        python_path = os.pathsep.join(filter(None, [ONNX_PACKAGES, os.environ.get("PYTHONPATH")]))
        result = run_script("export_mobile", f"--saved_model_dir={encoder_dir}", "--onnx", "--onnx_optimize",
                            PYTHONPATH=python_path)
        assert result.returncode == 0, result.stderr[-3000:]
        exported = onnx_path(encoder_dir)
        return {"dir": encoder_dir, "onnx": exported, "optimized": optimized_onnx_path(exported),
                "vocab_size": vocab_size, "parameter_bytes": 4 * model.encoder.count_params()}

    return build_once(run_root(tmp_path_factory), "onnx_optimize_encoder", build,
                      str(tmp_path_factory.mktemp("onnx_optimize") / "copy"))


@pytest.mark.slow
def test_every_layer_fuses_into_onnxruntime_kernels(encoder_export):
    exported, optimized = _op_counts(encoder_export["onnx"]), _op_counts(encoder_export["optimized"])
    print(f"optimized ONNX ops: {optimized}")
    assert not {"Attention", "SkipLayerNormalization", "EmbedLayerNormalization", "FastGelu"} & set(exported)
    assert optimized.get("Attention") == NUM_LAYERS, optimized
    assert optimized.get("SkipLayerNormalization") == 2 * NUM_LAYERS, optimized
    assert optimized.get("EmbedLayerNormalization") == 1, optimized
    # The encoder's GELU is the tanh approximation: onnxruntime's FastGelu. Its Gelu is erf's, another function.
    assert optimized.get("FastGelu") == NUM_LAYERS and "Gelu" not in optimized, optimized
    assert not {"Softmax", "LayerNormalization", "GlobalAveragePool", "Pow"} & set(optimized), optimized


@pytest.mark.slow
def test_optimize_onnx_returns_the_fused_counts_and_refuses_to_overwrite(encoder_export):
    with pytest.raises(FileExistsError, match="encoder_optimized.onnx exists; remove it or pass overwrite"):
        optimize_onnx(encoder_export["onnx"])
    path, counts = optimize_onnx(encoder_export["onnx"], overwrite=True)
    assert path == encoder_export["optimized"]
    assert counts == {"Attention": NUM_LAYERS, "EmbedLayerNormalization": 1, "SkipLayerNormalization": 2 * NUM_LAYERS,
                      "FastGelu": NUM_LAYERS}
    assert {op: count for op, count in _op_counts(path).items() if op in counts} == counts


@pytest.mark.slow
def test_the_optimized_model_matches_the_saved_model(encoder_export):
    for seq_length in (SEQ_LENGTH, 9):
        inputs = _inputs(seq_length, encoder_export["vocab_size"])
        reference = _saved_model_outputs(encoder_export["dir"], inputs)
        outputs = _onnxruntime_outputs(encoder_export["optimized"], inputs)
        assert sorted(outputs) == sorted(reference)
        drift = output_drift(reference, outputs)
        print(f"optimized ONNX at sequence length {seq_length}: largest drift {max(drift.values()):.2g}")
        assert max(drift.values()) <= 1e-4, (seq_length, drift)


@pytest.mark.slow
def test_the_optimized_model_keeps_the_shared_weights_once(encoder_export):
    import onnx
    model = onnx.load(encoder_export["optimized"])
    float_bytes = sum(onnx.numpy_helper.to_array(initializer).nbytes for initializer in model.graph.initializer
                      if initializer.data_type == onnx.TensorProto.FLOAT)
    size = os.path.getsize(encoder_export["optimized"])
    print(f"optimized ONNX: {size:,} bytes, float32 initializers {float_bytes:,}, parameters "
          f"{encoder_export['parameter_bytes']:,} bytes")
    # Every layer's Attention reads the one merged QKV weight; a copy per layer would add 3H² floats each.
    assert len({node.input[1] for node in model.graph.node if node.op_type == "Attention"}) == 1
    assert float_bytes == encoder_export["parameter_bytes"]
    assert size <= 1.1 * encoder_export["parameter_bytes"], size


@pytest.mark.slow
def test_the_int8_model_runs_near_the_float_model(encoder_export):
    import onnx
    path = quantize_onnx_dynamic(encoder_export["optimized"], overwrite=True)
    assert path == int8_onnx_path(encoder_export["optimized"]) and path.endswith("encoder_optimized_int8.onnx")
    model = onnx.load(path)
    assert any(initializer.data_type == onnx.TensorProto.INT8 for initializer in model.graph.initializer)
    assert {"QAttention", "QEmbedLayerNormalization"} <= {node.op_type for node in model.graph.node}
    assert os.path.getsize(path) < 0.6 * os.path.getsize(encoder_export["optimized"])
    inputs = _inputs(SEQ_LENGTH, encoder_export["vocab_size"], seed=1)
    reference = _onnxruntime_outputs(encoder_export["optimized"], inputs)
    outputs = _onnxruntime_outputs(path, inputs)
    for name, value in reference.items():
        drift = np.abs(outputs[name] - value)
        largest, mean = drift.max() / np.abs(value).max(), drift.mean() / np.abs(value).mean()
        print(f"int8 {name}: largest drift {largest:.3f} of the largest magnitude, mean drift {mean:.3f} of the "
              "mean magnitude")
        # Quantized weights move the outputs (this random model's by 3-5% on average, up to 17% of the largest
        # pooled value), but not by the order of the outputs themselves, as a wrong computation would.
        assert 1e-6 < mean < 0.1 and largest < 0.3, (name, largest, mean)


@pytest.fixture(scope="module")
def classifier_export(tmp_path_factory):
    """A tiny random classifier's serving SavedModel, its ONNX model and that model optimized."""
    _skip_without_onnx_extra()

    def build(directory):
        model = AlbertClassifier(tiny_config(vocab_size=CLASSIFIER_VOCAB_SIZE,
                                             **dict(MODEL_SIZES, num_hidden_layers=CLASSIFIER_LAYERS)),
                                 num_labels=2, dropout_rate=0.0)
        model({name: tf.zeros([1, 2], tf.int32) for name in INPUT_NAMES}, training=False)
        randomize(model)
        sequence = tf.TensorSpec([None, None], tf.int32)
        export_dir = export_saved_model(model, {name: sequence for name in INPUT_NAMES}, classification_serving_fn,
                                        os.path.join(directory, "classifier"))
        exported = convert_to_onnx(export_dir)
        optimized, counts = optimize_onnx(exported)
        return {"dir": export_dir, "onnx": exported, "optimized": optimized, "counts": counts,
                "parameter_bytes": 4 * model.count_params(), "hidden_size": MODEL_SIZES["hidden_size"]}

    return build_once(run_root(tmp_path_factory), "onnx_optimize_classifier", build,
                      str(tmp_path_factory.mktemp("onnx_optimize_classifier") / "copy"))


def _weight_slices(model):
    """{consumer op type: sorted [(merged initializer, start)]} of the inputs read through a Slice of an
    initializer."""
    import onnx
    initializers = {initializer.name for initializer in model.graph.initializer}
    constants = {initializer.name: onnx.numpy_helper.to_array(initializer).tolist()
                 for initializer in model.graph.initializer}
    slices = {node.output[0]: (node.input[0], constants[node.input[1]][0]) for node in model.graph.node
              if node.op_type == "Slice" and node.input[0] in initializers}
    read = {}
    for node in model.graph.node:
        read.setdefault(node.op_type, []).extend(slices[name] for name in node.input if name in slices)
    return {op_type: sorted(names) for op_type, names in read.items() if names}


@pytest.mark.slow
def test_the_optimized_classifier_keeps_the_shared_weights_once(classifier_export):
    import onnx
    assert classifier_export["counts"] == {"Attention": CLASSIFIER_LAYERS - 1, "EmbedLayerNormalization": 1,
                                           "SkipLayerNormalization": 2 * CLASSIFIER_LAYERS,
                                           "FastGelu": CLASSIFIER_LAYERS}
    model = onnx.load(classifier_export["optimized"])
    (weight, bias), = {tuple(node.input[1:3]) for node in model.graph.node if node.op_type == "Attention"}
    # The unfused last block's Q, K and V projections multiply by the merged weight's thirds and add its bias's.
    width = classifier_export["hidden_size"]
    thirds = [0, width, 2 * width]
    assert _weight_slices(model) == {"MatMul": [(weight, start) for start in thirds],
                                     "Add": [(bias, start) for start in thirds]}
    float_bytes, size = _initializer_bytes(model, onnx.TensorProto.FLOAT), os.path.getsize(
        classifier_export["optimized"])
    print(f"optimized classifier ONNX: {size:,} bytes (as exported {os.path.getsize(classifier_export['onnx']):,}), "
          f"float32 initializers {float_bytes:,}, parameters {classifier_export['parameter_bytes']:,} bytes")
    # Beside the parameters, a few scalars of the unfused block (its scale, the mask's constants); a second copy of
    # the Q, K and V weights would add 3H² floats.
    assert classifier_export["parameter_bytes"] <= float_bytes < classifier_export["parameter_bytes"] + 4 * width
    assert size <= 1.1 * classifier_export["parameter_bytes"], size


@pytest.mark.slow
def test_without_the_slices_the_optimized_classifier_holds_the_projections_twice(classifier_export, tmp_path,
                                                                                   monkeypatch):
    """What the test above guards against: the last block stays unfused, and its own Q, K and V weights, beside
    the merged ones, break the size bound."""
    import onnx
    monkeypatch.setattr(onnx_optimize, "_slices_of_merged_weights", lambda graph: 0)
    exported = str(tmp_path / "classifier.onnx")
    with open(classifier_export["onnx"], "rb") as source, open(exported, "wb") as copy:
        copy.write(source.read())
    path, counts = optimize_onnx(exported)
    assert counts == classifier_export["counts"]
    width = classifier_export["hidden_size"]
    assert _initializer_bytes(onnx.load(path), onnx.TensorProto.FLOAT) >= (
        classifier_export["parameter_bytes"] + 4 * (3 * width * width + 3 * width))
    assert os.path.getsize(path) > 1.1 * classifier_export["parameter_bytes"]


@pytest.mark.slow
def test_the_optimized_classifier_matches_the_saved_model(classifier_export):
    for seq_length in (SEQ_LENGTH, 9):
        inputs = _inputs(seq_length, CLASSIFIER_VOCAB_SIZE)
        reference = _saved_model_outputs(classifier_export["dir"], inputs)
        outputs = _onnxruntime_outputs(classifier_export["optimized"], inputs)
        assert sorted(outputs) == sorted(reference) == ["logits", "probabilities"]
        drift = output_drift(reference, outputs)
        print(f"optimized classifier ONNX at sequence length {seq_length}: drift {drift}")
        assert max(drift.values()) <= 1e-5, (seq_length, drift)


def _qattention_weight_scales(model):
    """The shape of each QAttention's weight scale (its fifth input)."""
    import onnx
    initializers = {initializer.name: initializer for initializer in model.graph.initializer}
    return {tuple(onnx.numpy_helper.to_array(initializers[node.input[4]]).shape)
            for node in model.graph.node if node.op_type == "QAttention"}


@pytest.mark.slow
def test_the_int8_classifier_quantizes_the_shared_weights_once(classifier_export):
    import onnx
    hidden_size = MODEL_SIZES["hidden_size"]
    per_tensor = onnx.load(quantize_onnx_dynamic(classifier_export["optimized"], overwrite=True, per_channel=False))
    assert _qattention_weight_scales(per_tensor) == {()}
    path = quantize_onnx_dynamic(classifier_export["optimized"], overwrite=True)
    model = onnx.load(path)
    # By default a scale per output column of the merged QKV weight.
    assert _qattention_weight_scales(model) == {(3 * hidden_size,)}
    # The last block's projections are int8 products by the fused layers' int8 QKV weight: no float copy of it.
    int8_weights = {node.input[1] for node in model.graph.node if node.op_type == "QAttention"}
    assert len(int8_weights) == 1
    assert [node.op_type for node in model.graph.node if int8_weights & set(node.input)].count("MatMulInteger") == 2
    assert "MatMul" not in {node.op_type for node in model.graph.node if set(node.input) & {
        initializer.name for initializer in model.graph.initializer if len(initializer.dims) == 2}}
    float_bytes, int8_bytes = (_initializer_bytes(model, data_type)
                               for data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.INT8))
    print(f"int8 classifier ONNX: {os.path.getsize(path):,} bytes, int8 initializers {int8_bytes:,}, float32 "
          f"{float_bytes:,}")
    # float32 holds the biases, the LayerNorms and a scale per output column: at H=128 under a tenth of the int8
    # bytes (a float copy of a weight matrix would be four times them).
    assert int8_bytes <= classifier_export["parameter_bytes"] // 4 and float_bytes < 0.1 * int8_bytes
    inputs = _inputs(SEQ_LENGTH, CLASSIFIER_VOCAB_SIZE, seed=1)
    reference = _onnxruntime_outputs(classifier_export["optimized"], inputs)["logits"]
    logits = _onnxruntime_outputs(path, inputs)["logits"]
    drift = np.abs(logits - reference)
    largest, mean = drift.max() / np.abs(reference).max(), drift.mean() / np.abs(reference).mean()
    print(f"int8 classifier logits: largest drift {largest:.3f} of the largest magnitude, mean drift {mean:.3f} of "
          "the mean magnitude")
    assert 1e-6 < mean < 0.2 and largest < 0.3, (largest, mean)


def test_onnx_optimize_needs_the_onnx_model_and_the_extra(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match=r"onnx_optimize \(--onnx_optimize\) fuses the ONNX model, which only onnx"):
        export_mobile_models(str(tmp_path / "export"), onnx_optimize=True)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(ValueError, match="needs onnx and onnxruntime, the `onnx` extra: run `make onnx`"):
        optimize_onnx(str(tmp_path / "export.onnx"))
    with pytest.raises(ValueError, match="needs onnx and onnxruntime, the `onnx` extra: run `make onnx`"):
        quantize_onnx_dynamic(str(tmp_path / "export.onnx"))
