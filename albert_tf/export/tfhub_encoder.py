"""The TF-Hub-style export: the encoder SavedModel (with `.mlm`) beside the preprocessor's.

The encoder follows TF-Hub's TF2 Reusable SavedModel interface for text encoders, so that
`tf.saved_model.load`, `keras.layers.TFSMLayer`, `tensorflow_hub.KerasLayer` and `saved_model_cli` all
work on it. Only tf.functions over the model's variables are saved: the Keras objects are not part of
the SavedModel's object graph, and loading needs neither Keras nor albert_tf (the preprocessor needs
`import tensorflow_text` for its ops).

Exported encoder directory:
- `encoder(inputs, training=False)`: int32 [batch, seq] `input_word_ids`, `input_mask`, `input_type_ids`
  -> `pooled_output` [B, H], `default` (the same), `sequence_output` [B, S, H], `encoder_outputs` (one
  [B, S, H] per applied block). Traced for training True and False.
- `encoder.mlm(inputs, training=False)`: also takes int32 `masked_lm_positions` [B, P] and adds
  `mlm_logits` [B, P, V] (only when the exported model has the masked-LM head).
- `variables`, `trainable_variables`, `regularization_losses` on both (the Reusable SavedModel API).
- `variables_by_tf1_name`: the same variables keyed by original TF1 checkpoint name; each variable,
  shared ones included, is saved once.
- signatures `serving_default` (the encoder's outputs, `encoder_outputs_{i}` flattened) and `mlm`.
- assets `albert_config.json` and `spm.model`; a non-trainable `do_lower_case` variable.

The asset and attribute names are those `albert_tf.checkpoints.hub_module` reads back for fine-tuning.
"""

import logging
import os
import shutil
import tempfile
from typing import Optional, Sequence, Tuple, Union

import tensorflow as tf

from albert_tf.checkpoints.hub_module import ALBERT_CONFIG_ASSET, SPM_MODEL_ASSET, VARIABLES_BY_TF1_NAME
from albert_tf.checkpoints.loading import load_weights
from albert_tf.checkpoints.tf1_names import encoder_variable_map
from albert_tf.config import AlbertConfig
from albert_tf.export.mobile import check_mobile_paths_free, check_onnx_request, export_mobile_models
from albert_tf.export.preprocessor import DEFAULT_SEQ_LENGTH, export_preprocessor
from albert_tf.export.saved_objects import AutoTrackable, Untracked, check_file, tf_variables
from albert_tf.export.tflite import ENCODER_TFLITE_OUTPUTS, check_tflite_variants
from albert_tf.layers.masked_lm_head import AlbertMaskedLMHead
from albert_tf.models.encoder import INPUT_NAMES, AlbertEncoder
from albert_tf.models.pretrainer import AlbertPretrainer
from albert_tf.tokenization import DEFAULT_DIGIT_COMMA_RULE, AlbertTokenizer, check_digit_comma_rule

logger = logging.getLogger(__name__)

MASKED_LM_POSITIONS = "masked_lm_positions"
MASKED_LM_SCOPE = "cls/predictions/"


def encoder_input_spec(with_masked_lm_positions: bool = False):
    """The dict of int32 [None, None] TensorSpecs the exported encoder (or its `.mlm`) is traced for."""
    names = INPUT_NAMES + ((MASKED_LM_POSITIONS,) if with_masked_lm_positions else ())
    return {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in names}


def _checked_inputs(inputs, max_position_embeddings):
    """The encoder inputs, after a runtime check of their length.

    Callers of a loaded SavedModel get static shapes inferred through the function body, so a sequence
    longer than the position table would fail there as an unreadable shape mismatch; cutting the inputs
    to the table (a no-op for valid inputs, and only after the check passed) lets the check speak first.
    """
    check = tf.debugging.assert_less_equal(
        tf.shape(inputs["input_word_ids"])[1], max_position_embeddings,
        message=f"The input sequence is longer than this ALBERT encoder's max_position_embeddings="
                f"{max_position_embeddings}")
    with tf.control_dependencies([check]):
        return {name: tf.identity(inputs[name])[:, :max_position_embeddings] for name in inputs}


def _encoder_outputs(outputs):
    pooled_output = tf.cast(outputs["pooled_output"], tf.float32)
    return {"pooled_output": pooled_output, "default": pooled_output,
            "sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
            "encoder_outputs": [tf.cast(output, tf.float32) for output in outputs["encoder_outputs"]]}


