"""The peers' pretraining steps, each timed in a child process of its own (albert_tf.benchmarking.peer_comparison runs
it).

keras-hub's `AlbertBackbone` and transformers' `AlbertForPreTraining` run the step of our `pretrain_step`
workload: the encoder, the MLM head on the masked positions only (gathered before the transform, as our
pretrainer does), the 2-way sentence-order head on the pooled output, our loss (MLM Σ(w·CE) / (Σw + 1e-5) plus
the mean SOP cross entropy, in float32), backward, clipping to global norm 1.0 and AdamW (decay 0.01 except
LayerNorm and biases, epsilon 1e-6). keras-hub runs under the Keras dtype policy in a plain tf.function, as
keras-hub users train; transformers in eager PyTorch, bfloat16 by `torch.autocast("cpu")`.

Nothing here imports TensorFlow, Keras or PyTorch at import time: the transformers child would otherwise carry
TensorFlow's memory in its peak RSS. The child gets plain JSON (sizes, the transformers config, timing) and the
batch as an .npz file, so every configuration trains on the same bytes.
"""

import platform
import sys
import time
from typing import Callable, Dict, Tuple

import numpy as np

from albert_tf.benchmarking.peer_protocol import PEERS, check_peer_run, peak_rss_mb, run_peer_child
from peers.peer_models import CLIP_NORM, keras_adamw, keras_hub_backbone, torch_adamw

# Ours' pretraining loss adds this to the weight sum (albert_tf/training/pretraining_losses.py).
MLM_DENOMINATOR_EPSILON = 1e-5
LAYER_NORM_EPSILON = 1e-12
INITIALIZER_RANGE = 0.02


def _keras_hub_step(spec: dict, precision: str, batch: Dict[str, np.ndarray]) -> Tuple[Callable, dict]:
    """keras-hub's AlbertBackbone with an MLM and a sentence-order head in plain Keras, trained by a tf.function."""
    import keras
    import keras_hub
    import tensorflow as tf

    keras.mixed_precision.set_global_policy("mixed_bfloat16" if precision == "bfloat16" else "float32")
    config = spec["config"]
    backbone = keras_hub_backbone(config)
    initializer = keras.initializers.TruncatedNormal(stddev=INITIALIZER_RANGE)

    class MaskedLMHead(keras.layers.Layer):
        """Dense + GELU + LayerNorm on the gathered positions, then the tied word embeddings plus a bias."""

        def __init__(self, token_embedding, **kwargs):
            super().__init__(**kwargs)
            self.token_embedding = token_embedding
            # The tanh approximation, as ours' "gelu", transformers' "gelu_new" and keras-hub's encoder.
            self.transform = keras.layers.Dense(
                config["embedding_size"], activation=lambda x: keras.activations.gelu(x, approximate=True),
                kernel_initializer=initializer, name="transform")
            self.layer_norm = keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name="layer_norm")

        def build(self, input_shape):
            self.transform.build(input_shape[0])
            self.layer_norm.build(input_shape[0][:-1] + (config["embedding_size"],))
            self.bias = self.add_weight(shape=(config["vocab_size"],), initializer="zeros", name="bias")

        def call(self, inputs):
            sequence_output, positions = inputs
            gathered = keras.ops.take_along_axis(sequence_output, keras.ops.expand_dims(positions, -1), axis=1)
            hidden = self.layer_norm(self.transform(gathered))
            # As keras-hub's own MaskedLMHead: the tied decoder's logits in the compute dtype, plus the bias.
            logits = keras.ops.cast(self.token_embedding(hidden, reverse=True), self.compute_dtype)
            return logits + keras.ops.cast(self.bias, self.compute_dtype)

    inputs = {"token_ids": keras.Input((None,), dtype="int32", name="token_ids"),
              "segment_ids": keras.Input((None,), dtype="int32", name="segment_ids"),
              "padding_mask": keras.Input((None,), dtype="int32", name="padding_mask"),
              "masked_lm_positions": keras.Input((None,), dtype="int32", name="masked_lm_positions")}
    encoded = backbone({name: inputs[name] for name in ("token_ids", "segment_ids", "padding_mask")})
    model = keras.Model(inputs, {
        "mlm_logits": MaskedLMHead(backbone.token_embedding, name="mlm")(
            (encoded["sequence_output"], inputs["masked_lm_positions"])),
        "sop_logits": keras.layers.Dense(2, kernel_initializer=initializer, name="sop")(encoded["pooled_output"])})
    optimizer = keras_adamw(spec["learning_rate"])
    features = {"token_ids": batch["input_word_ids"], "segment_ids": batch["input_type_ids"],
                "padding_mask": batch["input_mask"], "masked_lm_positions": batch["masked_lm_positions"]}
    features = {name: tf.constant(value) for name, value in features.items()}
    labels = {name: tf.constant(batch[name]) for name in ("masked_lm_ids", "masked_lm_weights",
                                                          "next_sentence_labels")}

    @tf.function
    def train_step():
        with tf.GradientTape() as tape:
            outputs = model(features, training=True)
            mlm_logits = tf.cast(outputs["mlm_logits"], tf.float32)
            sop_logits = tf.cast(outputs["sop_logits"], tf.float32)
            log_probs = tf.nn.log_softmax(mlm_logits, axis=-1)
            mlm_losses = -tf.reduce_sum(log_probs * tf.one_hot(labels["masked_lm_ids"], config["vocab_size"]), -1)
            weights = labels["masked_lm_weights"]
            loss = (tf.reduce_sum(weights * mlm_losses) / (tf.reduce_sum(weights) + MLM_DENOMINATOR_EPSILON)
                    + tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                        labels=labels["next_sentence_labels"], logits=sop_logits)))
        optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        return loss, tf.shape(mlm_logits), tf.shape(sop_logits)

    def run(num_steps):
        for _ in range(num_steps):
            loss, mlm_shape, sop_shape = train_step()
        return float(loss.numpy()), mlm_shape.numpy().tolist(), sop_shape.numpy().tolist()

    return run, {"optimizer": "keras AdamW", "mixed_precision": ("mixed_bfloat16" if precision == "bfloat16"
                                                                  else "float32"),
                 "jit_compile": False, "keras_hub": keras_hub.__version__, "keras": keras.__version__,
                 "tensorflow": tf.__version__}


