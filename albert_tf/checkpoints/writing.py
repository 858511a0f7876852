"""Writes a model's weights as a tf1, hf or native checkpoint, alone or as a self-contained directory, and copies
checkpoints with their config."""

import json
import os

import numpy as np
import tensorflow as tf

from albert_tf.checkpoints import hf_names
from albert_tf.checkpoints.formats import (ALBERT_CONFIG_NAME, FORMATS, GLOBAL_STEP_NAME, HF_CONFIG_NAME, HF_SPM_NAME,
                                           HF_WEIGHTS_NAME)
from albert_tf.checkpoints.matching import albert_config_of
from albert_tf.checkpoints.tf1_names import model_variable_map


def _write_tf1(arrays, prefix, global_step):
    graph = tf.Graph()
    with graph.as_default():
        variables, feeds, assignments = {}, {}, []
        for name, array in sorted(arrays.items()):
            variable = tf.compat.v1.get_variable(name, shape=array.shape, dtype=tf.as_dtype(array.dtype),
                                                 initializer=tf.compat.v1.zeros_initializer())
            placeholder = tf.compat.v1.placeholder(variable.dtype.base_dtype, shape=array.shape)
            assignments.append(variable.assign(placeholder))
            feeds[placeholder] = array
            variables[name] = variable
        if global_step is not None:
            step = tf.compat.v1.train.get_or_create_global_step()
            assignments.append(step.assign(global_step))
            variables[GLOBAL_STEP_NAME] = step
        saver = tf.compat.v1.train.Saver(var_list=variables)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(assignments, feed_dict=feeds)
            return saver.save(session, prefix, write_meta_graph=False)


def hf_architecture(model) -> str:
    """The transformers class that runs `model`: its task head's, or AlbertModel.

    The SQuAD v2 model has none (its head is the original's, not AlbertForQuestionAnswering's): it is
    written as AlbertModel, its head under the TF1 names.
    """
    from albert_tf.models.classifier import AlbertClassifier
    from albert_tf.models.multiple_choice import AlbertMultipleChoice
    from albert_tf.models.pretrainer import AlbertPretrainer
    from albert_tf.models.span_predictor import AlbertSpanPredictor
    from albert_tf.models.token_classifier import AlbertTokenClassifier

    architectures = ((AlbertPretrainer, "AlbertForPreTraining"), (AlbertClassifier, "AlbertForSequenceClassification"),
                     (AlbertMultipleChoice, "AlbertForMultipleChoice"),
                     (AlbertSpanPredictor, "AlbertForQuestionAnswering"),
                     (AlbertTokenClassifier, "AlbertForTokenClassification"))
    return next((name for model_class, name in architectures if isinstance(model, model_class)), "AlbertModel")


def _write_hf(model, arrays, directory):
    from safetensors.numpy import save

    config = albert_config_of(model)
    architecture = hf_architecture(model)
    state = hf_names.tf1_to_hf(arrays, config, architecture)
    hf_config = hf_names.hf_config_from_albert(
        config, [architecture], num_labels=getattr(model, "num_labels", None),
        classifier_dropout_prob=getattr(model, "dropout_rate", hf_names.HF_CLASSIFIER_DROPOUT))
    tf.io.gfile.makedirs(directory)
    with tf.io.gfile.GFile(os.path.join(directory, HF_WEIGHTS_NAME), "wb") as handle:
        handle.write(save(state, metadata={"format": "pt"}))
    with tf.io.gfile.GFile(os.path.join(directory, HF_CONFIG_NAME), "w") as handle:
        handle.write(json.dumps(hf_config, indent=2, sort_keys=True) + "\n")
    return directory


def _write_native(model, prefix, global_step):
    objects = {"model": model}
    if global_step is not None:
        objects["step"] = tf.Variable(global_step, dtype=tf.int64)
    path = tf.train.Checkpoint(**objects).write(prefix)
    _record_latest(path)
    return path


