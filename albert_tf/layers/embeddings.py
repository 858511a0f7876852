"""AlbertEmbeddings: factorized word, token-type and position tables of width embedding_size."""

import keras
import tensorflow as tf

from albert_tf.layers.initializers import LAYER_NORM_EPSILON, truncated_normal
from albert_tf.layers.layer_normalization import AlbertLayerNormalization
from albert_tf.layers.replica_dropout import ReplicaDropout


class AlbertEmbeddings(keras.layers.Layer):
    """Sums word, token-type and learned position embeddings (width E), then LayerNorm and dropout.

    The E -> H projection is not part of this layer: the original keeps it in the encoder scope
    (`bert/encoder/embedding_hidden_mapping_in`) and applies it only when E != H.

    Example:
    >>> layer = AlbertEmbeddings(vocab_size=100, embedding_size=16, max_position_embeddings=32)
    >>> layer(tf.constant([[2, 7, 3]]), tf.constant([[0, 0, 0]])).shape
    TensorShape([1, 3, 16])
    """

    def __init__(self, vocab_size, embedding_size, max_position_embeddings=512, type_vocab_size=2,
                 dropout_rate=0.0, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self.layer_norm = AlbertLayerNormalization(epsilon=LAYER_NORM_EPSILON, name="LayerNorm",
                                                   dtype=self.dtype_policy)
        self.dropout = ReplicaDropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        initializer = truncated_normal(self.initializer_range)
        self.word_embeddings = self.add_weight(
            name="word_embeddings", shape=(self.vocab_size, self.embedding_size), initializer=initializer)
        self.token_type_embeddings = self.add_weight(
            name="token_type_embeddings", shape=(self.type_vocab_size, self.embedding_size),
            initializer=initializer)
        self.position_embeddings = self.add_weight(
            name="position_embeddings", shape=(self.max_position_embeddings, self.embedding_size),
            initializer=initializer)
        self.layer_norm.build((None, None, self.embedding_size))
        self.built = True

    def call(self, input_word_ids, input_type_ids, training=False):
        seq_length = tf.shape(input_word_ids)[1]
        word = tf.gather(self.word_embeddings, input_word_ids)
        token_type = tf.gather(self.token_type_embeddings, input_type_ids)
        position = self.position_embeddings[:seq_length][tf.newaxis]
        embeddings = self.layer_norm(word + token_type + position, training=training)
        return self.dropout(embeddings, training=training)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, embedding_size=self.embedding_size,
                      max_position_embeddings=self.max_position_embeddings,
                      type_vocab_size=self.type_vocab_size, dropout_rate=self.dropout_rate,
                      initializer_range=self.initializer_range)
        return config
