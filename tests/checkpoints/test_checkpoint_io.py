import json
import logging
import os
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertClassifier, AlbertEncoder, AlbertPretrainer, load_weights, save_weights
from albert_tf.checkpoints import conversion, formats, hf_names, locating, matching, reading
from albert_tf.checkpoints.tf1_names import (group0_candidates, model_variable_map, native_path_to_tf1_name,
                                             parse_half_name)
from tests import numpy_albert
from tests.helpers import random_inputs, random_value, randomize, run_script, tiny_config


def variable_values(model):
    return {name: variable.numpy() for name, variable in model_variable_map(model).items()}


def encoder_variable_values(model):
    """variable_values of the encoder's variables alone (names under bert/)."""
    return {name: value for name, value in variable_values(model).items() if name.startswith("bert/")}


def assert_same_variables(expected, actual):
    assert sorted(expected) == sorted(actual)
    for name in expected:
        np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)


def original_names_and_shapes(config):
    """The original modeling.py / run_pretraining.py variables of a share_type=all config, spelled out here
    independently of albert_tf.checkpoints.tf1_names."""
    E, H, I, V = config.embedding_size, config.hidden_size, config.intermediate_size, config.vocab_size
    shapes = {"bert/embeddings/word_embeddings": (V, E),
              "bert/embeddings/token_type_embeddings": (config.type_vocab_size, E),
              "bert/embeddings/position_embeddings": (config.max_position_embeddings, E),
              "bert/embeddings/LayerNorm/gamma": (E,), "bert/embeddings/LayerNorm/beta": (E,),
              "bert/pooler/dense/kernel": (H, H), "bert/pooler/dense/bias": (H,),
              "cls/predictions/transform/dense/kernel": (H, E), "cls/predictions/transform/dense/bias": (E,),
              "cls/predictions/transform/LayerNorm/gamma": (E,), "cls/predictions/transform/LayerNorm/beta": (E,),
              "cls/predictions/output_bias": (V,),
              "cls/seq_relationship/output_weights": (2, H), "cls/seq_relationship/output_bias": (2,)}
    if E != H:
        shapes["bert/encoder/embedding_hidden_mapping_in/kernel"] = (E, H)
        shapes["bert/encoder/embedding_hidden_mapping_in/bias"] = (H,)
    for group in range(config.num_hidden_groups):
        for inner in range(config.inner_group_num):
            base = f"bert/encoder/transformer/group_{group}/inner_group_{inner}"
            for projection in ("self/query", "self/key", "self/value", "output/dense"):
                shapes[f"{base}/attention_1/{projection}/kernel"] = (H, H)
                shapes[f"{base}/attention_1/{projection}/bias"] = (H,)
            shapes[f"{base}/ffn_1/intermediate/dense/kernel"] = (H, I)
            shapes[f"{base}/ffn_1/intermediate/dense/bias"] = (I,)
            shapes[f"{base}/ffn_1/intermediate/output/dense/kernel"] = (I, H)
            shapes[f"{base}/ffn_1/intermediate/output/dense/bias"] = (H,)
            for layer_norm in ("LayerNorm", "LayerNorm_1"):
                shapes[f"{base}/{layer_norm}/gamma"] = (H,)
                shapes[f"{base}/{layer_norm}/beta"] = (H,)
    return shapes


def write_tf1_checkpoint(prefix, arrays, scope="", optimizer_slots=False, global_step=None):
    """A name-based checkpoint written the TF1 way: tf.compat.v1 variables in a graph and a Saver."""
    graph = tf.Graph()
    with graph.as_default():
        variables = {}
        for name, value in arrays.items():
            names = [name] + ([f"{name}/adam_m", f"{name}/adam_v"] if optimizer_slots else [])
            for slot_name in names:
                variables[scope + slot_name] = tf.compat.v1.Variable(
                    value if slot_name == name else np.zeros_like(value), name=scope + slot_name)
        if global_step is not None:
            variables[scope + "global_step"] = tf.compat.v1.Variable(np.int64(global_step), name="global_step")
        saver = tf.compat.v1.train.Saver(var_list=variables)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            return saver.save(session, prefix, write_meta_graph=False)


def random_original_weights(config, seed=0):
    rng = np.random.default_rng(seed)
    return {name: random_value(name, shape, rng) for name, shape in sorted(original_names_and_shapes(config).items())}


# ---- round trips ------------------------------------------------------------------------------

