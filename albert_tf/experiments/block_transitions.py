"""Per depth, the L2 distance and cosine similarity between each block's input and output (paper Figure 2).

Example:
>>> config = AlbertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
...                       intermediate_size=32, embedding_size=8)
>>> batch = {"input_word_ids": tf.constant([[2, 7, 9, 3]]), "input_mask": tf.ones([1, 4], tf.int32),
...          "input_type_ids": tf.zeros([1, 4], tf.int32)}
>>> measured = block_transitions(AlbertEncoder(config), [batch])
>>> len(measured["l2_distance"]), sorted(measured["l2_distance"][0])
(2, ['mean', 'sd'])
"""

from typing import Dict, Iterable, List

import numpy as np
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.models.encoder import AlbertEncoder

ENCODER_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


def _block_inputs_and_outputs(encoder: AlbertEncoder, batch) -> List[np.ndarray]:
    """[embedding output, block 1 output, ..., block N output], each [B, S, H]."""
    hidden = encoder.embeddings(tf.cast(batch["input_word_ids"], tf.int32), tf.cast(batch["input_type_ids"], tf.int32))
    if encoder.embedding_projection is not None:
        hidden = encoder.embedding_projection(hidden)
    outputs = encoder({name: batch[name] for name in ENCODER_INPUTS}, training=False)["encoder_outputs"]
    return [np.asarray(tensor, dtype=np.float64) for tensor in [hidden, *outputs]]


def block_transitions(encoder: AlbertEncoder, batches: Iterable[Dict[str, tf.Tensor]]) -> Dict[str, List[Dict]]:
    """Mean and spread over the real tokens of `batches`, per applied block, of ||output - input|| and
    cos(input, output)."""
    distances: List[List[np.ndarray]] = []
    cosines: List[List[np.ndarray]] = []
    for batch in batches:
        states = _block_inputs_and_outputs(encoder, batch)
        real = np.asarray(batch["input_mask"]).astype(bool)
        if not distances:
            distances, cosines = [[] for _ in states[1:]], [[] for _ in states[1:]]
        for depth, (before, after) in enumerate(zip(states[:-1], states[1:])):
            before, after = before[real], after[real]
            distances[depth].append(np.linalg.norm(after - before, axis=-1))
            norms = np.linalg.norm(before, axis=-1) * np.linalg.norm(after, axis=-1)
            cosines[depth].append(np.sum(before * after, axis=-1) / np.maximum(norms, 1e-12))

    def summarise(per_depth):
        return [{"mean": float(np.mean(np.concatenate(values))), "sd": float(np.std(np.concatenate(values)))}
                for values in per_depth]

    if not distances:
        raise ValueError("block_transitions needs at least one batch of held-out text.")
    return {"l2_distance": summarise(distances), "cosine_similarity": summarise(cosines)}


def deeper_shared_encoder(encoder: AlbertEncoder, num_hidden_layers: int, batch) -> AlbertEncoder:
    """The all-shared `encoder`'s weights applied `num_hidden_layers` times: its one block, repeated."""
    config = encoder.config
    if config.share_type != "all" or config.num_hidden_groups != 1 or config.inner_group_num != 1:
        raise ValueError(f"Only a model with one shared block can run deeper than trained; this one has "
                         f"share_type={config.share_type!r}, num_hidden_groups={config.num_hidden_groups}, "
                         f"inner_group_num={config.inner_group_num}.")
    deeper = AlbertEncoder(AlbertConfig.from_dict({**config.to_dict(), "num_hidden_layers": num_hidden_layers}))
    deeper({name: batch[name] for name in ENCODER_INPUTS}, training=False)
    deeper.set_weights(encoder.get_weights())
    return deeper
