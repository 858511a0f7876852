"""Pretraining instances: the original's semantics, the record format, determinism, resuming, bad input."""
import collections
import concurrent.futures
import io
import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from unittest import mock

import numpy as np
import pytest
import scipy.stats
import tensorflow as tf

from albert_tf.tokenization import AlbertTokenizer
from data_gen.pretraining import blocks
from data_gen.pretraining import create_pretraining_data as cpd
from data_gen.pretraining.instances import (FEATURE_NAMES, InstanceOptions, SpecialIds, TrainingInstance,
                                            create_instances_from_document, create_masked_lm_predictions,
                                            instance_to_example_bytes, is_start_piece_sentencepiece, pack_token,
                                            truncate_seq_pair)
from tests.helpers import REPO_ROOT, make_number_spm_model, number_texts, run_script, write_corpus

MAX_SEQ_LENGTH = 128
MAX_PREDICTIONS = 20
SPECIAL_IDS = SpecialIds(cls_id=2, sep_id=3, mask_id=4, vocab_size=120)
# The smallest p-value a correct implementation may give; fixed seeds make every test deterministic.
P_VALUE_FLOOR = 1e-3


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    return write_corpus(str(tmp_path_factory.mktemp("corpus") / "corpus.txt"), num_documents=150, seed=3)


@pytest.fixture(scope="module")
def generated(tmp_path_factory, spm_model_file, corpus_file):
    """A few thousand instances with the original's defaults except length and passes."""
    outputs = cpd.output_shard_paths(str(tmp_path_factory.mktemp("out") / "train.tfrecord"), 2)
    summary = cpd.create_pretraining_data(corpus_file, outputs, spm_model_file, max_seq_length=MAX_SEQ_LENGTH,
                                          max_predictions_per_seq=MAX_PREDICTIONS, dupe_factor=10, random_seed=7)
    return outputs, summary, [record for path in outputs for record in read_records(path)]


def read_records(path):
    return [tf.train.Example.FromString(record.numpy()) for record in tf.data.TFRecordDataset(path)]


def feature_values(example, name):
    feature = example.features.feature[name]
    return list(feature.int64_list.value) if feature.HasField("int64_list") else list(feature.float_list.value)


def restore_original_ids(example):
    ids = feature_values(example, "input_ids")
    for position, label, weight in zip(feature_values(example, "masked_lm_positions"),
                                       feature_values(example, "masked_lm_ids"),
                                       feature_values(example, "masked_lm_weights")):
        if weight:
            ids[position] = label
    return ids


# The record format.

def test_record_features_names_dtypes_and_lengths(generated):
    _, summary, examples = generated
    assert len(examples) == summary["totals"]["instances"] > 2000
    int_lengths = {"input_ids": MAX_SEQ_LENGTH, "input_mask": MAX_SEQ_LENGTH, "segment_ids": MAX_SEQ_LENGTH,
                   "token_boundary": MAX_SEQ_LENGTH, "masked_lm_positions": MAX_PREDICTIONS,
                   "masked_lm_ids": MAX_PREDICTIONS, "next_sentence_labels": 1}
    for example in examples[:50]:
        features = example.features.feature
        assert set(features) == set(int_lengths) | {"masked_lm_weights"} == set(FEATURE_NAMES)
        for name, length in int_lengths.items():
            assert features[name].WhichOneof("kind") == "int64_list"
            assert len(features[name].int64_list.value) == length
        assert features["masked_lm_weights"].WhichOneof("kind") == "float_list"
        assert len(features["masked_lm_weights"].float_list.value) == MAX_PREDICTIONS