ROUND_TRIP_CONFIGS = {
    "all": dict(),
    "grouped": dict(num_hidden_groups=2, inner_group_num=2),
    "E=H": dict(embedding_size=16),
    "attention": dict(share_type="attention", num_hidden_groups=2),
    "ffn": dict(share_type="ffn"),
    "none": dict(share_type="none"),
}
ROUND_TRIPS = [(layout, format) for layout in ROUND_TRIP_CONFIGS for format in ("tf1", "hf")] + [
    ("all", "native"), ("attention", "native")]


@pytest.mark.parametrize("layout, format", ROUND_TRIPS)
def test_round_trip_is_bit_exact(tmp_path, layout, format):
    config = tiny_config(**ROUND_TRIP_CONFIGS[layout])
    model = randomize(AlbertPretrainer(config))
    path = str(tmp_path) if format == "hf" else str(tmp_path / "model.ckpt")
    save_weights(model, path, format=format, global_step=None if format == "hf" else 1234)
    restored = AlbertPretrainer(config)
    result = load_weights(restored, str(tmp_path))
    assert (result.format, result.num_loaded) == (format, len(model.weights))
    assert result.global_step == (None if format == "hf" else 1234)
    assert_same_variables(variable_values(model), variable_values(restored))
    inputs = random_inputs()
    np.testing.assert_array_equal(restored(inputs)["mlm_logits"], model(inputs)["mlm_logits"])


@pytest.mark.parametrize("layout, expanded", [("all", False), ("grouped", False), ("attention", True),
                                              ("ffn", True), ("none", True)])
def test_hf_layout_expands_only_what_hf_cannot_share(tmp_path, layout, expanded):
    config = tiny_config(**ROUND_TRIP_CONFIGS[layout])
    save_weights(AlbertPretrainer(config), str(tmp_path), format="hf")
    hf_config = json.loads((tmp_path / "config.json").read_text())
    assert hf_config["architectures"] == ["AlbertForPreTraining"]
    assert hf_config["hidden_act"] == "gelu_new"
    if expanded:
        assert hf_config["num_hidden_groups"] == config.num_hidden_layers
        assert hf_config[hf_names.SHARE_TYPE_KEY] == config.share_type
        assert hf_config[hf_names.NUM_HIDDEN_GROUPS_KEY] == config.num_hidden_groups
    else:
        assert hf_config["num_hidden_groups"] == config.num_hidden_groups
        assert hf_names.SHARE_TYPE_KEY not in hf_config


def test_hf_group_formulas_disagree_where_float_rounding_differs():
    assert hf_names.formula_disagreements(12, 1) == []
    assert hf_names.formula_disagreements(22, 22) == [15]
    assert hf_names.formula_disagreements(27, 21) == [9, 18]
    assert not hf_names.uses_plain_layout(tiny_config(num_hidden_layers=22, num_hidden_groups=22))


def test_finetuning_model_round_trip_keeps_its_head(tmp_path):
    config = tiny_config(num_hidden_groups=2)
    model = randomize(AlbertClassifier(config, num_labels=3))
    for format in ("tf1", "hf", "native"):
        directory = tmp_path / format
        save_weights(model, str(directory if format == "hf" else directory / "model.ckpt"), format=format)
        restored = AlbertClassifier(config, num_labels=3)
        load_weights(restored, str(directory))
        values = variable_values(restored)
        assert_same_variables(variable_values(model), values)
        assert "output_weights" in values


# ---- the original's own checkpoints ---------------------------------------------------------------

def _check_against_reference(model, weights, config):
    numpy_albert.assert_pretrainer_matches(model, weights, config, random_inputs(seed=5), atol=5e-5, mlm_atol=2e-4)


@pytest.mark.parametrize("overrides", [dict(), dict(num_hidden_groups=2, inner_group_num=2)])
def test_original_checkpoint_prefix_gives_reference_outputs(tmp_path, overrides):
    config = tiny_config(**overrides)
    weights = random_original_weights(config)
    prefix = write_tf1_checkpoint(str(tmp_path / "model.ckpt-100"), weights, global_step=100)
    model = AlbertPretrainer(config)
    result = load_weights(model, prefix, format="tf1")
    assert result.global_step == 100 and result.num_loaded == len(weights)
    _check_against_reference(model, weights, config)


