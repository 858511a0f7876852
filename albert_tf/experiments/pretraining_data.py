"""The data every arm of an experiment shares: the corpus split, its vocabulary, SOP and NSP shards and the pure
sentence-pair evaluation sets.

Everything is written once under `data_dir` and reused by a rerun: the corpus and the vocabulary when their files
exist, the shards through create_pretraining_data's own resumption. `data_record.json` holds each file's SHA-256
and what the corpus came from (the Python version, and the installed packages when site-packages were read): a
rerun on a machine without the data writes it again and checks it against that record, because kept results
(arm_result.json) are only comparable with arms trained on the same data.

Example (it trains a vocabulary, so it is not run here):
>>> data = prepare_pretraining_data("out/data", budget_for("smoke"))  # doctest: +SKIP
>>> data.train_patterns["sop"]  # doctest: +SKIP
'out/data/sop/train.tfrecord-00000-of-00001'
"""

import dataclasses
import hashlib
import importlib.metadata
import os
import platform
from typing import Dict, List, Optional, Sequence

from absl import logging

from albert_tf.experiments.budgets import Budget
from albert_tf.experiments.datasets.document_classification import read_text_documents
from albert_tf.experiments.datasets.sentence_pair_eval import write_sentence_pair_eval_set
from albert_tf.experiments.atomic_json import read_json, write_json
from data_gen.pretraining import build_vocab, corpora
from data_gen.pretraining.create_pretraining_data import create_pretraining_data, output_shard_paths

EVAL_RANDOM_SEED = 54321
DATA_RECORD_NAME = "data_record.json"


@dataclasses.dataclass(frozen=True)
class PretrainingData:
    """Paths of the prepared data: the vocabulary model, the training records by objective ("sop", "nsp"), the
    original generator's held-out SOP records, the pure, balanced held-out sets by task ("sop", "nsp"), the
    held-out text, and where the downstream score's held-out document classification set goes (written by
    albert_tf.experiments.downstream when an experiment fine-tunes its arms); with the built-in corpus, the
    package of each held-out document (a line each, data_gen.pretraining.corpora.write_corpus's
    holdout_packages_path)."""

    spm_model_file: str
    train_patterns: Dict[str, str]
    eval_pattern: str
    pure_eval_patterns: Dict[str, str]
    holdout_text: str
    document_classification_dir: str
    holdout_packages: Optional[str] = None


def _write_documents(path: str, documents: Sequence[List[str]]) -> None:
    temporary = path + ".incomplete"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.writelines("\n".join(sentences) + "\n\n" for sentences in documents)
    os.replace(temporary, path)


def split_corpus(corpus_files: Sequence[str], train_path: str, holdout_path: str, holdout_fraction: float) -> None:
    """Splits the documents of `corpus_files` into train and held-out text by the corpus's own hash rule."""
    documents = [document for path in build_vocab.expand_input_files(corpus_files, "--corpus")
                 for document in read_text_documents(path)]
    holdout = [document for document in documents if corpora.is_holdout_document(document, holdout_fraction)]
    train = [document for document in documents if not corpora.is_holdout_document(document, holdout_fraction)]
    if not holdout or not train:
        raise ValueError(f"--corpus={','.join(corpus_files)}: its {len(documents)} documents give "
                         f"{len(train)} for training and {len(holdout)} held out (fraction {holdout_fraction}); "
                         "give more documents (blank lines separate them).")
    _write_documents(train_path, train)
    _write_documents(holdout_path, holdout)


def _sha256(path: str) -> str:
    """The file's SHA-256; a SentencePiece model's without the paths and thread count its trainer_spec records,
    which depend on where and how it was trained, not on the vocabulary."""
    digest = hashlib.sha256()
    if path.endswith(".model"):
        from sentencepiece import sentencepiece_model_pb2

        model = sentencepiece_model_pb2.ModelProto()
        with open(path, "rb") as handle:
            model.ParseFromString(handle.read())
        for field in ("input", "model_prefix", "num_threads"):
            model.trainer_spec.ClearField(field)
        digest.update(model.SerializeToString(deterministic=True))
        return digest.hexdigest()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def data_record(data_dir: str, paths: Sequence[str], include_site_packages: bool) -> Dict[str, object]:
    """The SHA-256 of each of `paths` (by its path relative to `data_dir`), the Python version and, when the corpus
    holds site-packages' docstrings, every installed distribution's version."""
    packages = ({dist.metadata["Name"]: dist.version for dist in importlib.metadata.distributions()}
                if include_site_packages else None)
    return {"files": {os.path.relpath(path, data_dir): _sha256(path) for path in paths},
            "python": platform.python_version(), "packages": packages}