def test_records_parse_with_fixed_length_specs(generated):
    outputs, _, _ = generated
    spec = {name: tf.io.FixedLenFeature([MAX_SEQ_LENGTH], tf.int64)
            for name in ("input_ids", "input_mask", "segment_ids", "token_boundary")}
    spec.update({"masked_lm_positions": tf.io.FixedLenFeature([MAX_PREDICTIONS], tf.int64),
                 "masked_lm_ids": tf.io.FixedLenFeature([MAX_PREDICTIONS], tf.int64),
                 "masked_lm_weights": tf.io.FixedLenFeature([MAX_PREDICTIONS], tf.float32),
                 "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64)})
    batch = next(iter(tf.data.TFRecordDataset(outputs[0]).batch(64).map(
        lambda records: tf.io.parse_example(records, spec))))
    assert batch["input_ids"].shape == (64, MAX_SEQ_LENGTH)
    assert batch["masked_lm_weights"].dtype == tf.float32


def test_serialization_matches_tensorflow_example(generated):
    _, _, examples = generated
    instance = TrainingInstance(input_ids=[2, 40, 300, 3, 7, 3], segment_ids=[0, 0, 0, 0, 1, 1],
                                token_boundary=[1, 1, 0, 1, 1, 1], masked_lm_positions=[1, 2],
                                masked_lm_ids=[41, 9], is_random_next=False)
    ours = tf.train.Example.FromString(instance_to_example_bytes(instance, 8, 3))
    expected = tf.train.Example()
    for name, values in [("input_ids", [2, 40, 300, 3, 7, 3, 0, 0]), ("input_mask", [1] * 6 + [0] * 2),
                         ("segment_ids", [0, 0, 0, 0, 1, 1, 0, 0]), ("token_boundary", [1, 1, 0, 1, 1, 1, 0, 0]),
                         ("masked_lm_positions", [1, 2, 0]), ("masked_lm_ids", [41, 9, 0]),
                         ("next_sentence_labels", [0])]:
        expected.features.feature[name].int64_list.value.extend(values)
    expected.features.feature["masked_lm_weights"].float_list.value.extend([1.0, 1.0, 0.0])
    assert ours == expected
    assert len(ours.SerializeToString()) == len(instance_to_example_bytes(instance, 8, 3))


def test_layout_cls_a_sep_b_sep_and_segment_ids(generated):
    _, _, examples = generated
    for example in examples[:300]:
        ids = restore_original_ids(example)
        length = sum(feature_values(example, "input_mask"))
        segments = feature_values(example, "segment_ids")
        assert feature_values(example, "input_mask") == [1] * length + [0] * (MAX_SEQ_LENGTH - length)
        first_sep = segments.index(1) - 1
        assert ids[0] == SPECIAL_IDS.cls_id and ids[first_sep] == SPECIAL_IDS.sep_id
        assert ids[length - 1] == SPECIAL_IDS.sep_id
        assert [i for i in range(length) if ids[i] in (SPECIAL_IDS.cls_id, SPECIAL_IDS.sep_id)] == [0, first_sep,
                                                                                                     length - 1]
        assert 2 <= first_sep <= length - 3  # A and B both non-empty
        assert segments == [0] * (first_sep + 1) + [1] * (length - first_sep - 1) + [0] * (MAX_SEQ_LENGTH - length)
        assert ids[length:] == [0] * (MAX_SEQ_LENGTH - length)
        boundary = feature_values(example, "token_boundary")
        assert boundary[0] == boundary[first_sep] == boundary[length - 1] == 1
        positions = [p for p, w in zip(feature_values(example, "masked_lm_positions"),
                                       feature_values(example, "masked_lm_weights")) if w]
        assert not {0, first_sep, length - 1} & set(positions)


# Masking statistics over the generated records.

def test_masked_fraction_matches_the_budget(generated):
    _, summary, examples = generated
    predicted = budget = tokens = 0
    for example in examples:
        length = sum(feature_values(example, "input_mask"))
        count = int(sum(feature_values(example, "masked_lm_weights")))
        num_to_predict = min(MAX_PREDICTIONS, max(1, int(round(length * 0.15))))
        assert 1 <= count <= num_to_predict
        positions = feature_values(example, "masked_lm_positions")
        assert positions[:count] == sorted(set(positions[:count]))
        assert positions[count:] == [0] * (MAX_PREDICTIONS - count)
        predicted, budget, tokens = predicted + count, budget + num_to_predict, tokens + length
    assert predicted == summary["totals"]["masked_lm_predictions"]
    # Whole words of several pieces can, rarely, leave the last slot of the budget empty.
    assert predicted / budget > 0.99
    assert predicted / tokens == pytest.approx(0.15, abs=0.005)


def test_replacement_is_80_percent_mask_10_keep_10_random(generated):
    _, _, examples = generated
    counts = np.zeros(3)
    for example in examples:
        inputs = feature_values(example, "input_ids")
        for position, label, weight in zip(feature_values(example, "masked_lm_positions"),
                                           feature_values(example, "masked_lm_ids"),
                                           feature_values(example, "masked_lm_weights")):
            if weight:
                token = inputs[position]
                counts[0 if token == SPECIAL_IDS.mask_id else 1 if token == label else 2] += 1
    # A random id can also be [MASK] or the label itself.
    random_hit = 0.1 / SPECIAL_IDS.vocab_size
    expected = np.array([0.8 + random_hit, 0.1 + random_hit, 0.1 - 2 * random_hit]) * counts.sum()
    assert counts.sum() > 10000
    assert scipy.stats.chisquare(counts, expected).pvalue > P_VALUE_FLOOR


def _first_span_lengths(favor_shorter_ngram, trials=2000, num_words=400):
    """Lengths (in words) of the first masked n-gram: the one at the first shuffled candidate.

    The first candidate is never shortened (the budget is 6 >= 3) nor skipped (nothing is masked yet);
    with 6 masked tokens among 400 another span touches it rarely.
    """
    options = InstanceOptions(max_seq_length=num_words + 3, max_predictions_per_seq=6,
                              favor_shorter_ngram=favor_shorter_ngram)
    ids = [SPECIAL_IDS.cls_id] + [10] * num_words + [SPECIAL_IDS.sep_id]
    starts = [True] * len(ids)
    lengths = []
    for trial in range(trials):
        rng = random.Random(trial)
        # The original's first draw is the shuffle of the candidates (one per word, at positions 1..num_words).
        probe = random.Random()
        probe.setstate(rng.getstate())
        order = list(range(num_words))
        probe.shuffle(order)
        first = order[0] + 1
        if first > num_words - 2:
            continue  # an n-gram starting in the last two words is cut short by the sequence end
        _, positions, _, _ = create_masked_lm_predictions(ids, starts, (0, len(ids) - 1), options,
                                                          SPECIAL_IDS, rng, random.Random(10**6 + trial))
        masked = set(positions)
        assert first in masked
        length = 1
        while first + length in masked:
            length += 1
        lengths.append(min(length, 3))
    return np.bincount(lengths, minlength=4)[1:]


@pytest.mark.parametrize("favor_shorter_ngram, probabilities", [(True, [6 / 11, 3 / 11, 2 / 11]),
                                                                (False, [2 / 11, 3 / 11, 6 / 11])])
def test_ngram_length_histogram(favor_shorter_ngram, probabilities):
    counts = _first_span_lengths(favor_shorter_ngram)
    assert scipy.stats.chisquare(counts, np.array(probabilities) * counts.sum()).pvalue > P_VALUE_FLOOR


def test_masking_leaves_the_random_stream_where_the_original_does():
    # Unigrams only: the original shuffles its candidates, draws one to three numbers for each masked
    # token in visiting order, then shuffles the candidates again (for do_permutation, whatever the flag).
    options = InstanceOptions(max_seq_length=40, max_predictions_per_seq=5, ngram=1)
    ids = [SPECIAL_IDS.cls_id] + list(range(10, 30)) + [SPECIAL_IDS.sep_id] + list(range(30, 45)) + [SPECIAL_IDS.sep_id]
    starts = [True] * len(ids)
    num_candidates = len(ids) - 3
    for seed in range(20):
        rng = random.Random(seed)
        output, positions, _, _ = create_masked_lm_predictions(ids, starts, (0, 21, len(ids) - 1), options,
                                                               SPECIAL_IDS, rng, random.Random(seed))
        original = random.Random(seed)
        order = [index for index in range(len(ids)) if index not in (0, 21, len(ids) - 1)]
        original.shuffle(order)
        for index in order[:len(positions)]:
            if original.random() >= 0.8 and original.random() >= 0.5:
                assert output[index] == original.randint(0, SPECIAL_IDS.vocab_size - 1)
        assert sorted(order[:len(positions)]) == positions
        original.shuffle(list(range(num_candidates)))
        assert rng.getstate() == original.getstate()


def test_whole_word_candidates_and_token_boundary():
    # [CLS] w1=(10 11 12) w2=(13) [SEP] w3=(14 15) [SEP]
    ids = [2, 10, 11, 12, 13, 3, 14, 15, 3]
    starts = [True, True, False, False, True, True, True, False, True]
    options = InstanceOptions(max_seq_length=12, max_predictions_per_seq=3, masked_lm_prob=0.3)
    words = [{1, 2, 3}, {4}, {6, 7}]
    seen = set()
    for seed in range(200):
        _, positions, labels, boundary = create_masked_lm_predictions(
            ids, starts, (0, 5, 8), options, SPECIAL_IDS, random.Random(seed), random.Random(seed + 1))
        assert boundary == [1, 1, 0, 0, 1, 1, 1, 0, 1]
        assert labels == [ids[p] for p in positions]
        masked = set(positions)
        assert all(word <= masked or not word & masked for word in words)  # whole words only
        seen.add(frozenset(masked))
    assert {frozenset({1, 2, 3}), frozenset({4, 6, 7})} <= seen
    piece_options = InstanceOptions(max_seq_length=12, max_predictions_per_seq=3, masked_lm_prob=0.3,
                                    do_whole_word_mask=False)
    single_pieces = {tuple(create_masked_lm_predictions(ids, starts, (0, 5, 8), piece_options, SPECIAL_IDS,
                                                        random.Random(seed), random.Random(seed))[1])
                     for seed in range(200)}
    assert (2,) in single_pieces or any(2 in p and 1 not in p for p in single_pieces)


def test_start_piece_rule():
    starts = {piece: is_start_piece_sentencepiece(piece)
              for piece in ["▁the", "ing", ",", "-", "90", "<unk>", "é", "'s", "a-b", "▁"]}
    assert starts == {"▁the": True, "ing": False, ",": True, "-": True, "90": True, "<unk>": True, "é": True,
                      "'s": True, "a-b": False, "▁": True}


# Sentence pairs, labels and truncation, on the instance function directly.

def _packed_document(sentence_lengths, first_id):
    document, next_id = [], first_id
    for length in sentence_lengths:
        document.append([pack_token(next_id + k, True) for k in range(length)])
        next_id += length
    return document


def _segments(instance):
    ids = list(instance.input_ids)
    for position, label in zip(instance.masked_lm_positions, instance.masked_lm_ids):
        ids[position] = label
    a_length = instance.segment_ids.index(1) - 2
    return ids[1:1 + a_length], ids[2 + a_length:-1]


def test_sop_negative_is_the_positive_swapped_and_labels_are_balanced():
    # Each document fits in one chunk, so A + B (label 0) or B + A (label 1) is the whole document.
    options = InstanceOptions(max_seq_length=64, max_predictions_per_seq=5, short_seq_prob=0.0)
    documents = [_packed_document([3, 4, 2, 5], first_id=10 + 20 * d) for d in range(10)]
    labels = []
    for seed in range(300):
        rng, ngram_rng = random.Random(seed), random.Random(-seed)
        for index, document in enumerate(documents):
            whole = [token >> 1 for sentence in document for token in sentence]
            boundaries = {sum(len(s) for s in document[:k]) for k in range(1, len(document))}
            (instance,) = create_instances_from_document(documents, index, options, SPECIAL_IDS, rng,
                                                         ngram_rng)
            a, b = _segments(instance)
            if instance.is_random_next:
                assert b + a == whole and len(b) in boundaries
            else:
                assert a + b == whole and len(a) in boundaries
            labels.append(int(instance.is_random_next))
    assert scipy.stats.binomtest(sum(labels), len(labels), 0.5).pvalue > P_VALUE_FLOOR


def test_single_sentence_chunk_takes_b_from_another_document():
    options = InstanceOptions(max_seq_length=64, max_predictions_per_seq=5, short_seq_prob=0.0)
    documents = [_packed_document([6], first_id=10), _packed_document([4, 4, 4], first_id=100)]
    other = [token >> 1 for sentence in documents[1] for token in sentence]
    for seed in range(50):
        (instance,) = create_instances_from_document(documents, 0, options, SPECIAL_IDS, random.Random(seed),
                                                     random.Random(seed))
        a, b = _segments(instance)
        assert instance.is_random_next and a == list(range(10, 16))
        start = other.index(b[0])
        assert b == other[start:] and start % 4 == 0  # from a random sentence to the document end


def test_nsp_random_next_puts_unused_sentences_back():
    options = InstanceOptions(max_seq_length=64, max_predictions_per_seq=5, short_seq_prob=0.0,
                              random_next_sentence=True)
    documents = [_packed_document([3, 3, 3], first_id=10), _packed_document([5, 5], first_id=100)]
    labels = []
    for seed in range(400):
        instances = create_instances_from_document(documents, 0, options, SPECIAL_IDS, random.Random(seed),
                                                   random.Random(seed))
        first_a, first_b = _segments(instances[0])
        if instances[0].is_random_next:
            assert all(token >= 100 for token in first_b)
            # The sentences A did not use start the next instance.
            assert _segments(instances[1])[0][0] == first_a[-1] + 1
        else:
            assert first_a + first_b == list(range(10, 10 + len(first_a) + len(first_b)))
        labels.append(int(instances[0].is_random_next))
    assert scipy.stats.binomtest(sum(labels), len(labels), 0.5).pvalue > P_VALUE_FLOOR


def test_truncation_trims_the_longer_side_from_both_ends():
    fronts = backs = 0
    for seed in range(100):
        a, b = list(range(20)), list(range(100, 105))
        truncate_seq_pair(a, b, 12, random.Random(seed))
        assert len(a) + len(b) == 12 and b == list(range(100, 105)) and len(a) == 7
        assert a == list(range(a[0], a[0] + 7))
        fronts += a[0] > 0
        backs += a[-1] < 19
    assert fronts > 20 and backs > 20
    a, b = [1, 2], [3, 4]
    truncate_seq_pair(a, b, 3, random.Random(0))
    assert a == [1, 2] and len(b) == 1  # ties trim B


def test_long_documents_fill_max_seq_length():
    options = InstanceOptions(max_seq_length=32, max_predictions_per_seq=5, short_seq_prob=0.0)
    documents = [_packed_document([20] * 12, first_id=10), _packed_document([20] * 12, first_id=500)]
    instances = create_instances_from_document(documents, 0, options, SPECIAL_IDS, random.Random(0),
                                               random.Random(0))
    assert len(instances) >= 5
    assert all(len(instance.input_ids) == 32 for instance in instances)


# Determinism and resuming.

def _run(corpus_file, spm_model_file, output_dir, num_workers, **overrides):
    arguments = dict(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=2, random_seed=11,
                     num_workers=num_workers, block_bytes=4096)
    arguments.update(overrides)
    outputs = cpd.output_shard_paths(os.path.join(output_dir, "train.tfrecord"), 3)
    return outputs, cpd.create_pretraining_data(corpus_file, outputs, spm_model_file, **arguments)


def _contents(paths):
    return [open(path, "rb").read() for path in paths]


def test_same_seed_gives_identical_bytes_for_any_worker_count(tmp_path, corpus_file, spm_model_file):
    one, summary_one = _run(corpus_file, spm_model_file, str(tmp_path / "one"), num_workers=1)
    two, summary_two = _run(corpus_file, spm_model_file, str(tmp_path / "two"), num_workers=2)
    assert summary_one["totals"]["blocks"] > 6  # several blocks per shard, processed in parallel
    assert _contents(one) == _contents(two)
    assert summary_one["totals"] == summary_two["totals"]
    other_seed, _ = _run(corpus_file, spm_model_file, str(tmp_path / "seed"), num_workers=1, random_seed=12)
    assert _contents(other_seed) != _contents(one)


class _RecordingContext:
    """Stands in for the worker context: logs when each task starts and ends, from the pool's threads."""

    token_cache_directory = "cache"

    def __init__(self, fail_on=None):
        self.events, self.lock, self.running, self.most_running, self.fail_on = [], threading.Lock(), 0, 0, fail_on

    def run(self, task):
        with self.lock:
            self.events.append(("start", task))
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        time.sleep(0.02)
        with self.lock:
            self.events.append(("end", task))
            self.running -= 1
        if task == self.fail_on:
            raise ValueError(f"failed on {task}")
        return task, [f"{task.block.index}/{task.dupe_pass}".encode()], {}


def _shard_tasks(num_blocks, dupe_factor):
    planned = [blocks.Block(index, ()) for index in range(num_blocks)]
    return [cpd._Task(block, dupe_pass) for block in planned for dupe_pass in range(dupe_factor)]


def _results_through_thread_pool(context, tasks, num_workers):
    with concurrent.futures.ThreadPoolExecutor(num_workers, initializer=cpd._init_worker, initargs=(context,)) as pool:
        return list(cpd._ordered_results(context, tasks, pool, num_workers))


def test_workers_tokenize_each_block_once_and_results_keep_task_order():
    # One block per shard, as in a small corpus: a block's passes are next to each other in the task list.
    tasks = _shard_tasks(num_blocks=5, dupe_factor=3)
    context = _RecordingContext()
    results = _results_through_thread_pool(context, tasks, num_workers=2)
    assert [result[0] for result in results] == tasks
    for task in tasks:
        if task.dupe_pass:
            first_pass_end = context.events.index(("end", cpd._Task(task.block, 0)))
            assert first_pass_end < context.events.index(("start", task)), task
    assert context.most_running == 2


def test_a_failing_task_raises_its_error():
    tasks = _shard_tasks(num_blocks=3, dupe_factor=2)
    with pytest.raises(ValueError, match="failed on"):
        _results_through_thread_pool(_RecordingContext(fail_on=tasks[3]), tasks, num_workers=2)


def test_rerun_rewrites_only_the_missing_shard(tmp_path, corpus_file, spm_model_file):
    outputs, first = _run(corpus_file, spm_model_file, str(tmp_path), num_workers=2)
    before = _contents(outputs)
    kept_times = [os.stat(path).st_mtime_ns for path in outputs]
    os.remove(outputs[1])
    _, second = _run(corpus_file, spm_model_file, str(tmp_path), num_workers=2)
    assert _contents(outputs) == before
    assert [os.stat(path).st_mtime_ns for path in (outputs[0], outputs[2])] == [kept_times[0], kept_times[2]]
    assert second["totals"] == first["totals"] and second["complete"]
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".incomplete")]
    with open(cpd.summary_path_for(outputs), encoding="utf-8") as handle:
        assert json.load(handle)["totals"] == first["totals"]
    rewritten_time = os.stat(outputs[1]).st_mtime_ns
    _, third = _run(corpus_file, spm_model_file, str(tmp_path), num_workers=2)
    assert os.stat(outputs[1]).st_mtime_ns == rewritten_time and third["totals"] == first["totals"]


