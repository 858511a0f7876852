"""The `finetune_text` workload: fine-tuning a text classifier on real text as users run it, ours beside the peers.

The data: the built-in small task (data_gen/pretraining/package_pair_task.py: which of two packages a docstring
sentence comes from) as single sentences and as sentence pairs (two consecutive sentences of a docstring), and with
`glue_data_dir` the dev files of `glue_tasks`, each both the training data and the set predicted. The training
examples are shuffled with the seed and cut to whole batches, so that an epoch is every example once in every row.
They are tokenized once, here, by the library's own feature building (`text_classification.build_task`, whose
feature cache every albert-tf row then reads) with a SentencePiece model (`spm_model_file`, else one of the demo's
size trained on the built-in corpus); the peers get the same ids in an .npz file, so every row sees the same
sequences. The lengths in tokens of each data set are logged as a histogram over dynamic padding's buckets.

The rows (`finetune_rows`), each in every precision at every max_seq_length:
- ours, dynamic padding: `run_text_classification`, the library's fine-tuning (run_classifier's), which cuts each
  batch to its longest member rounded up to a power of two;
- ours, group_by_length: the same run with `group_by_length` (batches of similar length from sorted windows);
- ours, padded to max_seq_length: the same run with `pad_to_max_seq_length`;
- keras-hub: AlbertTextClassifier's `fit` and `predict` on the ids packed to sequence_length = max_seq_length, as its
  AlbertTextClassifierPreprocessor packs them (keras-hub has no dynamic padding);
- transformers: AlbertForSequenceClassification in PyTorch, batches padded to their longest by
  DataCollatorWithPadding, in random order and, in a second row, with group_by_length (transformers'
  LengthGroupedSampler: batches of similar length from sorted windows of 50 batches, for prediction too).
Every row trains the config's classifier from random weights with AdamW (decay 0.01 but LayerNorm and biases,
clipping to norm 1.0) at one learning rate and batch size, and predicts in batches of that size; bfloat16 is
our and keras-hub's mixed_bfloat16 policy and `torch.autocast` for transformers.

Each run is a process of its own. It fine-tunes one epoch and predicts the dev set, timed end to end (building,
tracing and compiling included, the imports apart), with the process's peak RSS after that; then it times
`timed_epochs` epochs of training and one prediction of the dev set after the first, traced, ones (ours: in a
second run of the library, see finetune_text_child). Rows are interleaved: every row of every data set, length and
precision runs once, then again, `repeats` times. A record per row has the median, min and max over the repeats;
its real (non-pad) tokens/s are its examples/s times the data's real tokens per example, one count for every row.
"""

import dataclasses
import datetime
import json
import os
import tempfile
from typing import Callable, Dict, List, Optional, Sequence, Union

import numpy as np
from absl import logging

from albert_tf.benchmarking.child_process import run_python_child
from albert_tf.benchmarking.interleaved_runs import run_interleaved
from albert_tf.benchmarking.peer_comparison import (OURS, PEER_PACKAGES, check_peers_can_build,
                                                    check_peers_installed, parse_peers)
from albert_tf.benchmarking.peer_protocol import PRECISIONS, RECORD_MARKER
from albert_tf.benchmarking.probes import load_average
from albert_tf.benchmarking.workloads import summarize
from albert_tf.checkpoints.hf_names import hf_config_from_albert
from albert_tf.config import AlbertConfig
from albert_tf.tasks.dynamic_padding import MIN_LENGTH
from albert_tf.tasks.finetuning_options import FinetuningOptions
from albert_tf.tasks.model_source import resolve_tokenizer
from albert_tf.tasks.quickstart import QuickstartOptions
from albert_tf.tasks.text_classification import TextClassificationOptions, build_task
from albert_tf.training.compile_choice import cpu_model_name
from data_gen import file_io
from data_gen.pretraining import build_vocab, corpora, package_pair_task
from data_gen.readers import glue, labeled_text