def check_data_record(data_dir: str, record: Dict[str, object], built_in_corpus: bool = False) -> None:
    """Writes `record` (data_record's) as `data_dir`/data_record.json, or fails when the one there differs: the
    data was written again (on another machine, say) and is not what the kept results were trained on. A rerun
    keeps the data files it finds, so the error asks for them to be deleted; with `built_in_corpus` (made of the
    checkout's own docstrings, among others) it names the checkout as a cause too.

    Example:
    >>> import tempfile
    >>> data_dir = tempfile.mkdtemp()
    >>> check_data_record(data_dir, {"files": {"a.txt": "0f"}, "python": "3.11.7", "packages": None})
    >>> check_data_record(data_dir, {"files": {"a.txt": "1e"}, "python": "3.11.7", "packages": None})
    Traceback (most recent call last):
    ...
    ValueError: The data written in ... differs from the data its results were trained on (.../data_record.json): \
a.txt; give another --output_dir, or write the same data (delete everything in ... but data_record.json, then \
rerun): on Python 3.11.7.
    """
    path = os.path.join(data_dir, DATA_RECORD_NAME)
    if not os.path.exists(path):
        write_json(path, record)
        return
    recorded = read_json(path)
    differing = sorted(name for name in set(recorded["files"]) | set(record["files"])
                       if recorded["files"].get(name) != record["files"].get(name))
    if not differing:
        return
    recorded_packages, packages = recorded.get("packages") or {}, record.get("packages") or {}
    changed_packages = sorted(f"{name} {recorded_packages[name]} (here {packages.get(name, 'absent')})"
                              for name in recorded_packages if recorded_packages[name] != packages.get(name))
    added_packages = sorted(set(packages) - set(recorded_packages))
    causes = [f"on Python {recorded['python']}" + (f" (here {record['python']})"
                                                   if record["python"] != recorded["python"] else "")]
    if changed_packages:
        causes.append("with the packages " + ", ".join(changed_packages))
    if added_packages:
        causes.append("without " + ", ".join(added_packages))
    if built_in_corpus:
        causes.append("from a checkout of the commit that started the run (the built-in corpus holds the checkout's "
                      "docstrings; each arm_result.json names the commit under trained_by)")
    raise ValueError(f"The data written in {data_dir} differs from the data its results were trained on ({path}): "
                     f"{', '.join(differing)}; give another --output_dir, or write the same data (delete everything "
                     f"in {data_dir} but {DATA_RECORD_NAME}, then rerun): {'; '.join(causes)}.")


def prepare_pretraining_data(data_dir: str, budget: Budget, corpus_files: Optional[Sequence[str]] = None,
                             include_site_packages: bool = False) -> PretrainingData:
    """Writes the text split, the SentencePiece model, the shards and the pure sets under `data_dir` (kept on a
    rerun), and checks them against `data_dir`'s data_record.json (check_data_record)."""
    text_dir = os.path.join(data_dir, "text")
    os.makedirs(text_dir, exist_ok=True)
    train_text, holdout_text = os.path.join(text_dir, "train.txt"), os.path.join(text_dir, "holdout.txt")
    holdout_packages = None if corpus_files else os.path.join(text_dir, "holdout_packages.txt")
    if not all(os.path.exists(path) for path in (train_text, holdout_text, holdout_packages) if path):
        if corpus_files:
            split_corpus(corpus_files, train_text, holdout_text, budget.holdout_fraction)
        else:
            corpora.write_corpus(train_text, include_site_packages=include_site_packages,
                                 holdout_fraction=budget.holdout_fraction, holdout_path=holdout_text,
                                 holdout_packages_path=holdout_packages)
    spm_prefix = os.path.join(data_dir, "vocab", "spm")
    spm_model_file = spm_prefix + ".model"
    if not os.path.exists(spm_model_file):
        logging.info("Training the %d-piece vocabulary on %s", budget.vocab_size, train_text)
        build_vocab.train_sentencepiece([train_text], spm_prefix, vocab_size=budget.vocab_size)
    shapes = dict(max_seq_length=budget.max_seq_length, max_predictions_per_seq=budget.max_predictions_per_seq)
    train_patterns = {}
    for objective in ("sop", "nsp"):
        shards = output_shard_paths(os.path.join(data_dir, objective, "train.tfrecord"), 1)
        create_pretraining_data(train_text, shards, spm_model_file, dupe_factor=budget.dupe_factor,
                                random_next_sentence=objective == "nsp", **shapes)
        train_patterns[objective] = ",".join(shards)
    eval_shards = output_shard_paths(os.path.join(data_dir, "sop", "eval.tfrecord"), 1)
    create_pretraining_data(holdout_text, eval_shards, spm_model_file, dupe_factor=1, random_seed=EVAL_RANDOM_SEED,
                            **shapes)
    pure_eval_patterns = {}
    for task in ("sop", "nsp"):
        path = os.path.join(data_dir, "pure", f"{task}.tfrecord")
        if not os.path.exists(path):
            counts = write_sentence_pair_eval_set(holdout_text, path, spm_model_file, task,
                                                  random_seed=EVAL_RANDOM_SEED, **shapes)
            logging.info("Pure %s set: %s", task, counts)
        pure_eval_patterns[task] = path
    # The packages file is recorded only where the downstream score reads it, so that the records of runs that do
    # not read it stay as they were written.
    recorded_packages = [holdout_packages] if holdout_packages and budget.downstream_task == "packages" else []
    check_data_record(data_dir, data_record(
        data_dir, [train_text, holdout_text, *recorded_packages, spm_model_file,
                   *(shard for pattern in train_patterns.values() for shard in pattern.split(",")),
                   *eval_shards, *pure_eval_patterns.values()], include_site_packages and not corpus_files),
        built_in_corpus=not corpus_files)
    return PretrainingData(spm_model_file, train_patterns, ",".join(eval_shards), pure_eval_patterns, holdout_text,
                           os.path.join(data_dir, "downstream", "documents"), holdout_packages)
