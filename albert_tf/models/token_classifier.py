"""AlbertTokenClassifier: per-token logits (NER tagging) from the sequence output."""

from albert_tf.layers.classification_head import ClassificationHead
from albert_tf.layers.initializers import HEAD_INITIALIZER_STDDEV
from albert_tf.layers.replica_dropout import ReplicaDropout
from albert_tf.models.task_model import AlbertTaskModel

TOKEN_CLASSIFIER_SCOPE = "cls/token_classification"


class AlbertTokenClassifier(AlbertTaskModel):
    """Token classification: sequence output -> dropout -> a dense layer, float32 logits [B, S, num_labels].

    The original ALBERT has no tagging head; this one is run_classifier's head applied at every
    position, under its own scope so that a TF1 checkpoint says which head it holds:
    `cls/token_classification/output_weights` [num_labels, H] and `.../output_bias`, initialised with
    the fixed 0.02 stddev of the original's heads. Hugging Face's AlbertForTokenClassification
    (`classifier.weight` / `classifier.bias`) holds the same arrays. Dropout (0.1 by default, HF's
    classifier_dropout_prob) applies only when training.
    Built from a config or around an AlbertEncoder (`encoder=`), as AlbertTaskModel describes.

    Example:
    >>> import tensorflow as tf
    >>> from albert_tf import AlbertConfig
    >>> config = AlbertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                       num_attention_heads=2, intermediate_size=64, embedding_size=16)
    >>> model = AlbertTokenClassifier(config, num_labels=5)
    >>> model({"input_word_ids": tf.constant([[2, 9, 3]]), "input_mask": tf.ones([1, 3], tf.int32),
    ...        "input_type_ids": tf.zeros([1, 3], tf.int32)}).shape
    TensorShape([1, 3, 5])
    """

    def __init__(self, config=None, num_labels=2, dropout_rate=0.1, recompute_blocks=None, encoder=None, **kwargs):
        kwargs.setdefault("name", "albert_token_classifier")
        super().__init__(config, recompute_blocks=recompute_blocks, encoder=encoder, **kwargs)
        if not isinstance(num_labels, int) or num_labels < 1:
            raise ValueError(f"AlbertTokenClassifier needs num_labels >= 1, got {num_labels!r}.")
        self.num_labels = num_labels
        self.dropout_rate = dropout_rate
        self.dropout = ReplicaDropout(dropout_rate, dtype=self.dtype_policy)
        self.head = ClassificationHead(hidden_size=self.config.hidden_size, num_classes=num_labels,
                                       initializer_range=HEAD_INITIALIZER_STDDEV, name="token_classification",
                                       dtype=self.dtype_policy)
        self.head.build((None, None, self.config.hidden_size))
        self.built = True

    def call(self, inputs, training=False):
        sequence = self.encoder(inputs, training=training)["sequence_output"]
        return self.head(self.dropout(sequence, training=training))

    def head_variable_map(self):
        """TF1 names of the head's variables."""
        return {f"{TOKEN_CLASSIFIER_SCOPE}/output_weights": self.head.output_weights,
                f"{TOKEN_CLASSIFIER_SCOPE}/output_bias": self.head.output_bias}

    def get_config(self):
        config = super().get_config()
        config.update(num_labels=self.num_labels, dropout_rate=self.dropout_rate)
        return config