def test_interrupted_job_resumes_to_the_same_bytes(tmp_path, corpus_file, spm_model_file):
    clean, _ = _run(corpus_file, spm_model_file, str(tmp_path / "clean"), num_workers=1, dupe_factor=3)
    interrupted = str(tmp_path / "interrupted")
    real_write_summary = cpd.write_summary
    calls = []

    def write_then_die(*arguments):
        calls.append(arguments)
        if len(calls) == 2:
            raise KeyboardInterrupt  # killed after the second shard was renamed, before it was recorded
        real_write_summary(*arguments)

    with mock.patch.object(cpd, "write_summary", write_then_die), pytest.raises(KeyboardInterrupt):
        _run(corpus_file, spm_model_file, interrupted, num_workers=2, dupe_factor=3)
    work = [name for name in os.listdir(interrupted) if name.endswith(".work")]
    assert len(work) == 1 and os.listdir(os.path.join(interrupted, work[0], "tokens"))  # tokenized blocks kept
    resumed, summary = _run(corpus_file, spm_model_file, interrupted, num_workers=2, dupe_factor=3)
    assert _contents(resumed) == _contents(clean) and summary["complete"]
    assert sorted(os.listdir(interrupted)) == sorted(os.path.basename(path) for path in resumed) + [
        "train.tfrecord.summary.json"]


