"""The `serve` workload: a sequence classifier served on the CPU by every path a user would deploy, ours
beside Hugging Face's, on the same weights and inputs.

The model: AlbertClassifier with 2 labels of the benchmark's config (ALBERT-base's shape by default), its own
random initialisation with the LayerNorm scales and the biases moved off exact ones and zeros (tf2onnx folds those
away, and a layer so folded does not fuse in onnxruntime; a trained model has none), and its head rescaled so the
logits' root mean square over the inputs is 1: a drift of 1e-2 is then 1% of a logit. Its paths, `SERVE_ROWS`:
- ours, the serving SavedModel (export_saved_model, as run_classifier --export_dir writes it but with an open
  sequence axis) in TensorFlow: float32; "mixed_bfloat16", the classifier built under Keras's mixed_bfloat16
  policy (float32 weights cast to bfloat16 at every use, what a model fine-tuned and exported with
  --mixed_precision=mixed_bfloat16 serves); and "bfloat16 weights", the classifier built under the bfloat16
  policy with the float32 weights rounded once to bfloat16: no cast per call, half the file, and still LayerNorm,
  softmax, GELU and the logits computed in float32 (the layers cast to float32 there, as under mixed_bfloat16).
  The bfloat16 rows run only on CPUs with bfloat16 units (elsewhere bfloat16 is emulated); XLA has no bfloat16
  row because XLA:CPU computes bfloat16 dots in float32 (albert_tf/training/bfloat16_support.py);
- ours, that signature in a tf.function with jit_compile=True (XLA; one compilation per input shape, in the
  warm-up);
- ours, TFLite float32 and int8 (dynamic range), one model per timed length (TFLite fixes the sequence axis);
- ours, ONNX (convert_to_onnx) in onnxruntime: as exported, fused by optimize_onnx, and the fused model's dynamic
  int8 (quantize_onnx_dynamic);
- ours, ONNX in OpenVINO (read from the .onnx file): float32, bfloat16 (the inference precision hint) and int8
  (the exported, unfused model's dynamic int8: its MatMulInteger nodes are standard ONNX, which OpenVINO reads;
  the fused model's onnxruntime operators are not);
- Hugging Face (with --compare_peers=transformers): AlbertForSequenceClassification of the same weights, written
  by our converter (save_weights format "hf"), in PyTorch (float32, bfloat16 autocast), and exported by
  torch.onnx.export (peers/serving.py, eager attention) in onnxruntime (as exported, optimized by onnxruntime's
  transformer optimizer, model type "bert", and that model's dynamic int8) and OpenVINO (float32, bfloat16).
With `checkpoint` (--serve_checkpoint), the model is a fine-tuned classifier as run_classifier leaves it instead
(its output directory, its best/ or a checkpoint prefix, with its albert_config.json beside it), loaded strictly,
its weights as trained, every artifact built from it; its SentencePiece model is `spm_model_file` or the one beside
the checkpoint. With `eval_file` too (a TSV, CSV or JSON-lines file as run_classifier reads it, its `text_field`,
`label_field` and `text_b_field`; the labels are the model's labels.txt), every row's first run also predicts each
dev example once, untimed, after its timing, at batch 1 at the example's own length (TFLite and XLA padded to the
longest timed length, which every example is cut to, as max_seq_length cuts it); the record holds the row's dev
accuracy, our float32 SavedModel's (computed here), the drop in points, the agreement of their predictions and,
for every row that is not float32, McNemar's exact p-value against our float32 SavedModel on the discordant
examples (scipy's binomtest in a child process: scipy is .venv/report's, which no TensorFlow process imports).
A row whose packages are not installed, or that needs bfloat16 units the CPU lacks, is skipped with its reason
logged; its record says why. The onnx extra (`make onnx`: tf2onnx, onnx, onnxruntime, openvino) is found in
.venv/onnx, which is appended to the path of this process and of the rows' processes.

The inputs: built-in corpus text (standard-library docstrings, one a sequence) tokenized by `spm_model_file`
(default: a SentencePiece model of the demo's size trained on the built-in corpus) and cut to exactly the timed
lengths, or random ids (`inputs="random"`). The cases: batch 1 at each of `seq_lengths` and `batch_size`
sequences at the longest; every row answers the same ids.

Each row runs in a process of its own (serving_child, or peers/serving.py for PyTorch), the rows interleaved over
`repeats`. A record has, per batch-1 length, the latency's median and 95th percentile over `runs` calls after
`warmup_runs` (the median over the repeats; the spread of the medians too), the batch's sequences/s over
`batch_runs` calls, the artifact's size, the process's peak RSS (VmHWM), the time from the process's start to its
first answer (imports, load, first call at batch 1 on the shortest length), and the largest absolute difference of
its logits from our float32 SavedModel's (computed here) over every case, with the agreement of their argmax.
Every runtime gets the machine's cores as its operation threads and runs one operation at a time.
"""

import dataclasses
import datetime
import importlib.machinery
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
from typing import Callable, Dict, List, Optional, Sequence, Union

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.benchmarking.child_process import REPORT_PACKAGES, REPOSITORY_ROOT, run_python_child
from albert_tf.benchmarking.finetune_text import train_built_in_tokenizer
from albert_tf.benchmarking.interleaved_runs import run_interleaved
from albert_tf.benchmarking.peer_comparison import OURS, check_peers_can_build, parse_peers
from albert_tf.benchmarking.peer_protocol import RECORD_MARKER
from albert_tf.benchmarking.probes import load_average
from albert_tf.checkpoints.conversion import head_rows
from albert_tf.checkpoints.loading import load_weights
from albert_tf.checkpoints.locating import CheckpointLocation, find_vocab_files
from albert_tf.checkpoints.reading import CheckpointContents, read_checkpoint
from albert_tf.checkpoints.writing import save_weights
from albert_tf.config import AlbertConfig
from albert_tf.export.onnx_export import convert_to_onnx
from albert_tf.export.onnx_optimize import optimize_onnx, optimized_onnx_path, quantize_onnx_dynamic
from albert_tf.export.serving import export_saved_model
from albert_tf.export.tflite import convert_to_tflite, serving_signature
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.models.encoder import INPUT_NAMES
from albert_tf.tasks.checkpoint_evaluation import BEST_DIR_NAME
from albert_tf.tasks.classification_functions import classification_serving_fn
from albert_tf.tasks.text_classification import LABELS_FILE, read_labels_file
from albert_tf.tokenization import AlbertTokenizer
from albert_tf.training.bfloat16_support import cpu_bfloat16_units
from albert_tf.training.compile_choice import cpu_model_name
from data_gen.pretraining import corpora
from data_gen.readers import labeled_text
from data_gen.readers.glue import encode_text_pair

