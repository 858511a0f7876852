"""A numpy transcription of the original modeling.py forward pass, for checking the Keras model.

It reads weights by original TF1 name from a dict, so the same reference also checks the
checkpoint converters. Written from the original's equations, independently of albert_tf's layers.
"""
import math

import numpy as np


def layer_norm(x, gamma, beta, epsilon=1e-12):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


ACTIVATIONS = {"gelu": gelu, "gelu_new": gelu, "relu": lambda x: np.maximum(x, 0), "tanh": np.tanh,
               "linear": lambda x: x}


def softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def block(x, bias, w, attention_scope, ffn_scope, num_heads, act):
    batch, seq, hidden = x.shape
    head = hidden // num_heads

    def dense(t, scope):
        return t @ w[scope + "/kernel"] + w[scope + "/bias"]

    def heads(t):
        return t.reshape(batch, seq, num_heads, head).transpose(0, 2, 1, 3)

    q = heads(dense(x, attention_scope + "/self/query"))
    k = heads(dense(x, attention_scope + "/self/key"))
    v = heads(dense(x, attention_scope + "/self/value"))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head) + bias
    context = (softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(batch, seq, hidden)
    base = attention_scope.rsplit("/", 1)[0]
    x = layer_norm(x + dense(context, attention_scope + "/output/dense"),
                   w[base + "/LayerNorm/gamma"], w[base + "/LayerNorm/beta"])
    intermediate = act(dense(x, ffn_scope + "/intermediate/dense"))
    return layer_norm(x + dense(intermediate, ffn_scope + "/intermediate/output/dense"),
                      w[base + "/LayerNorm_1/gamma"], w[base + "/LayerNorm_1/beta"])


def forward(w, config, word_ids, mask, type_ids, masked_positions=None):
    """Returns sequence_output, pooled_output and (with positions) mlm_logits, sop_logits.

    `w` maps original TF1 names (bert/..., cls/...) to arrays; only share_type=all layouts exist
    in the original, which is what this reference implements.
    """
    act = ACTIVATIONS[config.hidden_act]
    seq = word_ids.shape[1]
    x = (w["bert/embeddings/word_embeddings"][word_ids] + w["bert/embeddings/token_type_embeddings"][type_ids]
         + w["bert/embeddings/position_embeddings"][:seq][None])
    x = layer_norm(x, w["bert/embeddings/LayerNorm/gamma"], w["bert/embeddings/LayerNorm/beta"])
    if config.embedding_size != config.hidden_size:
        projection = "bert/encoder/embedding_hidden_mapping_in"
        x = x @ w[f"{projection}/kernel"] + w[f"{projection}/bias"]
    bias = (1.0 - mask[:, None, None, :].astype(np.float64)) * -10000.0
    for layer in range(config.num_hidden_layers):
        group = int(layer / config.num_hidden_layers * config.num_hidden_groups)
        for inner in range(config.inner_group_num):
            scope = f"bert/encoder/transformer/group_{group}/inner_group_{inner}"
            x = block(x, bias, w, scope + "/attention_1", scope + "/ffn_1", config.num_attention_heads, act)
    pooled = np.tanh(x[:, 0] @ w["bert/pooler/dense/kernel"] + w["bert/pooler/dense/bias"])
    if masked_positions is None:
        return x, pooled
    gathered = np.take_along_axis(x, masked_positions[:, :, None], axis=1)
    h = act(gathered @ w["cls/predictions/transform/dense/kernel"] + w["cls/predictions/transform/dense/bias"])
    h = layer_norm(h, w["cls/predictions/transform/LayerNorm/gamma"], w["cls/predictions/transform/LayerNorm/beta"])
    mlm_logits = h @ w["bert/embeddings/word_embeddings"].T + w["cls/predictions/output_bias"]
    sop_logits = pooled @ w["cls/seq_relationship/output_weights"].T + w["cls/seq_relationship/output_bias"]
    return x, pooled, mlm_logits, sop_logits


def assert_pretrainer_matches(model, weights, config, inputs, atol, mlm_atol):
    """Checks an AlbertPretrainer's outputs on `inputs` against `forward` with `weights` in float64.

    `mlm_atol` bounds the MLM logits (a longer chain of float32 rounding), `atol` the other three.
    Returns the encoder's outputs for further checks.
    """
    outputs = model(inputs)
    encoded = model.encoder(inputs)
    as_float64 = {name: np.asarray(value, np.float64) for name, value in weights.items()}
    sequence, pooled, mlm, sop = forward(
        as_float64, config, inputs["input_word_ids"].numpy(), inputs["input_mask"].numpy(),
        inputs["input_type_ids"].numpy(), inputs["masked_lm_positions"].numpy())
    np.testing.assert_allclose(encoded["sequence_output"], sequence, atol=atol)
    np.testing.assert_allclose(encoded["pooled_output"], pooled, atol=atol)
    np.testing.assert_allclose(outputs["mlm_logits"], mlm, atol=mlm_atol)
    np.testing.assert_allclose(outputs["sop_logits"], sop, atol=atol)
    return encoded
