"""Numerical parity with transformers' PyTorch ALBERT (CPU) on the same weights, both directions."""
import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import (AlbertClassifier, AlbertEncoder, AlbertMultipleChoice, AlbertPretrainer, AlbertSpanPredictor,
                       AlbertTokenClassifier, load_weights, save_weights)
from albert_tf.checkpoints.tf1_names import model_variable_map
from tests.helpers import randomize, tiny_config

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TOLERANCE = 1e-4


@pytest.fixture(autouse=True, scope="module")
def _two_torch_threads():
    torch.set_num_threads(2)


def padded_inputs(batch=3, seq=9, vocab=60, seed=0):
    """Row 1 has two padding positions and row 2 has four; MLM positions are all real tokens."""
    rng = np.random.default_rng(seed)
    lengths = np.array([seq, seq - 2, seq - 4])
    mask = (np.arange(seq)[None] < lengths[:, None]).astype(np.int32)
    return {"input_word_ids": rng.integers(0, vocab, (batch, seq)).astype(np.int32),
            "input_mask": mask,
            "input_type_ids": ((np.arange(seq) >= 3) & (mask == 1)).astype(np.int32),
            "masked_lm_positions": np.stack([rng.choice(length, 3, replace=False) for length in lengths])
            .astype(np.int32)}


def ours(model, inputs):
    tensors = {name: tf.constant(value) for name, value in inputs.items()}
    encoded = model.encoder(tensors)
    outputs = model(tensors)
    return {"sequence": encoded["sequence_output"].numpy(), "pooled": encoded["pooled_output"].numpy(),
            "mlm": outputs["mlm_logits"].numpy(), "sop": outputs["sop_logits"].numpy()}


def torch_arguments(inputs):
    """Our input names -> transformers' keyword arguments, as torch int64 tensors."""
    return {hf_name: torch.tensor(inputs[name], dtype=torch.long) for name, hf_name in (
        ("input_word_ids", "input_ids"), ("input_mask", "attention_mask"), ("input_type_ids", "token_type_ids"))}


def theirs(hf_model, inputs):
    hf_model.eval()
    with torch.no_grad():
        arguments = torch_arguments(inputs)
        base = hf_model.albert(**arguments)
        outputs = hf_model(**arguments)
    positions = inputs["masked_lm_positions"]
    logits = outputs.prediction_logits.numpy()
    return {"sequence": base.last_hidden_state.numpy(), "pooled": base.pooler_output.numpy(),
            "mlm": np.take_along_axis(logits, positions[:, :, None], axis=1), "sop": outputs.sop_logits.numpy()}


def assert_parity(expected, actual, mask):
    """HF pads with the dtype's minimum where the original adds -10000: real positions must agree."""
    real = mask.astype(bool)
    np.testing.assert_allclose(actual["sequence"][real], expected["sequence"][real], atol=TOLERANCE)
    for name in ("pooled", "mlm", "sop"):
        np.testing.assert_allclose(actual[name], expected[name], atol=TOLERANCE, err_msg=name)


