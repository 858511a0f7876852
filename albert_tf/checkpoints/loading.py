"""Loads a tf1, hf or native checkpoint into a model, strictly (see matching.py), and reports what it did.

`load_weights` and `save_weights` (writing.py) take an AlbertEncoder, an AlbertPretrainer, or any
Keras model with an `.encoder` attribute holding an AlbertEncoder and, for its own head variables,
a method `head_variable_map() -> {TF1 name: variable}` (e.g. the original GLUE head's
`output_weights` / `output_bias`, SQuAD's `cls/squad/output_weights`). Every variable of the model
must have a name, so nothing is skipped silently.
"""

import dataclasses
import logging
from typing import Optional, Tuple

import keras
import numpy as np
import tensorflow as tf

from albert_tf.checkpoints.matching import (CheckpointMismatchError, albert_config_of, check_config_agrees,
                                            match_variables)
from albert_tf.checkpoints.reading import NATIVE_PREFIX, CheckpointContents, read_checkpoint
from albert_tf.checkpoints.tf1_names import model_variable_map

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class LoadResult:
    """What load_weights did: the file, its step, and the names it left fresh or ignored."""

    path: str
    format: str
    global_step: Optional[int]
    num_loaded: int
    missing_heads: Tuple[str, ...] = ()
    ignored: Tuple[str, ...] = ()
    dropped_heads: Tuple[str, ...] = ()


def _trackable_variables(root):
    """{object path: variable} under a Keras model, as tf.train.Checkpoint sees it (first path wins)."""
    found, seen, queue = {}, {id(root)}, [(root, "")]
    while queue:
        current, path = queue.pop(0)
        for name, child in tf.train.TrackableView(current).children(current).items():
            child_path = f"{path}/{name}" if path else name
            if isinstance(child, (tf.Variable, keras.Variable)):
                found.setdefault(child_path, child)
            elif id(child) not in seen:
                seen.add(id(child))
                queue.append((child, child_path))
    return found


def _native_head_names(model, names):
    """`native:<path>` -> TF1 name for the model's own variables (its heads, whatever their paths)."""
    from albert_tf.models.encoder import AlbertEncoder

    by_id = {id(variable): name for name, variable in names.items()}
    prefix = "encoder/" if isinstance(model, AlbertEncoder) else ""
    return {NATIVE_PREFIX + prefix + path: by_id[id(variable)]
            for path, variable in _trackable_variables(model).items() if id(variable) in by_id}


def _rename_native_heads(contents, renames):
    file_name_of = {renames.get(name, name): name for name in contents.shapes}

    def read(name):
        return contents.read(file_name_of[name])

    return dataclasses.replace(
        contents, shapes={renames.get(name, name): shape for name, shape in contents.shapes.items()}, read=read,
        file_names={renames.get(name, name): file for name, file in contents.file_names.items()})


def _cast_for(variable, array, name, source):
    dtype = np.dtype(variable.dtype)
    if array.dtype == dtype:
        return array
    if np.can_cast(array.dtype, dtype, "safe") and np.issubdtype(dtype, np.floating):
        return array.astype(dtype)
    raise CheckpointMismatchError(f"{name} in {source} has dtype {array.dtype}, which does not convert exactly to "
                                  f"the model's {dtype}.")


def load_weights(model, path, format="auto", allow_missing_heads=False, init_from_group0=False,
                 drop_unused_heads=False) -> LoadResult:
    """Loads a tf1, hf or native checkpoint into `model`, strictly (see matching.py).

    `path` is anything locate_checkpoint accepts, or CheckpointContents already read.

    Example:
    >>> from albert_tf import AlbertConfig, AlbertPretrainer
    >>> model = AlbertPretrainer(AlbertConfig.from_preset("albert-base"))  # doctest: +SKIP
    >>> load_weights(model, "albert_base").global_step  # doctest: +SKIP
    125000
    """
    contents = path if isinstance(path, CheckpointContents) else read_checkpoint(path, format)
    names = model_variable_map(model)
    config = albert_config_of(model)
    if contents.format == "native":
        contents = _rename_native_heads(contents, _native_head_names(model, names))
    if contents.config is not None:
        check_config_agrees(config, contents.config, contents.config_source, init_from_group0)
    sources, missing_heads, ignored, dropped_heads = match_variables(names, contents, config, allow_missing_heads,
                                                                     drop_unused_heads, init_from_group0)
    source_text = f"{contents.location.path} ({contents.format})"
    values = {name: _cast_for(names[name], contents.read(source), name, source_text)
              for name, source in sources.items()}
    for name, value in values.items():
        names[name].assign(value)
    if missing_heads:
        logger.warning("%d head variable(s) are not in %s and keep their fresh initialisation: %s",
                       len(missing_heads), source_text, ", ".join(missing_heads))
    if dropped_heads:
        logger.warning("Left out %d head variable(s) of %s that the model does not have (drop_unused_heads): %s",
                       len(dropped_heads), source_text, ", ".join(contents.describe(name) for name in dropped_heads))
    if ignored:
        logger.info("Ignored %d pretraining-head variable(s) of %s that the model does not have: %s",
                    len(ignored), source_text, ", ".join(ignored))
    logger.info("Loaded %d variables from %s%s.", len(values), source_text,
                f" at step {contents.global_step}" if contents.global_step is not None else "")
    return LoadResult(contents.location.path, contents.format, contents.global_step, len(values),
                      tuple(missing_heads), tuple(ignored), tuple(dropped_heads))

