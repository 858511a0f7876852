"""Where a fine-tuning run's model comes from, resolved once before a task reads or writes any data: the config, the
tokenizer and the weights to start from (`ModelSource`).

A run names its weights with `init_checkpoint` (any supported format, located here, so that a wrong path stops
the run before its data is tokenized) or `hub_module_handle` (an export of run_scripts.export_to_tfhub, whose
files are read once here for the config, the SentencePiece model and the weights), or neither (random weights).
The config and the tokenizer come from the options, else from the weights.

Example:
>>> source = resolve_model_source(FinetuningOptions("/tmp/mrpc", preset="albert-base", do_eval=True),
...                               with_tokenizer=False)
>>> source.config.hidden_size, source.weights
(768, None)
"""

import dataclasses
import os
from typing import Optional

import tensorflow as tf
from absl import logging

from albert_tf.checkpoints import formats, hub_module, loading, locating
from albert_tf.checkpoints.hub_module import HubModule
from albert_tf.checkpoints.locating import CheckpointLocation
from albert_tf.config import AlbertConfig, load_config
from albert_tf.tasks.finetuning_options import FinetuningOptions
from albert_tf.tokenization import AlbertTokenizer


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """A run's model config, its tokenizer (None for a run that tokenizes nothing itself) and its initial weights:
    a located `checkpoint`, an exported encoder read once (`hub_module`), or neither.

    Example:
    >>> from albert_tf import AlbertConfig
    >>> ModelSource(AlbertConfig.from_preset("albert-base")).weights is None
    True
    """

    config: AlbertConfig
    tokenizer: Optional[AlbertTokenizer] = None
    checkpoint: Optional[CheckpointLocation] = None
    hub_module: Optional[HubModule] = None

    @property
    def weights(self) -> Optional[str]:
        """Where the initial weights are: the checkpoint's path or the exported encoder's directory; None for
        random weights."""
        if self.checkpoint is not None:
            return self.checkpoint.path
        if self.hub_module is not None:
            return self.hub_module.encoder_dir
        return None

    def load_weights(self, model) -> None:
        """Loads the initial weights into `model`; its heads, which no pretrained model has, keep theirs."""
        if self.checkpoint is not None:
            loading.load_weights(model, self.checkpoint, allow_missing_heads=True)
        elif self.hub_module is not None:
            hub_module.load_encoder_weights(model, self.hub_module)


def resolve_model_source(options: FinetuningOptions, with_tokenizer: bool = True) -> ModelSource:
    """The config, tokenizer (unless `with_tokenizer` is False) and initial weights `options` name, each file read
    once; fails, naming the option, where one is missing or does not fit."""
    checkpoint = locating.locate_checkpoint(options.init_checkpoint) if options.init_checkpoint else None
    module = hub_module.read_hub_module(options.hub_module_handle) if options.hub_module_handle else None
    config = resolve_config(options, checkpoint, module)
    tokenizer = resolve_tokenizer(options, checkpoint, module) if with_tokenizer else None
    return ModelSource(config, tokenizer, checkpoint, module)


def resolve_config(options: FinetuningOptions, checkpoint: Optional[CheckpointLocation] = None,
                   module: Optional[HubModule] = None) -> AlbertConfig:
    """The model config: --albert_config_file or --preset, else the one that comes with the weights.

    That is an albert_config.json beside --init_checkpoint (`checkpoint`, located) or in --hub_module_handle's
    assets/ (`module`, read), or a Hugging Face config.json; without either, the albert_config.json an earlier
    training run left in output_dir. Fails when --max_seq_length exceeds the config's positions.
    """
    if options.albert_config_file or options.preset:
        config = load_config(options.albert_config_file, options.preset)
    elif options.hub_module_handle:
        module = module or hub_module.read_hub_module(options.hub_module_handle)
        config = module.config
        logging.info("Using the model config of the hub module %s.", module.encoder_dir)
    else:
        found = locating.find_config(checkpoint or options.init_checkpoint) if options.init_checkpoint else None
        trained_config_file = os.path.join(options.output_dir, formats.ALBERT_CONFIG_NAME)
        if found is None and tf.io.gfile.exists(trained_config_file):
            found = AlbertConfig.from_json_file(trained_config_file), trained_config_file
        if found is None:
            raise ValueError("Give --albert_config_file or --preset to define the model" + (
                f"; no config comes with {options.init_checkpoint}." if options.init_checkpoint else "."))
        config, config_file = found
        logging.info("Using the model config %s.", config_file)
    if options.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"--max_seq_length={options.max_seq_length} exceeds the model's max_position_embeddings="
                         f"{config.max_position_embeddings}: the model was only trained up to that length.")
    return config


def resolve_tokenizer(options: FinetuningOptions, checkpoint: Optional[CheckpointLocation] = None,
                      module: Optional[HubModule] = None) -> AlbertTokenizer:
    """The tokenizer of --spm_model_file or --vocab_file, else the SentencePiece model that comes with
    --hub_module_handle (its assets/; `module`, read) or --init_checkpoint (beside it, as in the released
    tarballs; `checkpoint`, located)."""
    if options.spm_model_file or options.vocab_file:
        return AlbertTokenizer(spm_model_file=options.spm_model_file, vocab_file=options.vocab_file,
                               do_lower_case=options.do_lower_case, digit_comma_rule=options.digit_comma_rule)
    if options.hub_module_handle:
        module = module or hub_module.read_hub_module(options.hub_module_handle)
        logging.info("Using the SentencePiece model of the hub module %s.", module.spm_model_file)
        return AlbertTokenizer(spm_model_file=module.spm_model_file, do_lower_case=module.do_lower_case,
                               digit_comma_rule=options.digit_comma_rule)
    if not options.init_checkpoint:
        raise ValueError("Give --spm_model_file (or --vocab_file) to tokenize the input.")
    models = [path for path in locating.find_vocab_files(checkpoint or options.init_checkpoint)
              if path.endswith(".model")]
    if len(models) != 1:
        raise ValueError(f"Found {len(models)} SentencePiece models with {options.init_checkpoint} ({models}), need "
                         "exactly one; give --spm_model_file.")
    logging.info("Using the SentencePiece model %s.", models[0])
    return AlbertTokenizer(spm_model_file=models[0], do_lower_case=options.do_lower_case,
                           digit_comma_rule=options.digit_comma_rule)
