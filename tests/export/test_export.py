"""TF-Hub-style export: the script, and loading by tf.saved_model, Keras 3 TFSMLayer, tensorflow_hub.KerasLayer
(tf_keras) and saved_model_cli; fine-tuning from the export; a raw-text classifier SavedModel.

The *_SNIPPET constants are read from docs/export.md: the tests run exactly the guide's text (shell snippets through
bash with the variables they name, Python snippets with `export_path` defined).
"""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertClassifier, AlbertPretrainer
from albert_tf.checkpoints import writing
from albert_tf.checkpoints.hub_module import VARIABLES_BY_TF1_NAME, load_encoder_weights, read_hub_module
from albert_tf.checkpoints.tf1_names import model_variable_map
from albert_tf.export.preprocessor import AlbertPreprocessor
from albert_tf.export.text_classifier import (_RawTextClassifier, export_classifier_with_preprocessor,
                                              packed_length)
from albert_tf.export.tfhub_encoder import export_hub_modules
from albert_tf.tokenization import AlbertTokenizer
from tests.helpers import REPO_ROOT, guide_snippet, run_python, run_script, tiny_config

EXPORT_SNIPPET = guide_snippet("export")
LOAD_SNIPPET = guide_snippet("saved_model_load")
TFSM_LAYER_SNIPPET = guide_snippet("tfsm_layer")
HUB_KERAS_LAYER_SNIPPET = guide_snippet("hub_keras_layer")
SAVED_MODEL_CLI_SNIPPET = guide_snippet("saved_model_cli")

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
# Softmax ignores a bias added to every key, so its gradient is zero up to rounding.
KEY_BIAS = "bert/encoder/transformer/group_0/inner_group_0/attention_1/self/key/bias"
_VENV_BIN = os.path.dirname(sys.executable)


def _run_bash(script, **variables):
    env = dict(os.environ, PATH=_VENV_BIN + os.pathsep + os.environ["PATH"], TF_CPP_MIN_LOG_LEVEL="2",
               **variables)
    result = subprocess.run(["bash", "-e", "-c", script], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def _example_inputs():
    return {"input_word_ids": np.array([[2, 10, 11, 12, 3, 0], [2, 20, 3, 21, 22, 3]], np.int32),
            "input_mask": np.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]], np.int32),
            "input_type_ids": np.array([[0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1]], np.int32)}