def _flat_outputs(outputs):
    """Signatures return a flat dict of tensors: the per-block list becomes encoder_outputs_{i}."""
    flat = {key: value for key, value in outputs.items() if key != "encoder_outputs"}
    flat.update({f"encoder_outputs_{index}": output for index, output in enumerate(outputs["encoder_outputs"])})
    return flat


class _MaskedLMEncoder(AutoTrackable):
    """`encoder.mlm`: the encoder's outputs plus `mlm_logits` at `masked_lm_positions`."""

    def __init__(self, parts: Untracked):
        self._parts = parts
        self.variables = tf_variables(parts.encoder.variables + parts.masked_lm_head.variables)
        self.trainable_variables = tf_variables(parts.encoder.trainable_variables
                                                 + parts.masked_lm_head.trainable_variables)
        self.regularization_losses = []

    @tf.function(autograph=False)
    def __call__(self, inputs, training=False):
        encoder = self._parts.encoder
        inputs = _checked_inputs(inputs, encoder.config.max_position_embeddings)
        raw_outputs = encoder({name: inputs[name] for name in INPUT_NAMES}, training=training)
        outputs = _encoder_outputs(raw_outputs)
        outputs["mlm_logits"] = tf.cast(self._parts.masked_lm_head(
            raw_outputs["sequence_output"], inputs[MASKED_LM_POSITIONS], encoder.embeddings.word_embeddings),
            tf.float32)
        return outputs


class AlbertHubEncoder(AutoTrackable):
    """An ALBERT encoder as a TF-Hub TF2 Reusable SavedModel object (see the module docstring).

    Built from an AlbertPretrainer (encoder and `.mlm`) or an AlbertEncoder (no `.mlm`). It holds the
    model's variables, not copies: calling it before saving gives the Keras model's numbers.
    A tf.__internal__.tracking.AutoTrackable, as Keras's own ExportArchive is: a tf.Module's read-only
    `variables` property could not be saved as the attribute that tensorflow_hub.KerasLayer reads.

    Example:
    >>> from albert_tf import AlbertConfig
    >>> config = AlbertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                       num_attention_heads=2, intermediate_size=64, embedding_size=16)
    >>> hub_encoder = AlbertHubEncoder(AlbertPretrainer(config))
    >>> inputs = {"input_word_ids": tf.constant([[2, 10, 3]]), "input_mask": tf.ones([1, 3], tf.int32),
    ...           "input_type_ids": tf.zeros([1, 3], tf.int32)}
    >>> hub_encoder(inputs)["default"].shape
    TensorShape([1, 32])
    """

    def __init__(self, model: Union[AlbertPretrainer, AlbertEncoder], spm_model_file: Optional[str] = None,
                 albert_config_file: Optional[str] = None, do_lower_case: bool = True):
        if isinstance(model, AlbertPretrainer):
            parts = Untracked(encoder=model.encoder, masked_lm_head=model.masked_lm_head)
        elif isinstance(model, AlbertEncoder):
            parts = Untracked(encoder=model, masked_lm_head=None)
        else:
            raise TypeError(f"AlbertHubEncoder takes an AlbertPretrainer or an AlbertEncoder, got "
                            f"{type(model).__name__}.")
        self._parts = parts
        self.variables = tf_variables(parts.encoder.variables)
        self.trainable_variables = tf_variables(parts.encoder.trainable_variables)
        self.regularization_losses = []
        names = encoder_variable_map(parts.encoder)
        if parts.masked_lm_head is not None:
            self.mlm = _MaskedLMEncoder(parts)
            names.update(_masked_lm_variable_map(parts.masked_lm_head))
        setattr(self, VARIABLES_BY_TF1_NAME, dict(zip(names, tf_variables(names.values()))))
        self.do_lower_case = tf.Variable(do_lower_case, trainable=False, name="do_lower_case")
        if spm_model_file is not None:
            self.sp_model_file = tf.saved_model.Asset(spm_model_file)
        if albert_config_file is not None:
            self.albert_config_file = tf.saved_model.Asset(albert_config_file)
        self.serving_default = tf.function(self._serve, input_signature=[encoder_input_spec()], autograph=False)

    @tf.function(autograph=False)
    def __call__(self, inputs, training=False):
        encoder = self._parts.encoder
        inputs = _checked_inputs({name: inputs[name] for name in INPUT_NAMES},
                                 encoder.config.max_position_embeddings)
        return _encoder_outputs(encoder(inputs, training=training))

    def _serve(self, inputs):
        return _flat_outputs(self(inputs))

    def trace(self):
        """Traces every call the SavedModel must serve and returns its signatures.

        Signature functions take keyword arguments only; `serving_default` is also an attribute
        taking the input dict, the form keras.layers.TFSMLayer(call_endpoint="serving_default") calls.
        """
        for training in (False, True):
            self.__call__.get_concrete_function(encoder_input_spec(), training=training)
            if hasattr(self, "mlm"):
                self.mlm.__call__.get_concrete_function(encoder_input_spec(True), training=training)

        @tf.function(input_signature=list(encoder_input_spec().values()), autograph=False)
        def serving_default(input_word_ids, input_mask, input_type_ids):
            return self.serving_default(dict(input_word_ids=input_word_ids, input_mask=input_mask,
                                             input_type_ids=input_type_ids))

        signatures = {"serving_default": serving_default.get_concrete_function()}
        if hasattr(self, "mlm"):
            @tf.function(input_signature=list(encoder_input_spec(True).values()), autograph=False)
            def mlm(input_word_ids, input_mask, input_type_ids, masked_lm_positions):
                return _flat_outputs(self.mlm(dict(input_word_ids=input_word_ids, input_mask=input_mask,
                                                   input_type_ids=input_type_ids,
                                                   masked_lm_positions=masked_lm_positions)))

            signatures["mlm"] = mlm.get_concrete_function()
        return signatures


