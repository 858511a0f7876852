"""TFLite (float32, dynamic-range int8, float16) and ONNX models of the exported SavedModels.

The fine-tuned classifier is a tiny AlbertClassifier trained for real on a separable task (the label decides which
half of the vocabulary most tokens come from), so its test-set predictions have margins that a broken conversion
would flip; it is exported as a fine-tuning script's --export_dir does, then converted by export_mobile. The encoder
comes from export_to_tfhub --tflite.
"""
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertClassifier, AlbertPretrainer
from albert_tf.checkpoints import writing
from albert_tf.export.mobile import export_mobile_models
from albert_tf.export.onnx_export import convert_to_onnx
from albert_tf.export.serving import export_saved_model
from albert_tf.export.tflite import (ENCODER_TFLITE_OUTPUTS, TFLITE_VARIANTS, convert_to_tflite, output_drift,
                                     run_tflite, serving_signature, tflite_path)
from albert_tf.tasks.classification_functions import classification_serving_fn
from albert_tf.tokenization import AlbertTokenizer
from tests.helpers import run_script, tiny_config

SEQ_LENGTH = 16
VOCAB_SIZE = 60
NUM_TEST_EXAMPLES = 256
# Wide enough that the kernels pass the converter's size threshold for quantization (1,024 elements).
MODEL_SIZES = dict(hidden_size=64, intermediate_size=128, embedding_size=32, num_attention_heads=4,
                   num_hidden_layers=2, max_position_embeddings=32, initializer_range=0.02)
INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
MINIMUM_AGREEMENT = 0.99
# How far each variant's weights are stored from float32: the dtype the quantized model must hold.
WEIGHT_DTYPES = {"int8": np.int8, "float16": np.float16}
# Every test reads the trained classifier or the exported encoder (a subprocess each).
pytestmark = pytest.mark.slow


def _separable_task(num_examples, seed):
    """[CLS] and then tokens of which 75% come from 10-29 (label 0) or 30-49 (label 1), the rest from anywhere;
    lengths between half and all of SEQ_LENGTH, padded with 0."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, num_examples)
    noise = rng.integers(5, VOCAB_SIZE, (num_examples, SEQ_LENGTH))
    signal = np.where(labels[:, None] == 0, rng.integers(10, 30, noise.shape), rng.integers(30, 50, noise.shape))
    words = np.where(rng.random(noise.shape) < 0.75, signal, noise)
    words[:, 0] = 2
    lengths = rng.integers(SEQ_LENGTH // 2, SEQ_LENGTH + 1, num_examples)
    mask = (np.arange(SEQ_LENGTH)[None] < lengths[:, None]).astype(np.int32)
    inputs = {"input_word_ids": np.where(mask == 1, words, 0).astype(np.int32), "input_mask": mask,
              "input_type_ids": np.zeros_like(mask)}
    return inputs, labels.astype(np.int32)


def _saved_model_outputs(saved_model_dir, inputs):
    loaded, signature = serving_signature(saved_model_dir)
    outputs = _signature_outputs(signature, inputs)
    del loaded
    return outputs


def _signature_outputs(signature, inputs):
    outputs = signature(**{name: tf.constant(value) for name, value in inputs.items()})
    return {name: value.numpy() for name, value in outputs.items()}


def _tensor_dtypes(model_path):
    return {details["dtype"] for details in tf.lite.Interpreter(model_path=model_path).get_tensor_details()}


@pytest.fixture(scope="module")
def classifier_export(tmp_path_factory):
    """A classifier fine-tuned for 40 steps, its serving export, the test set and the SavedModel's outputs."""
    keras.utils.set_random_seed(0)
    config = tiny_config(vocab_size=VOCAB_SIZE, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                         **MODEL_SIZES)
    model = AlbertClassifier(config, num_labels=2, dropout_rate=0.0)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), jit_compile=False,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    train_inputs, train_labels = _separable_task(40 * 32, seed=0)
    model.fit(train_inputs, train_labels, batch_size=32, epochs=1, steps_per_epoch=40, verbose=0)
    export_dir = str(tmp_path_factory.mktemp("classifier") / "export")
    sequence = tf.TensorSpec([None, SEQ_LENGTH], tf.int32)
    export_saved_model(model, {name: sequence for name in INPUT_NAMES}, classification_serving_fn, export_dir)
    test_inputs, test_labels = _separable_task(NUM_TEST_EXAMPLES, seed=1)
    return {"dir": export_dir, "inputs": test_inputs, "labels": test_labels,
            "outputs": _saved_model_outputs(export_dir, test_inputs)}


