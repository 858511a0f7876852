"""AlbertClassifier: pooled output -> dropout -> the original's GLUE head (classification or regression)."""

from albert_tf.layers.classification_head import ClassificationHead
from albert_tf.layers.initializers import HEAD_INITIALIZER_STDDEV
from albert_tf.layers.replica_dropout import ReplicaDropout
from albert_tf.models.encoder import no_output_positions
from albert_tf.models.task_model import AlbertTaskModel


class AlbertClassifier(AlbertTaskModel):
    """Sentence(-pair) classification, or regression with `num_labels=1` (STS-B).

    Variables match run_classifier.py: `output_weights` [num_labels, H] and `output_bias`.
    Dropout (0.1 by default, the original's) applies to the pooled output only when training. The
    encoder's last block runs on position 0 alone, the only row the pooler reads (`output_positions`).
    Built from a config or around an AlbertEncoder (`encoder=`), as AlbertTaskModel describes.

    Example:
    >>> import tensorflow as tf
    >>> from albert_tf import AlbertConfig
    >>> config = AlbertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                       num_attention_heads=2, intermediate_size=64, embedding_size=16)
    >>> model = AlbertClassifier(config, num_labels=3)
    >>> model({"input_word_ids": tf.constant([[2, 9, 3]]), "input_mask": tf.ones([1, 3], tf.int32),
    ...        "input_type_ids": tf.zeros([1, 3], tf.int32)}).shape
    TensorShape([1, 3])
    """

    def __init__(self, config=None, num_labels=2, dropout_rate=0.1, recompute_blocks=None, encoder=None, **kwargs):
        kwargs.setdefault("name", "albert_classifier")
        super().__init__(config, recompute_blocks=recompute_blocks, encoder=encoder, **kwargs)
        self.num_labels = num_labels
        self.dropout_rate = dropout_rate
        self.dropout = ReplicaDropout(dropout_rate, dtype=self.dtype_policy)
        self.head = ClassificationHead(hidden_size=self.config.hidden_size, num_classes=num_labels,
                                       initializer_range=HEAD_INITIALIZER_STDDEV, name="output",
                                       dtype=self.dtype_policy)
        self.head.build((None, self.config.hidden_size))
        self.built = True

    def call(self, inputs, training=False):
        positions = no_output_positions(inputs["input_word_ids"])
        pooled = self.encoder(inputs, training=training, output_positions=positions)["pooled_output"]
        return self.head(self.dropout(pooled, training=training))

    def head_variable_map(self):
        """TF1 names of the head's variables, as run_classifier.py creates them."""
        return {"output_weights": self.head.output_weights, "output_bias": self.head.output_bias}

    def get_config(self):
        config = super().get_config()
        config.update(num_labels=self.num_labels, dropout_rate=self.dropout_rate)
        return config