def test_tarball_directory_without_checkpoint_file(tmp_path):
    """The released tarballs: model.ckpt-best.* with optimizer slots, albert_config.json and the spm model."""
    config = tiny_config()
    weights = random_original_weights(config, seed=1)
    write_tf1_checkpoint(str(tmp_path / "model.ckpt-best"), weights, optimizer_slots=True, global_step=125000)
    os.remove(tmp_path / "checkpoint")
    config.to_json_file(str(tmp_path / "albert_config.json"))
    (tmp_path / "30k-clean.model").write_bytes(b"spm")
    assert locating.detect_format(str(tmp_path)) == "tf1"
    contents = reading.read_checkpoint(str(tmp_path))
    assert contents.location.path == str(tmp_path / "model.ckpt-best")
    assert contents.config == config and contents.global_step == 125000
    assert not any(name.endswith(("adam_m", "adam_v")) for name in contents.shapes)
    model = AlbertPretrainer(config)
    load_weights(model, contents)
    _check_against_reference(model, weights, config)
    assert locating.find_vocab_files(str(tmp_path)) == [str(tmp_path / "30k-clean.model")]


def test_hub_module_directory_with_module_scope(tmp_path):
    config = tiny_config(num_hidden_groups=2)
    weights = random_original_weights(config, seed=2)
    (tmp_path / "variables").mkdir()
    (tmp_path / "assets").mkdir()
    write_tf1_checkpoint(str(tmp_path / "variables" / "variables"), weights, scope="module/")
    (tmp_path / "tfhub_module.pb").write_bytes(b"")
    (tmp_path / "saved_model.pb").write_bytes(b"")
    config.to_json_file(str(tmp_path / "assets" / "albert_config.json"))
    (tmp_path / "assets" / "30k-clean.model").write_bytes(b"spm")
    contents = reading.read_checkpoint(str(tmp_path))
    assert contents.format == "tf1" and contents.config == config
    assert "bert/embeddings/word_embeddings" in contents.shapes
    model = AlbertPretrainer(config)
    load_weights(model, contents)
    _check_against_reference(model, weights, config)
    assert locating.find_vocab_files(str(tmp_path)) == [str(tmp_path / "assets" / "30k-clean.model")]
    prefix = str(tmp_path / "variables" / "variables")
    assert locating.find_config(prefix) == (config, str(tmp_path / "assets" / "albert_config.json"))


@pytest.mark.parametrize("format", ["tf1", "native"])
def test_a_checkpoint_cut_short_is_one_sentence_naming_it_and_the_variable(tmp_path, format):
    config = tiny_config()
    prefix = str(tmp_path / "model.ckpt")
    save_weights(randomize(AlbertPretrainer(config)), prefix, format=format, global_step=7)
    data_file = tf.io.gfile.glob(prefix + "*.data-*")[0]
    with open(data_file, "r+b") as handle:
        handle.truncate(100)
    with pytest.raises(formats.CheckpointFormatError) as raised:
        load_weights(AlbertPretrainer(config), prefix)
    assert re.fullmatch(rf"{re.escape(tf.train.latest_checkpoint(str(tmp_path)) or prefix)} is damaged: its "
                        r"variable \S+ cannot be read \(.+\); copy or save the checkpoint again\.", str(raised.value))


def test_a_damaged_index_read_as_a_hub_modules_variables_is_one_sentence(tmp_path):
    # read_hub_module reads a SavedModel's variables through load_reader without locating them first.
    prefix = str(tmp_path / "model.ckpt")
    save_weights(randomize(AlbertPretrainer(tiny_config())), prefix, format="native")
    index_file = tf.io.gfile.glob(prefix + "*.index")[0]
    with open(index_file, "r+b") as handle:
        handle.truncate(10)
    with pytest.raises(formats.CheckpointFormatError, match=rf"^{re.escape(index_file[:-len('.index')])} is damaged: "
                       r"its index cannot be read \(.+\); copy or save the checkpoint again\.$"):
        reading.load_reader(index_file[:-len(".index")])


# ---- strictness -------------------------------------------------------------------------------

def test_missing_variable_is_listed_with_its_shape(tmp_path):
    config = tiny_config()
    weights = random_original_weights(config)
    del weights["bert/pooler/dense/bias"]
    prefix = write_tf1_checkpoint(str(tmp_path / "model.ckpt"), weights)
    model = AlbertPretrainer(config)
    before = variable_values(model)
    with pytest.raises(matching.CheckpointMismatchError) as error:
        load_weights(model, prefix)
    assert error.value.missing == ["bert/pooler/dense/bias"]
    assert "missing from the file (1):\n  bert/pooler/dense/bias [16]" in str(error.value)
    assert_same_variables(before, variable_values(model))


def test_extra_variable_is_listed_with_its_shape(tmp_path):
    config = tiny_config()
    weights = random_original_weights(config)
    weights["bert/encoder/transformer/group_0/inner_group_0/attention_1/self/extra/kernel"] = np.ones((3, 5), "f")
    prefix = write_tf1_checkpoint(str(tmp_path / "model.ckpt"), weights)
    with pytest.raises(matching.CheckpointMismatchError, match=r"unexpected in the file \(1\):\n  "
                       r"bert/encoder/transformer/group_0/inner_group_0/attention_1/self/extra/kernel \[3,5\]"):
        load_weights(AlbertPretrainer(config), prefix)