def _transformers_step(spec: dict, precision: str, batch: Dict[str, np.ndarray]) -> Tuple[Callable, dict]:
    """transformers' AlbertForPreTraining (encoder, MLM predictions, SOP classifier) in eager PyTorch."""
    import torch
    import transformers

    model = transformers.AlbertForPreTraining(transformers.AlbertConfig(**spec["hf_config"]))
    model.train()
    optimizer = torch_adamw(model, spec["learning_rate"])
    tensors = {name: torch.from_numpy(value) for name, value in batch.items()}
    hidden_size = spec["config"]["hidden_size"]
    positions = tensors["masked_lm_positions"].long().unsqueeze(-1).expand(-1, -1, hidden_size)

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bfloat16"):
            encoded = model.albert(input_ids=tensors["input_word_ids"].long(),
                                   attention_mask=tensors["input_mask"].long(),
                                   token_type_ids=tensors["input_type_ids"].long())
            mlm_logits = model.predictions(torch.gather(encoded.last_hidden_state, 1, positions)).float()
            sop_logits = model.sop_classifier(encoded.pooler_output).float()
        mlm_losses = torch.nn.functional.cross_entropy(
            mlm_logits.flatten(0, 1), tensors["masked_lm_ids"].long().flatten(), reduction="none")
        weights = tensors["masked_lm_weights"].flatten()
        loss = ((weights * mlm_losses).sum() / (weights.sum() + MLM_DENOMINATOR_EPSILON)
                + torch.nn.functional.cross_entropy(sop_logits, tensors["next_sentence_labels"].long()))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)
        optimizer.step()
        return loss, list(mlm_logits.shape), list(sop_logits.shape)

    def run(num_steps):
        for _ in range(num_steps):
            loss, mlm_shape, sop_shape = train_step()
        return float(loss.detach()), mlm_shape, sop_shape

    return run, {"optimizer": "torch AdamW", "mixed_precision": ("bfloat16 autocast" if precision == "bfloat16"
                                                                  else "float32"),
                 "jit_compile": None, "transformers": transformers.__version__, "torch": torch.__version__,
                 "torch_threads": torch.get_num_threads()}


_STEPS = {"keras-hub": _keras_hub_step, "transformers": _transformers_step}


def run_peer_step(peer: str, precision: str, spec: dict) -> dict:
    """Builds `peer`'s model in `precision`, runs the warmup steps, then times `spec["steps"]` steps; the record.

    `spec` holds "config" (our AlbertConfig's dict), "hf_config" (its transformers config), "batch_file" (an
    .npz of random_batch's arrays), "learning_rate", "steps" and "warmup_steps" (at least one is run).
    `first_loss` is the first step's loss, `loss` the last timed one's; `peak_rss_mb` is the process's
    high-water mark (imports, model, warmup and steps), as our workloads' records report it.
    """
    check_peer_run(peer, precision, PEERS)
    with np.load(spec["batch_file"]) as arrays:
        batch = {name: arrays[name] for name in arrays.files}
    start = time.perf_counter()
    run, details = _STEPS[peer](spec, precision, batch)
    first_loss = run(1)[0]
    if spec["warmup_steps"] > 1:
        run(spec["warmup_steps"] - 1)
    warmup_seconds = time.perf_counter() - start
    start = time.perf_counter()
    loss, mlm_logits_shape, sop_logits_shape = run(spec["steps"])
    elapsed = time.perf_counter() - start
    batch_size = batch["input_word_ids"].shape[0]
    return {"implementation": peer, "precision": precision, **details,
            "seq_per_s": spec["steps"] * batch_size / elapsed, "warmup_seconds": warmup_seconds,
            "first_loss": first_loss, "loss": loss, "mlm_logits_shape": mlm_logits_shape,
            "sop_logits_shape": sop_logits_shape,
            "peak_rss_mb": peak_rss_mb(),
            "python": platform.python_version()}


def main(argv):
    """The child's entry, `python -m peers.pretraining_steps PEER PRECISION SPEC_JSON`: peer_protocol's
    run_peer_child."""
    run_peer_child(argv, run_peer_step)


if __name__ == "__main__":
    main(sys.argv[1:])
