"""Load and save ALBERT weights as original TF1 checkpoints, Hugging Face safetensors, or this
project's own tf.train checkpoints, strictly.

Formats
- `tf1`: a name-based checkpoint with the original's variable names (see tf1_names.py): a
  checkpoint prefix, a directory with a `checkpoint` file, a released tarball directory with
  only `model.ckpt-best.*`, or a TF1 TF-Hub module directory (`variables/variables`, names
  under `module/`, config and SentencePiece model in `assets/`). Optimizer slots (`*/adam_m`,
  `*/adam_v`) are ignored by name; `global_step` is read as the step.
- `hf`: a Hugging Face directory with `model.safetensors` (or a sharded index) and
  `config.json`, in `AlbertForPreTraining` names, with the task heads of
  AlbertForSequenceClassification, AlbertForMultipleChoice and AlbertForQuestionAnswering (see
  hf_names.py); the architecture written is the model's (`hf_architecture`). Never unpickled: a
  directory with only `pytorch_model.bin` is an error.
- `native`: a tf.train.Checkpoint whose `model` attribute is the model, as the training loop
  writes it; everything outside `model` (optimizer, counters) is not a weight and is not read,
  except a root `step`/`global_step` variable (or the optimizer's iterations) as the step.

Every format is first turned into arrays keyed by original TF1 name; one strict matcher then
maps them onto the model.

Models
`load_weights` and `save_weights` take an AlbertEncoder, an AlbertPretrainer, or any Keras model
with an `.encoder` attribute holding an AlbertEncoder and, for its own head variables, a method
`head_variable_map() -> {TF1 name: variable}` (e.g. the original GLUE head's `output_weights` /
`output_bias`, SQuAD's `cls/squad/output_weights`). Every variable of the model must have a
name, so nothing is skipped silently.

Strict matching
- Every variable the model needs must be in the file, and every shape must match.
- With `allow_missing_heads=True`, head variables that the file lacks keep their fresh
  initialisation and are listed in a warning. Heads are all names outside `bert/`, and the pooler
  `bert/pooler/dense/*`: only the SOP/NSP objective trains it, and Hugging Face's masked-LM,
  token-classification and QA models are saved without it.
- A file variable the model does not use is an error, except the pretraining heads
  `cls/predictions/*` and `cls/seq_relationship/*` when the model has no such head: starting a
  fine-tuning model from a pretraining checkpoint is the normal case. They are logged.
- With `drop_unused_heads=True`, any other head variable the model does not have (a GLUE, SQuAD or
  RACE head of a fine-tuned checkpoint) is left out too, and listed in a warning; unused variables
  under `bert/` stay an error.
- The block layout (groups, inner groups, shared or per-layer halves) must match the config,
  unless `init_from_group0=True`: then every model variable absent from the file takes the
  original's rewrites `group_g` -> `group_0` and `attention_k` / `ffn_k` -> index 1 (also
  combined), so more groups or a partially shared model can start from an all-shared
  checkpoint.
- When the file comes with a config (HF config.json, an albert_config.json beside a TF1 or
  native checkpoint), its architecture fields must equal the model's.
Nothing is assigned unless everything matches.
"""

import dataclasses
import json
import logging
import os
import re
from typing import Callable, Dict, List, Optional, Tuple

import keras
import numpy as np
import tensorflow as tf

from albert_tf.checkpoints import hf_names
from albert_tf.checkpoints.tf1_names import (PRETRAINING_HEAD_SCOPES, group0_candidates, model_variable_map,
                                             native_path_to_tf1_name, parse_half_name)
from albert_tf.config import AlbertConfig

logger = logging.getLogger(__name__)

FORMATS = ("tf1", "hf", "native")
MODEL_HEADS = ("auto", "encoder", "pretraining", "classifier", "multiple_choice", "squad")
OPTIMIZER_SLOT_SUFFIXES = ("/adam_m", "/adam_v")
GLOBAL_STEP_NAME = "global_step"
HUB_MODULE_SCOPE = "module/"
ALBERT_CONFIG_NAME = "albert_config.json"
HF_CONFIG_NAME = "config.json"
HF_WEIGHTS_NAME = "model.safetensors"
HF_INDEX_NAME = "model.safetensors.index.json"
HF_SPM_NAME = "spiece.model"
TARBALL_PREFIX = "model.ckpt-best"
_PICKLE_FILES = ("pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5", "flax_model.msgpack")
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_NATIVE_PREFIX = "native:"
# Architecture fields that weights alone do not pin down (activation, depth, heads) or that
# decide the layout; dropout and initializer_range may differ between a file and a model.
_ARCHITECTURE_FIELDS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                        "intermediate_size", "max_position_embeddings", "type_vocab_size", "num_hidden_groups",
                        "inner_group_num", "share_type")