FINETUNE_TEXT = "finetune_text"
OURS_CHILD_MODULE = "albert_tf.benchmarking.finetune_text_child"
PEER_CHILD_MODULE = "peers.finetune_text"
# The learning rate of every row: run_classifier's default.
LEARNING_RATE = FinetuningOptions.learning_rate
# The classifier head's dropout in every row: the fine-tuning scripts' default (transformers' and keras-hub's too).
CLASSIFIER_DROPOUT = FinetuningOptions.dropout_prob
TEXT_FIELDS = ("sentence_a", "sentence_b", "label")
# The built-in data sets, by the name `FinetuneTextSettings.built_in_data` gives them: whether they are pairs.
BUILT_IN_DATA = {"sentences": False, "pairs": True}
_ROW_LABELS = {(OURS, "dynamic"): "ours, dynamic padding", (OURS, "group_by_length"): "ours, group_by_length",
               (OURS, "max_seq_length"): "ours, padded to max_seq_length",
               ("keras-hub", "max_seq_length"): "keras-hub, padded to sequence_length",
               ("transformers", "longest"): "transformers, DataCollatorWithPadding",
               ("transformers", "group_by_length"): "transformers, group_by_length"}
_SEQUENCES = ("input_word_ids", "input_mask", "input_type_ids")


@dataclasses.dataclass
class FinetuneTextSettings:
    """What the workload runs: the model (an AlbertConfig's dict, named `model_name` in the records), the lengths,
    precisions (PRECISIONS), batch size, repeats and timed epochs, the tokenizer (None: train one) and the data:
    `built_in_data` (of BUILT_IN_DATA) and, with `glue_data_dir`, `glue_tasks`.

    `max_examples` keeps at most that many examples of each split (before the cut to whole batches), for short
    runs; `jit_compile` is our rows' (the training scripts' "auto" by default).

    Example:
    >>> settings = FinetuneTextSettings(AlbertConfig.from_preset("albert-base").to_dict(), "albert-base")
    >>> settings.seq_lengths, settings.batch_size, settings.precisions
    ((128, 512), 32, ('float32', 'bfloat16'))
    """

    config: dict
    model_name: str
    seq_lengths: Sequence[int] = (128, 512)
    precisions: Sequence[str] = PRECISIONS
    batch_size: int = 32
    repeats: int = 3
    timed_epochs: int = 1
    jit_compile: Union[bool, str] = "auto"
    spm_model_file: Optional[str] = None
    built_in_data: Sequence[str] = tuple(BUILT_IN_DATA)
    glue_data_dir: Optional[str] = None
    glue_tasks: Sequence[str] = ("SST-2", "MRPC")
    max_examples: Optional[int] = None
    seed: int = 12345

    def __post_init__(self):
        for name in ("batch_size", "repeats", "timed_epochs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"finetune_text setting {name} must be a positive integer, got {value!r}.")
        if self.max_examples is not None and (isinstance(self.max_examples, bool) or self.max_examples < 1):
            raise ValueError(f"finetune_text setting max_examples must be a positive integer or None, got "
                             f"{self.max_examples!r}.")
        unknown = sorted(set(self.precisions) - set(PRECISIONS))
        if unknown or not self.precisions:
            raise ValueError(f"finetune_text precisions {list(self.precisions)} must name one or more of "
                             f"{', '.join(PRECISIONS)}.")
        unknown = sorted(set(self.built_in_data) - set(BUILT_IN_DATA))
        if unknown:
            raise ValueError(f"Unknown finetune_text built-in data {unknown}; allowed: {', '.join(BUILT_IN_DATA)}.")
        if not self.built_in_data and not self.glue_data_dir:
            raise ValueError("finetune_text has no data: name built-in data or give a GLUE data directory.")
        positions = self.albert_config().max_position_embeddings
        wrong = [length for length in self.seq_lengths if not MIN_LENGTH <= length <= positions]
        if wrong or not self.seq_lengths:
            raise ValueError(f"finetune_text max_seq_lengths {list(self.seq_lengths)} must be between {MIN_LENGTH} "
                             f"and the model's max_position_embeddings={positions}.")

    def albert_config(self) -> AlbertConfig:
        return AlbertConfig.from_dict(self.config, source=f"benchmark model {self.model_name}")


@dataclasses.dataclass(frozen=True)
class FinetuneRow:
    """A row of the workload: an implementation (ours or a peer) and how it pads a batch.

    Example:
    >>> FinetuneRow("transformers", "group_by_length").label
    'transformers, group_by_length'
    """

    implementation: str
    padding: str

    @property
    def label(self) -> str:
        return _ROW_LABELS[(self.implementation, self.padding)]


def finetune_rows(peers: Sequence[str]) -> List[FinetuneRow]:
    """The rows in run order: ours with dynamic padding, grouped by length and padded, then each peer's.

    Example:
    >>> [row.label for row in finetune_rows(["transformers"])]  # doctest: +NORMALIZE_WHITESPACE
    ['ours, dynamic padding', 'ours, group_by_length', 'ours, padded to max_seq_length',
     'transformers, DataCollatorWithPadding', 'transformers, group_by_length']
    """
    return [FinetuneRow(implementation, padding) for implementation, padding in _ROW_LABELS
            if implementation == OURS or implementation in parse_peers(peers)]


@dataclasses.dataclass
class TextData:
    """A data set as the rows read it at one max_seq_length: its TSV files (TEXT_FIELDS), labels, the model's
    config file and the tokenizer, the features' cache, the token ids (`ids_file`, an .npz of the train and dev
    features) and their real lengths in tokens."""

    name: str
    seq_length: int
    train_file: str
    dev_file: str
    pairs: bool
    labels: tuple
    config_file: str
    spm_model_file: str
    cached_dir: str
    ids_file: str
    train_lengths: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    dev_lengths: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))


