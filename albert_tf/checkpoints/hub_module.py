"""Fine-tuning from an encoder exported by `run_scripts.export_to_tfhub` (`--hub_module_handle`).

The export keeps what a fine-tuning run needs: `assets/albert_config.json`, `assets/spm.model`, the
`do_lower_case` flag, and every weight keyed by its original TF1 name (`variables_by_tf1_name`).
They are read from the SavedModel's files directly, without loading its functions, and the weights
go through `loading.load_weights`, so the same strict matching applies as for any checkpoint:
every encoder weight must be there with its shape, the config must agree with the model's, and the
model's own heads (never part of a hub module) start fresh with a warning.
"""

import dataclasses
import logging
import os
from typing import Union

import tensorflow as tf

from albert_tf.checkpoints.loading import LoadResult, load_weights
from albert_tf.checkpoints.locating import CheckpointLocation
from albert_tf.checkpoints.reading import CheckpointContents, load_reader, object_graph
from albert_tf.config import AlbertConfig

logger = logging.getLogger(__name__)

HUB_FORMAT = "albert-tf hub module"
# The names albert_tf.export.tfhub_encoder writes under: the assets, and the attribute keyed by TF1 name.
ALBERT_CONFIG_ASSET = "albert_config.json"
SPM_MODEL_ASSET = "spm.model"
VARIABLES_BY_TF1_NAME = "variables_by_tf1_name"
_DO_LOWER_CASE = "do_lower_case"
# The file tensorflow_hub writes into every TF1 hub module.
TF1_HUB_MODULE_MARKER = "tfhub_module.pb"


@dataclasses.dataclass(frozen=True)
class HubModule:
    """What an exported encoder directory provides for fine-tuning, read once: the config, the SentencePiece model
    and do_lower_case, and the encoder's `weights` by TF1 name (read lazily, as `load_weights(model, weights)`
    takes them)."""

    encoder_dir: str
    config: AlbertConfig
    spm_model_file: str
    do_lower_case: bool
    weights: CheckpointContents


def resolve_encoder_dir(handle: str) -> str:
    """The encoder SavedModel under `handle`: the export path itself or its `encoder/` directory."""
    if not handle:
        raise ValueError("--hub_module_handle is empty; give the directory run_scripts.export_to_tfhub wrote.")
    if tf.io.gfile.exists(os.path.join(handle, TF1_HUB_MODULE_MARKER)):
        raise ValueError(f"--hub_module_handle={handle!r} is an original TF1 hub module ({TF1_HUB_MODULE_MARKER}), "
                         f"whose graph TensorFlow 2 cannot run; pass --init_checkpoint={handle} instead (its "
                         f"variables, albert_config.json and SentencePiece model are read from it) with "
                         f"--do_lower_case as its tokenization_info says (true for the released English models).")
    for directory in (os.path.join(handle, "encoder"), handle):
        if tf.io.gfile.exists(os.path.join(directory, "saved_model.pb")):
            if not tf.io.gfile.exists(os.path.join(directory, "assets", ALBERT_CONFIG_ASSET)):
                raise ValueError(f"--hub_module_handle={handle!r}: {directory} is a SavedModel without "
                                 f"assets/{ALBERT_CONFIG_ASSET}, so it was not written by "
                                 "run_scripts.export_to_tfhub (for an original TF1 hub module use "
                                 "--init_checkpoint, which reads its variables).")
            return directory
    raise ValueError(f"--hub_module_handle={handle!r} holds no saved_model.pb, neither itself nor in encoder/; "
                     "give the --export_path of run_scripts.export_to_tfhub or its encoder/ directory.")


def _children(graph, node_id):
    return {child.local_name: child.node_id for child in graph.nodes[node_id].children}


def _value_key(graph, node_id):
    return next(attribute.checkpoint_key for attribute in graph.nodes[node_id].attributes
                if attribute.name == "VARIABLE_VALUE")


def read_hub_module(handle: str) -> HubModule:
    """Config, SentencePiece model, do_lower_case and weights of an exported encoder, from one reading of its files.

    Example:
    >>> module = read_hub_module("/tmp/albert_hub")  # doctest: +SKIP
    >>> module.config.hidden_size, os.path.basename(module.spm_model_file)  # doctest: +SKIP
    (768, 'spm.model')
    >>> module.weights.shapes["bert/embeddings/word_embeddings"]  # doctest: +SKIP
    (30000, 128)
    """
    encoder_dir = resolve_encoder_dir(handle)
    assets = os.path.join(encoder_dir, "assets")
    config_file = os.path.join(assets, ALBERT_CONFIG_ASSET)
    config = AlbertConfig.from_json_file(config_file)
    spm_model_file = os.path.join(assets, SPM_MODEL_ASSET)
    if not tf.io.gfile.exists(spm_model_file):
        raise ValueError(f"--hub_module_handle={handle!r}: {assets} has no {SPM_MODEL_ASSET}.")
    prefix = os.path.join(encoder_dir, "variables", "variables")
    reader, get_tensor = load_reader(prefix)
    graph = object_graph(get_tensor)
    root_children = _children(graph, 0)
    for name in (_DO_LOWER_CASE, VARIABLES_BY_TF1_NAME):
        if name not in root_children:
            raise ValueError(f"--hub_module_handle={handle!r}: the SavedModel in {encoder_dir} has no `{name}`; "
                             "re-export it with run_scripts.export_to_tfhub.")
    do_lower_case = bool(get_tensor(_value_key(graph, root_children[_DO_LOWER_CASE])))
    keys = {name: _value_key(graph, node)
            for name, node in _children(graph, root_children[VARIABLES_BY_TF1_NAME]).items()}
    shape_map = reader.get_variable_to_shape_map()
    weights = CheckpointContents(
        location=CheckpointLocation(HUB_FORMAT, prefix, encoder_dir),
        shapes={name: tuple(shape_map[key]) for name, key in keys.items()},
        read=lambda name: get_tensor(keys[name]),
        config=config, config_source=config_file,
        file_names={name: f"{VARIABLES_BY_TF1_NAME}[{name!r}]" for name in keys})
    return HubModule(encoder_dir, config, spm_model_file, do_lower_case, weights)


def load_encoder_weights(model, module: Union[str, HubModule]) -> HubModule:
    """Loads an exported encoder's weights into `model` and returns the module's config and vocabulary.

    `module` is the export's directory, or the HubModule `read_hub_module` read from it (then nothing is read
    again). `model` is an AlbertEncoder, an AlbertPretrainer (its masked-LM head comes from `.mlm`; the
    sentence-order head is not exported and starts fresh) or a fine-tuning model with `.encoder` (its head starts
    fresh). Build the model from the module's `config`.

    Example:
    >>> from albert_tf import AlbertClassifier
    >>> module = read_hub_module("/tmp/albert_hub")  # doctest: +SKIP
    >>> classifier = AlbertClassifier(module.config, num_labels=2)  # doctest: +SKIP
    >>> load_encoder_weights(classifier, module).spm_model_file  # doctest: +SKIP
    '/tmp/albert_hub/encoder/assets/spm.model'
    """
    if not isinstance(module, HubModule):
        module = read_hub_module(module)
    result: LoadResult = load_weights(model, module.weights, allow_missing_heads=True)
    logger.info("Loaded %d variables from the hub module %s.", result.num_loaded, module.encoder_dir)
    return module