def _masked_lm_variable_map(head: AlbertMaskedLMHead):
    return {"cls/predictions/transform/dense/kernel": head.dense.kernel,
            "cls/predictions/transform/dense/bias": head.dense.bias,
            "cls/predictions/transform/LayerNorm/gamma": head.layer_norm.gamma,
            "cls/predictions/transform/LayerNorm/beta": head.layer_norm.beta,
            "cls/predictions/output_bias": head.output_bias}


def export_encoder(model: Union[AlbertPretrainer, AlbertEncoder], export_dir: str, spm_model_file: str,
                   do_lower_case: bool = True) -> str:
    """Writes the encoder SavedModel (see the module docstring) to `export_dir` and returns it.

    Example:
    >>> export_encoder(pretrainer, "/tmp/albert_hub/encoder", "30k-clean.model")  # doctest: +SKIP
    '/tmp/albert_hub/encoder'
    """
    encoder = model.encoder if isinstance(model, AlbertPretrainer) else model
    if not isinstance(model, AlbertPretrainer):
        logger.warning("Exporting an AlbertEncoder without the masked-LM head: the SavedModel has no `.mlm`.")
    check_file(spm_model_file, "spm_model_file")
    with tempfile.TemporaryDirectory() as staging:
        # Assets keep their file names, so they are staged under the names hub_module reads.
        config_path = os.path.join(staging, ALBERT_CONFIG_ASSET)
        encoder.config.to_json_file(config_path)
        spm_path = os.path.join(staging, SPM_MODEL_ASSET)
        shutil.copyfile(spm_model_file, spm_path)
        hub_encoder = AlbertHubEncoder(model, spm_path, config_path, do_lower_case)
        signatures = hub_encoder.trace()
        tf.saved_model.save(hub_encoder, export_dir, signatures=signatures)
    logger.info("Exported the encoder (%d variables) to %s", len(hub_encoder.variables), export_dir)
    return export_dir