def test_wrong_shape_names_both_shapes(tmp_path):
    config = tiny_config()
    weights = random_original_weights(config)
    weights["cls/predictions/output_bias"] = np.zeros(61, np.float32)
    prefix = write_tf1_checkpoint(str(tmp_path / "model.ckpt"), weights)
    with pytest.raises(matching.CheckpointMismatchError,
                       match=r"cls/predictions/output_bias: file \[61\] vs model \[60\]") as error:
        load_weights(AlbertPretrainer(config), prefix)
    assert error.value.mismatched == [("cls/predictions/output_bias", (61,), (60,))]


def test_group_mismatch_names_both_layouts(tmp_path):
    weights = random_original_weights(tiny_config())
    prefix = write_tf1_checkpoint(str(tmp_path / "model.ckpt"), weights)
    with pytest.raises(matching.CheckpointMismatchError) as error:
        load_weights(AlbertPretrainer(tiny_config(num_hidden_groups=2)), prefix)
    message = str(error.value)
    assert ("block layout (group_{0} x inner_group_{0}, attention_{1}, ffn_{1}) does not match the model's "
            "(group_{0,1} x inner_group_{0}, attention_{1}, ffn_{1}: num_hidden_groups=2") in message
    assert "init_from_group0" in message
    assert "bert/encoder/transformer/group_1/inner_group_0/LayerNorm_1/gamma [16]" in message


def test_init_from_group0_fills_every_group_from_group_0(tmp_path):
    weights = random_original_weights(tiny_config())
    prefix = write_tf1_checkpoint(str(tmp_path / "model.ckpt"), weights)
    model = AlbertPretrainer(tiny_config(num_hidden_groups=2))
    load_weights(model, prefix, init_from_group0=True)
    values = variable_values(model)
    for name, value in values.items():
        source = name.replace("/group_1/", "/group_0/")
        np.testing.assert_array_equal(value, weights[source], err_msg=name)
    assert any("/group_1/" in name for name in values)


def test_init_from_group0_starts_partial_sharing_from_an_all_shared_checkpoint(tmp_path):
    weights = random_original_weights(tiny_config())
    prefix = write_tf1_checkpoint(str(tmp_path / "model.ckpt"), weights)
    model = AlbertPretrainer(tiny_config(share_type="attention", num_hidden_groups=2))
    load_weights(model, prefix, init_from_group0=True)
    ffn_4 = "bert/encoder/transformer/group_1/inner_group_0/ffn_4/LayerNorm_1/beta"
    assert ffn_4 in variable_values(model)
    np.testing.assert_array_equal(variable_values(model)[ffn_4],
                                  weights["bert/encoder/transformer/group_0/inner_group_0/LayerNorm_1/beta"])
    assert group0_candidates(ffn_4) == [
        "bert/encoder/transformer/group_0/inner_group_0/ffn_4/LayerNorm_1/beta",
        "bert/encoder/transformer/group_1/inner_group_0/LayerNorm_1/beta",
        "bert/encoder/transformer/group_0/inner_group_0/LayerNorm_1/beta"]


def test_init_from_group0_still_rejects_unused_file_groups(tmp_path):
    save_weights(randomize(AlbertPretrainer(tiny_config(num_hidden_groups=2))), str(tmp_path / "m"), format="tf1")
    with pytest.raises(matching.CheckpointMismatchError, match=r"unexpected in the file \(16\):\n  "
                       r"bert/encoder/transformer/group_1/inner_group_0/LayerNorm/beta \[16\]"):
        load_weights(AlbertPretrainer(tiny_config()), str(tmp_path), init_from_group0=True)


def test_classifier_from_pretraining_checkpoint_needs_allow_missing_heads(tmp_path, caplog):
    config = tiny_config()
    pretrainer = randomize(AlbertPretrainer(config))
    save_weights(pretrainer, str(tmp_path / "model.ckpt"), format="tf1")
    with pytest.raises(matching.CheckpointMismatchError) as error:
        load_weights(AlbertClassifier(config, num_labels=2), str(tmp_path))
    assert error.value.missing == ["output_bias", "output_weights"] and error.value.unexpected == []
    assert "allow_missing_heads" in str(error.value)
    classifier = AlbertClassifier(config, num_labels=2)
    fresh_head = classifier.head.output_weights.numpy()
    with caplog.at_level(logging.INFO, logger="albert_tf.checkpoints.loading"):
        result = load_weights(classifier, str(tmp_path), allow_missing_heads=True)
    assert result.missing_heads == ("output_bias", "output_weights")
    assert sorted(result.ignored) == sorted(name for name in variable_values(pretrainer) if name.startswith("cls/"))
    assert "keep their fresh initialisation: output_bias, output_weights" in caplog.text
    np.testing.assert_array_equal(classifier.head.output_weights.numpy(), fresh_head)
    np.testing.assert_array_equal(classifier.encoder.pooler.kernel.numpy(), pretrainer.encoder.pooler.kernel.numpy())


