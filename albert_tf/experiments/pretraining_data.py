"""The data every arm of an experiment shares: the corpus split, its vocabulary, SOP and NSP shards and the pure
sentence-pair evaluation sets.

Everything is written once under `data_dir` and reused by a rerun: the corpus and the vocabulary when their files
exist, the shards through create_pretraining_data's own resumption.

Example (it trains a vocabulary, so it is not run here):
>>> data = prepare_pretraining_data("out/data", budget_for("smoke"))  # doctest: +SKIP
>>> data.train_patterns["sop"]  # doctest: +SKIP
'out/data/sop/train.tfrecord-00000-of-00001'
"""

import dataclasses
import os
from typing import Dict, List, Optional, Sequence

from absl import logging

from albert_tf.experiments.budgets import Budget
from data_gen import build_vocab, corpora
from data_gen.create_pretraining_data import create_pretraining_data, output_shard_paths
from data_gen.document_classification import read_text_documents
from data_gen.sentence_pair_eval import write_sentence_pair_eval_set

EVAL_RANDOM_SEED = 54321


@dataclasses.dataclass(frozen=True)
class PretrainingData:
    """Paths of the prepared data: the vocabulary model, the training records by objective ("sop", "nsp"), the
    original generator's held-out SOP records, the pure, balanced held-out sets by task ("sop", "nsp"), the
    held-out text, and where the downstream score's held-out document classification set goes (written by
    albert_tf.experiments.downstream when an experiment fine-tunes its arms)."""

    spm_model_file: str
    train_patterns: Dict[str, str]
    eval_pattern: str
    pure_eval_patterns: Dict[str, str]
    holdout_text: str
    document_classification_dir: str


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


def prepare_pretraining_data(data_dir: str, budget: Budget, corpus_files: Optional[Sequence[str]] = None,
                             include_site_packages: bool = False) -> PretrainingData:
    """Writes the text split, the SentencePiece model, the shards and the pure sets under `data_dir` (kept on a
    rerun)."""
    text_dir = os.path.join(data_dir, "text")
    os.makedirs(text_dir, exist_ok=True)
    train_text, holdout_text = os.path.join(text_dir, "train.txt"), os.path.join(text_dir, "holdout.txt")
    if not (os.path.exists(train_text) and os.path.exists(holdout_text)):
        if corpus_files:
            split_corpus(corpus_files, train_text, holdout_text, budget.holdout_fraction)
        else:
            corpora.write_corpus(train_text, include_site_packages=include_site_packages,
                                 holdout_fraction=budget.holdout_fraction, holdout_path=holdout_text)
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
    return PretrainingData(spm_model_file, train_patterns, ",".join(eval_shards), pure_eval_patterns, holdout_text,
                           os.path.join(data_dir, "downstream", "documents"))