_KILLED_MID_SHARD = """
import os, signal, sys
from data_gen.pretraining import create_pretraining_data as cpd

corpus, spm_model, output_dir = sys.argv[1:]
tasks_after_first_shard = []
task_done, shard_done = cpd._Progress.task_done, cpd._Progress.shard_done


def shard_done_then_count(self):
    shard_done(self)
    tasks_after_first_shard.append(0)


def task_done_then_die(self, *arguments):
    task_done(self, *arguments)
    if tasks_after_first_shard:
        tasks_after_first_shard.append(1)
    if len(tasks_after_first_shard) == 3:  # two blocks of the second shard written, its file not yet renamed
        os.kill(os.getpid(), signal.SIGKILL)


cpd._Progress.task_done, cpd._Progress.shard_done = task_done_then_die, shard_done_then_count
cpd.create_pretraining_data(corpus, cpd.output_shard_paths(os.path.join(output_dir, "train.tfrecord"), 3), spm_model,
                            max_seq_length=64, max_predictions_per_seq=10, dupe_factor=2, random_seed=11,
                            num_workers=1, block_bytes=4096)
"""


def test_a_job_killed_inside_a_shard_reruns_to_the_bytes_of_an_uninterrupted_one(tmp_path, corpus_file,
                                                                                     spm_model_file):
    clean, _ = _run(corpus_file, spm_model_file, str(tmp_path / "clean"), num_workers=1)
    killed_dir = tmp_path / "killed"
    killed = subprocess.run([sys.executable, "-c", _KILLED_MID_SHARD, corpus_file, spm_model_file, str(killed_dir)],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    written = sorted(os.listdir(killed_dir))
    assert os.path.basename(clean[0]) in written and os.path.basename(clean[1]) not in written
    assert [name for name in written if "incomplete" in name]  # the second shard, cut off inside
    resumed, summary = _run(corpus_file, spm_model_file, str(killed_dir), num_workers=1)
    assert _contents(resumed) == _contents(clean) and summary["complete"]
    assert not [name for name in os.listdir(killed_dir) if "incomplete" in name]


def test_ram_filesystem_paths_give_the_local_bytes_and_resume(tmp_path, corpus_file, spm_model_file):
    """Input, vocabulary, shards and summary on tf.io.gfile's in-memory filesystem (as on gs://): the local bytes."""
    local, local_summary = _run(corpus_file, spm_model_file, str(tmp_path), num_workers=2)
    root = f"ram://cloud_paths_{os.getpid()}_{time.time_ns()}"
    tf.io.gfile.makedirs(f"{root}/corpus")
    tf.io.gfile.copy(corpus_file, f"{root}/corpus/part-0.txt")
    tf.io.gfile.copy(spm_model_file, f"{root}/spm.model")
    try:
        remote, summary = _run(f"{root}/corpus/*.txt", f"{root}/spm.model", f"{root}/out", num_workers=2)
        assert [_gfile_contents(path) for path in remote] == _contents(local)
        assert summary["totals"] == local_summary["totals"]
        assert summary["settings"]["input_files"] == [[f"{root}/corpus/part-0.txt", os.path.getsize(corpus_file)]]
        assert sorted(tf.io.gfile.listdir(f"{root}/out")) == sorted(
            os.path.basename(path) for path in remote) + ["train.tfrecord.summary.json"]
        tf.io.gfile.remove(remote[1])
        _, resumed = _run(f"{root}/corpus/*.txt", f"{root}/spm.model", f"{root}/out", num_workers=1)
        assert [_gfile_contents(path) for path in remote] == _contents(local)
        assert resumed["totals"] == local_summary["totals"] and resumed["complete"]
    finally:
        tf.io.gfile.rmtree(root)


@pytest.mark.parametrize("data", [b"", b"x", b"\n", b"a\nbb\r\n\n\nccc", b"abc\n" * 5, b"one long line, no end"])
def test_chunked_lines_are_the_files_lines(monkeypatch, data):
    monkeypatch.setattr(blocks, "_READ_CHUNK_BYTES", 3)  # lines cross chunk boundaries, and chunks hold no line end
    assert list(blocks._lines(io.BytesIO(data))) == list(io.BytesIO(data))


def test_blocks_do_not_depend_on_the_read_chunk(monkeypatch, corpus_file):
    planned = blocks.plan_blocks([corpus_file], "text", 4096, 3)
    monkeypatch.setattr(blocks, "_READ_CHUNK_BYTES", 7)
    assert blocks.plan_blocks([corpus_file], "text", 4096, 3) == planned
    assert [block.num_documents for block in blocks.plan_blocks([corpus_file], "text", 4096, 3)] == [
        block.num_documents for block in planned]


def _gfile_contents(path):
    with tf.io.gfile.GFile(path, "rb") as handle:
        return handle.read()


def test_rerun_with_other_settings_is_refused(tmp_path, corpus_file, spm_model_file):
    _run(corpus_file, spm_model_file, str(tmp_path), num_workers=1)
    with pytest.raises(ValueError, match="random_seed"):
        _run(corpus_file, spm_model_file, str(tmp_path), num_workers=1, random_seed=99)
    os.remove(cpd.summary_path_for(cpd.output_shard_paths(str(tmp_path / "train.tfrecord"), 3)))
    with pytest.raises(FileExistsError, match="summary"):
        _run(corpus_file, spm_model_file, str(tmp_path), num_workers=1)


def test_passes_follow_each_other_so_copies_of_a_document_are_a_pass_apart(tmp_path, spm_model_file):
    corpus = tmp_path / "numbered.txt"
    numbers = [10, 11, 12, 13, 15, 19, 20, 21, 22, 23, 25, 29]  # digits the tiny vocabulary knows
    corpus.write_text("".join(f"Number {i} starts here.\nNumber {i} ends.\n\n" for i in numbers),
                      encoding="utf-8")
    outputs = [str(tmp_path / "one.tfrecord")]
    summary = cpd.create_pretraining_data(str(corpus), outputs, spm_model_file, max_seq_length=64, dupe_factor=3,
                                          short_seq_prob=0.0, block_bytes=100)
    assert summary["totals"]["blocks"] >= 4
    documents = []
    for example in read_records(outputs[0]):
        ids, segments = restore_original_ids(example), feature_values(example, "segment_ids")
        length, first_sep = sum(feature_values(example, "input_mask")), segments.index(1) - 1
        documents.append(frozenset({tuple(ids[1:first_sep]), tuple(ids[first_sep + 1:length - 1])}))
    assert len(documents) == 36 and len(set(documents)) == 12
    assert set(documents[:12]) == set(documents[12:24]) == set(documents[24:]) == set(documents)


def test_small_corpus_still_feeds_every_shard(tmp_path, spm_model_file, caplog):
    corpus = write_corpus(str(tmp_path / "small.txt"), num_documents=40)
    outputs = cpd.output_shard_paths(str(tmp_path / "out" / "t.tfrecord"), 4)
    with caplog.at_level(logging.WARNING):
        summary = cpd.create_pretraining_data(corpus, outputs, spm_model_file, max_seq_length=64, dupe_factor=1)
    assert all(shard["documents"] >= 1 and shard["instances"] >= 1 for shard in summary["shards"])
    assert summary["totals"]["documents"] == 40
    # Blocks of about 10 documents: a small pool for the random segment B, which the user is told.
    assert "4 of 4 blocks hold fewer than 20 documents" in caplog.text
    assert "each of the 4 output shards gets a block" in caplog.text


def test_blocks_count_their_documents_as_the_reader_finds_them(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("a\nb\n\nc\n \n\nd\ne\n\n\nf\n", encoding="utf-8")
    for budget in (1, 4, 1000):
        planned = blocks._scan_blocks([str(path)], "text", budget)
        assert sum(block.num_documents for block in planned) == 4
    assert [block.num_documents for block in blocks._scan_blocks([str(path)], "text", 1)] == [1, 1, 1, 1]
    lines = tmp_path / "docs.jsonl"
    lines.write_text('{"text": "x"}\n\n{"text": "y"}\n{"text": "z"}\n', encoding="utf-8")
    assert [block.num_documents for block in blocks._scan_blocks([str(lines)], "jsonl", 1000)] == [3]


# Input formats.

def test_jsonl_input(tmp_path, spm_model_file):
    path = tmp_path / "docs.jsonl"
    with open(path, "w", encoding="utf-8") as handle:
        for index in range(12):
            sentences = [f"The model learns shared weights number {index} and {k}." for k in range(4)]
            handle.write(json.dumps({"body": "\n".join(sentences) + "\n\n", "id": index}) + "\n")
        handle.write("\n")
    outputs = [str(tmp_path / "out.tfrecord")]
    summary = cpd.create_pretraining_data(str(path), outputs, spm_model_file, input_format="jsonl",
                                          json_text_field="body", max_seq_length=64, dupe_factor=1)
    assert summary["totals"]["documents"] == 12 and summary["totals"]["sentences"] == 48
    assert len(read_records(outputs[0])) == summary["totals"]["instances"] > 12
    with pytest.raises(ValueError, match=r"docs.jsonl:1 has no string field 'text' \(--json_text_field\)"):
        cpd.create_pretraining_data(str(path), [str(tmp_path / "other.tfrecord")], spm_model_file,
                                    input_format="jsonl", max_seq_length=64, dupe_factor=1)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "fine"}\n{"text": oops}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"broken.jsonl:2 is not a JSON object"):
        cpd.create_pretraining_data(str(broken), [str(tmp_path / "b.tfrecord")], spm_model_file,
                                    input_format="jsonl", max_seq_length=64, dupe_factor=1)