def length_histogram(lengths: Sequence[int], max_seq_length: int) -> Dict[str, int]:
    """How many of `lengths` fall in each of dynamic padding's buckets up to max_seq_length.

    Example:
    >>> length_histogram([5, 16, 20, 128], 128)
    {'1-16': 2, '17-32': 1, '33-64': 0, '65-128': 1}
    """
    bounds = [MIN_LENGTH]
    while bounds[-1] < max_seq_length:
        bounds.append(min(2 * bounds[-1], max_seq_length))
    counts, low = {}, 1
    for high in bounds:
        counts[f"{low}-{high}"] = int(sum(low <= length <= high for length in lengths))
        low = high + 1
    return counts


def length_summary(lengths: Sequence[int], max_seq_length: int) -> str:
    """`lengths` (in tokens) in a line: their count, mean, median and largest, how many reach max_seq_length (the
    longer ones were cut there) and the histogram.

    Example:
    >>> length_summary([5, 16, 20, 64], 64)
    '4 examples, mean 26.2, median 18, max 64, 1 at max_seq_length; 1-16: 2, 17-32: 1, 33-64: 1'
    """
    histogram = ", ".join(f"{bucket}: {count}" for bucket, count in length_histogram(lengths, max_seq_length).items())
    return (f"{len(lengths)} examples, mean {np.mean(lengths):.1f}, median {np.median(lengths):g}, max "
            f"{max(lengths)}, {sum(length == max_seq_length for length in lengths)} at max_seq_length; {histogram}")


def run_finetune_text(settings: FinetuneTextSettings, peers: Sequence[str] = (), work_dir: Optional[str] = None,
                      run_ours: Optional[Callable[..., dict]] = None, run_peer: Optional[Callable[..., dict]] = None
                      ) -> List[dict]:
    """Prepares the data, runs every row `settings.repeats` times, interleaved, each in its own process; returns a
    record per data set, length, precision and row (`finetune_text_table` prints them). The data, the tokenizer
    and the runs' files go to `work_dir` (default: a temporary directory). A row whose process fails (a peer that
    runs out of memory at 512, say) is not run again at that data, length and precision; its record says why
    (`failed`), and the other rows carry on.

    Example:
    >>> records = run_finetune_text(settings, ["keras-hub", "transformers"])  # doctest: +SKIP
    >>> records[0]["configuration"], records[0]["train_examples_per_s_median"]  # doctest: +SKIP
    ('ours, dynamic padding', 7.9)
    """
    peers = parse_peers(peers)
    if peers:
        check_peers_can_build(settings.albert_config(), settings.model_name)
    check_peers_installed(peers)
    run_ours = run_ours or run_ours_child
    run_peer = run_peer or run_peer_child
    rows = finetune_rows(peers)
    with tempfile.TemporaryDirectory() as scratch:
        directory = work_dir or scratch
        data_sets = prepare_text_data(settings, directory)
        # Every data set (by its index), precision and row, in the order a repeat runs them and the records list them.
        cells = [(index, precision, row) for index in range(len(data_sets)) for precision in settings.precisions
                 for row in rows]

        def run_cell(cell, _):
            index, precision, row = cell
            run = run_ours if row.implementation == OURS else run_peer
            return dict(run(row, precision, data_sets[index], settings), cpu_model=cpu_model_name(), date=_now())

        def describe(cell):
            index, precision, row = cell
            return f"{data_sets[index].name} at {data_sets[index].seq_length}, {precision}, {row.label}"

        def record_of(cell):
            index, precision, row = cell
            if cell in failures:
                return _failed_record(row, precision, data_sets[index], settings, failures[cell], runs[cell])
            return _record(row, precision, data_sets[index], settings, runs[cell])

        runs, failures = run_interleaved(cells, settings.repeats, run_cell, "finetune_text", describe=describe)
        return [record_of(cell) for cell in cells]