def _record_latest(prefix):
    """Writes the directory's `checkpoint` file as a Saver would, so tf.train.latest_checkpoint finds `prefix`."""
    name = os.path.basename(prefix)
    with tf.io.gfile.GFile(os.path.join(os.path.dirname(prefix) or ".", "checkpoint"), "w") as handle:
        handle.write(f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n')


def save_weights(model, path, format, global_step=None) -> str:
    """Writes `model`'s weights; returns the checkpoint prefix (tf1, native) or directory (hf).

    - tf1: a name-based checkpoint at prefix `path` with the original's names (and
      `global_step` when given), written by a tf.compat.v1 Saver, which also records it in the
      directory's `checkpoint` file; the original code and HF's former TF1 loader read it.
    - hf: `path/model.safetensors` and `path/config.json` (see hf_names.py for the layout).
    - native: tf.train.Checkpoint(model=model[, step]) at prefix `path`, recorded in `checkpoint`.

    Example:
    >>> from albert_tf import AlbertConfig, AlbertEncoder
    >>> import tempfile
    >>> encoder = AlbertEncoder(AlbertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=2,
    ...                                      num_attention_heads=2, intermediate_size=16, embedding_size=4))
    >>> directory = save_weights(encoder, tempfile.mkdtemp(), format="hf")
    >>> from albert_tf.checkpoints.locating import detect_format
    >>> detect_format(directory)
    'hf'
    """
    if format not in FORMATS:
        raise ValueError(f"Unknown checkpoint format {format!r} to save; allowed: {', '.join(FORMATS)}.")
    path = os.fspath(path)
    if format == "native":
        model_variable_map(model)
        return _write_native(model, path, global_step)
    arrays = {name: np.asarray(variable.numpy()) for name, variable in model_variable_map(model).items()}
    if format == "hf":
        return _write_hf(model, arrays, path)
    return _write_tf1(arrays, path, global_step)


def save_checkpoint_directory(model, output_dir, format, global_step=None, vocab_files=()) -> str:
    """Writes a self-contained directory: the weights, the config and the SentencePiece files.

    tf1: `model.ckpt[-step]` + `albert_config.json` (the released tarballs' layout); native:
    `ckpt[-step]` + `albert_config.json`; hf: `model.safetensors` + `config.json`, with the
    SentencePiece model renamed `spiece.model` as Hugging Face's AlbertTokenizer expects. Other
    formats keep the vocabulary files' names. `output_dir` must be new or empty. Returns the
    path load_weights takes (the directory).
    """
    if format not in FORMATS:
        raise ValueError(f"Unknown checkpoint format {format!r} to save; allowed: {', '.join(FORMATS)}.")
    if tf.io.gfile.isdir(output_dir) and tf.io.gfile.listdir(output_dir):
        raise ValueError(f"The output directory {output_dir} is not empty; give a new or empty directory so "
                         f"nothing is overwritten.")
    spm_models = [path for path in vocab_files if path.endswith(".model")]
    if format == "hf":
        if len(spm_models) > 1:
            raise ValueError(f"A Hugging Face directory holds one SentencePiece model, but {spm_models} were given.")
        copies = [(path, HF_SPM_NAME) for path in spm_models]
    else:
        copies = [(path, os.path.basename(path)) for path in vocab_files]
    tf.io.gfile.makedirs(output_dir)
    if format == "hf":
        save_weights(model, output_dir, format="hf")
    else:
        stem = ("model.ckpt" if format == "tf1" else "ckpt") + (f"-{global_step}" if global_step is not None else "")
        save_weights(model, os.path.join(output_dir, stem), format=format, global_step=global_step)
        albert_config_of(model).to_json_file(os.path.join(output_dir, ALBERT_CONFIG_NAME))
    for source, name in copies:
        tf.io.gfile.copy(source, os.path.join(output_dir, name), overwrite=False)
    return output_dir


def copy_checkpoint(checkpoint_path: str, destination_prefix: str) -> str:
    """Copies a checkpoint's files to `destination_prefix`.* and the albert_config.json beside it into the
    destination's directory, so the copy loads and converts on its own; returns `destination_prefix`."""
    for source in tf.io.gfile.glob(checkpoint_path + ".*"):
        tf.io.gfile.copy(source, destination_prefix + source[len(checkpoint_path):], overwrite=True)
    config_file = os.path.join(os.path.dirname(checkpoint_path), ALBERT_CONFIG_NAME)
    if tf.io.gfile.exists(config_file):
        tf.io.gfile.copy(config_file, os.path.join(os.path.dirname(destination_prefix), ALBERT_CONFIG_NAME),
                         overwrite=True)
    return destination_prefix