SERVE = "serve"
CHILD_MODULE = "albert_tf.benchmarking.serving_child"
PEER_CHILD_MODULE = "peers.serving"
ONNX_PACKAGES = os.path.join(REPOSITORY_ROOT, ".venv", "onnx")
INPUT_KINDS = ("text", "random")
# The random model's labels; a fine-tuned one has its own.
NUM_LABELS = 2
# The runtimes that predict the dev set padded to the longest timed length: TFLite's models are fixed to it, and
# XLA would compile once per length.
FIXED_LENGTH_RUNTIMES = ("tflite", "xla")
# The peers a serve row can come from.
SERVE_PEERS = ("transformers",)
_TF2ONNX = ("tf2onnx", "onnx")
_HUGGING_FACE = ("torch", "transformers")
_VERSIONS = ("tensorflow", "onnxruntime", "openvino", "torch", "transformers", "tflite_interpreter")
_DETAILS = ("attention", "openvino_inference_precision", "tensorflow_environment")


@dataclasses.dataclass(frozen=True)
class ServeRow:
    """A deployment path: who made the model (OURS or a peer), the runtime that serves it (serving_child's, or
    "torch"), the precision, the artifact it loads, the Python packages it needs (to be built and to run) and
    whether it needs bfloat16 units."""

    name: str
    label: str
    implementation: str
    runtime: str
    precision: str
    artifact: str
    packages: tuple = ()
    needs_bfloat16_units: bool = False


SERVE_ROWS = (
    ServeRow("ours_saved_model", "ours, SavedModel in TensorFlow", OURS, "tensorflow", "float32", "saved_model"),
    ServeRow("ours_saved_model_mixed_bfloat16", "ours, SavedModel mixed_bfloat16 in TensorFlow", OURS, "tensorflow",
             "mixed_bfloat16", "saved_model_mixed_bfloat16", needs_bfloat16_units=True),
    ServeRow("ours_saved_model_bfloat16", "ours, SavedModel with bfloat16 weights in TensorFlow", OURS,
             "tensorflow", "bfloat16", "saved_model_bfloat16", needs_bfloat16_units=True),
    ServeRow("ours_xla", "ours, tf.function with XLA", OURS, "xla", "float32", "saved_model"),
    ServeRow("ours_tflite_float32", "ours, TFLite float32 (fixed length)", OURS, "tflite", "float32",
             "tflite_float32"),
    ServeRow("ours_tflite_int8", "ours, TFLite int8 (fixed length)", OURS, "tflite", "int8", "tflite_int8"),
    ServeRow("ours_onnx", "ours, ONNX in onnxruntime", OURS, "onnxruntime", "float32", "onnx",
             _TF2ONNX + ("onnxruntime",)),
    ServeRow("ours_onnx_optimized", "ours, ONNX optimized in onnxruntime", OURS, "onnxruntime", "float32",
             "onnx_optimized", _TF2ONNX + ("onnxruntime",)),
    ServeRow("ours_onnx_int8", "ours, ONNX optimized int8 in onnxruntime", OURS, "onnxruntime", "int8",
             "onnx_optimized_int8", _TF2ONNX + ("onnxruntime",)),
    ServeRow("ours_openvino", "ours, ONNX in OpenVINO", OURS, "openvino", "float32", "onnx", _TF2ONNX + ("openvino",)),
    ServeRow("ours_openvino_bfloat16", "ours, ONNX in OpenVINO bfloat16", OURS, "openvino", "bfloat16", "onnx",
             _TF2ONNX + ("openvino",), needs_bfloat16_units=True),
    ServeRow("ours_openvino_int8", "ours, ONNX int8 in OpenVINO", OURS, "openvino", "int8", "onnx_int8",
             _TF2ONNX + ("onnxruntime", "openvino")),
    ServeRow("hf_torch", "Hugging Face, torch", "transformers", "torch", "float32", "hf", _HUGGING_FACE),
    ServeRow("hf_torch_bfloat16", "Hugging Face, torch bfloat16 autocast", "transformers", "torch", "bfloat16", "hf",
             _HUGGING_FACE, needs_bfloat16_units=True),
    ServeRow("hf_onnx", "Hugging Face ONNX, onnxruntime", "transformers", "onnxruntime", "float32", "hf_onnx",
             _HUGGING_FACE + ("onnx", "onnxruntime")),
    ServeRow("hf_onnx_optimized", "Hugging Face ONNX optimized, onnxruntime", "transformers", "onnxruntime",
             "float32", "hf_onnx_optimized", _HUGGING_FACE + ("onnx", "onnxruntime")),
    ServeRow("hf_onnx_int8", "Hugging Face ONNX optimized int8, onnxruntime", "transformers", "onnxruntime", "int8",
             "hf_onnx_optimized_int8", _HUGGING_FACE + ("onnx", "onnxruntime")),
    ServeRow("hf_openvino", "Hugging Face ONNX, OpenVINO", "transformers", "openvino", "float32", "hf_onnx",
             _HUGGING_FACE + ("onnx", "openvino")),
    ServeRow("hf_openvino_bfloat16", "Hugging Face ONNX, OpenVINO bfloat16", "transformers", "openvino", "bfloat16",
             "hf_onnx", _HUGGING_FACE + ("onnx", "openvino"), needs_bfloat16_units=True),
)
ROW_NAMES = tuple(row.name for row in SERVE_ROWS)


