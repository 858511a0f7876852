"""A fine-tuned AlbertClassifier behind its preprocessor, as one SavedModel: raw strings in, probabilities out.

A batch is packed to its longest row ([CLS] and a [SEP] per segment counted), at most the preprocessor's
seq_length, so short text computes no padding; the probabilities are those of rows packed to seq_length, to float
rounding (padding is masked at -10000 and nothing is trimmed that seq_length would keep).
"""

import logging
from typing import Union

import tensorflow as tf

from albert_tf.export.preprocessor import DEFAULT_SEQ_LENGTH, AlbertPreprocessor
from albert_tf.export.saved_objects import AutoTrackable, Untracked, check_file, tf_variables
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.tokenization import DEFAULT_DIGIT_COMMA_RULE

logger = logging.getLogger(__name__)

TEXT_INPUT_NAMES = ("text_a", "text_b")


class _RawTextClassifier(AutoTrackable):
    """A fine-tuned AlbertClassifier behind its preprocessor: strings in, probabilities out."""

    def __init__(self, classifier: AlbertClassifier, preprocessor: AlbertPreprocessor, num_text_inputs: int,
                 multi_label: bool = False):
        self._parts = Untracked(classifier=classifier)
        self._multi_label = multi_label
        self.preprocessor = preprocessor
        self.variables = tf_variables(classifier.variables)
        self.trainable_variables = tf_variables(classifier.trainable_variables)
        self.regularization_losses = []
        specs = [tf.TensorSpec([None], tf.string, name=name) for name in TEXT_INPUT_NAMES[:num_text_inputs]]
        function = self._classify_one if num_text_inputs == 1 else self._classify_pair
        # The loaded object is called like a function; `loaded(text_a[, text_b])`.
        self.__call__ = tf.function(function, input_signature=specs, autograph=False)

    def _classify(self, texts):
        segments = [self.preprocessor.tokenize(text) for text in texts]
        classifier = self._parts.classifier
        inputs = self.preprocessor.bert_pack_inputs(segments, packed_length(segments, self.preprocessor.seq_length))
        logits = classifier(inputs, training=False)
        if classifier.num_labels == 1:
            return {"predictions": tf.cast(logits[:, 0], tf.float32)}
        logits = tf.cast(logits, tf.float32)
        if self._multi_label:
            return {"probabilities": tf.sigmoid(logits)}
        return {"probabilities": tf.nn.softmax(logits, axis=-1)}

    def _classify_one(self, text_a):
        return self._classify([text_a])

    def _classify_pair(self, text_a, text_b):
        return self._classify([text_a, text_b])


def packed_length(segments, seq_length: int) -> tf.Tensor:
    """The length that packs every row of `segments` (ragged token ids [batch, (tokens)], one per text input)
    untrimmed, [CLS] and a [SEP] per segment included, at most `seq_length` (int32 scalar).

    Example:
    >>> segments = [tf.ragged.constant([[7, 8], [7, 8, 9, 10]]), tf.ragged.constant([[5], []])]
    >>> int(packed_length(segments, 128)), int(packed_length(segments, 6))
    (7, 6)
    """
    tokens = tf.add_n([tf.cast(segment.row_lengths(), tf.int32) for segment in segments])
    special = len(segments) + 1
    return tf.minimum(tf.reduce_max(tf.concat([tokens, [0]], axis=0)) + special, seq_length)


def export_classifier_with_preprocessor(classifier: AlbertClassifier, export_dir: str,
                                        preprocessor: Union[AlbertPreprocessor, str], do_lower_case: bool = True,
                                        seq_length: int = DEFAULT_SEQ_LENGTH, num_text_inputs: int = 1,
                                        digit_comma_rule: str = DEFAULT_DIGIT_COMMA_RULE,
                                        multi_label: bool = False) -> str:
    """Writes one SavedModel that classifies raw strings: the preprocessor, then the fine-tuned classifier.

    `preprocessor` is an AlbertPreprocessor or the path of the SentencePiece model to build one from
    (with `do_lower_case`, `seq_length` and `digit_comma_rule`). `num_text_inputs` is 1 (`text_a`) or 2
    (`text_a`, `text_b`, packed as `[CLS] a [SEP] b [SEP]`, each batch to its longest row up to `seq_length`).
    The SavedModel's `serving_default` signature and the loaded
    object itself take those string tensors and return `probabilities` [B, num_labels] (softmax of the
    logits; with `multi_label`, a sigmoid per label), or `predictions` [B] for a regression model (num_labels=1).
    Loading it needs `import tensorflow_text`.

    Example:
    >>> export_classifier_with_preprocessor(classifier, "/tmp/sst2_model", "30k-clean.model")  # doctest: +SKIP
    >>> loaded = tf.saved_model.load("/tmp/sst2_model")  # doctest: +SKIP
    >>> loaded(tf.constant(["a gripping film"]))["probabilities"].shape  # doctest: +SKIP
    TensorShape([1, 2])
    """
    if not isinstance(classifier, AlbertClassifier):
        raise TypeError(f"export_classifier_with_preprocessor takes an AlbertClassifier, got "
                        f"{type(classifier).__name__}.")
    if num_text_inputs not in (1, 2):
        raise ValueError(f"num_text_inputs must be 1 or 2, got {num_text_inputs!r}.")
    if not isinstance(preprocessor, AlbertPreprocessor):
        check_file(preprocessor, "preprocessor (SentencePiece model)")
        preprocessor = AlbertPreprocessor(preprocessor, do_lower_case=do_lower_case, seq_length=seq_length,
                                          digit_comma_rule=digit_comma_rule)
    model = _RawTextClassifier(classifier, preprocessor, num_text_inputs, multi_label)
    tf.saved_model.save(model, export_dir, signatures={"serving_default": model.__call__.get_concrete_function()})
    logger.info("Exported the classifier with its preprocessor (%d text input(s)) to %s", num_text_inputs,
                export_dir)
    return export_dir
