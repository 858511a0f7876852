"""What the peers' child processes (pretraining_steps, finetune_text) build alike: keras-hub's ALBERT backbone from
our config, and each framework's AdamW as the original's (decay 0.01 except LayerNorm and biases, epsilon 1e-6,
clipping to global norm 1.0; torch clips in the training step). Each imports its framework when called, so a
transformers child imports no TensorFlow.
"""

WEIGHT_DECAY_RATE = 0.01
ADAM_EPSILON = 1e-6
CLIP_NORM = 1.0


def keras_hub_backbone(config: dict):
    """keras-hub's AlbertBackbone of our AlbertConfig's dict `config`."""
    import keras_hub

    return keras_hub.models.AlbertBackbone(
        vocabulary_size=config["vocab_size"], num_layers=config["num_hidden_layers"],
        num_heads=config["num_attention_heads"], embedding_dim=config["embedding_size"],
        hidden_dim=config["hidden_size"], intermediate_dim=config["intermediate_size"],
        num_groups=config["num_hidden_groups"], num_inner_repetitions=config["inner_group_num"],
        dropout=config["hidden_dropout_prob"], max_sequence_length=config["max_position_embeddings"],
        num_segments=config["type_vocab_size"])


def keras_adamw(learning_rate: float):
    """Keras' AdamW, LayerNorm's gamma and beta and the biases left out of the decay."""
    import keras

    optimizer = keras.optimizers.AdamW(learning_rate=learning_rate, weight_decay=WEIGHT_DECAY_RATE,
                                       epsilon=ADAM_EPSILON, global_clipnorm=CLIP_NORM)
    optimizer.exclude_from_weight_decay(var_names=["gamma", "beta", "bias"])
    return optimizer


def torch_adamw(model, learning_rate: float):
    """torch's AdamW over `model`'s parameters, LayerNorm's and the biases left out of the decay."""
    import torch

    no_decay = ("LayerNorm", "bias")
    named = list(model.named_parameters())
    return torch.optim.AdamW(
        [{"params": [p for name, p in named if not any(part in name for part in no_decay)],
          "weight_decay": WEIGHT_DECAY_RATE},
         {"params": [p for name, p in named if any(part in name for part in no_decay)], "weight_decay": 0.0}],
        lr=learning_rate, eps=ADAM_EPSILON)