@dataclasses.dataclass
class ServeSettings:
    """What the workload runs: the model (an AlbertConfig's dict, named `model_name` in the records), the rows
    (`rows`, names of ROW_NAMES; None: all), the batch-1 lengths and the batch (at the longest length), the calls
    timed per repeat (`runs` at batch 1, `batch_runs` at the batch, each case after `warmup_runs`), the repeats
    and the inputs (INPUT_KINDS; text is tokenized by `spm_model_file`, None: one trained on the built-in corpus,
    or the fine-tuned classifier's). `checkpoint` is a fine-tuned classifier to serve instead of random weights
    (`config` must be its: `checkpoint_config`), `eval_file` its dev set, read as run_classifier reads it through
    `text_field`, `label_field`, `text_b_field` and `file_format` (see the module's docstring).

    Example:
    >>> settings = ServeSettings(AlbertConfig.from_preset("albert-base").to_dict(), "albert-base")
    >>> settings.cases()
    ['b1x32', 'b1x128', 'b32x128']
    """

    config: dict
    model_name: str
    rows: Optional[Sequence[str]] = None
    seq_lengths: Sequence[int] = (32, 128)
    batch_size: int = 32
    runs: int = 20
    batch_runs: int = 3
    warmup_runs: int = 2
    repeats: int = 2
    inputs: str = "text"
    spm_model_file: Optional[str] = None
    seed: int = 0
    checkpoint: Optional[str] = None
    eval_file: Optional[str] = None
    text_field: str = "sentence"
    label_field: str = "label"
    text_b_field: Optional[str] = None
    file_format: Optional[str] = None

    def __post_init__(self):
        for name, least in (("batch_size", 2), ("runs", 1), ("batch_runs", 1), ("warmup_runs", 0), ("repeats", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"serve setting {name} must be an integer of at least {least}, got {value!r}.")
        if self.rows is not None:
            unknown = sorted(set(self.rows) - set(ROW_NAMES))
            if unknown or not self.rows:
                raise ValueError(f"serve rows {list(self.rows)} must name one or more of {', '.join(ROW_NAMES)}.")
        positions = self.albert_config().max_position_embeddings
        if not self.seq_lengths or any(not 3 <= length <= positions for length in self.seq_lengths):
            raise ValueError(f"serve seq_lengths {list(self.seq_lengths)} must be between 3 (a token between [CLS] "
                             f"and [SEP]) and the model's max_position_embeddings={positions}.")
        if self.inputs not in INPUT_KINDS:
            raise ValueError(f"serve inputs {self.inputs!r} must be one of {', '.join(INPUT_KINDS)}.")
        if self.checkpoint is not None:
            check_checkpoint_exists(self.checkpoint)
        if self.eval_file is not None:
            if self.checkpoint is None:
                raise ValueError(f"serve eval_file {self.eval_file} scores a fine-tuned classifier: give its "
                                 "checkpoint too (--serve_checkpoint).")
            if not tf.io.gfile.exists(self.eval_file):
                raise ValueError(f"serve eval_file {self.eval_file} does not exist (--serve_eval_file).")

    def eval_schema(self) -> labeled_text.LabeledTextSchema:
        """How `eval_file`'s records hold their texts and labels (single-label, as run_classifier reads them)."""
        return _with_serve_flags(lambda: labeled_text.LabeledTextSchema(
            text_field=self.text_field, label_field=self.label_field, text_b_field=self.text_b_field,
            file_format=self.file_format))

    def albert_config(self) -> AlbertConfig:
        return AlbertConfig.from_dict(self.config, source=f"benchmark model {self.model_name}")

    def cases(self) -> List[str]:
        """The inputs' cases in timing order: batch 1 at each length, shortest first, then the batch."""
        lengths = sorted(set(self.seq_lengths))
        return [f"b1x{length}" for length in lengths] + [f"b{self.batch_size}x{lengths[-1]}"]


@dataclasses.dataclass
class ServeArtifacts:
    """What the rows load: {artifact: path} (a TFLite artifact is {length: path}), the inputs' .npz (cases as
    serving_child reads them) and how they were made, our float32 SavedModel's logits per case, the fused ops of
    each optimized ONNX model, the model's float32 parameter bytes and, with an eval file, the dev set (DevSet)."""

    paths: Dict[str, Union[str, Dict[str, str]]]
    inputs_file: str
    inputs_description: str
    reference_logits: Dict[str, np.ndarray]
    fused_ops: Dict[str, Dict[str, int]]
    parameter_bytes: int
    dev: Optional["DevSet"] = None


def serve_rows(settings: ServeSettings, peers: Sequence[str] = ()) -> List[ServeRow]:
    """The rows `settings.rows` names (all by default, the peers' only when `peers` names them), in SERVE_ROWS'
    order; a peer's row named without its peer is refused in one sentence.

    Example:
    >>> settings = ServeSettings(AlbertConfig.from_preset("albert-base").to_dict(), "albert-base",
    ...                          rows=["hf_torch", "ours_onnx"])
    >>> [row.name for row in serve_rows(settings, ["transformers"])]
    ['ours_onnx', 'hf_torch']
    """
    peers = _serve_peers(peers)
    named = ROW_NAMES if settings.rows is None else settings.rows
    rows = [row for row in SERVE_ROWS if row.name in named]
    without_peer = [row.name for row in rows if row.implementation not in (OURS, *peers)]
    if without_peer and settings.rows is not None:
        raise ValueError(f"serve rows {without_peer} are transformers' rows; compare with it "
                         "(--compare_peers=transformers) to run them.")
    return [row for row in rows if row.implementation in (OURS, *peers)]


def _serve_peers(peers: Sequence[str]) -> tuple:
    """The peers named, each one of SERVE_PEERS; another is refused in one sentence."""
    peers = parse_peers(peers)
    other = [peer for peer in peers if peer not in SERVE_PEERS]
    if other:
        raise ValueError(f"The serve workload compares with {', '.join(SERVE_PEERS)} only; --compare_peers names "
                         f"{', '.join(other)}.")
    return peers


def skip_reason(row: ServeRow) -> Optional[str]:
    """Why `row` cannot run here (a package it needs is not installed, or it needs bfloat16 units the CPU lacks),
    or None."""
    missing = [module for module in row.packages
               if importlib.machinery.PathFinder.find_spec(module, [*sys.path, ONNX_PACKAGES]) is None]
    if missing:
        return (f"{', '.join(missing)} not installed (`make onnx` installs the onnx extra into {ONNX_PACKAGES}; "
                "requirements-dev.txt has torch and transformers)")
    if row.needs_bfloat16_units and not cpu_bfloat16_units():
        return "this CPU has no bfloat16 units (avx512_bf16, amx_bf16), where bfloat16 is emulated"
    return None


# ---- a fine-tuned classifier and its dev set ---------------------------------------------------------------------

# The reader's (run_classifier's) flags, as the benchmark names them.
_EVAL_FLAGS = re.compile(r"--(text_field|text_b_field|label_field|file_format)\b")


def _with_serve_flags(read: Callable):
    """`read()`, its LabeledTextError naming the benchmark's --serve_ flags where the reader names run_classifier's."""
    try:
        return read()
    except labeled_text.LabeledTextError as error:
        raise labeled_text.LabeledTextError(_EVAL_FLAGS.sub(r"--serve_\1", str(error))) from None


@dataclasses.dataclass
class FineTuned:
    """A fine-tuned classifier's checkpoint (read, not loaded), its label count (its head's rows), its labels
    (labels.txt beside it or, for best/, in the run's directory; None where there is none) and, with an eval
    file, that file's examples, every label among the model's."""

    contents: CheckpointContents
    num_labels: int
    labels: Optional[tuple] = None
    dev_examples: Optional[List[labeled_text.LabeledExample]] = None


def check_checkpoint_exists(checkpoint: str) -> None:
    """Refuses, in one sentence, a `checkpoint` that is neither a file or directory nor a checkpoint prefix."""
    if not (tf.io.gfile.exists(checkpoint) or tf.io.gfile.exists(checkpoint + ".index")):
        raise ValueError(f"serve checkpoint {checkpoint} does not exist: give a fine-tuned classifier's output "
                         "directory or checkpoint prefix (--serve_checkpoint).")


def checkpoint_config(checkpoint: str) -> tuple:
    """(config, the name the records give the model) of the fine-tuned classifier at `checkpoint`: the
    albert_config.json run_classifier leaves beside its checkpoints."""
    check_checkpoint_exists(checkpoint)
    contents = read_checkpoint(checkpoint)
    if contents.config is None:
        raise ValueError(f"serve checkpoint {checkpoint} has no albert_config.json beside it; give the model's config "
                         "(--albert_config_file).")
    return contents.config, f"fine-tuned {os.path.normpath(checkpoint)}"


def read_fine_tuned(settings: ServeSettings) -> Optional[FineTuned]:
    """The fine-tuned classifier `settings.checkpoint` names and the dev examples of `settings.eval_file` (None
    without a checkpoint), every file read and checked: a value that cannot be used (no classifier head, no
    labels.txt for the eval file's labels, a label field the file lacks, a label the model has not) is refused in
    one sentence naming it. With an eval file, scipy must be findable too (the McNemar test's)."""
    if settings.checkpoint is None:
        return None
    contents = read_checkpoint(settings.checkpoint)
    num_labels = head_rows(contents)
    if num_labels is None or num_labels < 2:
        raise ValueError(f"serve checkpoint {contents.location.path} has no classifier head of two or more labels "
                         "(output_weights [labels, hidden]): give a run_classifier or run_glue checkpoint of a "
                         "single-label task.")
    fine_tuned = FineTuned(contents, int(num_labels))
    if settings.eval_file is None:
        return fine_tuned
    fine_tuned.labels, labels_file = _model_labels(contents.location)
    if len(fine_tuned.labels) != fine_tuned.num_labels:
        raise ValueError(f"{labels_file} names {len(fine_tuned.labels)} labels, but the classifier head of "
                         f"{contents.location.path} has {fine_tuned.num_labels}.")
    schema = settings.eval_schema()
    fine_tuned.dev_examples = _with_serve_flags(lambda: labeled_text.read_examples(settings.eval_file, schema))
    if not fine_tuned.dev_examples:
        raise ValueError(f"serve eval_file {settings.eval_file} holds no examples.")
    _with_serve_flags(lambda: labeled_text.check_labels(fine_tuned.dev_examples, fine_tuned.labels, schema,
                                                        labels_file))
    if importlib.machinery.PathFinder.find_spec("scipy", [*sys.path, REPORT_PACKAGES]) is None:
        raise ValueError(f"The serve workload's McNemar test needs scipy, looked for in {REPORT_PACKAGES} and on the "
                         "path; `make install` puts it there (requirements-report.txt).")
    return fine_tuned


def _model_labels(location: CheckpointLocation) -> tuple:
    """(labels, the file) of run_classifier's labels.txt beside the checkpoint or, for its best/ checkpoint, in
    the run's output directory."""
    directory = os.path.normpath(location.directory)
    candidates = [directory] + ([os.path.dirname(directory)] if os.path.basename(directory) == BEST_DIR_NAME else [])
    for candidate in candidates:
        path = os.path.join(candidate, LABELS_FILE)
        if tf.io.gfile.exists(path):
            return read_labels_file(path), path
    raise ValueError(f"serve checkpoint {location.path} has no {LABELS_FILE} beside it (run_classifier writes the "
                     "model's labels in its output directory), so the eval file's labels cannot be matched to its "
                     "outputs.")


def _fine_tuned_classifier(config: AlbertConfig, fine_tuned: FineTuned):
    """The classifier of `fine_tuned`'s checkpoint, loaded strictly (every variable, nothing else)."""
    classifier = AlbertClassifier(config, num_labels=fine_tuned.num_labels, dropout_rate=0.0)
    classifier({name: tf.zeros([1, 2], tf.int32) for name in INPUT_NAMES}, training=False)
    load_weights(classifier, fine_tuned.contents)
    return classifier


def discordant_pairs(label_ids: np.ndarray, reference: np.ndarray, predictions: np.ndarray) -> tuple:
    """(examples the reference gets right and `predictions` wrong, examples the reference gets wrong and
    `predictions` right): the discordant pairs of McNemar's test.

    Example:
    >>> discordant_pairs(np.array([0, 1, 1, 0]), np.array([0, 1, 0, 1]), np.array([1, 1, 1, 1]))
    (1, 1)
    """
    reference_right, right = np.asarray(reference) == label_ids, np.asarray(predictions) == label_ids
    return int(np.sum(reference_right & ~right)), int(np.sum(~reference_right & right))


def mcnemar_p_values(discordant: Sequence[tuple]) -> List[float]:
    """The exact two-sided McNemar p-value of each (b, c) pair of discordant counts: scipy.stats.binomtest(b,
    b + c, 0.5), 1 where no pair is discordant. scipy is the report's (.venv/report), which no TensorFlow process
    imports: the test runs in a child process (serving_child's `mcnemar` command) that adds it to its path.

    Example:
    >>> mcnemar_p_values([(10, 2), (0, 0)])  # doctest: +SKIP
    [0.0385742..., 1.0]
    """
    if not discordant:
        return []
    spec = {"discordant": [[int(b), int(c)] for b, c in discordant]}
    return run_python_child(["-m", CHILD_MODULE, "mcnemar", json.dumps(spec)], RECORD_MARKER,
                            "Computing McNemar's test failed in its child process").record["p_values"]


def run_serving(settings: ServeSettings, peers: Sequence[str] = (), work_dir: Optional[str] = None,
                run_row: Optional[Callable[..., dict]] = None, report_failed_rows: bool = False) -> List[dict]:
    """Builds every artifact once (`prepare_serving`), runs every row that can run `settings.repeats` times,
    interleaved, each in its own process (`run_row_child`); returns a record per row in SERVE_ROWS' order, a
    skipped row's with its reason (`serve_table` prints them). The files go to `work_dir` (default: a temporary
    directory). With `settings.eval_file`, each row's first run also predicts the dev set (`dev_fields`), and every
    row that is not float32 gets McNemar's p-value against our float32 SavedModel (`mcnemar_p_values`). With
    `report_failed_rows`, a row whose process fails is not run again and its record says why (`failed`), instead
    of ending the workload.

    Example:
    >>> records = run_serving(settings, ["transformers"])  # doctest: +SKIP
    >>> records[0]["configuration"], records[0]["latency_ms_b1x32_median"]  # doctest: +SKIP
    ('ours, SavedModel in TensorFlow', 47.3)
    """
    rows = serve_rows(settings, peers)
    fine_tuned = read_fine_tuned(settings)  # refuses a bad checkpoint or eval file before anything is built
    if any(row.implementation != OURS for row in rows):
        check_peers_can_build(settings.albert_config(), settings.model_name)
    reasons = {row.name: skip_reason(row) for row in rows}
    for row in rows:
        if reasons[row.name]:
            logging.warning("serve skips %s (%s): %s.", row.name, row.label, reasons[row.name])
    runnable = [row for row in rows if not reasons[row.name]]
    run_row = run_row or run_row_child
    with tempfile.TemporaryDirectory() as scratch:
        artifacts = prepare_serving(settings, runnable, work_dir or scratch, fine_tuned=fine_tuned)
        # The dev set's predictions come from the first repeat.
        runs, failures = run_interleaved(
            runnable, settings.repeats,
            lambda row, repeat: run_row(row, artifacts, settings, predict_dev=artifacts.dev is not None and not repeat),
            "serve", describe=lambda row: f"{row.name} ({row.label})", record_failures=report_failed_rows)
        records = [{**_common_fields(row, settings), "failed": failures[row]} if row in failures
                   else _record(row, runs[row], artifacts, settings) if row in runs
                   else _skipped_record(row, reasons[row.name], settings) for row in rows]
    tested = [record for record in records if "dev_discordant" in record and record["precision"] != "float32"]
    p_values = mcnemar_p_values([(record["dev_discordant"]["float32_right_only"],
                                  record["dev_discordant"]["row_right_only"]) for record in tested])
    for record, p_value in zip(tested, p_values, strict=True):
        record["dev_mcnemar_p"] = p_value
    return records


def run_row_child(row: ServeRow, artifacts: ServeArtifacts, settings: ServeSettings,
                  timeout_seconds: Optional[float] = None, predict_dev: bool = False) -> dict:
    """One run of `row` in a Python process of its own (serving_child, or peers/serving.py for PyTorch); its
    record: the seconds of every call, the logits of every case, the first answer's time, the peak RSS; with
    `predict_dev`, the logits of every dev example too (after the timing)."""
    cases = settings.cases()
    spec = {"row": row.name, "runtime": row.runtime, "precision": row.precision,
            "artifact": artifacts.paths[row.artifact], "inputs_file": artifacts.inputs_file, "cases": cases,
            "warmup_runs": settings.warmup_runs,
            "runs": {case: settings.runs for case in cases[:-1]} | {cases[-1]: settings.batch_runs},
            "threads": _machine_threads(), "extra_paths": [ONNX_PACKAGES]}
    if predict_dev:
        spec["dev"] = {"inputs_file": artifacts.dev.inputs_file,
                       "fixed_length": artifacts.dev.length if row.runtime in FIXED_LENGTH_RUNTIMES else None}
    failure = f"The serve row {row.name} ({row.label}) failed in its child process"
    if row.runtime == "torch":
        return run_python_child(["-m", PEER_CHILD_MODULE, "run", json.dumps(spec)], RECORD_MARKER, failure,
                                timeout_seconds=timeout_seconds).record
    return run_python_child(["-m", CHILD_MODULE, json.dumps(spec)], RECORD_MARKER, failure,
                            timeout_seconds=timeout_seconds).record


def _machine_threads() -> int:
    """The cores this process may run on: every row's operation threads."""
    return len(os.sched_getaffinity(0))


# ---- the artifacts ----------------------------------------------------------------------------------------------

def prepare_serving(settings: ServeSettings, rows: Sequence[ServeRow], directory: str,
                    fine_tuned: Optional[FineTuned] = None) -> ServeArtifacts:
    """The inputs, the model and every artifact `rows` load, written under `directory`; our float32 SavedModel
    (always: it gives the reference logits) is `saved_model/`. The model is the fine-tuned classifier of
    `settings.checkpoint` (`fine_tuned`, read by read_fine_tuned when not given) or the random one of the module's
    docstring; with `settings.eval_file`, its dev set too (`DevSet`)."""
    if os.path.isdir(ONNX_PACKAGES) and ONNX_PACKAGES not in sys.path:
        sys.path.append(ONNX_PACKAGES)
    os.makedirs(directory, exist_ok=True)
    if fine_tuned is None and settings.checkpoint is not None:
        fine_tuned = read_fine_tuned(settings)
    tokenizer = None
    if settings.inputs == "text" or settings.eval_file is not None:
        tokenizer = AlbertTokenizer(spm_model_file=_spm_model_file(settings, fine_tuned, directory))
    cases, description = _serving_inputs(settings, tokenizer)
    inputs_file = os.path.join(directory, "inputs.npz")
    np.savez(inputs_file, **{f"{case}/{name}": value for case, inputs in cases.items()
                             for name, value in inputs.items()})
    config = settings.albert_config()
    classifier = (_fine_tuned_classifier(config, fine_tuned) if fine_tuned is not None
                  else _random_classifier(config, cases, settings.seed))
    wanted = {row.artifact for row in rows}
    paths: Dict[str, Union[str, Dict[str, str]]] = {"saved_model": _export(classifier, directory, "saved_model")}
    for policy in ("mixed_bfloat16", "bfloat16"):
        if f"saved_model_{policy}" in wanted:
            paths[f"saved_model_{policy}"] = _export(_in_policy(classifier, settings, policy), directory,
                                                     f"saved_model_{policy}")
    paths.update(_tflite_models(paths["saved_model"], [variant for variant in ("float32", "int8")
                                                       if f"tflite_{variant}" in wanted], settings, directory))
    fused_ops = _onnx_models(paths, wanted)
    fused_ops.update(_hugging_face_models(classifier, paths, wanted, settings, directory))
    loaded, signature = serving_signature(paths["saved_model"])
    reference = {case: signature(**{name: tf.constant(value) for name, value in inputs.items()})["logits"].numpy()
                 for case, inputs in cases.items()}
    dev = None
    if settings.eval_file is not None:
        dev = _dev_set(settings, fine_tuned, tokenizer, signature, directory)
    del loaded
    parameter_bytes = 4 * sum(int(np.prod(variable.shape)) for variable in classifier.trainable_variables)
    return ServeArtifacts(paths, inputs_file, description, reference, fused_ops, parameter_bytes, dev)


def _spm_model_file(settings: ServeSettings, fine_tuned: Optional[FineTuned], directory: str) -> str:
    """`settings.spm_model_file`; else the fine-tuned classifier's (the one SentencePiece model beside its
    checkpoint); else one trained on the built-in corpus, for the random model."""
    if settings.spm_model_file:
        return settings.spm_model_file
    if fine_tuned is None:
        return train_built_in_tokenizer(directory)
    models = [path for path in find_vocab_files(fine_tuned.contents.location) if path.endswith(".model")]
    if len(models) != 1:
        raise ValueError(f"serve checkpoint {settings.checkpoint} has {len(models)} SentencePiece models beside it "
                         f"({models}); give the one it was fine-tuned with (--spm_model_file).")
    return models[0]


def _serving_inputs(settings: ServeSettings, tokenizer: Optional[AlbertTokenizer]):
    """({case: {input name: int32 ids}}, how they were made): every sequence exactly its case's length."""
    config = settings.albert_config()
    cases = settings.cases()
    shapes = {case: tuple(int(size) for size in case[1:].split("x")) for case in cases}
    if settings.inputs == "random":
        rng = np.random.default_rng(settings.seed)
        # Ids 0-4 are the vocabulary's special pieces (<pad>, <unk>, [CLS], [SEP], [MASK]).
        word_ids = {case: rng.integers(5, config.vocab_size, shape) for case, shape in shapes.items()}
        description = "random ids"
    else:
        word_ids, description = _text_ids(settings, shapes, tokenizer)
    return ({case: {"input_word_ids": ids.astype(np.int32), "input_mask": np.ones(ids.shape, np.int32),
                    "input_type_ids": np.zeros(ids.shape, np.int32)} for case, ids in word_ids.items()},
            description)


def _check_vocabulary(settings: ServeSettings, tokenizer: AlbertTokenizer) -> None:
    vocab_size = settings.albert_config().vocab_size
    if tokenizer.vocab_size > vocab_size:
        raise ValueError(f"The SentencePiece model {tokenizer.spm_model_file} has {tokenizer.vocab_size} pieces, more "
                         f"than the model's vocab_size={vocab_size}; give one of at most that many (--spm_model_file) "
                         "or random inputs.")


def _text_ids(settings: ServeSettings, shapes: Dict[str, tuple], tokenizer: AlbertTokenizer):
    """The word ids of built-in corpus text for every case: one docstring a sequence, each long enough to fill it."""
    _check_vocabulary(settings, tokenizer)
    documents = (" ".join(sentences) for _, sentences in corpora.iter_sourced_documents())
    word_ids = {}
    for case, (batch, length) in shapes.items():
        rows = []
        while len(rows) < batch:
            text = next(documents, None)
            if text is None:
                raise ValueError(f"The built-in corpus has fewer than {batch} docstrings of {length} tokens left; "
                                 "time shorter lengths or random inputs.")
            encoded = encode_text_pair(tokenizer, text, None, length)
            if sum(encoded["input_mask"]) == length:
                rows.append(encoded["input_word_ids"])
        word_ids[case] = np.array(rows)
    return word_ids, (f"built-in corpus text (standard-library docstrings, one a sequence, cut to its length), "
                      f"tokenized by {os.path.basename(tokenizer.spm_model_file)}")


@dataclasses.dataclass
class DevSet:
    """The eval file's examples as the rows predict them: `inputs_file` (.npz of the three inputs [examples,
    length], zero-padded to `length`, the longest timed length), their `label_ids` (the model's label order),
    our float32 SavedModel's logits of each (computed here) and how they were made."""

    inputs_file: str
    length: int
    label_ids: np.ndarray
    reference_logits: np.ndarray
    description: str


def _dev_set(settings: ServeSettings, fine_tuned: FineTuned, tokenizer: AlbertTokenizer, signature,
             directory: str, batch_size: int = 64) -> DevSet:
    """The eval file encoded as run_classifier encodes it ([CLS] a [SEP] (b [SEP]), cut to the longest timed
    length) and our float32 SavedModel's logits of it, in batches of similar lengths cut to their longest
    (float32 logits do not depend on the padding, which the mask hides)."""
    _check_vocabulary(settings, tokenizer)
    length = max(settings.seq_lengths)
    schema = settings.eval_schema()
    encoded = [labeled_text.convert_example(example, index, tokenizer, length, schema, fine_tuned.labels)
               for index, example in enumerate(fine_tuned.dev_examples)]
    inputs = {name: np.array([example[name] for example in encoded], np.int32) for name in INPUT_NAMES}
    label_ids = np.array([example["label_ids"] for example in encoded], np.int64)
    inputs_file = os.path.join(directory, "dev_inputs.npz")
    np.savez(inputs_file, **inputs)
    lengths = inputs["input_mask"].sum(axis=1)
    order = np.argsort(lengths, kind="stable")
    reference = np.zeros((len(encoded), fine_tuned.num_labels), np.float32)
    for start in range(0, len(order), batch_size):
        chosen = order[start:start + batch_size]
        width = int(lengths[chosen].max())
        reference[chosen] = signature(**{name: tf.constant(value[chosen, :width])
                                         for name, value in inputs.items()})["logits"].numpy()
    truncated = int(np.sum(lengths == length))
    description = (f"{len(encoded)} examples of {os.path.basename(settings.eval_file)}, encoded as run_classifier "
                   f"encodes them, cut to {length} tokens ({truncated} reach it), each predicted alone at batch 1 at "
                   f"its own length (TFLite and XLA: padded to {length})")
    return DevSet(inputs_file, length, label_ids, reference, description)


def _random_classifier(config: AlbertConfig, cases: Dict[str, Dict[str, np.ndarray]], seed: int):
    """The module docstring's model: random weights, logits of unit root mean square over `cases`."""
    keras.utils.set_random_seed(seed)
    classifier = AlbertClassifier(config, num_labels=NUM_LABELS, dropout_rate=0.0)
    rng = np.random.default_rng(seed)
    for variable in classifier.trainable_variables:
        if len(variable.shape) == 1:
            centre = 1.0 if variable.name == "gamma" else 0.0
            variable.assign(centre + 0.02 * rng.standard_normal(variable.shape).astype(np.float32))
    classifier.head.output_bias.assign(tf.zeros_like(classifier.head.output_bias))
    logits = np.concatenate([classifier({name: tf.constant(value) for name, value in inputs.items()}).numpy()
                             for inputs in cases.values()])
    classifier.head.output_weights.assign(classifier.head.output_weights / float(np.sqrt(np.mean(logits ** 2))))
    return classifier


def _in_policy(classifier, settings: ServeSettings, policy: str):
    """A copy of `classifier` built under the Keras dtype policy `policy`, its weights cast to that policy's."""
    copy = AlbertClassifier(settings.albert_config(), num_labels=classifier.num_labels, dropout_rate=0.0,
                            dtype=policy)
    for target, source in zip(copy.variables, classifier.variables, strict=True):
        if target.path != source.path:
            raise RuntimeError(f"The {policy} classifier's variable {target.path} stands where the float32 one has "
                               f"{source.path}.")
        target.assign(tf.cast(source, target.dtype))
    return copy


def _export(classifier, directory: str, name: str) -> str:
    """The serving SavedModel of `classifier` at `directory`/`name`, its sequence axis open."""
    sequence = tf.TensorSpec([None, None], tf.int32)
    return export_saved_model(classifier, {name: sequence for name in INPUT_NAMES}, classification_serving_fn,
                              os.path.join(directory, name))


def _tflite_models(saved_model_dir: str, variants: Sequence[str], settings: ServeSettings, directory: str
                   ) -> Dict[str, Dict[str, str]]:
    """{"tflite_<variant>": {length: path}}: each variant converted at every batch-1 length."""
    models: Dict[str, Dict[str, str]] = {f"tflite_{variant}": {} for variant in variants}
    os.makedirs(os.path.join(directory, "tflite"), exist_ok=True)
    for length in sorted(set(settings.seq_lengths)) if variants else ():
        converted = convert_to_tflite(saved_model_dir, variants, length, ["logits"], overwrite=True)
        for variant, path in converted.items():
            models[f"tflite_{variant}"][str(length)] = os.path.join(directory, "tflite", f"{variant}_{length}.tflite")
            shutil.move(path, models[f"tflite_{variant}"][str(length)])
    return models


def _onnx_models(paths: dict, wanted: set) -> Dict[str, Dict[str, int]]:
    """Adds our ONNX artifacts that `wanted` names to `paths`; returns the optimized model's fused ops."""
    if not wanted & {"onnx", "onnx_int8", "onnx_optimized", "onnx_optimized_int8"}:
        return {}
    paths["onnx"] = convert_to_onnx(paths["saved_model"], ["logits"], overwrite=True)
    if "onnx_int8" in wanted:
        paths["onnx_int8"] = quantize_onnx_dynamic(paths["onnx"], overwrite=True)
    if not wanted & {"onnx_optimized", "onnx_optimized_int8"}:
        return {}
    paths["onnx_optimized"], fused_ops = optimize_onnx(paths["onnx"], overwrite=True)
    if "onnx_optimized_int8" in wanted:
        paths["onnx_optimized_int8"] = quantize_onnx_dynamic(paths["onnx_optimized"], overwrite=True)
    return {"onnx_optimized": fused_ops, "onnx_optimized_int8": fused_ops}


def _hugging_face_models(classifier, paths: dict, wanted: set, settings: ServeSettings, directory: str
                         ) -> Dict[str, Dict[str, int]]:
    """Adds the Hugging Face artifacts that `wanted` names to `paths`: our converter's checkpoint ("hf"), its ONNX
    model (peers/serving.py exports it, in a process with PyTorch), that model optimized by onnxruntime's
    transformer optimizer (model type "bert", its Python fusions, as optimize_onnx runs them on ours) and the
    optimized model's dynamic int8 (quantize_onnx_dynamic, as ours); returns the optimized model's fused ops."""
    # Here, not at the top: onnxruntime is the onnx extra's, on the path from prepare_serving on.
    from onnxruntime.transformers.optimizer import optimize_model

    onnx_artifacts = wanted & {"hf_onnx", "hf_onnx_optimized", "hf_onnx_optimized_int8"}
    if "hf" not in wanted and not onnx_artifacts:
        return {}
    paths["hf"] = save_weights(classifier, os.path.join(directory, "hf"), format="hf")
    if not onnx_artifacts:
        return {}
    spec = {"hf_dir": paths["hf"], "onnx_path": os.path.join(directory, "hf_onnx", "model.onnx"),
            "extra_paths": [ONNX_PACKAGES]}
    os.makedirs(os.path.dirname(spec["onnx_path"]), exist_ok=True)
    paths["hf_onnx"] = run_python_child(["-m", PEER_CHILD_MODULE, "export", json.dumps(spec)], RECORD_MARKER,
                                        "Exporting the Hugging Face model to ONNX failed in its child process"
                                        ).record["path"]
    if not onnx_artifacts & {"hf_onnx_optimized", "hf_onnx_optimized_int8"}:
        return {}
    config = settings.albert_config()
    optimizer = optimize_model(paths["hf_onnx"], model_type="bert", num_heads=config.num_attention_heads,
                               hidden_size=config.hidden_size, opt_level=0)
    paths["hf_onnx_optimized"] = optimized_onnx_path(paths["hf_onnx"])
    optimizer.save_model_to_file(paths["hf_onnx_optimized"])
    fused_ops = {op: count for op, count in optimizer.get_fused_operator_statistics().items() if count}
    if "hf_onnx_optimized_int8" in onnx_artifacts:
        paths["hf_onnx_optimized_int8"] = quantize_onnx_dynamic(paths["hf_onnx_optimized"], overwrite=True)
    return {"hf_onnx_optimized": fused_ops, "hf_onnx_optimized_int8": fused_ops}


# ---- the records ------------------------------------------------------------------------------------------------

def _bytes(path: Union[str, Dict[str, str]]) -> int:
    """A file's size, a directory's files' (a SavedModel, a Hugging Face checkpoint), or the largest of a TFLite
    artifact's models (one a length)."""
    if isinstance(path, dict):
        return max(_bytes(one) for one in path.values())
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(path) for name in names)
    return os.path.getsize(path)


