"""albert-tf: ALBERT (arXiv:1909.11942) in TensorFlow 2 and Keras 3."""

from albert_tf.config import AlbertConfig
from albert_tf.encoder import AlbertEncoder
from albert_tf.pretrainer import AlbertPretrainer

__all__ = ["AlbertConfig", "AlbertEncoder", "AlbertPretrainer"]
