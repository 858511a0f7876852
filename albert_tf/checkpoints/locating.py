"""Where a checkpoint is: its format, its prefix or directory, and the config and SentencePiece model beside it.

A path may be a checkpoint prefix or one of its files, a directory with a `checkpoint` file, a
released tarball directory, a TF1 TF-Hub module directory or a Hugging Face directory (see
formats.py); pickled weights and TF2 SavedModels are refused with the reason.
"""

import dataclasses
import json
import os
import re
from typing import List, Optional, Tuple

import tensorflow as tf

from albert_tf.checkpoints import hf_names
from albert_tf.checkpoints.formats import (ALBERT_CONFIG_NAME, FORMATS, HF_CONFIG_NAME, HF_INDEX_NAME, HF_WEIGHTS_NAME,
                                           OBJECT_GRAPH_KEY, TARBALL_PREFIX, CheckpointFormatError)
from albert_tf.config import AlbertConfig

_PICKLE_FILES = ("pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5", "flax_model.msgpack")


@dataclasses.dataclass(frozen=True)
class CheckpointLocation:
    """`path` is the prefix of a tf1 / native checkpoint or the directory of an hf one;
    `directory` is where its config and SentencePiece model live (`assets/` for hub modules)."""

    format: str
    path: str
    directory: str


def _not_a_checkpoint(path, reason):
    return CheckpointFormatError(
        f"{path} is not a TF1 checkpoint, a Hugging Face directory or a native checkpoint: {reason}.")


def _prefix_format(prefix):
    try:
        names = {name for name, _ in tf.train.list_variables(prefix)}
    except (tf.errors.OpError, ValueError) as error:
        raise _not_a_checkpoint(prefix, f"reading its index failed ({error})") from None
    return "native" if OBJECT_GRAPH_KEY in names else "tf1"


def _listdir(directory):
    return {name.rstrip("/") for name in tf.io.gfile.listdir(directory)}


def _locate_in_directory(directory):
    names = _listdir(directory)
    if HF_WEIGHTS_NAME in names or HF_INDEX_NAME in names:
        return CheckpointLocation("hf", directory, directory)
    pickled = sorted(names & set(_PICKLE_FILES))
    if pickled:
        raise _not_a_checkpoint(directory, f"it holds {pickled} but no {HF_WEIGHTS_NAME}; Hugging Face weights are "
                                           f"read only from safetensors (a pickle can run code), so re-save them "
                                           f"with save_pretrained(..., safe_serialization=True)")
    if "tfhub_module.pb" in names:
        prefix = os.path.join(directory, "variables", "variables")
        return CheckpointLocation(_prefix_format(prefix), prefix, directory)
    if "saved_model.pb" in names:
        raise _not_a_checkpoint(directory, "it is a TF2 SavedModel; load it with tf.saved_model.load or "
                                           "tensorflow_hub, or pass the checkpoint it was exported from")
    if "checkpoint" in names:
        latest = tf.train.latest_checkpoint(directory)
        if latest:
            return CheckpointLocation(_prefix_format(latest), latest, directory)
    prefixes = sorted(name[:-len(".index")] for name in names if name.endswith(".index"))
    if TARBALL_PREFIX in prefixes:
        prefixes = [TARBALL_PREFIX]
    if len(prefixes) == 1:
        prefix = os.path.join(directory, prefixes[0])
        return CheckpointLocation(_prefix_format(prefix), prefix, directory)
    if prefixes:
        raise _not_a_checkpoint(directory, f"it holds several checkpoints {prefixes} and no usable `checkpoint` "
                                           f"file; pass one prefix, e.g. {os.path.join(directory, prefixes[-1])}")
    raise _not_a_checkpoint(directory, f"it holds no *.index, {HF_WEIGHTS_NAME} or tfhub_module.pb "
                                       f"(found {sorted(names)[:10]})")