def export_hub_modules(export_path: str, config: AlbertConfig, spm_model_file: str,
                       init_checkpoint: Optional[str] = None, do_lower_case: bool = True,
                       seq_length: int = DEFAULT_SEQ_LENGTH, allow_random_init: bool = False,
                       overwrite: bool = False, digit_comma_rule: str = DEFAULT_DIGIT_COMMA_RULE,
                       tflite_variants: Sequence[str] = (), tflite_seq_length: Optional[int] = None,
                       onnx: bool = False, onnx_optimize: bool = False) -> Tuple[str, str]:
    """Writes `<export_path>/encoder` and `<export_path>/preprocessor`; returns both paths.

    The preprocessor tokenizes with `do_lower_case` and `digit_comma_rule` (`albert_tf.tokenization`).
    `tflite_variants` (some of `albert_tf.export.tflite.TFLITE_VARIANTS`) also writes the encoder as
    `<export_path>/encoder_<variant>.tflite`, returning pooled_output and sequence_output at a fixed
    `tflite_seq_length` (default `seq_length`); `onnx` writes `<export_path>/encoder.onnx` (tf2onnx, the
    `onnx` extra), and `onnx_optimize` also `<export_path>/encoder_optimized.onnx`, fused for onnxruntime's CPU
    kernels. Both take the integer inputs, not text (`albert_tf.export.mobile`).

    The weights come from `init_checkpoint` (any format `loading.load_weights` reads). A
    checkpoint without the masked-LM head (a fine-tuned model, a bare encoder) gives an encoder
    without `.mlm`, with a warning; a fine-tuning head (GLUE, SQuAD, RACE) is not part of the
    module's interface and is left out, also with a warning. Exporting random weights is refused
    unless `allow_random_init`.

    Example:
    >>> export_hub_modules("/tmp/albert_hub", AlbertConfig.from_preset("albert-base"), "30k-clean.model",
    ...                    init_checkpoint="albert_base")  # doctest: +SKIP
    ('/tmp/albert_hub/encoder', '/tmp/albert_hub/preprocessor')
    """
    encoder_dir = os.path.join(export_path, "encoder")
    preprocessor_dir = os.path.join(export_path, "preprocessor")
    for directory in (encoder_dir, preprocessor_dir):
        if tf.io.gfile.exists(directory) and tf.io.gfile.listdir(directory) and not overwrite:
            raise FileExistsError(f"{directory} already holds an export; remove it or pass overwrite "
                                  "(--overwrite) to replace it.")
    tflite_seq_length = tflite_seq_length or seq_length
    if tflite_variants:
        check_tflite_variants(tflite_variants)
        if tflite_seq_length > config.max_position_embeddings:
            raise ValueError(f"tflite_seq_length={tflite_seq_length} exceeds the model's max_position_embeddings="
                             f"{config.max_position_embeddings}.")
    check_onnx_request(onnx, onnx_optimize)
    if not overwrite:
        check_mobile_paths_free(encoder_dir, tflite_variants, onnx, onnx_optimize)
    check_file(spm_model_file, "spm_model_file")
    check_digit_comma_rule(digit_comma_rule)
    if seq_length > config.max_position_embeddings:
        raise ValueError(f"seq_length={seq_length} exceeds the model's max_position_embeddings="
                         f"{config.max_position_embeddings}; the preprocessor would make inputs the encoder rejects.")
    vocab_size = AlbertTokenizer(spm_model_file=spm_model_file).vocab_size
    if vocab_size != config.vocab_size:
        raise ValueError(f"spm_model_file={spm_model_file!r} has {vocab_size} pieces but the config's vocab_size "
                         f"is {config.vocab_size}; export the vocabulary the model was trained with.")
    pretrainer = AlbertPretrainer(config)
    model: Union[AlbertPretrainer, AlbertEncoder] = pretrainer
    if init_checkpoint:
        result = load_weights(pretrainer, init_checkpoint, allow_missing_heads=True, drop_unused_heads=True)
        if any(name.startswith(MASKED_LM_SCOPE) for name in result.missing_heads):
            logger.warning("%s has no masked-LM head (%s*): the exported encoder has no `.mlm`.", init_checkpoint,
                           MASKED_LM_SCOPE)
            model = pretrainer.encoder
    elif allow_random_init:
        logger.warning("No init_checkpoint: exporting RANDOMLY INITIALISED weights (allow_random_init).")
    else:
        raise ValueError("No init_checkpoint: exporting random weights is almost certainly a mistake; give "
                         "--init_checkpoint, or --allow_random_init for tests.")
    logger.info("Exporting the encoder to %s", encoder_dir)
    export_encoder(model, encoder_dir, spm_model_file, do_lower_case=do_lower_case)
    logger.info("Exporting the preprocessor to %s", preprocessor_dir)
    export_preprocessor(spm_model_file, preprocessor_dir, do_lower_case=do_lower_case, seq_length=seq_length,
                        digit_comma_rule=digit_comma_rule)
    if tflite_variants or onnx:
        export_mobile_models(encoder_dir, tflite_variants, tflite_seq_length, onnx, ENCODER_TFLITE_OUTPUTS,
                             overwrite=True, onnx_optimize=onnx_optimize)
    return encoder_dir, preprocessor_dir
