"""Converts a checkpoint between formats: read, loaded strictly into the model its variables belong to, and
written anew with its config and SentencePiece model (what run_scripts.convert_checkpoint runs)."""

import logging
from typing import Optional

from albert_tf.checkpoints.loading import load_weights
from albert_tf.checkpoints.locating import find_vocab_files
from albert_tf.checkpoints.reading import NATIVE_PREFIX, CheckpointContents, read_checkpoint
from albert_tf.checkpoints.tf1_names import PRETRAINING_HEAD_SCOPES
from albert_tf.checkpoints.writing import save_checkpoint_directory
from albert_tf.config import AlbertConfig

logger = logging.getLogger(__name__)

MODEL_HEADS = ("auto", "encoder", "pretraining", "classifier", "multiple_choice", "squad", "token_classifier")

# The transformers task architectures and the head of the model each converts into.
_HEAD_OF_HF_TASK = {"AlbertForSequenceClassification": "classifier", "AlbertForMultipleChoice": "multiple_choice",
                    "AlbertForQuestionAnswering": "squad", "AlbertForTokenClassification": "token_classifier"}


def _auto_head(contents):
    from albert_tf.models.token_classifier import TOKEN_CLASSIFIER_SCOPE

    for architecture in contents.hf_architectures:
        if architecture in _HEAD_OF_HF_TASK:
            return _HEAD_OF_HF_TASK[architecture]
    if f"{TOKEN_CLASSIFIER_SCOPE}/output_weights" in contents.shapes:
        return "token_classifier"
    has_heads = any(name.startswith(PRETRAINING_HEAD_SCOPES) for name in contents.shapes)
    return "pretraining" if has_heads else "encoder"


def head_rows(contents: CheckpointContents, tf1_name: str = "output_weights") -> Optional[int]:
    """The rows (labels) of a task head's `output_weights` [num_labels, H]: under its TF1 name, or, in a checkpoint
    the fine-tuning scripts wrote (native), under the task model's `head`; None when neither is a matrix."""
    for name in (tf1_name, f"{NATIVE_PREFIX}head/output_weights"):
        shape = contents.shapes.get(name)
        if shape is not None and len(shape) == 2:
            return shape[0]
    return None


def model_for_checkpoint(contents: CheckpointContents, config: AlbertConfig, head: str = "auto"):
    """The model whose variables `contents` holds, by `head` (one of MODEL_HEADS).

    - "auto": the task model of the transformers architecture a Hugging Face config.json names; else
      an AlbertTokenClassifier when the checkpoint has its head (`cls/token_classification/*`); else an
      AlbertPretrainer when the checkpoint has pretraining heads, else an AlbertEncoder. A fine-tuned TF1
      checkpoint's `output_weights` may be run_classifier's or run_race's: name it.
    - "classifier": AlbertClassifier, with as many labels as `output_weights` has rows.
    - "multiple_choice": AlbertMultipleChoice (run_race's head); "squad": AlbertSpanPredictor (the
      v1 head `cls/squad/*`); "pretraining": AlbertPretrainer; "encoder": AlbertEncoder.
    - "token_classifier": AlbertTokenClassifier (`cls/token_classification/*`), with as many labels as
      its output_weights has rows.
    """
    from albert_tf.models.classifier import AlbertClassifier
    from albert_tf.models.encoder import AlbertEncoder
    from albert_tf.models.multiple_choice import AlbertMultipleChoice
    from albert_tf.models.pretrainer import AlbertPretrainer
    from albert_tf.models.span_predictor import AlbertSpanPredictor
    from albert_tf.models.token_classifier import TOKEN_CLASSIFIER_SCOPE, AlbertTokenClassifier

    if head not in MODEL_HEADS:
        raise ValueError(f"Unknown model head {head!r}; allowed: {', '.join(MODEL_HEADS)}.")
    if head == "auto":
        head = _auto_head(contents)
    if head == "classifier":
        num_labels = head_rows(contents, "output_weights")
        if num_labels is None:
            raise ValueError(f"{contents.location.path} has no classifier head (output_weights [num_labels, H]) "
                             f"to size an AlbertClassifier from.")
        return AlbertClassifier(config, num_labels=num_labels)
    if head == "token_classifier":
        name = f"{TOKEN_CLASSIFIER_SCOPE}/output_weights"
        num_labels = head_rows(contents, name)
        if num_labels is None:
            raise ValueError(f"{contents.location.path} has no token classification head ({name} [num_labels, H]) "
                             f"to size an AlbertTokenClassifier from.")
        return AlbertTokenClassifier(config, num_labels=num_labels)
    models = {"multiple_choice": AlbertMultipleChoice, "squad": AlbertSpanPredictor, "pretraining": AlbertPretrainer,
              "encoder": AlbertEncoder}
    return models[head](config)


def convert_checkpoint(input_path: str, output_dir: str, output_format: str, input_format: str = "auto",
                       config: Optional[AlbertConfig] = None, head: str = "auto", allow_missing_heads: bool = False,
                       drop_unused_heads: bool = False, init_from_group0: bool = False) -> str:
    """Reads the checkpoint at `input_path`, loads it into its model (see model_for_checkpoint) and writes
    `output_dir` in `output_format` with the SentencePiece files found beside the input; returns `output_dir`.

    The config is `config` when given, else the one found with the input. Any missing, unexpected or
    mis-shaped variable raises CheckpointMismatchError (see matching.py); allow_missing_heads,
    drop_unused_heads and init_from_group0 are load_weights'.
    """
    contents = read_checkpoint(input_path, input_format)
    if config is None:
        if contents.config is None:
            raise ValueError(f"No config found with {input_path} (no albert_config.json beside it or in assets/, "
                             f"no config.json); pass --albert_config_file or --preset.")
        config = contents.config
        logger.info("Using the config in %s", contents.config_source)
    model = model_for_checkpoint(contents, config, head)
    result = load_weights(model, contents, allow_missing_heads=allow_missing_heads,
                          init_from_group0=init_from_group0, drop_unused_heads=drop_unused_heads)
    output = save_checkpoint_directory(model, output_dir, output_format, global_step=result.global_step,
                                       vocab_files=find_vocab_files(contents.location))
    logger.info("Wrote %s (%s) with %d variables of a %s from %s (%s).", output, output_format, result.num_loaded,
                type(model).__name__, contents.location.path, contents.format)
    return output