def locate_checkpoint(path, format="auto") -> CheckpointLocation:
    """Finds the checkpoint at `path`: a prefix, one of its files, or a directory of any layout.

    Example:
    >>> locate_checkpoint("albert_base")  # doctest: +SKIP
    CheckpointLocation(format='tf1', path='albert_base/model.ckpt-best', directory='albert_base')
    """
    if format not in ("auto",) + FORMATS:
        raise ValueError(f"Unknown checkpoint format {format!r}; allowed: auto, {', '.join(FORMATS)}.")
    path = os.fspath(path)
    if tf.io.gfile.isdir(path):
        location = _locate_in_directory(path.rstrip("/") or path)
    else:
        base = os.path.basename(path)
        if base in (HF_WEIGHTS_NAME, HF_INDEX_NAME, HF_CONFIG_NAME) and tf.io.gfile.exists(path):
            directory = os.path.dirname(path) or "."
            location = CheckpointLocation("hf", directory, directory)
        elif base in _PICKLE_FILES or base.endswith((".bin", ".pt", ".pth", ".pkl")):
            raise _not_a_checkpoint(path, "pickled weights are never read (they can run code); use safetensors")
        else:
            prefix = re.sub(r"\.(index|meta|data-\d{5}-of-\d{5})$", "", path)
            if not tf.io.gfile.exists(prefix + ".index"):
                raise _not_a_checkpoint(path, "no such directory, and no checkpoint index "
                                              f"{prefix}.index")
            directory = os.path.dirname(prefix) or "."
            module_directory = os.path.dirname(directory)
            if os.path.basename(prefix) == "variables" and tf.io.gfile.exists(
                    os.path.join(module_directory, "tfhub_module.pb")):
                directory = module_directory
            location = CheckpointLocation(_prefix_format(prefix), prefix, directory)
    if format != "auto" and location.format != format:
        raise CheckpointFormatError(f"{path} holds a {location.format} checkpoint, not the {format} format "
                                    f"that was asked for.")
    return location


def detect_format(path) -> str:
    """'tf1', 'hf' or 'native' for the checkpoint at `path`; CheckpointFormatError otherwise."""
    return locate_checkpoint(path).format


def _as_location(path_or_location):
    if isinstance(path_or_location, CheckpointLocation):
        return path_or_location
    return locate_checkpoint(path_or_location)


def find_config(path) -> Optional[Tuple[AlbertConfig, str]]:
    """(config, file it came from) for a checkpoint, or None: `albert_config.json` beside it or
    in a hub module's `assets/`, else a Hugging Face `config.json` (beside a TF1 or native
    checkpoint only when it says model_type "albert")."""
    location = _as_location(path)
    directory = location.directory
    for candidate in (os.path.join(directory, ALBERT_CONFIG_NAME),
                      os.path.join(directory, "assets", ALBERT_CONFIG_NAME)):
        if tf.io.gfile.exists(candidate):
            return AlbertConfig.from_json_file(candidate), candidate
    hf_config_path = os.path.join(directory, HF_CONFIG_NAME)
    if tf.io.gfile.exists(hf_config_path):
        values = read_json(hf_config_path)
        if location.format == "hf" or values.get("model_type") == "albert":
            return hf_names.albert_config_from_hf(values, source=hf_config_path), hf_config_path
    return None


def find_vocab_files(path) -> List[str]:
    """The SentencePiece model(s) (`*.model`, with their `*.vocab`) beside a checkpoint or in `assets/`."""
    location = _as_location(path)
    found = []
    for directory in (location.directory, os.path.join(location.directory, "assets")):
        if not tf.io.gfile.isdir(directory):
            continue
        names = _listdir(directory)
        for name in sorted(names):
            if name.endswith(".model"):
                found.append(os.path.join(directory, name))
                vocab = name[:-len(".model")] + ".vocab"
                if vocab in names:
                    found.append(os.path.join(directory, vocab))
    return found


def read_json(path):
    """The JSON value in the file at `path`; a ValueError naming the file when it is not valid JSON."""
    with tf.io.gfile.GFile(path, "r") as handle:
        text = handle.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}.") from None