@pytest.fixture(scope="module")
def exported(tmp_path_factory, spm_model_file):
    """A tiny pretrainer, its native checkpoint, and the export script's output for them."""
    directory = tmp_path_factory.mktemp("hub_export")
    config = tiny_config(vocab_size=AlbertTokenizer(spm_model_file=spm_model_file).vocab_size, hidden_size=32,
                         num_hidden_layers=3, intermediate_size=48, embedding_size=16, max_position_embeddings=128,
                         initializer_range=0.02, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    pretrainer = AlbertPretrainer(config)
    checkpoint = writing.save_weights(pretrainer, str(directory / "ckpt" / "model"), format="native")
    config_file = str(directory / "albert_config.json")
    config.to_json_file(config_file)
    export_path = str(directory / "hub")
    _run_bash(EXPORT_SNIPPET, CHECKPOINT=checkpoint, ALBERT_CONFIG=config_file, SPM_MODEL=spm_model_file,
              EXPORT_PATH=export_path)
    return {"directory": directory, "pretrainer": pretrainer, "spm_model": spm_model_file, "export_path": export_path}


@pytest.fixture(scope="module")
def fine_tuned_export(exported):
    """export_to_tfhub of a fine-tuned classifier's checkpoint directory with --digit_comma_rule=drop_added_marker:
    one script run for the tests of both (the classifier and the export path)."""
    directory = exported["directory"] / "fine_tuned"
    classifier = AlbertClassifier(exported["pretrainer"].config, num_labels=3)
    writing.save_weights(classifier, str(directory / "ckpt" / "model"), format="native")
    export_path = str(directory / "hub")
    result = run_script("export_to_tfhub", f"--init_checkpoint={directory / 'ckpt'}",
                        f"--albert_config_file={exported['directory'] / 'albert_config.json'}",
                        f"--spm_model_file={exported['spm_model']}", f"--export_path={export_path}",
                        "--digit_comma_rule=drop_added_marker")
    assert result.returncode == 0, result.stderr[-3000:]
    return {"classifier": classifier, "export_path": export_path}


@pytest.fixture(scope="module")
def loaded(exported):
    """The namespace LOAD_SNIPPET leaves: the loaded encoder and preprocessor and what it computed."""
    namespace = {"export_path": exported["export_path"]}
    exec(LOAD_SNIPPET, namespace)
    return namespace


@pytest.mark.slow
def test_export_writes_encoder_and_preprocessor_with_assets(exported):
    encoder_dir = os.path.join(exported["export_path"], "encoder")
    assert sorted(os.listdir(os.path.join(encoder_dir, "assets"))) == ["albert_config.json", "spm.model"]
    assert os.path.exists(os.path.join(exported["export_path"], "preprocessor", "saved_model.pb"))
    # Each variable is saved once: the encoder's (dropout seeds included), the masked-LM head's, the flag.
    pretrainer = exported["pretrainer"]
    keys = [name for name, _ in tf.train.list_variables(os.path.join(encoder_dir, "variables", "variables"))
            if name.endswith("VARIABLE_VALUE")]
    assert len(keys) == len(pretrainer.encoder.variables) + len(pretrainer.masked_lm_head.variables) + 1


@pytest.mark.slow
def test_saved_model_holds_no_keras_objects(exported):
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(exported["export_path"], "encoder", "saved_model.pb"), "rb") as handle:
        proto.ParseFromString(handle.read())
    identifiers = {node.user_object.identifier for node in proto.meta_graphs[0].object_graph_def.nodes
                   if node.WhichOneof("kind") == "user_object"}
    # TensorFlow's own object kinds only: nothing that needs Keras (or albert_tf) to be revived.
    assert identifiers <= {"_generic_user_object", "signature_map", "trackable_dict_wrapper",
                           "trackable_list_wrapper"}


@pytest.mark.slow
def test_tf_saved_model_load_matches_the_keras_model(exported, loaded):
    namespace = loaded
    pretrainer = exported["pretrainer"]
    inputs = namespace["inputs"]
    expected = pretrainer.encoder(inputs, training=False)
    outputs = namespace["outputs"]
    np.testing.assert_allclose(outputs["pooled_output"], expected["pooled_output"], atol=1e-5)
    np.testing.assert_allclose(outputs["default"], expected["pooled_output"], atol=1e-5)
    np.testing.assert_allclose(outputs["sequence_output"], expected["sequence_output"], atol=1e-5)
    assert len(outputs["encoder_outputs"]) == 3
    for got, want in zip(outputs["encoder_outputs"], expected["encoder_outputs"]):
        np.testing.assert_allclose(got, want, atol=1e-5)
    expected_mlm = pretrainer(dict(inputs, masked_lm_positions=tf.constant([[1, 2], [2, 3]])))["mlm_logits"]
    np.testing.assert_allclose(namespace["mlm_logits"], expected_mlm, atol=1e-5)

    tokenizer = AlbertTokenizer(spm_model_file=exported["spm_model"])
    ids = [tokenizer.cls_id] + tokenizer.encode("Sentence order prediction, 1990, café.") + [tokenizer.sep_id]
    assert inputs["input_word_ids"][1].numpy().tolist() == ids + [0] * (128 - len(ids))
    pair = namespace["pair_inputs"]
    first, second = tokenizer.encode("Is it shared?"), tokenizer.encode("Yes, every layer.")
    expected_pair = [2] + first + [3] + second + [3]
    assert pair["input_word_ids"][0].numpy().tolist() == expected_pair + [0] * (32 - len(expected_pair))
    assert pair["input_type_ids"][0].numpy().tolist()[len(first) + 2:len(expected_pair)] == [1] * (len(second) + 1)

    encoder = namespace["encoder"]
    assert len(encoder.trainable_variables) == len(pretrainer.encoder.trainable_variables)
    assert len(encoder.mlm.trainable_variables) == len(pretrainer.encoder.trainable_variables) + 5
    assert list(encoder.regularization_losses) == []
    assert sorted(encoder.signatures) == ["mlm", "serving_default"]
    training_outputs = encoder(inputs, training=True)["pooled_output"]
    assert not np.allclose(training_outputs, outputs["pooled_output"])  # dropout is on when training


