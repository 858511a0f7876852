"""The model a checkpoint's variables belong to, for converting it between formats."""

from albert_tf.checkpoints.reading import CheckpointContents
from albert_tf.checkpoints.tf1_names import PRETRAINING_HEAD_SCOPES
from albert_tf.config import AlbertConfig

MODEL_HEADS = ("auto", "encoder", "pretraining", "classifier", "multiple_choice", "squad")

# The transformers task architectures and the head of the model each converts into.
_HEAD_OF_HF_TASK = {"AlbertForSequenceClassification": "classifier", "AlbertForMultipleChoice": "multiple_choice",
                    "AlbertForQuestionAnswering": "squad"}


def _auto_head(contents):
    for architecture in contents.hf_architectures:
        if architecture in _HEAD_OF_HF_TASK:
            return _HEAD_OF_HF_TASK[architecture]
    has_heads = any(name.startswith(PRETRAINING_HEAD_SCOPES) for name in contents.shapes)
    return "pretraining" if has_heads else "encoder"


def model_for_checkpoint(contents: CheckpointContents, config: AlbertConfig, head: str = "auto"):
    """The model whose variables `contents` holds, by `head` (one of MODEL_HEADS).

    - "auto": the task model of the transformers architecture a Hugging Face config.json names; else
      an AlbertPretrainer when the checkpoint has pretraining heads, else an AlbertEncoder. A
      fine-tuned TF1 checkpoint's `output_weights` may be run_classifier's or run_race's: name it.
    - "classifier": AlbertClassifier, with as many labels as `output_weights` has rows.
    - "multiple_choice": AlbertMultipleChoice (run_race's head); "squad": AlbertSpanPredictor (the
      v1 head `cls/squad/*`); "pretraining": AlbertPretrainer; "encoder": AlbertEncoder.
    """
    from albert_tf.models.classifier import AlbertClassifier
    from albert_tf.models.encoder import AlbertEncoder
    from albert_tf.models.multiple_choice import AlbertMultipleChoice
    from albert_tf.models.pretrainer import AlbertPretrainer
    from albert_tf.models.span_predictor import AlbertSpanPredictor

    if head not in MODEL_HEADS:
        raise ValueError(f"Unknown model head {head!r}; allowed: {', '.join(MODEL_HEADS)}.")
    if head == "auto":
        head = _auto_head(contents)
    if head == "classifier":
        shape = contents.shapes.get("output_weights")
        if shape is None or len(shape) != 2:
            raise ValueError(f"{contents.location.path} has no classifier head (output_weights [num_labels, H]) "
                             f"to size an AlbertClassifier from.")
        return AlbertClassifier(config, num_labels=shape[0])
    models = {"multiple_choice": AlbertMultipleChoice, "squad": AlbertSpanPredictor, "pretraining": AlbertPretrainer,
              "encoder": AlbertEncoder}
    return models[head](config)