@pytest.mark.parametrize("format", ["tf1", "hf", "native"])
def test_encoder_of_a_fine_tuned_checkpoint_needs_drop_unused_heads(tmp_path, format, caplog):
    config = tiny_config(num_hidden_groups=2)
    classifier = randomize(AlbertClassifier(config, num_labels=3))
    save_weights(classifier, str(tmp_path if format == "hf" else tmp_path / "model.ckpt"), format=format)
    with pytest.raises(matching.CheckpointMismatchError, match="drop_unused_heads") as error:
        load_weights(AlbertEncoder(config), str(tmp_path))
    assert error.value.missing == [] and len(error.value.unexpected) == 2
    encoder = AlbertEncoder(config)
    with caplog.at_level(logging.WARNING, logger="albert_tf.checkpoints.loading"):
        result = load_weights(encoder, str(tmp_path), drop_unused_heads=True)
    assert len(result.dropped_heads) == 2 and all("output_" in name for name in result.dropped_heads)
    assert "Left out 2 head variable(s)" in caplog.text
    assert_same_variables(encoder_variable_values(classifier), variable_values(encoder))


def test_drop_unused_heads_keeps_unused_encoder_variables_an_error(tmp_path):
    config = tiny_config(num_hidden_groups=2)
    save_weights(randomize(AlbertClassifier(config, num_labels=3)), str(tmp_path / "model.ckpt"), format="tf1")
    with pytest.raises(matching.CheckpointMismatchError, match="group_1") as error:
        load_weights(AlbertEncoder(tiny_config()), str(tmp_path), drop_unused_heads=True)
    assert error.value.unexpected and all(name.startswith("bert/") for name in error.value.unexpected)


def test_drop_unused_heads_keeps_unknown_hugging_face_encoder_names_an_error(tmp_path):
    config = tiny_config()
    save_weights(randomize(AlbertClassifier(config, num_labels=3)), str(tmp_path), format="hf")
    unknown = "albert.encoder.albert_layer_groups.0.albert_layers.0.attention.extra_proj.weight"
    _rewrite_safetensors(str(tmp_path), lambda tensors: tensors.update({unknown: np.ones([2, 2], np.float32)}))
    with pytest.raises(matching.CheckpointMismatchError, match="extra_proj") as error:
        load_weights(AlbertEncoder(config), str(tmp_path), drop_unused_heads=True)
    assert unknown in error.value.unexpected


def test_native_training_checkpoint_with_optimizer_into_classifier(tmp_path):
    """The training loop's layout: Checkpoint(model=..., optimizer=...), where tf.train keys most
    model variables under the optimizer's list; they are found through the object graph."""
    config = tiny_config(share_type="attention")
    pretrainer = randomize(AlbertPretrainer(config))
    optimizer = keras.optimizers.Adam()
    optimizer.build(pretrainer.trainable_variables)
    optimizer.iterations.assign(42)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=pretrainer, optimizer=optimizer),
                                         str(tmp_path), max_to_keep=1, checkpoint_name="ckpt")
    manager.save(checkpoint_number=42)
    classifier = AlbertClassifier(config, num_labels=2)
    result = load_weights(classifier, str(tmp_path), allow_missing_heads=True)
    assert (result.format, result.global_step) == ("native", 42)
    encoder_values = encoder_variable_values(pretrainer)
    loaded = variable_values(classifier)
    for name, value in encoder_values.items():
        np.testing.assert_array_equal(loaded[name], value, err_msg=name)


def test_bare_encoder_native_checkpoint_loads_into_pretrainer_encoder(tmp_path):
    config = tiny_config(num_hidden_groups=2)
    encoder = randomize(AlbertEncoder(config))
    save_weights(encoder, str(tmp_path / "ckpt"), format="native")
    with pytest.raises(matching.CheckpointMismatchError, match=r"missing from the file \(7\)"):
        load_weights(AlbertPretrainer(config), str(tmp_path))
    restored = AlbertEncoder(config)
    load_weights(restored, str(tmp_path))
    assert_same_variables(variable_values(encoder), variable_values(restored))