@pytest.mark.slow
def test_bad_encoder_inputs_raise_clear_errors(loaded):
    encoder = loaded["encoder"]
    inputs = {name: tf.constant(value) for name, value in _example_inputs().items()}
    with pytest.raises(ValueError, match="(?s)Could not find matching concrete function.*int32"):
        encoder({name: tf.cast(value, tf.int64) for name, value in inputs.items()})
    with pytest.raises(ValueError, match="Could not find matching concrete function"):
        encoder({name: value[0] for name, value in inputs.items()})
    too_long = {name: tf.zeros([1, 150], tf.int32) for name in INPUT_NAMES}
    with pytest.raises(tf.errors.InvalidArgumentError, match="longer than .* max_position_embeddings=128"):
        encoder(too_long)


@pytest.mark.slow
def test_tfsm_layer_loads_the_encoder_and_fits(exported):
    import keras

    namespace = {"export_path": exported["export_path"]}
    exec(TFSM_LAYER_SNIPPET, namespace)
    model, encoder = namespace["model"], namespace["encoder"]
    assert len(encoder.trainable_weights) == len(exported["pretrainer"].encoder.trainable_variables)
    names = {id(variable): name
             for name, variable in getattr(encoder._reloaded_obj, VARIABLES_BY_TF1_NAME).items()}
    before = {names[id(weight.value)]: weight.numpy().copy() for weight in encoder.trainable_weights}
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(_example_inputs(), np.array([0, 1]), epochs=1, verbose=0)
    unchanged = [name for weight in encoder.trainable_weights
                 for name in [names[id(weight.value)]] if np.abs(weight.numpy() - before[name]).max() < 1e-7]
    assert set(unchanged) <= {KEY_BIAS}


@pytest.mark.slow
def test_hub_keras_layer_in_tf_keras_trains_every_weight(exported, tmp_path):
    check = textwrap.dedent("""
        import json
        import numpy as np
        names = {id(v): name for name, v in encoder.resolved_object.variables_by_tf1_name.items()}
        before = {names[id(w)]: w.numpy().copy() for w in encoder.trainable_weights}
        model.compile(optimizer=tf_keras.optimizers.SGD(0.1),
                      loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        x = {name: np.asarray(value, np.int32) for name, value in json.loads(INPUTS).items()}
        model.fit(x, np.array([0, 1]), epochs=1, verbose=0)
        unchanged = [names[id(w)] for w in encoder.trainable_weights
                     if np.abs(w.numpy() - before[names[id(w)]]).max() < 1e-7]
        print(json.dumps({"trainable": len(encoder.trainable_weights), "unchanged": unchanged}))
    """)
    inputs = json.dumps({name: value.tolist() for name, value in _example_inputs().items()})
    script = f"export_path = {exported['export_path']!r}\nINPUTS = {inputs!r}\n" + HUB_KERAS_LAYER_SNIPPET + check
    result = run_python("-c", script)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["trainable"] == len(exported["pretrainer"].encoder.trainable_variables)
    assert set(report["unchanged"]) <= {KEY_BIAS}