def prepare_text_data(settings: FinetuneTextSettings, work_dir: str) -> List[TextData]:
    """Every data set at every max_seq_length, written and tokenized under `work_dir`, its lengths logged."""
    spm_model_file = settings.spm_model_file or train_built_in_tokenizer(work_dir)
    config_file = os.path.join(work_dir, "albert_config.json")
    settings.albert_config().to_json_file(config_file)
    data_sets = []
    for name, pairs, train, dev, labels in _read_data_sets(settings, work_dir):
        rng = np.random.default_rng(settings.seed)
        train = [train[index] for index in rng.permutation(len(train))][:settings.max_examples]
        dev = dev[:settings.max_examples]
        whole_batches = len(train) // settings.batch_size * settings.batch_size
        if not whole_batches:
            raise ValueError(f"The finetune_text data {name} has {len(train)} training examples, fewer than a batch "
                             f"of {settings.batch_size}.")
        directory = os.path.join(work_dir, "data", name.replace(" ", "_"))
        file_io.makedirs(directory)
        files = {}
        for split, examples in (("train", train[:whole_batches]), ("dev", dev)):
            files[split] = os.path.join(directory, f"{split}.tsv")
            file_io.write_tsv(files[split], TEXT_FIELDS if pairs else TEXT_FIELDS[::2],
                              [(text_a, text_b, label) if pairs else (text_a, label)
                               for text_a, text_b, label in examples])
        for seq_length in settings.seq_lengths:
            features_dir = os.path.join(work_dir, "features", f"{name.replace(' ', '_')}_{seq_length}")
            data = _tokenize(TextData(name, seq_length, files["train"], files["dev"], pairs, labels, config_file,
                                      spm_model_file, os.path.join(features_dir, "cache"),
                                      os.path.join(features_dir, "ids.npz")))
            for split, lengths in (("train", data.train_lengths), ("dev", data.dev_lengths)):
                logging.info("finetune_text data %s at max_seq_length %d, %s lengths in tokens: %s", name, seq_length,
                             split, length_summary(lengths, seq_length))
            data_sets.append(data)
    return data_sets


def _finetuning_options(data: TextData, settings: FinetuneTextSettings, precision: str, padding: str) -> dict:
    """The FinetuningOptions of our rows but `output_dir` and what to do (`finetune_text_child` adds them)."""
    return dict(albert_config_file=data.config_file, spm_model_file=data.spm_model_file, cached_dir=data.cached_dir,
                max_seq_length=data.seq_length, train_batch_size=settings.batch_size,
                eval_batch_size=settings.batch_size, predict_batch_size=settings.batch_size,
                learning_rate=LEARNING_RATE, dropout_prob=CLASSIFIER_DROPOUT,
                mixed_precision="mixed_bfloat16" if precision == "bfloat16" else "float32",
                jit_compile=settings.jit_compile, seed=settings.seed,
                pad_to_max_seq_length=padding == "max_seq_length", group_by_length=padding == "group_by_length")


