"""Reads a checkpoint of any format into arrays keyed by original TF1 name, lazily, with its step and config."""

import dataclasses
import os
from typing import Callable, Dict, Optional, Tuple

import numpy as np
import tensorflow as tf

from albert_tf.checkpoints import hf_names
from albert_tf.checkpoints.formats import (GLOBAL_STEP_NAME, HF_CONFIG_NAME, HF_INDEX_NAME, HF_WEIGHTS_NAME,
                                           HUB_MODULE_SCOPE, OBJECT_GRAPH_KEY, OPTIMIZER_SLOT_SUFFIXES,
                                           CheckpointFormatError)
from albert_tf.checkpoints.locating import CheckpointLocation, find_config, locate_checkpoint, read_json
from albert_tf.checkpoints.tf1_names import native_path_to_tf1_name
from albert_tf.config import AlbertConfig

# The name of a native variable that has no TF1 name: this prefix and its object path in the model.
NATIVE_PREFIX = "native:"


@dataclasses.dataclass
class CheckpointContents:
    """The variables of a checkpoint, keyed by original TF1 name, read lazily.

    Names that have no TF1 name keep their file name (HF keys, `native:<object path>`).
    `file_names` gives the name in the file where it differs, for messages.
    """

    location: CheckpointLocation
    shapes: Dict[str, Tuple[int, ...]]
    read: Callable[[str], np.ndarray]
    global_step: Optional[int] = None
    config: Optional[AlbertConfig] = None
    config_source: Optional[str] = None
    file_names: Dict[str, str] = dataclasses.field(default_factory=dict)
    hf_architectures: Tuple[str, ...] = ()

    @property
    def format(self):
        return self.location.format

    def describe(self, name):
        file_name = self.file_names.get(name)
        if file_name is None and self.format == "hf":
            file_name = hf_names.hf_name_of(name)
        return f"{name} (in the file: {file_name})" if file_name and file_name != name else name


def load_reader(path):
    """tf.train's reader of the checkpoint `path`, and a `get_tensor` for it: a damaged file (cut short, or its bytes
    changed) raises CheckpointFormatError naming the checkpoint and the variable, not the reader's own error."""
    try:
        reader = tf.train.load_checkpoint(path)
    except tf.errors.OpError as error:
        raise CheckpointFormatError(f"{path} is damaged: its index cannot be read ({_first_line(error)}); copy or "
                                    "save the checkpoint again.") from None

    def get_tensor(key):
        try:
            return reader.get_tensor(key)
        except (IndexError, tf.errors.OpError) as error:
            raise CheckpointFormatError(f"{path} is damaged: its variable {key} cannot be read "
                                        f"({_first_line(error)}); copy or save the checkpoint again.") from None

    return reader, get_tensor


def _first_line(error):
    message = error.message if isinstance(error, tf.errors.OpError) else str(error)
    return message.strip().splitlines()[0] if message.strip() else type(error).__name__


def _read_tf1(location):
    reader, get_tensor = load_reader(location.path)
    shapes, file_names, global_step = {}, {}, None
    for file_name, shape in reader.get_variable_to_shape_map().items():
        name = file_name[len(HUB_MODULE_SCOPE):] if file_name.startswith(HUB_MODULE_SCOPE) else file_name
        if name.endswith(OPTIMIZER_SLOT_SUFFIXES):
            continue
        if name == GLOBAL_STEP_NAME:
            global_step = int(get_tensor(file_name))
            continue
        shapes[name] = tuple(shape)
        file_names[name] = file_name
    return CheckpointContents(location, shapes, lambda name: get_tensor(file_names[name]),
                              global_step=global_step, file_names=file_names)


def _read_safetensors(path):
    from safetensors.numpy import load

    with tf.io.gfile.GFile(path, "rb") as handle:
        data = handle.read()
    try:
        return load(data)
    except Exception as error:  # safetensors raises its own error types for corrupt or bf16 files.
        raise CheckpointFormatError(f"{path} could not be read as float safetensors: {error}.") from None


