"""albert-tf: ALBERT (arXiv:1909.11942) in TensorFlow 2 and Keras 3."""

from albert_tf.checkpoint_io import load_weights, save_weights
from albert_tf.classifier import AlbertClassifier
from albert_tf.config import AlbertConfig
from albert_tf.encoder import AlbertEncoder
from albert_tf.multiple_choice import AlbertMultipleChoice
from albert_tf.pretrainer import AlbertPretrainer
from albert_tf.span_predictor import AlbertSpanPredictor
from albert_tf.squad_v2 import AlbertSquadV2

__all__ = ["AlbertClassifier", "AlbertConfig", "AlbertEncoder", "AlbertMultipleChoice", "AlbertPretrainer",
           "AlbertSpanPredictor", "AlbertSquadV2", "load_weights", "save_weights"]
