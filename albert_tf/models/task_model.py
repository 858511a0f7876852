"""AlbertTaskModel: the base of the models that put heads on an AlbertEncoder (pretraining and fine-tuning)."""

import keras

from albert_tf.models.encoder import AlbertEncoder


class AlbertTaskModel(keras.Model):
    """A keras.Model whose `.encoder` is an AlbertEncoder, built from a config or handed in ready-made.

    Pass exactly one of:
    - `config`: an AlbertConfig or its dict form; the model builds a fresh encoder under its own
      dtype policy, with `recompute_blocks` (re-run blocks in the backward pass; None is False).
    - `encoder`: an AlbertEncoder, as keras-hub tasks take a backbone. The model uses that very
      instance, its dtype policy included, so its variables are the model's and a trained encoder
      starts the task with its weights. `recompute_blocks` is the encoder's own option then, so
      passing it here is an error.

    get_config stores the config (and recompute_blocks) in the first case, the encoder serialized
    with keras.saving.serialize_keras_object in the second; from_config rebuilds either.
    Subclasses build their heads after calling this constructor and extend get_config.

    Example:
    >>> import tensorflow as tf
    >>> from albert_tf import AlbertClassifier, AlbertConfig, AlbertEncoder
    >>> config = AlbertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                       num_attention_heads=2, intermediate_size=64, embedding_size=16)
    >>> encoder = AlbertEncoder(config)
    >>> model = AlbertClassifier(encoder=encoder, num_labels=3)
    >>> model.encoder is encoder, model.config is encoder.config
    (True, True)
    >>> model({"input_word_ids": tf.constant([[2, 9, 3]]), "input_mask": tf.ones([1, 3], tf.int32),
    ...        "input_type_ids": tf.zeros([1, 3], tf.int32)}).shape
    TensorShape([1, 3])
    >>> restored = AlbertClassifier.from_config(model.get_config())
    >>> restored.get_config() == model.get_config()
    True
    """

    def __init__(self, config=None, recompute_blocks=None, encoder=None, **kwargs):
        super().__init__(**kwargs)
        model_class = type(self).__name__
        if (config is None) == (encoder is None):
            raise ValueError(f"{model_class} takes exactly one of config= (an AlbertConfig or its dict) and encoder= "
                             f"(an AlbertEncoder), got {'both' if config is not None else 'neither'}.")
        if isinstance(config, AlbertEncoder):
            raise TypeError(f"{model_class} got an AlbertEncoder as config=; pass it as encoder=.")
        if encoder is None:
            recompute_blocks = False if recompute_blocks is None else recompute_blocks
            encoder = AlbertEncoder(config, recompute_blocks=recompute_blocks, dtype=self.dtype_policy)
        elif not isinstance(encoder, AlbertEncoder):
            raise TypeError(f"encoder= must be an AlbertEncoder, got {type(encoder).__name__}.")
        elif recompute_blocks is not None:
            raise ValueError(f"recompute_blocks={recompute_blocks!r} is the encoder's option: build the AlbertEncoder "
                             f"with it instead of passing it to {model_class} with encoder=.")
        self._encoder_given = config is None
        self.encoder = encoder

    @property
    def config(self):
        """The encoder's AlbertConfig."""
        return self.encoder.config

    @property
    def recompute_blocks(self):
        """The encoder's recompute_blocks."""
        return self.encoder.recompute_blocks

    def get_config(self):
        if self._encoder_given:
            config = {"encoder": keras.saving.serialize_keras_object(self.encoder)}
        else:
            config = {"config": self.config.to_dict(), "recompute_blocks": self.recompute_blocks}
        config["name"] = self.name
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if "encoder" in config:
            config["encoder"] = keras.saving.deserialize_keras_object(
                config["encoder"], custom_objects={"AlbertEncoder": AlbertEncoder})
        return cls(**config)