@pytest.mark.slow
def test_saved_model_cli_shows_and_runs_the_serving_signature(exported):
    directory = exported["directory"]
    inputs = _example_inputs()
    np.savez(directory / "cli_inputs.npz", **inputs)
    output_dir = str(directory / "cli_outputs")
    stdout = _run_bash(SAVED_MODEL_CLI_SNIPPET, EXPORT_PATH=exported["export_path"],
                       NPZ=str(directory / "cli_inputs.npz"), OUTPUT_DIR=output_dir)
    assert "signature_def['serving_default']" in stdout and "signature_def['mlm']" in stdout
    assert "outputs['encoder_outputs_2']" in stdout and "inputs['masked_lm_positions']" in stdout
    expected = exported["pretrainer"].encoder(inputs)
    np.testing.assert_allclose(np.load(os.path.join(output_dir, "pooled_output.npy")), expected["pooled_output"],
                               atol=1e-5)
    np.testing.assert_allclose(np.load(os.path.join(output_dir, "sequence_output.npy")),
                               expected["sequence_output"], atol=1e-5)


@pytest.mark.slow
def test_exported_preprocessor_equals_python_tokenizer(exported, loaded):
    texts = ["Café naïve, 1990, 2001, “quoted” ``tex''", "東京 ❤️ 🐍", "", "ΟΔΟΣ a\x00B " * 40]
    preprocessor = loaded["preprocessor"]
    tokenizer = AlbertTokenizer(spm_model_file=exported["spm_model"])
    assert preprocessor.tokenize(tf.constant(texts)).to_list() == [tokenizer.encode(text) for text in texts]
    special = {key: int(value) for key, value in preprocessor.tokenize.get_special_tokens_dict().items()}
    assert special == {"vocab_size": tokenizer.vocab_size, "start_of_sequence_id": 2, "end_of_segment_id": 3,
                       "padding_id": 0, "mask_id": 4}
    assert preprocessor(tf.constant([], tf.string))["input_word_ids"].shape == (0, 128)


@pytest.mark.slow
def test_hub_module_loads_into_fine_tuning_models(exported):
    pretrainer = exported["pretrainer"]
    module = read_hub_module(exported["export_path"])
    assert module.config == pretrainer.config and module.do_lower_case
    assert open(module.spm_model_file, "rb").read() == open(exported["spm_model"], "rb").read()

    classifier = AlbertClassifier(module.config, num_labels=3)
    load_encoder_weights(classifier, exported["export_path"])
    fresh_pretrainer = AlbertPretrainer(module.config)
    load_encoder_weights(fresh_pretrainer, os.path.join(exported["export_path"], "encoder"))
    source = model_variable_map(pretrainer)
    for model in (classifier, fresh_pretrainer):
        for name, variable in model_variable_map(model).items():
            if name.startswith(("bert/", "cls/predictions/")):
                np.testing.assert_array_equal(variable.numpy(), source[name].numpy(), err_msg=name)

    wider = AlbertClassifier(module.config.replace(hidden_size=64, intermediate_size=96), num_labels=2)
    with pytest.raises(ValueError, match="hidden_size: file 32 vs model 64"):
        load_encoder_weights(wider, exported["export_path"])
    with pytest.raises(ValueError, match="holds no saved_model.pb"):
        read_hub_module(str(exported["directory"]))


def test_an_original_tf1_hub_module_points_to_init_checkpoint(tmp_path):
    # The original's modules hold saved_model.pb, assets/albert_config.json and tensorflow_hub's marker file.
    (tmp_path / "assets").mkdir()
    for name in ("saved_model.pb", "tfhub_module.pb", "assets/albert_config.json"):
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(ValueError, match=r"is an original TF1 hub module .* --init_checkpoint="):
        read_hub_module(str(tmp_path))


