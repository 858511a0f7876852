"""The original TF1 checkpoint name of every variable of an AlbertEncoder or AlbertPretrainer.

Names follow google-research/albert modeling.py. A shared half (index 1) sits exactly where the
original puts it; its LayerNorm is the inner group's `LayerNorm` (attention) or `LayerNorm_1`
(feed-forward). Partial sharing has no original names: an unshared half of layer l is
`attention_{l+1}` / `ffn_{l+1}` under its group, with its LayerNorm nested inside that scope.
"""

from typing import Dict


def _dense(prefix, layer):
    return {prefix + "/kernel": layer.kernel, prefix + "/bias": layer.bias}


def _layer_norm(prefix, layer):
    return {prefix + "/gamma": layer.gamma, prefix + "/beta": layer.beta}


def encoder_variable_map(encoder, scope="bert") -> Dict[str, object]:
    """TF1 name -> tf.Variable for every encoder variable (shared variables appear once)."""
    names = {}
    embeddings = encoder.embeddings
    names[f"{scope}/embeddings/word_embeddings"] = embeddings.word_embeddings
    names[f"{scope}/embeddings/token_type_embeddings"] = embeddings.token_type_embeddings
    names[f"{scope}/embeddings/position_embeddings"] = embeddings.position_embeddings
    names.update(_layer_norm(f"{scope}/embeddings/LayerNorm", embeddings.layer_norm))
    if encoder.embedding_projection is not None:
        names.update(_dense(f"{scope}/encoder/embedding_hidden_mapping_in", encoder.embedding_projection))

    plan = encoder.sharing_plan
    for (group, inner, index), attention in zip(plan.attention_keys, encoder.attention_layers):
        base = f"{scope}/encoder/transformer/group_{group}/inner_group_{inner}"
        half = f"{base}/attention_{index}"
        for projection in ("query", "key", "value"):
            names.update(_dense(f"{half}/self/{projection}", getattr(attention, projection)))
        names.update(_dense(f"{half}/output/dense", attention.output_dense))
        names.update(_layer_norm(f"{base}/LayerNorm" if index == 1 else f"{half}/LayerNorm", attention.layer_norm))
    for (group, inner, index), ffn in zip(plan.ffn_keys, encoder.feed_forward_layers):
        base = f"{scope}/encoder/transformer/group_{group}/inner_group_{inner}"
        half = f"{base}/ffn_{index}"
        names.update(_dense(f"{half}/intermediate/dense", ffn.intermediate))
        names.update(_dense(f"{half}/intermediate/output/dense", ffn.output_dense))
        names.update(_layer_norm(f"{base}/LayerNorm_1" if index == 1 else f"{half}/LayerNorm_1", ffn.layer_norm))
    names.update(_dense(f"{scope}/pooler/dense", encoder.pooler))
    return names


def pretrainer_variable_map(pretrainer, scope="bert") -> Dict[str, object]:
    """The encoder's names plus the `cls/predictions` and `cls/seq_relationship` heads."""
    names = encoder_variable_map(pretrainer.encoder, scope)
    mlm = pretrainer.masked_lm_head
    names.update(_dense("cls/predictions/transform/dense", mlm.dense))
    names.update(_layer_norm("cls/predictions/transform/LayerNorm", mlm.layer_norm))
    names["cls/predictions/output_bias"] = mlm.output_bias
    sop = pretrainer.sentence_order_head
    names["cls/seq_relationship/output_weights"] = sop.output_weights
    names["cls/seq_relationship/output_bias"] = sop.output_bias
    return names