def test_native_object_paths_translate_to_tf1_names():
    assert native_path_to_tf1_name("encoder/group_1_inner_group_0_ffn_3/layer_norm/gamma") == (
        "bert/encoder/transformer/group_1/inner_group_0/ffn_3/LayerNorm_1/gamma")
    assert native_path_to_tf1_name("encoder/group_0_inner_group_1_attention_1/layer_norm/beta") == (
        "bert/encoder/transformer/group_0/inner_group_1/LayerNorm/beta")
    assert native_path_to_tf1_name("masked_lm_head/dense/_kernel") == "cls/predictions/transform/dense/kernel"
    assert native_path_to_tf1_name("head/output_weights") is None
    assert parse_half_name("bert/encoder/transformer/group_0/inner_group_0/attention_5/self/key/bias") == (
        "attention", 0, 0, 5, "self/key/bias")


def test_file_config_must_agree_with_the_model(tmp_path):
    save_weights(AlbertPretrainer(tiny_config(hidden_act="relu", num_hidden_layers=6)), str(tmp_path), format="hf")
    with pytest.raises(matching.CheckpointMismatchError) as error:
        load_weights(AlbertPretrainer(tiny_config()), str(tmp_path))
    assert "num_hidden_layers: file 6 vs model 4" in str(error.value)
    assert "hidden_act: file 'relu' vs model 'gelu'" in str(error.value)


# ---- Hugging Face files that have no ALBERT equivalent -------------------------------------------------

def _rewrite_safetensors(directory, change):
    from safetensors.numpy import load_file, save_file

    path = os.path.join(directory, "model.safetensors")
    state = load_file(path)
    change(state)
    save_file(state, path, metadata={"format": "pt"})


def test_hf_copies_of_a_shared_half_must_be_identical(tmp_path):
    config = tiny_config(share_type="attention")
    save_weights(randomize(AlbertPretrainer(config)), str(tmp_path), format="hf")
    name = "albert.encoder.albert_layer_groups.2.albert_layers.0.attention.query.bias"

    def perturb(state):
        state[name] = state[name] + 1e-3

    _rewrite_safetensors(str(tmp_path), perturb)
    with pytest.raises(hf_names.HfConversionError, match=r"copies of the shared .*attention_1/self/query/bias"):
        load_weights(AlbertPretrainer(config), str(tmp_path))


def test_hf_embedding_projection_must_be_identity_when_e_equals_h(tmp_path):
    config = tiny_config(embedding_size=16)
    save_weights(AlbertPretrainer(config), str(tmp_path), format="hf")

    def perturb(state):
        state["albert.encoder.embedding_hidden_mapping_in.bias"][3] = 0.5

    _rewrite_safetensors(str(tmp_path), perturb)
    with pytest.raises(hf_names.HfConversionError, match="not an identity kernel with a zero bias"):
        load_weights(AlbertPretrainer(config), str(tmp_path))


def test_hf_untied_decoder_is_rejected(tmp_path):
    config = tiny_config()
    save_weights(AlbertPretrainer(config), str(tmp_path), format="hf")

    def untie(state):
        state["predictions.decoder.weight"] = state["albert.embeddings.word_embeddings.weight"] + 1.0

    _rewrite_safetensors(str(tmp_path), untie)
    with pytest.raises(hf_names.HfConversionError, match="predictions.decoder.weight differs"):
        load_weights(AlbertPretrainer(config), str(tmp_path))


def test_hf_masked_lm_without_pooler_and_sop_head_needs_allow_missing_heads(tmp_path):
    """What transformers' AlbertForMaskedLM.save_pretrained writes: no pooler, no SOP classifier."""
    config = tiny_config()
    source = randomize(AlbertPretrainer(config))
    save_weights(source, str(tmp_path), format="hf")

    def drop_pooler_and_sop(state):
        for name in ("albert.pooler.weight", "albert.pooler.bias", "sop_classifier.classifier.weight",
                     "sop_classifier.classifier.bias"):
            del state[name]

    _rewrite_safetensors(str(tmp_path), drop_pooler_and_sop)
    with pytest.raises(matching.CheckpointMismatchError, match="Only head variables \\(or the pooler\\)"):
        load_weights(AlbertPretrainer(config), str(tmp_path))
    model = AlbertPretrainer(config)
    result = load_weights(model, str(tmp_path), allow_missing_heads=True)
    assert result.missing_heads == ("bert/pooler/dense/bias", "bert/pooler/dense/kernel",
                                    "cls/seq_relationship/output_bias", "cls/seq_relationship/output_weights")
    np.testing.assert_array_equal(model.masked_lm_head.output_bias.numpy(), source.masked_lm_head.output_bias.numpy())