def run_ours_child(row: FinetuneRow, precision: str, data: TextData, settings: FinetuneTextSettings,
                   timeout_seconds: Optional[float] = None) -> dict:
    """One run of an albert-tf row (finetune_text_child) in a Python process of its own; its record."""
    spec = {"options": _finetuning_options(data, settings, precision, row.padding),
            "text": dict(_text_fields(data), train_file=data.train_file, eval_file=data.dev_file,
                         predict_file=data.dev_file, labels=list(data.labels)),
            "timed_epochs": settings.timed_epochs, "train_examples": len(data.train_lengths),
            "dev_examples": len(data.dev_lengths)}
    record = run_python_child(["-m", OURS_CHILD_MODULE, json.dumps(spec)], RECORD_MARKER,
                              f"The finetune_text row {row.label} ({precision}) failed in its child process",
                              timeout_seconds=timeout_seconds).record
    return dict(record, padding=row.padding, precision=precision)


def run_peer_child(row: FinetuneRow, precision: str, data: TextData, settings: FinetuneTextSettings,
                   timeout_seconds: Optional[float] = None) -> dict:
    """One run of a peer's row (peers/finetune_text.py) in a Python process of its own; its record."""
    config = settings.albert_config()
    spec = {"config": config.to_dict(), "num_labels": len(data.labels),
            "hf_config": hf_config_from_albert(config, ["AlbertForSequenceClassification"], num_labels=len(data.labels),
                                               classifier_dropout_prob=CLASSIFIER_DROPOUT),
            "ids_file": data.ids_file, "spm_model_file": data.spm_model_file, "batch_size": settings.batch_size,
            "learning_rate": LEARNING_RATE, "classifier_dropout": CLASSIFIER_DROPOUT,
            "timed_epochs": settings.timed_epochs, "seed": settings.seed,
            "group_by_length": row.padding == "group_by_length", "extra_paths": [PEER_PACKAGES]}
    record = run_python_child(["-m", PEER_CHILD_MODULE, row.implementation, precision, json.dumps(spec)],
                              RECORD_MARKER, f"The finetune_text row {row.label} ({precision}) failed in its child "
                              "process", timeout_seconds=timeout_seconds).record
    return dict(record, padding=row.padding)


# ---- the data ---------------------------------------------------------------------------------------------------

def train_built_in_tokenizer(work_dir: str) -> str:
    """A SentencePiece model of the demo's vocabulary size trained on the built-in corpus, as `make demo` trains."""
    corpus = os.path.join(work_dir, "corpus.txt")
    corpora.write_corpus(corpus)
    return build_vocab.train_sentencepiece([corpus], os.path.join(work_dir, "spm"),
                                           vocab_size=QuickstartOptions.vocab_size)


def _read_data_sets(settings: FinetuneTextSettings, work_dir: str):
    """(name, pairs, train, dev, labels) of each data set, its examples as (text_a, text_b or None, label)."""
    for built_in in settings.built_in_data:
        name, pairs = f"built-in {built_in}", BUILT_IN_DATA[built_in]
        directory = os.path.join(work_dir, "package_pair_task", built_in)
        counts = package_pair_task.write_package_pair_task(directory, sentence_pairs=pairs)
        header = package_pair_task.PAIR_HEADER if pairs else package_pair_task.HEADER
        schema = labeled_text.LabeledTextSchema(header[0], header[-1], text_b_field=header[1] if pairs else None)
        train, dev = ([(example.text_a, example.text_b, example.label) for example in
                       labeled_text.read_examples(os.path.join(directory, package_pair_task.SPLIT_FILES[split]),
                                                  schema)] for split in ("train", "dev"))
        yield name, pairs, train, dev, tuple(counts["classes"])
    for task_name in settings.glue_tasks if settings.glue_data_dir else ():
        task = glue.get_task(task_name)
        if task.is_regression:
            raise ValueError(f"finetune_text fine-tunes classifiers; GLUE task {task_name} is a regression.")
        dev = [(example.text_a, example.text_b, example.label)
               for example in glue.read_examples(settings.glue_data_dir, task, task.eval_splits[0])]
        yield f"GLUE {task_name} dev", dev[0][1] is not None, dev, dev, tuple(task.labels)


def _text_fields(data: TextData) -> dict:
    return dict(text_field=TEXT_FIELDS[0], text_b_field=TEXT_FIELDS[1] if data.pairs else None,
                label_field=TEXT_FIELDS[2])