@pytest.mark.slow
def test_export_refuses_random_weights_existing_exports_and_wrong_vocabularies(exported):
    config, spm_model = exported["pretrainer"].config, exported["spm_model"]
    directory = exported["directory"]
    with pytest.raises(ValueError, match="exporting random weights is almost certainly a mistake"):
        export_hub_modules(str(directory / "random"), config, spm_model)
    with pytest.raises(FileExistsError, match="already holds an export"):
        export_hub_modules(exported["export_path"], config, spm_model, allow_random_init=True)
    with pytest.raises(ValueError, match="seq_length=256 exceeds the model's max_position_embeddings=128"):
        export_hub_modules(str(directory / "other"), config, spm_model, seq_length=256, allow_random_init=True)
    with pytest.raises(ValueError, match="vocab_size is 200"):
        export_hub_modules(str(directory / "other"), config.replace(vocab_size=200), spm_model,
                           allow_random_init=True)


@pytest.mark.slow
def test_export_of_a_fine_tuned_classifier_leaves_its_head_out(fine_tuned_export):
    classifier = fine_tuned_export["classifier"]
    loaded = tf.saved_model.load(os.path.join(fine_tuned_export["export_path"], "encoder"))
    assert not hasattr(loaded, "mlm")
    inputs = {name: tf.constant(value) for name, value in _example_inputs().items()}
    np.testing.assert_allclose(loaded(inputs)["pooled_output"],
                               classifier.encoder(inputs, training=False)["pooled_output"], atol=1e-5)


@pytest.mark.slow
def test_classifier_with_preprocessor_takes_raw_text(exported, tmp_path):
    import tensorflow_text  # noqa: F401  (registers the preprocessor's ops)

    config = exported["pretrainer"].config
    classifier = AlbertClassifier(config, num_labels=3)
    preprocessor = AlbertPreprocessor(exported["spm_model"], seq_length=32)
    export_dir = str(tmp_path / "classifier")
    export_classifier_with_preprocessor(classifier, export_dir, preprocessor, num_text_inputs=2)
    loaded = tf.saved_model.load(export_dir)
    text_a = tf.constant(["A shared block, 1990.", "Café?", "Empty second segment"])
    text_b = tf.constant(["It runs at every depth.", "Naïve!", ""])
    probabilities = loaded(text_a, text_b)["probabilities"]
    from_signature = loaded.signatures["serving_default"](text_a=text_a, text_b=text_b)["probabilities"]

    inputs = preprocessor.bert_pack_inputs([preprocessor.tokenize(text_a), preprocessor.tokenize(text_b)])
    expected = tf.nn.softmax(classifier(inputs, training=False))
    np.testing.assert_allclose(probabilities, expected, atol=1e-5)
    np.testing.assert_allclose(from_signature, expected, atol=1e-5)
    np.testing.assert_allclose(np.sum(probabilities, axis=-1), 1.0, atol=1e-5)

    # Short batches are packed to their longest row, long ones to seq_length, with the fixed length's results.
    assert int(packed_length([preprocessor.tokenize(text_a[1:]), preprocessor.tokenize(text_b[1:])], 32)) < 32
    regressor = AlbertClassifier(config, num_labels=1)
    raw_text_regressor = _RawTextClassifier(regressor, preprocessor, num_text_inputs=1)
    for texts in (text_a, tf.constant(["a very long text " * 12, "short"])):
        predictions = raw_text_regressor.__call__(texts)["predictions"]
        single = preprocessor.bert_pack_inputs([preprocessor.tokenize(texts)])
        np.testing.assert_allclose(predictions, regressor(single, training=False)[:, 0], atol=1e-5)
    assert int(packed_length([preprocessor.tokenize(texts)], 32)) == 32


@pytest.mark.slow
def test_export_script_takes_the_digit_comma_rule(fine_tuned_export, loaded):
    preprocessor = tf.saved_model.load(os.path.join(fine_tuned_export["export_path"], "preprocessor"))
    assert preprocessor.digit_comma_rule.numpy().decode() == "drop_added_marker"
    default = loaded["preprocessor"]  # the guide's export, without --digit_comma_rule
    assert default.digit_comma_rule.numpy().decode() == "keep_added_marker"
