import json

import pytest

from albert_tf.config import PRESETS, AlbertConfig, load_config

# albert_base_v2's albert_config.json as released by Google (keys in the released order).
RELEASED_ALBERT_BASE_V2 = {
    "attention_probs_dropout_prob": 0,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0,
    "embedding_size": 128,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "num_hidden_groups": 1,
    "net_structure_type": 0,
    "gap_size": 0,
    "num_memory_blocks": 0,
    "inner_group_num": 1,
    "down_scale_factor": 1,
    "type_vocab_size": 2,
    "vocab_size": 30000,
}


def test_released_config_round_trips_losslessly(tmp_path):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps(RELEASED_ALBERT_BASE_V2, indent=2))
    config = AlbertConfig.from_json_file(str(path))
    assert config.hidden_size == 768 and config.share_type == "all"
    assert config.extra_keys == {"net_structure_type": 0, "gap_size": 0, "num_memory_blocks": 0}

    written = tmp_path / "written.json"
    config.to_json_file(str(written))
    values = json.loads(written.read_text())
    assert {k: v for k, v in values.items() if k != "share_type"} == RELEASED_ALBERT_BASE_V2
    assert values["share_type"] == "all"
    assert AlbertConfig.from_json_file(str(written)) == config


def test_layers_to_keep_survives_round_trip(tmp_path):
    config = AlbertConfig.from_dict(dict(RELEASED_ALBERT_BASE_V2, layers_to_keep=[0, 3]))
    path = tmp_path / "c.json"
    config.to_json_file(str(path))
    assert json.loads(path.read_text())["layers_to_keep"] == [0, 3]


def test_hidden_act_is_read_case_insensitively_as_the_original():
    assert AlbertConfig.from_dict(dict(RELEASED_ALBERT_BASE_V2, hidden_act="GELU")).hidden_act == "gelu"
    assert AlbertConfig.from_dict(dict(RELEASED_ALBERT_BASE_V2, hidden_act="Relu")).hidden_act == "relu"


def test_unknown_key_is_named(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(dict(RELEASED_ALBERT_BASE_V2, hiden_size=3)))
    with pytest.raises(ValueError, match="hiden_size") as error:
        AlbertConfig.from_json_file(str(path))
    assert str(path) in str(error.value)


def test_a_missing_config_file_is_named(tmp_path):
    missing = str(tmp_path / "no_such_config.json")
    with pytest.raises(FileNotFoundError, match=f"The config file {missing} does not exist."):
        AlbertConfig.from_json_file(missing)


def test_what_the_original_also_loaded_loads():
    loose = AlbertConfig.from_dict(dict(RELEASED_ALBERT_BASE_V2, hidden_act="", down_scale_factor=1.0))
    assert (loose.hidden_act, loose.down_scale_factor) == ("linear", 1)
    assert isinstance(loose.down_scale_factor, int)


def test_missing_architecture_key_is_named():
    values = {name: value for name, value in RELEASED_ALBERT_BASE_V2.items() if name != "intermediate_size"}
    with pytest.raises(ValueError, match=r"Missing required key\(s\) \['intermediate_size'\] in config dict"):
        AlbertConfig.from_dict(values)


@pytest.mark.parametrize("overrides, message", [
    (dict(hidden_size=100, num_attention_heads=12), "hidden_size=100 must be divisible by num_attention_heads=12"),
    (dict(num_hidden_layers=0), "num_hidden_layers must be a positive integer, got 0"),
    (dict(vocab_size=-5), "vocab_size must be a positive integer, got -5"),
    (dict(hidden_act="swish"), "hidden_act='swish' is not supported; allowed: gelu, gelu_new, relu, tanh, linear"),
    (dict(share_type="half"), "share_type='half' is not supported; allowed: all, attention, ffn, none"),
    (dict(hidden_dropout_prob=1.5), "hidden_dropout_prob must be a probability"),
    (dict(num_hidden_groups=13), "num_hidden_groups=13 must be at most num_hidden_layers=12"),
])
def test_bad_values_are_named(overrides, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        AlbertConfig.from_preset("albert-base", **overrides)


def test_presets():
    sizes = {name: (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["intermediate_size"])
             for name, c in PRESETS.items()}
    assert sizes["albert-base"] == (768, 12, 12, 3072)
    assert sizes["albert-large"] == (1024, 24, 16, 4096)
    assert sizes["albert-xlarge"] == (2048, 24, 16, 8192)
    assert sizes["albert-xxlarge"] == (4096, 12, 64, 16384)
    for name in ("albert-base", "albert-large", "albert-xlarge", "albert-xxlarge"):
        config = AlbertConfig.from_preset(name)
        assert (config.embedding_size, config.vocab_size, config.hidden_dropout_prob,
                config.attention_probs_dropout_prob, config.max_position_embeddings,
                config.type_vocab_size, config.share_type) == (128, 30000, 0.0, 0.0, 512, 2, "all")
    bert = AlbertConfig.from_preset("bert-large")
    assert (bert.embedding_size, bert.hidden_size, bert.share_type, bert.vocab_size) == (1024, 1024, "none", 30000)
    assert AlbertConfig.from_preset("albert-base", num_hidden_layers=2).num_hidden_layers == 2
    with pytest.raises(ValueError, match="Unknown preset 'albert-huge'"):
        AlbertConfig.from_preset("albert-huge")


def test_group_formula_matches_the_original():
    config = AlbertConfig.from_preset("albert-base", num_hidden_layers=12, num_hidden_groups=4)
    assert [config.group_of_layer(l) for l in range(12)] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    config = AlbertConfig.from_preset("albert-base", num_hidden_layers=5, num_hidden_groups=2)
    assert [config.group_of_layer(l) for l in range(5)] == [0, 0, 0, 1, 1]


def test_load_config_needs_exactly_one_source(tmp_path):
    with pytest.raises(ValueError, match="exactly one of --albert_config_file or --preset"):
        load_config(None, None)
    path = tmp_path / "c.json"
    AlbertConfig.from_preset("albert-base").to_json_file(str(path))
    with pytest.raises(ValueError, match="exactly one"):
        load_config(str(path), "albert-base")
    assert load_config(str(path), None, share_type="ffn").share_type == "ffn"