@pytest.fixture(scope="module")
def classifier_tflite(classifier_export):
    """export_mobile --tflite's models of the classifier export: {variant: path}."""
    result = run_script("export_mobile", f"--saved_model_dir={classifier_export['dir']}", "--tflite")
    assert result.returncode == 0, result.stderr[-3000:]
    return {variant: tflite_path(classifier_export["dir"], variant) for variant in TFLITE_VARIANTS}


@pytest.fixture(scope="module")
def encoder_export(tmp_path_factory, spm_model_file):
    """export_to_tfhub --tflite of a tiny pretrainer's checkpoint, two of the variants (the classifier's test runs
    all three), at the preprocessor's --seq_length: the encoder directory."""
    directory = tmp_path_factory.mktemp("hub_tflite")
    config = tiny_config(vocab_size=AlbertTokenizer(spm_model_file=spm_model_file).vocab_size, **MODEL_SIZES)
    checkpoint = writing.save_weights(AlbertPretrainer(config), str(directory / "ckpt" / "model"), format="native")
    config_file = str(directory / "albert_config.json")
    config.to_json_file(config_file)
    result = run_script("export_to_tfhub", f"--init_checkpoint={checkpoint}", f"--albert_config_file={config_file}",
                        f"--spm_model_file={spm_model_file}", f"--export_path={directory / 'hub'}", "--tflite",
                        "--tflite_variants=float32,int8", f"--seq_length={SEQ_LENGTH}")
    assert result.returncode == 0, result.stderr[-3000:]
    return str(directory / "hub" / "encoder")


@pytest.fixture(scope="module")
def encoder_signature(encoder_export):
    """The encoder SavedModel's serving_default, loaded once for the tests that take it as the reference."""
    loaded, signature = serving_signature(encoder_export)
    yield signature
    del loaded


def test_classifier_tflite_variants_keep_the_saved_models_predictions(classifier_export, classifier_tflite):
    reference = classifier_export["outputs"]
    accuracy = np.mean(np.argmax(reference["logits"], -1) == classifier_export["labels"])
    margins = np.abs(reference["logits"][:, 0] - reference["logits"][:, 1])
    print(f"SavedModel: accuracy {accuracy:.4f}, median logit margin {np.median(margins):.2f}")
    assert accuracy >= 0.95 and np.median(margins) > 1.0, (accuracy, np.median(margins))
    sizes = {variant: tf.io.gfile.stat(path).length for variant, path in classifier_tflite.items()}
    for variant, path in classifier_tflite.items():
        outputs = run_tflite(path, classifier_export["inputs"], num_threads=1)
        drift = output_drift(reference, outputs, prediction_output="logits")
        print(f"{variant}: {sizes[variant]:,} bytes, drift {drift}")
        assert sorted(outputs) == ["logits", "probabilities"]
        if variant == "float32":
            assert drift["max_abs_diff/logits"] <= 1e-4 and drift["max_abs_diff/probabilities"] <= 1e-4, drift
            assert drift["prediction_agreement"] == 1.0
        else:
            # The quantized model holds quantized weights and computes other numbers, yet keeps the predictions.
            assert WEIGHT_DTYPES[variant] in _tensor_dtypes(path)
            assert drift["max_abs_diff/logits"] > 1e-6, drift
            assert drift["prediction_agreement"] >= MINIMUM_AGREEMENT, drift
    assert sizes["int8"] < 0.6 * sizes["float32"] and sizes["float16"] < 0.7 * sizes["float32"], sizes


def test_prediction_agreement_catches_shuffled_outputs(classifier_export):
    reference = classifier_export["outputs"]
    assert output_drift(reference, reference, prediction_output="logits") == {
        "max_abs_diff/logits": 0.0, "max_abs_diff/probabilities": 0.0, "prediction_agreement": 1.0}
    # A conversion that scrambled which input each output belongs to keeps the output distribution.
    order = np.random.default_rng(0).permutation(NUM_TEST_EXAMPLES)
    shuffled = {name: value[order] for name, value in reference.items()}
    agreement = output_drift(reference, shuffled, prediction_output="logits")["prediction_agreement"]
    assert agreement < MINIMUM_AGREEMENT and 0.3 < agreement < 0.7, agreement
    one_flipped = {name: value.copy() for name, value in reference.items()}
    one_flipped["logits"][0] = one_flipped["logits"][0, ::-1]
    assert output_drift(reference, one_flipped, prediction_output="logits")["prediction_agreement"] == (
        1 - 1 / NUM_TEST_EXAMPLES)
    with pytest.raises(ValueError, match="prediction_output='label'"):
        output_drift(reference, reference, prediction_output="label")