def test_tfds_input_with_mock_data(tmp_path, spm_model_file):
    import tensorflow_datasets as tfds

    outputs = [str(tmp_path / "wiki.tfrecord")]
    with tfds.testing.mock_data(num_examples=30):
        # mock_data fakes the examples but not the prepared files that is_prepared() looks for.
        with mock.patch.object(tfds.core.DatasetBuilder, "is_prepared", return_value=True):
            summary = cpd.create_pretraining_data(None, outputs, spm_model_file, input_format="tfds",
                                                  tfds_name="wikipedia/20230601.en", max_seq_length=32,
                                                  dupe_factor=2)
    # Every mock article is one line, so every instance takes a random B (label 1).
    assert summary["totals"]["documents"] == 30
    assert summary["totals"]["next_sentence_label_1"] == summary["totals"]["instances"] == 60
    assert len(read_records(outputs[0])) == 60
    assert not [name for name in os.listdir(tmp_path) if "spool" in name]


def test_tfds_input_that_is_not_prepared_is_an_error(tmp_path, spm_model_file):
    with pytest.raises(FileNotFoundError, match=r"'wikipedia/20230601.en' is not prepared .*never downloads"):
        cpd.create_pretraining_data(None, [str(tmp_path / "w.tfrecord")], spm_model_file, input_format="tfds",
                                    tfds_name="wikipedia/20230601.en", tfds_data_dir=str(tmp_path / "tfds"))