def load_hf_export(directory):
    model, info = transformers.AlbertForPreTraining.from_pretrained(directory, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    return model


@pytest.mark.parametrize("overrides", [
    dict(),
    dict(num_hidden_groups=2, inner_group_num=2),
    dict(share_type="ffn", num_hidden_groups=2),
    dict(embedding_size=16, hidden_act="relu"),
    dict(num_hidden_layers=22, num_hidden_groups=22),
], ids=["all", "grouped", "ffn-shared", "E=H-relu", "float-formulas-disagree"])
def test_our_export_runs_identically_in_transformers(tmp_path, overrides):
    config = tiny_config(**overrides)
    model = randomize(AlbertPretrainer(config))
    save_weights(model, str(tmp_path), format="hf")
    inputs = padded_inputs()
    assert_parity(ours(model, inputs), theirs(load_hf_export(str(tmp_path)), inputs), inputs["input_mask"])


def test_encoder_export_loads_as_albert_model(tmp_path):
    config = tiny_config(num_hidden_groups=2)
    encoder = randomize(AlbertEncoder(config))
    save_weights(encoder, str(tmp_path), format="hf")
    hf_model, info = transformers.AlbertModel.from_pretrained(str(tmp_path), output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    inputs = padded_inputs()
    with torch.no_grad():
        pooled = hf_model.eval()(**torch_arguments(inputs)).pooler_output
    expected = encoder({name: tf.constant(inputs[name]) for name in ("input_word_ids", "input_mask",
                                                                     "input_type_ids")})["pooled_output"]
    np.testing.assert_allclose(pooled.numpy(), expected.numpy(), atol=TOLERANCE)


def hf_random_model(config_values, seed=0, architecture="AlbertForPreTraining"):
    """A transformers model with random weights on the same scales as `randomize` (torch Linear
    weights are [out, in])."""
    hf_model = getattr(transformers, architecture)(transformers.AlbertConfig(**config_values))
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for name, parameter in hf_model.named_parameters():
            shape = tuple(parameter.shape)
            if "LayerNorm" in name or "layer_norm" in name:
                value = (1.0 if name.endswith("weight") else 0.0) + 0.2 * rng.normal(size=shape)
            elif len(shape) == 1:
                value = 0.2 * rng.normal(size=shape)
            elif "embeddings" in name:
                value = rng.normal(size=shape)
            else:
                sharpness = 2.0 if ".query." in name or ".key." in name else 1.0
                value = sharpness * rng.normal(0, 1 / np.sqrt(shape[1]), shape)
            parameter.copy_(torch.tensor(value, dtype=torch.float32))
    return hf_model


@pytest.mark.parametrize("groups", [(1, 1), (2, 2)], ids=["all", "grouped"])
def test_transformers_weights_load_into_ours(tmp_path, groups):
    hf_config = dict(vocab_size=60, embedding_size=8, hidden_size=16, num_hidden_layers=4,
                     num_hidden_groups=groups[0], inner_group_num=groups[1], num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=24, hidden_act="gelu_new", initializer_range=0.2)
    hf_model = hf_random_model(hf_config)
    hf_model.save_pretrained(str(tmp_path), safe_serialization=True)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["num_hidden_groups"] == groups[0]
    config = tiny_config(num_hidden_groups=groups[0], inner_group_num=groups[1])
    model = AlbertPretrainer(config)
    result = load_weights(model, str(tmp_path))
    assert result.format == "hf" and result.num_loaded == len(model_variable_map(model))
    inputs = padded_inputs(seed=1)
    assert_parity(theirs(hf_model, inputs), ours(model, inputs), inputs["input_mask"])


# ---- task heads -----------------------------------------------------------------------------------

TASK_MODELS = {
    "AlbertForSequenceClassification": lambda config: AlbertClassifier(config, num_labels=3),
    "AlbertForMultipleChoice": lambda config: AlbertMultipleChoice(config, num_choices=2),
    "AlbertForQuestionAnswering": AlbertSpanPredictor,
    "AlbertForTokenClassification": lambda config: AlbertTokenClassifier(config, num_labels=4),
}
TASK_HF_CONFIG = dict(vocab_size=60, embedding_size=8, hidden_size=16, num_hidden_layers=4, num_attention_heads=2,
                      intermediate_size=32, max_position_embeddings=24, hidden_act="gelu_new", initializer_range=0.2)
# AlbertForQuestionAnswering's qa_outputs has num_labels rows: start and end.
# transformers builds these without a pooler, which our models have (and do not use for them).
WITHOUT_POOLER = ("AlbertForQuestionAnswering", "AlbertForTokenClassification")
TASK_NUM_LABELS = {"AlbertForSequenceClassification": 3, "AlbertForMultipleChoice": 3, "AlbertForQuestionAnswering": 2,
                   "AlbertForTokenClassification": 4}


def task_inputs(architecture):
    """padded_inputs, with two choices per example for multiple choice ([batch, choices, seq])."""
    names = ("input_word_ids", "input_mask", "input_type_ids")
    inputs = {name: padded_inputs(seed=2)[name] for name in names}
    if architecture == "AlbertForMultipleChoice":
        other = padded_inputs(seed=3)
        inputs = {name: np.stack([inputs[name], other[name]], axis=1) for name in names}
    return inputs


def task_outputs_of_ours(model, inputs):
    outputs = model({name: tf.constant(value) for name, value in inputs.items()})
    if isinstance(outputs, dict):
        return np.stack([outputs["start_logits"].numpy(), outputs["end_logits"].numpy()])
    return outputs.numpy()


def task_outputs_of_theirs(hf_model, inputs):
    hf_model.eval()
    with torch.no_grad():
        outputs = hf_model(**torch_arguments(inputs))
    if hasattr(outputs, "start_logits"):
        return np.stack([outputs.start_logits.numpy(), outputs.end_logits.numpy()])
    return outputs.logits.numpy()


def assert_task_parity(expected, actual, architecture, mask):
    if architecture == "AlbertForQuestionAnswering":
        real = mask.astype(bool)
        expected, actual = expected[:, real], actual[:, real]
    elif architecture == "AlbertForTokenClassification":
        # Padding positions differ (HF masks with the dtype's minimum): only real tokens compare.
        real = mask.astype(bool)
        expected, actual = expected[real], actual[real]
    np.testing.assert_allclose(actual, expected, atol=TOLERANCE)


@pytest.mark.parametrize("architecture", sorted(TASK_MODELS))
def test_task_model_export_runs_identically_in_transformers(tmp_path, architecture):
    model = randomize(TASK_MODELS[architecture](tiny_config()))
    save_weights(model, str(tmp_path), format="hf")
    assert json.loads((tmp_path / "config.json").read_text())["architectures"] == [architecture]
    hf_model, info = getattr(transformers, architecture).from_pretrained(str(tmp_path), output_loading_info=True)
    assert not info["missing_keys"] and not info["mismatched_keys"], info
    # Our pooler is written all the same.
    assert all(key.startswith("albert.pooler.") for key in info["unexpected_keys"]), info
    assert bool(info["unexpected_keys"]) == (architecture in WITHOUT_POOLER)
    inputs = task_inputs(architecture)
    assert_task_parity(task_outputs_of_theirs(hf_model, inputs), task_outputs_of_ours(model, inputs), architecture,
                       padded_inputs(seed=2)["input_mask"])


@pytest.mark.parametrize("architecture", sorted(TASK_MODELS))
def test_transformers_task_model_loads_into_ours(tmp_path, architecture):
    hf_model = hf_random_model(dict(TASK_HF_CONFIG, num_labels=TASK_NUM_LABELS[architecture]), seed=4,
                               architecture=architecture)
    hf_model.save_pretrained(str(tmp_path), safe_serialization=True)
    model = TASK_MODELS[architecture](tiny_config())
    without_pooler = architecture in WITHOUT_POOLER
    result = load_weights(model, str(tmp_path), allow_missing_heads=without_pooler)
    assert result.format == "hf"
    assert result.num_loaded == len(model_variable_map(model)) - 2 * without_pooler
    inputs = task_inputs(architecture)
    assert_task_parity(task_outputs_of_theirs(hf_model, inputs), task_outputs_of_ours(model, inputs), architecture,
                       padded_inputs(seed=2)["input_mask"])