def test_hf_erf_gelu_is_rejected():
    with pytest.raises(hf_names.HfConversionError, match="exact erf GELU"):
        hf_names.albert_config_from_hf({"model_type": "albert", "hidden_act": "gelu"})


# ---- locating checkpoints ---------------------------------------------------------------------------

def test_detection_errors_say_what_was_found(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(formats.CheckpointFormatError,
                       match="is not a TF1 checkpoint, a Hugging Face directory or a native checkpoint: it holds no"):
        locating.detect_format(str(tmp_path / "empty"))
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "pytorch_model.bin").write_bytes(b"pickle")
    with pytest.raises(formats.CheckpointFormatError, match="read only from safetensors"):
        locating.detect_format(str(tmp_path / "torch"))
    with pytest.raises(formats.CheckpointFormatError, match="no checkpoint index"):
        locating.detect_format(str(tmp_path / "nothing_here"))
    weights = {"bert/pooler/dense/bias": np.zeros(4, np.float32)}
    for step in (1, 2):
        write_tf1_checkpoint(str(tmp_path / "several" / f"model.ckpt-{step}"), weights)
    os.remove(tmp_path / "several" / "checkpoint")
    with pytest.raises(formats.CheckpointFormatError, match=r"several checkpoints \['model.ckpt-1', "):
        locating.detect_format(str(tmp_path / "several"))
    with pytest.raises(formats.CheckpointFormatError, match="holds a tf1 checkpoint, not the hf format"):
        locating.locate_checkpoint(str(tmp_path / "several" / "model.ckpt-2.index"), format="hf")


# ---- the run script --------------------------------------------------------------------------------

def _convert(*flags):
    return run_script("convert_checkpoint", *flags, timeout=None)


@pytest.mark.slow
def test_convert_script_tarball_to_hf_to_native(tmp_path):
    config = tiny_config(num_hidden_groups=2)
    tarball = tmp_path / "albert_tiny"
    weights = random_original_weights(config, seed=3)
    write_tf1_checkpoint(str(tarball / "model.ckpt-best"), weights, optimizer_slots=True, global_step=77)
    os.remove(tarball / "checkpoint")
    config.to_json_file(str(tarball / "albert_config.json"))
    (tarball / "30k-clean.model").write_bytes(b"spm model bytes")

    to_hf = _convert(f"--input={tarball}", f"--output={tmp_path / 'hf'}", "--output_format=hf")
    assert to_hf.returncode == 0, to_hf.stderr
    assert sorted(os.listdir(tmp_path / "hf")) == ["config.json", "model.safetensors", "spiece.model"]
    to_native = _convert(f"--input={tmp_path / 'hf'}", f"--output={tmp_path / 'native'}", "--output_format=native")
    assert to_native.returncode == 0, to_native.stderr
    assert locating.detect_format(str(tmp_path / "native")) == "native"

    model = AlbertPretrainer(config)
    load_weights(model, str(tmp_path / "native"))
    _check_against_reference(model, weights, config)
    assert (tmp_path / "native" / "spiece.model").read_bytes() == b"spm model bytes"


@pytest.mark.slow
def test_convert_script_takes_the_encoder_of_a_fine_tuned_checkpoint(tmp_path):
    config = tiny_config()
    classifier = randomize(AlbertClassifier(config, num_labels=2))
    save_weights(classifier, str(tmp_path / "finetuned" / "model.ckpt"), format="native")
    config.to_json_file(str(tmp_path / "config.json"))
    flags = [f"--input={tmp_path / 'finetuned'}", "--output_format=hf",
             f"--albert_config_file={tmp_path / 'config.json'}"]
    refused = _convert(*flags, f"--output={tmp_path / 'refused'}")
    assert refused.returncode == 1 and "--drop_unused_heads" in refused.stderr
    converted = _convert(*flags, f"--output={tmp_path / 'hf'}", "--drop_unused_heads")
    assert converted.returncode == 0, converted.stderr
    encoder = AlbertEncoder(config)
    load_weights(encoder, str(tmp_path / "hf"))
    assert_same_variables(encoder_variable_values(classifier), variable_values(encoder))