# Bad input.

def _totals_of_text(tmp_path, spm_model_file, name, data):
    """The generator's totals for one text file holding `data` (bytes)."""
    path = tmp_path / f"{name}.txt"
    path.write_bytes(data)
    return cpd.create_pretraining_data(str(path), [str(tmp_path / f"{name}.tfrecord")], spm_model_file,
                                       max_seq_length=32, dupe_factor=1)["totals"]


def test_undecodable_bytes_are_replaced_and_counted(tmp_path, spm_model_file):
    totals = _totals_of_text(tmp_path, spm_model_file, "bytes",
                             b"The model learns \xff\xfe weights.\nIt runs at every depth.\n\n"
                             b"Sentence order \xc3 prediction swaps segments.\r\nMasked tokens \xe2\x82 hide.\n")
    # \xff and \xfe are one invalid byte each, \xc3 a truncated 2-byte and \xe2\x82 a truncated 3-byte sequence.
    assert totals["undecodable_bytes"] == 5
    assert totals["documents"] == 2 and totals["sentences"] == 4


def test_carriage_returns_are_dropped_as_tf_gfile_reads_lines(tmp_path, spm_model_file):
    totals = _totals_of_text(tmp_path, spm_model_file, "crcrlf",
                             b"The model learns weights.\r\r\nIt runs at every depth.\r\r\n\r\r\n"
                             b"Sentence order prediction swaps segments.\r\r\nMasked tokens hide.\r\r\n")
    assert totals["documents"] == 2 and totals["sentences"] == 4
    totals = _totals_of_text(tmp_path, spm_model_file, "bare_cr",
                             b"The model learns\rweights.\nIt runs at every depth.\n")
    assert totals["documents"] == 1 and totals["sentences"] == 2


