"""The three checkpoint formats ALBERT weights are read from and written to, and the file names that identify them.

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

Every format is first turned into arrays keyed by original TF1 name (reading.py); one strict
matcher (matching.py) then maps them onto the model (loading.py).
"""

FORMATS = ("tf1", "hf", "native")
OPTIMIZER_SLOT_SUFFIXES = ("/adam_m", "/adam_v")
GLOBAL_STEP_NAME = "global_step"
HUB_MODULE_SCOPE = "module/"
ALBERT_CONFIG_NAME = "albert_config.json"
HF_CONFIG_NAME = "config.json"
HF_WEIGHTS_NAME = "model.safetensors"
HF_INDEX_NAME = "model.safetensors.index.json"
HF_SPM_NAME = "spiece.model"
TARBALL_PREFIX = "model.ckpt-best"
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


class CheckpointFormatError(ValueError):
    """A path that is not a checkpoint of a supported format."""