_LAYOUT_FIELDS = ("num_hidden_layers", "num_hidden_groups", "share_type")
POOLER_SCOPE = "bert/pooler/"
# Hugging Face encoder names that have no TF1 name keep their own (with or without the model's `albert.`).
_UNTRANSLATED_ENCODER_PREFIXES = ("albert.", "embeddings.", "encoder.", "pooler.")


class CheckpointFormatError(ValueError):
    """A path that is not a checkpoint of a supported format."""


class CheckpointMismatchError(ValueError):
    """The file and the model disagree; the message lists every name with its shapes."""

    def __init__(self, message, missing=(), unexpected=(), mismatched=()):
        super().__init__(message)
        self.missing = list(missing)
        self.unexpected = list(unexpected)
        self.mismatched = list(mismatched)


# ---- where a checkpoint is ---------------------------------------------------------------------

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
    return "native" if _OBJECT_GRAPH_KEY in names else "tf1"


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
        values = _read_json(hf_config_path)
        if location.format == "hf" or values.get("model_type") == "albert":
            return hf_names.albert_config_from_hf(values, source=hf_config_path), hf_config_path
    return None


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


def _read_json(path):
    with tf.io.gfile.GFile(path, "r") as handle:
        text = handle.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}.") from None


# ---- reading -----------------------------------------------------------------------------------

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


def _read_tf1(location):
    reader = tf.train.load_checkpoint(location.path)
    shapes, file_names, global_step = {}, {}, None
    for file_name, shape in reader.get_variable_to_shape_map().items():
        name = file_name[len(HUB_MODULE_SCOPE):] if file_name.startswith(HUB_MODULE_SCOPE) else file_name
        if name.endswith(OPTIMIZER_SLOT_SUFFIXES):
            continue
        if name == GLOBAL_STEP_NAME:
            global_step = int(reader.get_tensor(file_name))
            continue
        shapes[name] = tuple(shape)
        file_names[name] = file_name
    return CheckpointContents(location, shapes, lambda name: reader.get_tensor(file_names[name]),
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
    hf_config = _read_json(config_path)
    index_path = os.path.join(directory, HF_INDEX_NAME)
    if tf.io.gfile.exists(os.path.join(directory, HF_WEIGHTS_NAME)):
        state = _read_safetensors(os.path.join(directory, HF_WEIGHTS_NAME))
    else:
        state = {}
        for shard in sorted(set(_read_json(index_path)["weight_map"].values())):
            state.update(_read_safetensors(os.path.join(directory, shard)))
    arrays, file_names, config = hf_names.hf_to_tf1(state, hf_config, source=directory)
    return CheckpointContents(location, {name: array.shape for name, array in arrays.items()}, arrays.__getitem__,
                              config=config, config_source=config_path, file_names=file_names,
                              hf_architectures=tuple(hf_config.get("architectures") or ()))


def _object_graph(reader):
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor(_OBJECT_GRAPH_KEY))
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


def _native_global_step(reader, graph):
    for path in ("step", "global_step", "optimizer/_iterations", "optimizer/inner_optimizer/_iterations"):
        node = 0
        for part in path.split("/"):
            node = _child(graph, node, part) if node is not None else None
        if node is not None:
            for attribute in graph.nodes[node].attributes:
                if attribute.name == "VARIABLE_VALUE":
                    return int(reader.get_tensor(attribute.checkpoint_key))
    return None