def _common_fields(row: ServeRow, settings: ServeSettings) -> dict:
    return {"workload": SERVE, "row": row.name, "configuration": row.label, "implementation": row.implementation,
            "runtime": row.runtime, "precision": row.precision, "preset": settings.model_name,
            "seq_lengths": sorted(set(settings.seq_lengths)), "batch_size": settings.batch_size,
            "cpu_model": cpu_model_name(), "bfloat16_units": cpu_bfloat16_units(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def _skipped_record(row: ServeRow, reason: str, settings: ServeSettings) -> dict:
    return {**_common_fields(row, settings), "skipped": reason}


def _record(row: ServeRow, runs: List[dict], artifacts: ServeArtifacts, settings: ServeSettings) -> dict:
    cases = settings.cases()
    record = {**_common_fields(row, settings), "artifact": row.artifact,
              "file_mb": _bytes(artifacts.paths[row.artifact]) / 1e6,
              "parameter_mb": artifacts.parameter_bytes / 1e6, "repeats": len(runs),
              "runs_per_repeat": {case: len(runs[0]["seconds"][case]) for case in cases},
              "warmup_runs": settings.warmup_runs}
    for case in cases[:-1]:
        medians = [1000 * statistics.median(run["seconds"][case]) for run in runs]
        record[f"latency_ms_{case}_median"] = statistics.median(medians)
        record[f"latency_ms_{case}_p95"] = statistics.median(
            1000 * float(np.percentile(run["seconds"][case], 95)) for run in runs)
        record[f"latency_ms_{case}_min"], record[f"latency_ms_{case}_max"] = min(medians), max(medians)
    rates = [settings.batch_size / statistics.median(run["seconds"][cases[-1]]) for run in runs]
    record.update({f"throughput_seq_per_s_{cases[-1]}_{name}": function(rates)
                   for name, function in (("median", statistics.median), ("min", min), ("max", max))})
    drifts, agreements = zip(*(_logit_drift(run["logits"], artifacts.reference_logits) for run in runs))
    last = runs[-1]
    record.update({
        "peak_rss_mb": max(run["peak_rss_mb"] for run in runs),
        "first_answer_seconds_median": statistics.median(run["first_answer_seconds"] for run in runs),
        "max_abs_logit_drift": max(drifts), "prediction_agreement": min(agreements),
        "predictions_compared": sum(len(logits) for logits in artifacts.reference_logits.values()),
        "fused_ops": artifacts.fused_ops.get(row.artifact), "inputs": artifacts.inputs_description,
        "threads": {"intra_op": last["threads"], "inter_op": 1},
        "versions": {name: last[name] for name in _VERSIONS if last.get(name)},
        "details": {name: last[name] for name in _DETAILS if last.get(name)}, "load_average": load_average(),
        "runs": [{name: value for name, value in run.items() if name not in ("logits", "dev_logits")}
                 for run in runs]})
    dev_runs = [run for run in runs if "dev_logits" in run]
    if artifacts.dev is not None and dev_runs:
        record.update(dev_fields(np.asarray(dev_runs[0]["dev_logits"], np.float64), artifacts.dev))
        record["dev_mcnemar_p"] = None  # run_serving's, for a row that is not float32
    return record


def dev_fields(logits: np.ndarray, dev: DevSet) -> dict:
    """A row's dev-set figures from its logits of every example: its accuracy, our float32 SavedModel's, the drop
    in points (float32's minus the row's), the fraction of equal predictions, the largest logit difference and
    McNemar's discordant counts against float32 (`discordant_pairs`)."""
    if logits.shape != dev.reference_logits.shape:
        raise RuntimeError(f"A serve row answered dev logits of shape {list(logits.shape)}, not "
                           f"{list(dev.reference_logits.shape)}.")
    predictions, reference = logits.argmax(-1), dev.reference_logits.argmax(-1)
    accuracy = float(np.mean(predictions == dev.label_ids))
    reference_accuracy = float(np.mean(reference == dev.label_ids))
    float32_only, row_only = discordant_pairs(dev.label_ids, reference, predictions)
    return {"dev_examples": len(dev.label_ids), "dev_accuracy": accuracy, "dev_accuracy_float32": reference_accuracy,
            "dev_accuracy_drop_points": 100 * (reference_accuracy - accuracy),
            "dev_prediction_agreement": float(np.mean(predictions == reference)),
            "dev_max_abs_logit_drift": float(np.abs(logits - dev.reference_logits).max()),
            "dev_discordant": {"float32_right_only": float32_only, "row_right_only": row_only},
            "dev_inputs": dev.description}


def _logit_drift(logits: Dict[str, list], reference: Dict[str, np.ndarray]):
    """(largest absolute difference, fraction of equal argmax) of a run's logits from the reference's, over every
    case."""
    ours = np.concatenate([np.asarray(logits[case], np.float64) for case in reference])
    expected = np.concatenate([reference[case].astype(np.float64) for case in reference])
    if ours.shape != expected.shape:
        raise RuntimeError(f"A serve row answered logits of shape {list(ours.shape)}, not {list(expected.shape)}.")
    return float(np.abs(ours - expected).max()), float(np.mean(ours.argmax(-1) == expected.argmax(-1)))