def test_missing_empty_and_blank_inputs_name_the_path(tmp_path, spm_model_file):
    output = [str(tmp_path / "o.tfrecord")]
    with pytest.raises(FileNotFoundError, match="nothing_here.txt"):
        cpd.create_pretraining_data(str(tmp_path / "nothing_here.txt"), output, spm_model_file)
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty.txt' is empty"):
        cpd.create_pretraining_data(str(empty), output, spm_model_file)
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n\t\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"blank.txt' holds no documents"):
        cpd.create_pretraining_data(str(blank), output, spm_model_file)


@pytest.mark.parametrize("overrides, flag", [({"max_seq_length": 4}, "--max_seq_length=4"),
                                             ({"masked_lm_prob": 0.0}, "--masked_lm_prob=0.0"),
                                             ({"masked_lm_prob": 1.0}, "--masked_lm_prob=1.0"),
                                             ({"dupe_factor": 0}, "--dupe_factor=0"),
                                             ({"num_workers": 0}, "--num_workers=0"),
                                             ({"input_format": "csv"}, "--input_format='csv'")])
def test_invalid_flags_are_named(tmp_path, corpus_file, spm_model_file, overrides, flag):
    with pytest.raises(ValueError, match=flag.replace("[", r"\[")):
        cpd.create_pretraining_data(corpus_file, [str(tmp_path / "o.tfrecord")], spm_model_file, **overrides)


def test_model_with_other_special_ids_is_refused(tmp_path, corpus_file):
    import sentencepiece as spm

    spm.SentencePieceTrainer.train(input=corpus_file, model_prefix=str(tmp_path / "plain"), vocab_size=100,
                                   minloglevel=2)
    with pytest.raises(ValueError, match=r"<pad> must have id 0"):
        cpd.create_pretraining_data(corpus_file, [str(tmp_path / "o.tfrecord")], str(tmp_path / "plain.model"))


def test_output_shard_paths_errors():
    assert cpd.output_shard_paths("x", 1) == ["x-00000-of-00001"]
    with pytest.raises(ValueError, match="--num_output_shards=0"):
        cpd.output_shard_paths("x", 0)
    with pytest.raises(ValueError, match="needs one --output_file path"):
        cpd.output_shard_paths("a,b", 2)
    with pytest.raises(ValueError, match="names a file twice"):
        cpd.output_shard_paths("a,a")


