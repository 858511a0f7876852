"""albert-tf: ALBERT (arXiv:1909.11942) in TensorFlow 2 and Keras 3.

The public names load on first use, so `import albert_tf.tokenization` (and the data workers that
import it) does not pay for TensorFlow and Keras unless a model is needed.
"""

import importlib

_EXPORTS = {
    "AlbertClassifier": "albert_tf.models.classifier",
    "AlbertConfig": "albert_tf.config",
    "AlbertEncoder": "albert_tf.models.encoder",
    "AlbertMultipleChoice": "albert_tf.models.multiple_choice",
    "AlbertPretrainer": "albert_tf.models.pretrainer",
    "AlbertSpanPredictor": "albert_tf.models.span_predictor",
    "AlbertSquadV2": "albert_tf.models.squad_v2",
    "AlbertTokenClassifier": "albert_tf.models.token_classifier",
    "load_weights": "albert_tf.checkpoints.loading",
    "save_weights": "albert_tf.checkpoints.writing",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'albert_tf' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + __all__)