def _read_hf(location):
    directory = location.path
    config_path = os.path.join(directory, HF_CONFIG_NAME)
    if not tf.io.gfile.exists(config_path):
        raise CheckpointFormatError(f"{directory} has {HF_WEIGHTS_NAME} but no {HF_CONFIG_NAME}; a Hugging Face "
                                    f"checkpoint needs its config.")
    hf_config = read_json(config_path)
    index_path = os.path.join(directory, HF_INDEX_NAME)
    if tf.io.gfile.exists(os.path.join(directory, HF_WEIGHTS_NAME)):
        state = _read_safetensors(os.path.join(directory, HF_WEIGHTS_NAME))
    else:
        state = {}
        for shard in sorted(set(read_json(index_path)["weight_map"].values())):
            state.update(_read_safetensors(os.path.join(directory, shard)))
    arrays, file_names, config = hf_names.hf_to_tf1(state, hf_config, source=directory)
    return CheckpointContents(location, {name: array.shape for name, array in arrays.items()}, arrays.__getitem__,
                              config=config, config_source=config_path, file_names=file_names,
                              hf_architectures=tuple(hf_config.get("architectures") or ()))


def object_graph(get_tensor):
    """The object graph of a tf.train checkpoint (what `load_reader` returns as `get_tensor` reads)."""
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(get_tensor(OBJECT_GRAPH_KEY))
    return graph


def _variable_keys(graph, node_id):
    """{object path below node_id: checkpoint key} for every saved variable (first path wins)."""
    keys, seen, queue = {}, {node_id}, [(node_id, "")]
    while queue:
        current, path = queue.pop(0)
        for attribute in graph.nodes[current].attributes:
            if attribute.name == "VARIABLE_VALUE" and path:
                keys.setdefault(path, attribute.checkpoint_key)
        for child in graph.nodes[current].children:
            if child.node_id not in seen:
                seen.add(child.node_id)
                queue.append((child.node_id, f"{path}/{child.local_name}" if path else child.local_name))
    return keys


def _child(graph, node_id, name):
    for child in graph.nodes[node_id].children:
        if child.local_name == name:
            return child.node_id
    return None


def _native_global_step(get_tensor, graph):
    for path in ("step", "global_step", "optimizer/_iterations", "optimizer/inner_optimizer/_iterations"):
        node = 0
        for part in path.split("/"):
            node = _child(graph, node, part) if node is not None else None
        if node is not None:
            for attribute in graph.nodes[node].attributes:
                if attribute.name == "VARIABLE_VALUE":
                    return int(get_tensor(attribute.checkpoint_key))
    return None


def _read_native(location):
    reader, get_tensor = load_reader(location.path)
    graph = object_graph(get_tensor)
    model_node = _child(graph, 0, "model")
    if model_node is None:
        roots = sorted(child.local_name for child in graph.nodes[0].children)
        raise CheckpointFormatError(f"{location.path} is a tf.train checkpoint without a `model` object (it holds "
                                    f"{roots}); save it as tf.train.Checkpoint(model=...).")
    # A bare encoder saved as the model gets the path it has inside a pretrainer.
    is_encoder = _child(graph, model_node, "embeddings") is not None
    keys, shapes, file_names = {}, {}, {}
    shape_map = reader.get_variable_to_shape_map()
    for path, key in _variable_keys(graph, model_node).items():
        as_in_pretrainer = f"encoder/{path}" if is_encoder else path
        name = native_path_to_tf1_name(as_in_pretrainer) or NATIVE_PREFIX + as_in_pretrainer
        keys[name], shapes[name], file_names[name] = key, tuple(shape_map[key]), f"model/{path}"
    return CheckpointContents(location, shapes, lambda name: get_tensor(keys[name]),
                              global_step=_native_global_step(get_tensor, graph), file_names=file_names)


def read_checkpoint(path, format="auto") -> CheckpointContents:
    """Reads any supported checkpoint into TF1-named, lazily loaded arrays, with its step and config.

    Example:
    >>> contents = read_checkpoint("albert_base")  # doctest: +SKIP
    >>> contents.shapes["bert/embeddings/word_embeddings"]  # doctest: +SKIP
    (30000, 128)
    """
    location = path if isinstance(path, CheckpointLocation) else locate_checkpoint(path, format)
    contents = {"tf1": _read_tf1, "hf": _read_hf, "native": _read_native}[location.format](location)
    if contents.config is None:
        found = find_config(location)
        if found is not None:
            contents.config, contents.config_source = found
    return contents