def test_wordpiece_vocabulary_input(tmp_path):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "the", "model", "learn", "##s", "weights", "\u535a"]
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The model learns weights.\nThe model \u535a.\n\nThe weights.\nThe model learns.\n",
                      encoding="utf-8")
    tokenizer = AlbertTokenizer(vocab_file=str(vocab_file))
    outputs = [str(tmp_path / "wp.tfrecord")]
    summary = cpd.create_pretraining_data(str(corpus), outputs, tokenizer, max_seq_length=16, dupe_factor=3,
                                          max_predictions_per_seq=3)
    assert summary["totals"]["tokens"] == 18
    examples = read_records(outputs[0])
    learns = [example for example in examples if 8 in restore_original_ids(example)]
    for example in learns:
        ids, boundary = restore_original_ids(example), feature_values(example, "token_boundary")
        position = ids.index(8)
        assert ids[position + 1] == 9 and boundary[position:position + 2] == [1, 0]  # "learn" "##s"


@pytest.mark.slow
def test_run_script_uses_the_original_defaults(tmp_path, corpus_file, spm_model_file):
    result = run_script("create_pretraining_data", f"--input_file={corpus_file}",
                        f"--output_file={tmp_path / 'train.tfrecord'}", "--num_output_shards=2",
                        f"--spm_model_file={spm_model_file}", "--max_seq_length=64", "--dupe_factor=1",
                        "--num_workers=2", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(os.listdir(tmp_path)) == ["train.tfrecord-00000-of-00002", "train.tfrecord-00001-of-00002",
                                            "train.tfrecord.summary.json"]
    with open(tmp_path / "train.tfrecord.summary.json", encoding="utf-8") as handle:
        summary = json.load(handle)
    settings = summary["settings"]
    assert summary["complete"] and summary["totals"]["documents"] == 150
    assert {key: settings[key] for key in ("max_predictions_per_seq", "masked_lm_prob", "short_seq_prob", "ngram",
                                           "favor_shorter_ngram", "do_whole_word_mask", "random_next_sentence",
                                           "random_seed")} == {
        "max_predictions_per_seq": 20, "masked_lm_prob": 0.15, "short_seq_prob": 0.1, "ngram": 3,
        "favor_shorter_ngram": True, "do_whole_word_mask": True, "random_next_sentence": False, "random_seed": 12345}
    assert settings["tokenizer"]["do_lower_case"] is True
    assert settings["tokenizer"]["digit_comma_rule"] == "keep_added_marker"


@pytest.mark.slow
def test_run_script_takes_the_digit_comma_rule(tmp_path, corpus_file, spm_model_file):
    result = run_script("create_pretraining_data", f"--input_file={corpus_file}",
                        f"--output_file={tmp_path / 'train.tfrecord'}", f"--spm_model_file={spm_model_file}",
                        "--max_seq_length=64", "--dupe_factor=1", "--digit_comma_rule=drop_added_marker", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(tmp_path / "train.tfrecord.summary.json", encoding="utf-8") as handle:
        assert json.load(handle)["settings"]["tokenizer"]["digit_comma_rule"] == "drop_added_marker"


# The digit-comma rule.

@pytest.fixture(scope="module")
def number_spm_model_file(tmp_path_factory):
    return make_number_spm_model(str(tmp_path_factory.mktemp("number_spm")))


@pytest.mark.parametrize("digit_comma_rule", [None, "keep_added_marker", "drop_added_marker"])
def test_instances_hold_the_pieces_of_the_digit_comma_rule(tmp_path, number_spm_model_file, digit_comma_rule):
    """Two-sentence documents that fit whole: every sentence's ids appear once, under the rule asked for."""
    lines = number_texts(60)
    corpus = tmp_path / "numbers.txt"
    corpus.write_text("".join(f"{a}\n{b}\n\n" for a, b in zip(lines[::2], lines[1::2])), encoding="utf-8")
    outputs = cpd.output_shard_paths(str(tmp_path / "out" / "train.tfrecord"), 1)
    summary = cpd.create_pretraining_data(str(corpus), outputs, number_spm_model_file, max_seq_length=128,
                                          short_seq_prob=0.0, dupe_factor=1, digit_comma_rule=digit_comma_rule)
    rule = digit_comma_rule or "keep_added_marker"
    assert summary["settings"]["tokenizer"]["digit_comma_rule"] == rule
    tokenizer = AlbertTokenizer(spm_model_file=number_spm_model_file, digit_comma_rule=rule)
    special = {tokenizer.cls_id, tokenizer.sep_id, 0}
    written = collections.Counter(token for example in read_records(outputs[0])
                                  for token in restore_original_ids(example) if token not in special)
    assert written == collections.Counter(token for line in lines for token in tokenizer.encode(line))
    other = AlbertTokenizer(spm_model_file=number_spm_model_file,
                            digit_comma_rule=({"keep_added_marker", "drop_added_marker"} - {rule}).pop())
    assert written != collections.Counter(token for line in lines for token in other.encode(line))


def test_a_rerun_under_the_other_digit_comma_rule_is_refused(tmp_path, corpus_file, spm_model_file):
    _run(corpus_file, spm_model_file, str(tmp_path), num_workers=1)
    with pytest.raises(ValueError, match="tokenizer differ"):
        _run(corpus_file, spm_model_file, str(tmp_path), num_workers=1, digit_comma_rule="drop_added_marker")


def test_a_digit_comma_rule_that_disagrees_with_the_tokenizer_is_refused(tmp_path, corpus_file, spm_model_file):
    tokenizer = AlbertTokenizer(spm_model_file=spm_model_file, digit_comma_rule="drop_added_marker")
    outputs = cpd.output_shard_paths(str(tmp_path / "train.tfrecord"), 1)
    with pytest.raises(ValueError, match="digit_comma_rule='keep_added_marker' disagrees with the given tokenizer's "
                                         "'drop_added_marker'"):
        cpd.create_pretraining_data(corpus_file, outputs, tokenizer, digit_comma_rule="keep_added_marker")
    with pytest.raises(ValueError, match="digit_comma_rule must be one of"):
        cpd.create_pretraining_data(corpus_file, outputs, spm_model_file, digit_comma_rule="hf")