def _read_native(location):
    reader = tf.train.load_checkpoint(location.path)
    graph = _object_graph(reader)
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
        name = native_path_to_tf1_name(as_in_pretrainer) or _NATIVE_PREFIX + as_in_pretrainer
        keys[name], shapes[name], file_names[name] = key, tuple(shape_map[key]), f"model/{path}"
    return CheckpointContents(location, shapes, lambda name: reader.get_tensor(keys[name]),
                              global_step=_native_global_step(reader, graph), file_names=file_names)


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


# ---- matching ----------------------------------------------------------------------------------

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


def _model_config(model):
    config = getattr(model, "config", None)
    if not isinstance(config, AlbertConfig):
        config = model.encoder.config
    return config


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
    return {_NATIVE_PREFIX + prefix + path: by_id[id(variable)]
            for path, variable in _trackable_variables(model).items() if id(variable) in by_id}


def _rename_native_heads(contents, renames):
    file_name_of = {renames.get(name, name): name for name in contents.shapes}

    def read(name):
        return contents.read(file_name_of[name])

    return dataclasses.replace(
        contents, shapes={renames.get(name, name): shape for name, shape in contents.shapes.items()}, read=read,
        file_names={renames.get(name, name): file for name, file in contents.file_names.items()})


def _check_config_agrees(model_config, file_config, source, init_from_group0):
    fields = [name for name in _ARCHITECTURE_FIELDS if not (init_from_group0 and name in _LAYOUT_FIELDS)]
    differ = [f"{name}: file {getattr(file_config, name)!r} vs model {getattr(model_config, name)!r}"
              for name in fields if getattr(file_config, name) != getattr(model_config, name)]
    file_act, model_act = (("gelu" if act == "gelu_new" else act)
                           for act in (file_config.hidden_act, model_config.hidden_act))
    if file_act != model_act:
        differ.append(f"hidden_act: file {file_config.hidden_act!r} vs model {model_config.hidden_act!r}")
    if differ:
        raise CheckpointMismatchError(f"The config of the checkpoint ({source}) does not match the model's: "
                                      f"{'; '.join(differ)}.")


def _ranges(numbers):
    numbers = sorted(set(numbers))
    if len(numbers) > 2 and numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"{numbers[0]}..{numbers[-1]}"
    return ",".join(str(number) for number in numbers)


def _describe_layout(names):
    halves = [half for half in map(parse_half_name, names) if half is not None]
    if not halves:
        return "no transformer blocks"
    by_kind = {kind: [half.index for half in halves if half.kind == kind] for kind in ("attention", "ffn")}
    return (f"group_{{{_ranges(half.group for half in halves)}}} x "
            f"inner_group_{{{_ranges(half.inner for half in halves)}}}, "
            f"attention_{{{_ranges(by_kind['attention'])}}}, ffn_{{{_ranges(by_kind['ffn'])}}}")


def _shape_text(shape):
    return "[" + ",".join(str(dim) for dim in shape) + "]"


def is_head_variable(name) -> bool:
    """Whether allow_missing_heads may leave `name` freshly initialised (and drop_unused_heads leave it out)."""
    if name.startswith(_UNTRANSLATED_ENCODER_PREFIXES):
        return False
    return not name.startswith("bert/") or name.startswith(POOLER_SCOPE)


def _mismatch_message(names, contents, config, missing, unexpected, mismatched, allow_missing_heads,
                      drop_unused_heads, init_from_group0):
    available = contents.shapes
    lines = [f"{contents.location.path} ({contents.format}) does not match the model."]
    file_layout, model_layout = _describe_layout(available), _describe_layout(names)
    if file_layout != model_layout and not init_from_group0:
        lines.append(
            f"Its block layout ({file_layout}) does not match the model's ({model_layout}: num_hidden_groups="
            f"{config.num_hidden_groups}, inner_group_num={config.inner_group_num}, share_type="
            f"{config.share_type}); pass init_from_group0 (--init_from_group0) to initialise every group "
            f"from group 0.")
    lines.append(f"missing from the file ({len(missing)}):")
    lines += [f"  {contents.describe(name)} {_shape_text(names[name].shape)}" for name in missing]
    lines.append(f"unexpected in the file ({len(unexpected)}):")
    lines += [f"  {contents.describe(name)} {_shape_text(available[name])}" for name in unexpected]
    lines.append(f"shape mismatches ({len(mismatched)}):")
    lines += [f"  {contents.describe(name)}: file {_shape_text(file_shape)} vs model {_shape_text(model_shape)}"
              for name, file_shape, model_shape in mismatched]
    if missing and not allow_missing_heads and all(map(is_head_variable, missing)):
        lines.append("Only head variables (or the pooler) are missing: allow_missing_heads "
                     "(--allow_missing_heads) starts them from a fresh initialisation.")
    if unexpected and not drop_unused_heads and all(map(is_head_variable, unexpected)):
        lines.append("Only head variables are unexpected: drop_unused_heads (--drop_unused_heads) leaves them "
                     "out, e.g. to take the encoder of a fine-tuned checkpoint; to keep a fine-tuned head, "
                     "load into its task model (convert_checkpoint's --head).")
    return "\n".join(lines)