@pytest.mark.slow
def test_convert_script_keeps_a_fine_tuned_classifier_between_formats(tmp_path):
    config = tiny_config()
    classifier = randomize(AlbertClassifier(config, num_labels=3))
    save_weights(classifier, str(tmp_path / "hf"), format="hf")
    to_tf1 = _convert(f"--input={tmp_path / 'hf'}", f"--output={tmp_path / 'tf1'}", "--output_format=tf1")
    assert to_tf1.returncode == 0, to_tf1.stderr
    reader = tf.train.load_checkpoint(str(tmp_path / "tf1"))
    np.testing.assert_array_equal(reader.get_tensor("output_weights"), classifier.head.output_weights.numpy())

    ambiguous = _convert(f"--input={tmp_path / 'tf1'}", f"--output={tmp_path / 'refused'}", "--output_format=hf")
    assert ambiguous.returncode == 1 and "--head" in ambiguous.stderr
    back = _convert(f"--input={tmp_path / 'tf1'}", f"--output={tmp_path / 'hf_again'}", "--output_format=hf",
                    "--head=classifier")
    assert back.returncode == 0, back.stderr
    written = json.loads((tmp_path / "hf_again" / "config.json").read_text())
    assert written["architectures"] == ["AlbertForSequenceClassification"] and len(written["id2label"]) == 3
    loaded = AlbertClassifier(config, num_labels=3)
    load_weights(loaded, str(tmp_path / "hf_again"))
    assert_same_variables(variable_values(classifier), variable_values(loaded))


@pytest.mark.slow
def test_convert_script_sizes_the_classifier_of_a_fine_tuning_scripts_checkpoint(tmp_path):
    config = tiny_config()
    classifier = randomize(AlbertClassifier(config, num_labels=4))
    save_weights(classifier, str(tmp_path / "native"), format="native")  # as run_classifier's Trainer writes it
    config.to_json_file(str(tmp_path / "albert_config.json"))
    to_hf = _convert(f"--input={tmp_path / 'native'}", f"--output={tmp_path / 'hf'}", "--output_format=hf",
                     "--head=classifier")
    assert to_hf.returncode == 0, to_hf.stderr[-3000:]
    loaded = AlbertClassifier(config, num_labels=4)
    load_weights(loaded, str(tmp_path / "hf"))
    assert_same_variables(variable_values(classifier), variable_values(loaded))


def test_model_for_checkpoint_follows_the_hf_architecture(tmp_path):
    from albert_tf import AlbertMultipleChoice, AlbertSpanPredictor

    config = tiny_config()
    for model, expected in ((AlbertMultipleChoice(config), AlbertMultipleChoice),
                            (AlbertSpanPredictor(config), AlbertSpanPredictor), (AlbertEncoder(config), AlbertEncoder)):
        directory = str(tmp_path / expected.__name__)
        save_weights(model, directory, format="hf")
        contents = reading.read_checkpoint(directory)
        assert type(conversion.model_for_checkpoint(contents, config)) is expected
    encoder_contents = reading.read_checkpoint(str(tmp_path / "AlbertEncoder"))
    with pytest.raises(ValueError, match="has no classifier head .output_weights"):
        conversion.model_for_checkpoint(encoder_contents, config, head="classifier")
    with pytest.raises(ValueError, match="Unknown model head 'token'"):
        conversion.model_for_checkpoint(encoder_contents, config, head="token")


def test_token_classification_head_is_not_taken_for_a_sequence_classifier():
    config = tiny_config()
    state = hf_names.tf1_to_hf(variable_values(randomize(AlbertClassifier(config, num_labels=3))), config,
                               "AlbertForSequenceClassification")
    hf_config = hf_names.hf_config_from_albert(config, ["AlbertForTokenClassification"])
    arrays, _, _ = hf_names.hf_to_tf1(state, hf_config)
    # A token classifier's head keeps its own scope; GLUE's output_weights would take the per-token head as a
    # sentence head.
    assert "cls/token_classification/output_weights" in arrays and "output_weights" not in arrays


@pytest.mark.slow
def test_convert_script_fails_with_a_listing(tmp_path):
    config = tiny_config()
    weights = random_original_weights(config)
    weights["bert/pooler/dense/kernel"] = np.zeros((16, 15), np.float32)
    del weights["cls/seq_relationship/output_bias"]
    write_tf1_checkpoint(str(tmp_path / "in" / "model.ckpt"), weights)
    config.to_json_file(str(tmp_path / "config.json"))
    result = _convert(f"--input={tmp_path / 'in'}", f"--output={tmp_path / 'out'}", "--output_format=hf",
                      f"--albert_config_file={tmp_path / 'config.json'}")
    assert result.returncode == 1
    assert "missing from the file (1):\n  cls/seq_relationship/output_bias [2]" in result.stderr
    assert "bert/pooler/dense/kernel: file [16,15] vs model [16,16]" in result.stderr
    assert not (tmp_path / "out").exists()