def test_tflite_conversion_refuses_bad_requests(classifier_export, tmp_path):
    export_dir = classifier_export["dir"]
    with pytest.raises(ValueError, match="tflite_variants has 'int4'; the variants are float32, int8, float16"):
        convert_to_tflite(export_dir, ["float32", "int4"])
    with pytest.raises(ValueError, match=f"tflite_seq_length=32 differs .* fixed sequence length {SEQ_LENGTH}"):
        convert_to_tflite(export_dir, ["float32"], seq_length=32, overwrite=True)
    with pytest.raises(ValueError, match="has no output 'pooled_output'; it has logits, probabilities"):
        convert_to_tflite(export_dir, ["float32"], output_names=["pooled_output"], overwrite=True)
    with pytest.raises(ValueError, match="Nothing to convert"):
        export_mobile_models(export_dir)
    existing = tmp_path / "model"
    existing.mkdir()
    (tmp_path / "model_int8.tflite").write_bytes(b"kept")
    with pytest.raises(FileExistsError, match="model_int8.tflite exists; remove it or pass overwrite"):
        export_mobile_models(str(existing), TFLITE_VARIANTS)
    assert (tmp_path / "model_int8.tflite").read_bytes() == b"kept"
    assert not (tmp_path / "model_float32.tflite").exists()


def test_export_to_tfhub_writes_the_encoder_as_tflite(encoder_export, encoder_signature):
    inputs, _ = _separable_task(8, seed=2)
    inputs["input_word_ids"] = inputs["input_word_ids"] * 2  # the spm model's 120 ids, not the task's 60
    inputs["input_type_ids"][:, SEQ_LENGTH // 2:] = inputs["input_mask"][:, SEQ_LENGTH // 2:]
    reference = _signature_outputs(encoder_signature, inputs)
    assert not tf.io.gfile.exists(tflite_path(encoder_export, "float16"))
    for variant in ("float32", "int8"):
        path = tflite_path(encoder_export, variant)
        interpreter = tf.lite.Interpreter(model_path=path)
        signature = interpreter.get_signature_list()["serving_default"]
        assert sorted(signature["inputs"]) == sorted(INPUT_NAMES)
        assert sorted(signature["outputs"]) == sorted(ENCODER_TFLITE_OUTPUTS)
        details = interpreter.get_signature_runner().get_input_details()["input_word_ids"]
        assert list(details["shape_signature"]) == [-1, SEQ_LENGTH]
        drift = output_drift(reference, run_tflite(path, inputs))
        print(f"encoder {variant}: drift {drift}")
        limit = 1e-4 if variant == "float32" else 0.1
        assert max(drift.values()) <= limit, (variant, drift)
    with pytest.raises(ValueError, match=r"'s input 'input_\w+' takes \[batch, 16\]; got shape \[8, 12\]"):
        run_tflite(tflite_path(encoder_export, "float32"),
                   {name: value[:, :12] for name, value in inputs.items()})


def _onnxruntime_outputs(model_path, inputs):
    import onnxruntime
    session = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(names, dict(inputs))))


def test_onnx_models_match_the_saved_models(classifier_export, encoder_export, encoder_signature, tmp_path):
    missing = [name for name in ("tf2onnx", "onnx", "onnxruntime") if _absent(name)]
    if missing:
        reason = f"the onnx extra is not installed ({', '.join(missing)} missing): run `make onnx`"
        print(f"SKIPPED: {reason}")
        pytest.skip(reason)
    path = convert_to_onnx(classifier_export["dir"])
    drift = output_drift(classifier_export["outputs"], _onnxruntime_outputs(path, classifier_export["inputs"]),
                         prediction_output="logits")
    print(f"classifier ONNX: drift {drift}")
    assert max(value for name, value in drift.items() if name.startswith("max_abs")) <= 1e-4, drift
    assert drift["prediction_agreement"] == 1.0
    # The encoder's ONNX model keeps the SavedModel's dynamic batch and sequence axes and all its outputs.
    path = export_mobile_models(encoder_export, onnx=True)["onnx"]
    for seq_length in (SEQ_LENGTH, 9):
        inputs = {name: value[:5, :seq_length] for name, value in _separable_task(8, seed=3)[0].items()}
        reference = _signature_outputs(encoder_signature, inputs)
        outputs = _onnxruntime_outputs(path, inputs)
        assert sorted(outputs) == sorted(reference)
        drift = output_drift(reference, outputs)
        print(f"encoder ONNX at sequence length {seq_length}: largest drift {max(drift.values()):.2g}")
        assert max(drift.values()) <= 1e-4, (seq_length, drift)


def _absent(module):
    try:
        __import__(module)
    except ImportError:
        return True
    return False


def test_onnx_export_without_the_extra_says_how_to_install_it(classifier_export, monkeypatch):
    monkeypatch.setitem(sys.modules, "tf2onnx", None)
    with pytest.raises(ValueError, match="needs tf2onnx, the `onnx` extra: run `make onnx`"):
        export_mobile_models(classifier_export["dir"], ["float32"], onnx=True, overwrite=True)