def _tokenize(data: TextData) -> TextData:
    """`data` with its ids and lengths: the features built as our rows build them (into their cache)."""
    directory = os.path.dirname(data.cached_dir)
    options = FinetuningOptions(output_dir=directory, albert_config_file=data.config_file,
                                spm_model_file=data.spm_model_file, cached_dir=data.cached_dir,
                                max_seq_length=data.seq_length, do_train=True, do_eval=True, do_predict=True)
    text_options = TextClassificationOptions(options, train_file=data.train_file, eval_file=data.dev_file,
                                             predict_file=data.dev_file, labels=data.labels, **_text_fields(data))
    task = build_task(text_options, resolve_tokenizer(options))
    arrays = {}
    for split, features in (("train", task.train_data), ("dev", task.predict_splits[0])):
        batch = next(iter(features.dataset().batch(features.num_examples)))
        arrays.update({f"{split}_{feature}": batch[feature].numpy() for feature in _SEQUENCES + ("label_ids",)})
    np.savez(data.ids_file, **arrays)
    return dataclasses.replace(data, train_lengths=arrays["train_input_mask"].sum(axis=1),
                               dev_lengths=arrays["dev_input_mask"].sum(axis=1))


# ---- the records ------------------------------------------------------------------------------------------------

def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _common_fields(row: FinetuneRow, precision: str, data: TextData, settings: FinetuneTextSettings) -> dict:
    """What a record of `row` says whether it ran or failed: the row, the data and its lengths, the settings."""
    return {
        "workload": FINETUNE_TEXT, "data": data.name, "configuration": row.label, "implementation": row.implementation,
        "padding": row.padding, "precision": precision, "preset": settings.model_name,
        "batch_size": settings.batch_size, "seq_length": data.seq_length, "timed_epochs": settings.timed_epochs,
        "train_examples": len(data.train_lengths), "train_real_tokens": int(data.train_lengths.sum()),
        "dev_examples": len(data.dev_lengths), "dev_real_tokens": int(data.dev_lengths.sum()),
        "train_length_histogram": length_histogram(data.train_lengths, data.seq_length),
        "dev_length_histogram": length_histogram(data.dev_lengths, data.seq_length),
    }


def _failed_record(row: FinetuneRow, precision: str, data: TextData, settings: FinetuneTextSettings,
                   failure: str, runs: List[dict]) -> dict:
    """The record of a row that failed: why (the end of its message), and the runs of earlier repeats, if any."""
    return {**_common_fields(row, precision, data, settings), "failed": failure, "cpu_model": cpu_model_name(),
            "date": _now(), "load_average": load_average(), "runs": runs}


def _record(row: FinetuneRow, precision: str, data: TextData, settings: FinetuneTextSettings,
            runs: List[dict]) -> dict:
    train_examples, dev_examples = len(data.train_lengths), len(data.dev_lengths)
    train_tokens, dev_tokens = int(data.train_lengths.sum()), int(data.dev_lengths.sum())
    train_rates = summarize([train_examples * run["timed_epochs"] / run["train_seconds"] for run in runs])
    predict_rates = summarize([dev_examples / run["predict_seconds"] for run in runs])
    end_to_end = summarize([run["end_to_end_seconds"] for run in runs])
    last = runs[-1]
    return {
        **_common_fields(row, precision, data, settings), "mixed_precision": last["mixed_precision"],
        "jit_compile": last["jit_compile"], "repeats": len(runs),
        **{f"train_examples_per_s_{key}": value for key, value in train_rates.items()},
        "train_real_tokens_per_s": train_rates["median"] * train_tokens / train_examples,
        **{f"predict_examples_per_s_{key}": value for key, value in predict_rates.items()},
        "predict_real_tokens_per_s": predict_rates["median"] * dev_tokens / dev_examples,
        **{f"end_to_end_seconds_{key}": value for key, value in end_to_end.items()},
        "import_seconds_median": summarize([run["import_seconds"] for run in runs])["median"],
        "peak_rss_mb": max(run["peak_rss_mb"] for run in runs),
        "versions": {name: last[name] for name in ("tensorflow", "keras", "keras_hub", "torch", "transformers")
                     if last.get(name)},
        "cpu_model": cpu_model_name(), "date": _now(), "load_average": load_average(), "runs": runs,
    }