def _match(names, contents, config, allow_missing_heads, drop_unused_heads, init_from_group0):
    """Model name -> file name for every model variable, or CheckpointMismatchError."""
    available = contents.shapes
    sources = {}
    for name in names:
        if name in available:
            sources[name] = name
        elif init_from_group0:
            candidate = next((c for c in group0_candidates(name) if c in available), None)
            if candidate is not None:
                sources[name] = candidate
    used = set(sources.values())
    unexpected = sorted(name for name in available if name not in used)
    head_scopes_in_model = {scope for scope in PRETRAINING_HEAD_SCOPES if any(n.startswith(scope) for n in names)}
    ignored = [name for name in unexpected
               if any(name.startswith(scope) for scope in PRETRAINING_HEAD_SCOPES if scope not in head_scopes_in_model)]
    unexpected = [name for name in unexpected if name not in ignored]
    dropped_heads = [name for name in unexpected if drop_unused_heads and is_head_variable(name)]
    unexpected = [name for name in unexpected if name not in dropped_heads]
    missing = sorted(name for name in names if name not in sources)
    missing_heads = [name for name in missing if allow_missing_heads and is_head_variable(name)]
    missing = [name for name in missing if name not in missing_heads]
    mismatched = sorted((name, available[source], tuple(names[name].shape)) for name, source in sources.items()
                        if tuple(available[source]) != tuple(names[name].shape))
    if missing or unexpected or mismatched:
        raise CheckpointMismatchError(
            _mismatch_message(names, contents, config, missing, unexpected, mismatched, allow_missing_heads,
                              drop_unused_heads, init_from_group0),
            missing=missing, unexpected=unexpected, mismatched=mismatched)
    return sources, missing_heads, ignored, dropped_heads


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
    """Loads a tf1, hf or native checkpoint into `model`, strictly (see the module docstring).

    `path` is anything locate_checkpoint accepts, or CheckpointContents already read.

    Example:
    >>> from albert_tf import AlbertConfig, AlbertPretrainer
    >>> model = AlbertPretrainer(AlbertConfig.from_preset("albert-base"))  # doctest: +SKIP
    >>> load_weights(model, "albert_base").global_step  # doctest: +SKIP
    125000
    """
    contents = path if isinstance(path, CheckpointContents) else read_checkpoint(path, format)
    names = model_variable_map(model)
    config = _model_config(model)
    if contents.format == "native":
        contents = _rename_native_heads(contents, _native_head_names(model, names))
    if contents.config is not None:
        _check_config_agrees(config, contents.config, contents.config_source, init_from_group0)
    sources, missing_heads, ignored, dropped_heads = _match(names, contents, config, allow_missing_heads,
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


# ---- writing -----------------------------------------------------------------------------------

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

    architectures = ((AlbertPretrainer, "AlbertForPreTraining"), (AlbertClassifier, "AlbertForSequenceClassification"),
                     (AlbertMultipleChoice, "AlbertForMultipleChoice"),
                     (AlbertSpanPredictor, "AlbertForQuestionAnswering"))
    return next((name for model_class, name in architectures if isinstance(model, model_class)), "AlbertModel")


def _write_hf(model, arrays, directory):
    from safetensors.numpy import save

    config = _model_config(model)
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
        _model_config(model).to_json_file(os.path.join(output_dir, ALBERT_CONFIG_NAME))
    for source, name in copies:
        tf.io.gfile.copy(source, os.path.join(output_dir, name), overwrite=False)
    return output_dir


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
