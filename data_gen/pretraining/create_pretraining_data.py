"""Raw text -> ALBERT pretraining TFRecords (masked-LM + sentence-order instances), streamed and parallel.

Instances follow google-research/albert create_pretraining_data.py exactly (see `instances.py`);
what differs is how the corpus is walked, so that memory stays bounded and output is reproducible:

- Blocks instead of one corpus. The original reads every document into memory, shuffles them, makes
  `dupe_factor` passes drawing the random B segment from the whole corpus, shuffles all instances and
  writes them round robin. Here the input is cut, in order, into blocks of whole documents of about
  `block_bytes` of text (default 4 MiB; smaller when needed so that every shard gets a block). A block is
  the original's corpus in miniature: its documents are shuffled once, B comes from a random document of
  the same block, and each pass's instances are shuffled. Only a few block passes are in memory at a time.
- Shards. Block b goes to output shard b % num_shards (round robin, so each shard samples the whole
  corpus). A shard holds pass 1 over its blocks, then pass 2, ..., so the differently masked copies of a
  document lie a pass apart, as after the original's global shuffle they lie far apart. A block pass
  depends only on (random_seed, block index, pass, its documents): the same seed gives byte-identical
  shards whatever `num_workers` is.
- Resumable. Shards are written one after another (block passes in parallel over `num_workers` processes)
  to a hidden temporary name and renamed when complete; a rerun with the same settings skips existing
  shards. Settings and per-shard counts are kept in a JSON summary (by default OUTPUT.summary.json); a
  hidden work directory beside it holds tokenized blocks (read once, reused by later passes) and the
  tfds spool, and is removed when the job completes.
- Input formats: the original's text (one sentence per line, a blank line between documents; the end of
  a file also ends a document), JSON lines (a document per line, its text field split into sentences at
  line breaks) and a prepared tensorflow-datasets text dataset, spooled once to local JSON lines.
- Undecodable bytes are replaced by U+FFFD and counted; the original failed on them.

This module runs the job on local processes; its parts, which the Apache Beam pipeline (beam_pipeline.py) runs
too, are the modules beside it: blocks.py plans the blocks, block_reader.py reads one, pass_records.py turns a
block pass into records and job_summary.py keeps the summary.
"""

import collections
import contextlib
import concurrent.futures
import dataclasses
import gc
import hashlib
import itertools
import json
import logging
import multiprocessing
import os
import queue
import shutil
import tempfile
import time
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

from albert_tf.tokenization import DEFAULT_DIGIT_COMMA_RULE, AlbertTokenizer, is_url
from data_gen.file_io import hidden_incomplete_path
from data_gen.pretraining.block_reader import BlockReader, decode_utf8
from data_gen.pretraining.blocks import PROGRESS_LOG_SECONDS, Block, plan_shards
from data_gen.pretraining.instances import InstanceOptions, SpecialIds
from data_gen.pretraining.job_summary import (job_settings, resume_summary, shard_summary, summary_totals,
                                              write_summary)
from data_gen.pretraining.pass_records import generate_pass_records

__all__ = ["DEFAULT_BLOCK_BYTES", "INPUT_FORMATS", "create_pretraining_data", "output_shard_paths",
           "summary_path_for"]

INPUT_FORMATS = ("text", "jsonl", "tfds")
DEFAULT_BLOCK_BYTES = 4 << 20
_SHARD_SUFFIX = "-%05d-of-%05d"
_SPOOL_PART_BYTES = 256 << 20


# Output names.

def output_shard_paths(output_file: str, num_output_shards: Optional[int] = None) -> List[str]:
    """The output paths: the original's comma list, or PATH-00000-of-0000N names for `num_output_shards`.

    Example:
    >>> output_shard_paths("out/train.tfrecord", 2)
    ['out/train.tfrecord-00000-of-00002', 'out/train.tfrecord-00001-of-00002']
    >>> output_shard_paths("a.tfrecord,b.tfrecord")
    ['a.tfrecord', 'b.tfrecord']
    """
    paths = [path.strip() for path in output_file.split(",") if path.strip()]
    if not paths:
        raise ValueError(f"--output_file={output_file!r} names no output file.")
    if num_output_shards is None:
        if len(set(paths)) != len(paths):
            raise ValueError(f"--output_file={output_file!r} names a file twice.")
        return paths
    if num_output_shards < 1:
        raise ValueError(f"--num_output_shards={num_output_shards} is invalid: it must be an integer >= 1.")
    if len(paths) != 1:
        raise ValueError(f"--num_output_shards={num_output_shards} needs one --output_file path to number, "
                         f"got the list {output_file!r}.")
    return [paths[0] + _SHARD_SUFFIX % (index, num_output_shards) for index in range(num_output_shards)]


def summary_path_for(output_files: Sequence[str]) -> str:
    """Default summary path: the shard base name (or the first output) + ".summary.json".

    Example:
    >>> summary_path_for(["out/train.tfrecord-00000-of-00002", "out/train.tfrecord-00001-of-00002"])
    'out/train.tfrecord.summary.json'
    """
    first = output_files[0]
    suffix = _SHARD_SUFFIX % (0, len(output_files))
    base = first[:-len(suffix)] if first.endswith(suffix) else first
    return base + ".summary.json"


# Block passes in worker processes, and the token cache their later passes read.

@dataclasses.dataclass(frozen=True)
class _Task:
    block: Block
    dupe_pass: int


@dataclasses.dataclass
class _WorkerContext:
    reader: BlockReader
    options: InstanceOptions
    special_ids: SpecialIds
    random_seed: int
    token_cache_directory: Optional[str]

    def run(self, task: _Task) -> Tuple[_Task, List[bytes], Dict[str, int]]:
        documents, read_stats = self._documents(task.block)
        # Reading counts once per block, on its first pass.
        stats = collections.Counter(read_stats if task.dupe_pass == 0 else {})
        records = generate_pass_records(documents, task.block.index, task.dupe_pass, self.options,
                                        self.special_ids, self.random_seed, stats)
        return task, records, dict(stats)

    def _documents(self, block: Block) -> Tuple[List[List[List[int]]], Dict[str, int]]:
        """The block's tokenized documents: read once, then cached on disk for its other passes."""
        stats: collections.Counter = collections.Counter()
        if self.token_cache_directory is None:
            return self.reader.read(block, stats), dict(stats)
        path = _token_cache_path(self.token_cache_directory, block.index)
        if os.path.exists(path):
            return _load_documents(path)
        documents = self.reader.read(block, stats)
        _save_documents(path, documents, stats)
        return documents, dict(stats)


def _token_cache_path(directory: str, block_index: int) -> str:
    return os.path.join(directory, f"block-{block_index:07d}.npz")


_READ_COUNTS = ("documents", "sentences", "tokens", "undecodable_bytes")


def _save_documents(path: str, documents: List[List[List[int]]], stats: collections.Counter) -> None:
    import numpy as np

    sentences = [sentence for document in documents for sentence in document]
    arrays = {"tokens": np.array([token for sentence in sentences for token in sentence], dtype=np.int32),
              "sentence_lengths": np.array([len(sentence) for sentence in sentences], dtype=np.int64),
              "document_sentences": np.array([len(document) for document in documents], dtype=np.int64),
              "read_counts": np.array([stats[key] for key in _READ_COUNTS], dtype=np.int64)}
    temporary = f"{path}.{os.getpid()}.incomplete.npz"
    np.savez(temporary, **arrays)
    os.replace(temporary, path)  # another worker may write the same block: identical bytes, last one wins


def _load_documents(path: str) -> Tuple[List[List[List[int]]], Dict[str, int]]:
    import numpy as np

    with np.load(path) as arrays:
        tokens = arrays["tokens"].tolist()
        sentence_ends = list(itertools.accumulate(arrays["sentence_lengths"].tolist()))
        document_ends = list(itertools.accumulate(arrays["document_sentences"].tolist()))
        read_counts = dict(zip(_READ_COUNTS, arrays["read_counts"].tolist()))
    sentences = [tokens[end - length:end]
                 for end, length in zip(sentence_ends, _differences(sentence_ends))]
    documents = [sentences[end - count:end] for end, count in zip(document_ends, _differences(document_ends))]
    return documents, read_counts


def _differences(cumulative: List[int]) -> List[int]:
    return [end - start for start, end in zip([0] + cumulative[:-1], cumulative)]


_WORKER: Optional[_WorkerContext] = None  # set once per worker process by the pool initializer


def _init_worker(context: _WorkerContext) -> None:
    global _WORKER
    _WORKER = context


def _run_in_worker(task: _Task) -> Tuple[_Task, List[bytes], Dict[str, int]]:
    return _WORKER.run(task)


@contextlib.contextmanager
def _worker_pool(context: _WorkerContext, num_workers: int, num_tasks: int):
    """A pool of workers, or None when one process does it (one worker or at most one task)."""
    if num_workers == 1 or num_tasks <= 1:
        yield None
        return
    # fork: workers inherit the loaded modules instead of importing TensorFlow again; they never call it.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    # Frozen objects are never visited by the workers' garbage collector, so the pages they share with
    # this process stay shared instead of being copied on write.
    gc.freeze()
    try:
        # Not multiprocessing.Pool: its terminate(), which an exception (Ctrl-C) runs on the way out, can block
        # forever writing its sentinel into a result pipe that a killed worker left full and nothing reads any
        # more (it hung a test for 27 minutes). The executor drops the tasks not started, lets the running ones
        # finish, then returns.
        with concurrent.futures.ProcessPoolExecutor(min(num_workers, num_tasks),
                                                    mp_context=multiprocessing.get_context(method),
                                                    initializer=_init_worker, initargs=(context,)) as pool:
            try:
                yield pool
            except BaseException:
                pool.shutdown(cancel_futures=True)
                raise
    finally:
        gc.unfreeze()


def _ordered_results(context: _WorkerContext, tasks: Sequence[_Task], pool,
                     num_workers: int) -> Iterator[Tuple[_Task, List[bytes], Dict[str, int]]]:
    """Task results in task order; with a pool, about two tasks per worker are submitted ahead of the one written.

    A block's later passes are submitted only after its first pass has finished: the first pass tokenizes the
    block into the token cache, and a later pass running beside it would tokenize the same block again.
    """
    if pool is None:
        for task in tasks:
            yield context.run(task)
        return
    window = 2 * num_workers
    index_of = {task: index for index, task in enumerate(tasks)}
    finished: "queue.SimpleQueue" = queue.SimpleQueue()
    unsubmitted = list(range(len(tasks)))
    tokenized_blocks = set()
    results = {}
    in_flight = next_index = 0
    while next_index < len(tasks):
        position = 0
        while position < len(unsubmitted) and (in_flight < window or unsubmitted[position] == next_index):
            task = tasks[unsubmitted[position]]
            if task.dupe_pass and context.token_cache_directory is not None and task.block not in tokenized_blocks:
                position += 1
                continue
            del unsubmitted[position]
            pool.submit(_run_in_worker, task).add_done_callback(finished.put)
            in_flight += 1
        while next_index not in results:
            outcome = finished.get().result()
            results[index_of[outcome[0]]] = outcome
            if outcome[0].dupe_pass == 0:
                tokenized_blocks.add(outcome[0].block)
                break
        if next_index in results:
            yield results.pop(next_index)
            next_index += 1
            in_flight -= 1


# tensorflow-datasets input: spooled once to local JSON lines.

def _spool_tfds(name: str, data_dir: Optional[str], split: str, text_feature: str,
                spool_dir: str) -> Tuple[List[str], int]:
    """Writes the split's texts as JSON lines under `spool_dir` (reused when complete); returns files, bad bytes."""
    marker = os.path.join(spool_dir, "COMPLETE.json")
    if os.path.exists(marker):
        with open(marker, encoding="utf-8") as handle:
            spooled = json.load(handle)
        if spooled["source"] == [name, data_dir, split, text_feature]:
            logging.info("Reusing the spooled %s/%s texts in %s", name, split, spool_dir)
            return spooled["files"], spooled["undecodable_bytes"]
    import tensorflow_datasets as tfds

    try:
        builder = tfds.builder(name, data_dir=data_dir)
    except Exception as error:  # tfds raises several types for an unknown name or config
        raise ValueError(f"--tfds_name={name!r} is not a tensorflow-datasets dataset: {error}") from error
    if not builder.is_prepared():
        raise FileNotFoundError(
            f"tensorflow-datasets dataset {name!r} is not prepared in {builder.data_dir!r} (--tfds_data_dir="
            f"{data_dir!r}); this job never downloads: prepare it first, e.g. `tfds build {name}"
            f"{f' --data_dir={data_dir}' if data_dir else ''}`.")
    if text_feature not in builder.info.features:
        raise ValueError(f"--tfds_text_feature={text_feature!r} is not a feature of {name!r}; it has "
                         f"{sorted(builder.info.features.keys())}.")
    shutil.rmtree(spool_dir, ignore_errors=True)
    os.makedirs(spool_dir)
    stats: collections.Counter = collections.Counter()
    files: List[str] = []
    handle = None
    start = time.time()
    try:
        dataset = builder.as_dataset(split=split, shuffle_files=False)
        for count, example in enumerate(tfds.as_numpy(dataset), start=1):
            if handle is None or handle.tell() >= _SPOOL_PART_BYTES:
                if handle is not None:
                    handle.close()
                files.append(os.path.join(spool_dir, f"part-{len(files):05d}.jsonl"))
                handle = open(files[-1], "w", encoding="utf-8")
            text = decode_utf8(example[text_feature], stats)
            handle.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
            if count % 100_000 == 0:
                logging.info("Spooled %d %s examples (%.0f/s)", count, name, count / (time.time() - start))
    finally:
        if handle is not None:
            handle.close()
    if not files:
        raise ValueError(f"tensorflow-datasets split {name}/{split} is empty.")
    with open(marker, "w", encoding="utf-8") as handle:
        json.dump({"source": [name, data_dir, split, text_feature], "files": files,
                   "undecodable_bytes": stats["undecodable_bytes"]}, handle)
    return files, stats["undecodable_bytes"]


# The job.

def create_pretraining_data(input_files: Union[str, Sequence[str], None], output_files: Sequence[str],
                            tokenizer: Union[AlbertTokenizer, str], *, input_format: str = "text",
                            json_text_field: str = "text", tfds_name: Optional[str] = None,
                            tfds_data_dir: Optional[str] = None, tfds_split: str = "train",
                            tfds_text_feature: str = "text", max_seq_length: int = 512,
                            max_predictions_per_seq: int = 20, masked_lm_prob: float = 0.15,
                            short_seq_prob: float = 0.1, ngram: int = 3, favor_shorter_ngram: bool = True,
                            do_whole_word_mask: bool = True, random_next_sentence: bool = False,
                            dupe_factor: int = 40, random_seed: int = 12345, num_workers: Optional[int] = None,
                            block_bytes: int = DEFAULT_BLOCK_BYTES, summary_file: Optional[str] = None,
                            digit_comma_rule: Optional[str] = None,
                            beam_pipeline_options: Optional[str] = None) -> dict:
    """Writes ALBERT pretraining TFRecords to `output_files` and returns the summary (also written as JSON).

    `input_files`: comma list / globs / paths of text or JSON-lines files (None for tfds). `tokenizer`: an
    AlbertTokenizer or the path of a SentencePiece model (lowercasing). The remaining arguments are the
    original's flags with its defaults, plus the input format, `num_workers` processes (default 1), `block_bytes`
    (text per block), `summary_file` (default `summary_path_for(output_files)`), `digit_comma_rule` (for a model
    path: `albert_tf.tokenization.DIGIT_COMMA_RULES`, default the original's; an AlbertTokenizer brings its own)
    and `beam_pipeline_options`: a comma list of Beam options without dashes (e.g. "runner=DataflowRunner,
    project=...") that writes the same bytes with an Apache Beam pipeline (`beam_pipeline`) instead of local
    processes; it excludes `num_workers`.

    Example:
    >>> summary = create_pretraining_data("corpus.txt", output_shard_paths("out/train.tfrecord", 4),
    ...                                   "30k-clean.model", max_seq_length=128, dupe_factor=5,
    ...                                   num_workers=4)  # doctest: +SKIP
    >>> summary["complete"], summary["totals"]["shards_written"]  # doctest: +SKIP
    (True, 4)
    """
    start_time = time.time()
    options = InstanceOptions(max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions_per_seq,
                              masked_lm_prob=masked_lm_prob, short_seq_prob=short_seq_prob, ngram=ngram,
                              favor_shorter_ngram=favor_shorter_ngram, do_whole_word_mask=do_whole_word_mask,
                              random_next_sentence=random_next_sentence, dupe_factor=dupe_factor)
    output_files = list(output_files)
    if beam_pipeline_options is not None and num_workers is not None:
        raise ValueError(f"--num_workers={num_workers} cannot be combined with --beam_pipeline_options="
                         f"{beam_pipeline_options!r}: Beam's own num_workers means Dataflow workers, so give the "
                         "runner's worker count inside the Beam options (e.g. direct_num_workers=2).")
    num_workers = 1 if num_workers is None else num_workers
    _check_job_arguments(input_format, num_workers, block_bytes, output_files)
    tokenizer = _job_tokenizer(tokenizer, digit_comma_rule)
    tokenizer.check_special_ids()
    summary_file = summary_file or summary_path_for(output_files)
    if input_format == "tfds":
        if input_files:
            raise ValueError(f"--input_format=tfds reads --tfds_name, not --input_file={input_files!r}.")
        if not tfds_name:
            raise ValueError("--input_format=tfds needs --tfds_name (e.g. wikipedia/20230601.en).")
    else:
        input_files = _expand_input_files(input_files, input_format)
    settings = job_settings(input_files, input_format, json_text_field, tfds_name, tfds_split, tfds_text_feature,
                            tokenizer, options, random_seed, block_bytes, output_files)
    summary = resume_summary(summary_file, settings, output_files)
    pending = [shard for shard, stats in enumerate(summary["shards"]) if stats is None]
    if len(pending) < len(output_files):
        logging.info("Keeping %d finished shard(s) listed in %s", len(output_files) - len(pending), summary_file)

    instances_written = 0
    if pending:
        work_directory = _prepare_work_directory(summary_file, settings)
        reader_format, text_field = input_format, json_text_field
        if input_format == "tfds":
            input_files, summary["spooled_undecodable_bytes"] = _spool_tfds(
                tfds_name, tfds_data_dir, tfds_split, tfds_text_feature, os.path.join(work_directory, "tfds_spool"))
            reader_format, text_field = "jsonl", "text"
        if beam_pipeline_options is not None:
            from data_gen.pretraining import beam_pipeline  # the beam extra: only this path needs it

            instances_written = beam_pipeline.write_pending_shards(
                beam_pipeline_options, tokenizer, reader_format, text_field, options, random_seed, input_files,
                output_files, pending, summary, summary_file, block_bytes)
        else:
            token_cache_directory = None
            if options.dupe_factor > 1:
                token_cache_directory = os.path.join(work_directory, "tokens")
                os.makedirs(token_cache_directory, exist_ok=True)
            special_ids = SpecialIds(tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id, tokenizer.vocab_size)
            context = _WorkerContext(BlockReader(tokenizer, reader_format, text_field), options, special_ids,
                                     random_seed, token_cache_directory)
            instances_written = _write_pending_shards(context, input_files, output_files, pending, summary,
                                                      summary_file, block_bytes, num_workers)
        shutil.rmtree(work_directory, ignore_errors=True)
    summary["complete"] = True
    summary["seconds"] = round(time.time() - start_time, 3)
    summary["instances_per_second"] = round(instances_written / max(summary["seconds"], 1e-9), 1)
    write_summary(summary_file, summary)
    totals = summary["totals"]
    logging.info("%d instances from %d documents in %d shard(s), %d written in %.1f s; summary %s",
                 totals["instances"], totals["documents"], len(output_files), instances_written, summary["seconds"],
                 summary_file)
    return summary


def _job_tokenizer(tokenizer: Union[AlbertTokenizer, str], digit_comma_rule: Optional[str]) -> AlbertTokenizer:
    if isinstance(tokenizer, str):
        rule = DEFAULT_DIGIT_COMMA_RULE if digit_comma_rule is None else digit_comma_rule
        return AlbertTokenizer(spm_model_file=tokenizer, digit_comma_rule=rule)
    if digit_comma_rule is not None and digit_comma_rule != tokenizer.digit_comma_rule:
        raise ValueError(f"digit_comma_rule={digit_comma_rule!r} disagrees with the given tokenizer's "
                         f"{tokenizer.digit_comma_rule!r}; give the rule to the AlbertTokenizer instead.")
    return tokenizer


def _check_job_arguments(input_format: str, num_workers: int, block_bytes: int, output_files: List[str]) -> None:
    if input_format not in INPUT_FORMATS:
        raise ValueError(f"--input_format={input_format!r} is invalid: it must be one of {', '.join(INPUT_FORMATS)}.")
    if num_workers < 1:
        raise ValueError(f"--num_workers={num_workers} is invalid: it must be an integer >= 1.")
    if block_bytes < 1:
        raise ValueError(f"--block_bytes={block_bytes} is invalid: it must be an integer >= 1.")
    if not output_files or len(set(output_files)) != len(output_files):
        raise ValueError(f"Output files {output_files!r} must be distinct and at least one.")


def _expand_input_files(input_files: Union[str, Sequence[str], None], input_format: str) -> List[str]:
    """The comma list and/or globs as a sorted list of distinct files, globbed with tf.io.gfile as the original."""
    import tensorflow as tf

    if not input_files:
        raise ValueError(f"--input_format={input_format} needs --input_file.")
    patterns = input_files.split(",") if isinstance(input_files, str) else input_files
    files = []
    for pattern in filter(None, (pattern.strip() for pattern in patterns)):
        matches = tf.io.gfile.glob(pattern)
        if not matches:
            raise FileNotFoundError(f"--input_file: no file matches {pattern!r}.")
        files.extend(matches)
    if not files:
        raise FileNotFoundError("--input_file names no input files.")
    files = sorted(set(files))
    for path in files:
        status = tf.io.gfile.stat(path)
        if status.is_directory:
            raise ValueError(f"--input_file matches the directory {path!r}; name the files in it, e.g. "
                             f"{path.rstrip('/')}/*.txt.")
        if status.length == 0:
            raise ValueError(f"Input file {path!r} is empty.")
    return files


def _write_pending_shards(context: _WorkerContext, input_files: Sequence[str], output_files: Sequence[str],
                          pending: Sequence[int], summary: dict, summary_file: str, block_bytes: int,
                          num_workers: int) -> int:
    """Writes the `pending` shards one after another, updating the summary after each; returns instances.

    A shard holds pass 1 over all its blocks, then pass 2, and so on, as the original's dupe_factor
    passes: the copies of a document (differently masked) lie a pass apart, not side by side.
    """
    shard_blocks = plan_shards(input_files, context.reader.input_format, block_bytes, output_files)
    shard_tasks = {shard: [_Task(block, dupe_pass) for dupe_pass in range(context.options.dupe_factor)
                           for block in shard_blocks[shard]] for shard in pending}
    tasks = [task for shard in pending for task in shard_tasks[shard]]
    progress = _Progress(sum(task.block.num_bytes for task in tasks), len(pending))
    with _worker_pool(context, num_workers, len(tasks)) as pool:
        results = _ordered_results(context, tasks, pool, num_workers)
        for shard in pending:
            summary["shards"][shard] = _write_shard(output_files[shard], shard_tasks[shard], results, progress)
            summary["totals"] = summary_totals(summary["shards"], summary["spooled_undecodable_bytes"])
            write_summary(summary_file, summary)
            progress.shard_done()
            if context.token_cache_directory is not None:
                for block in shard_blocks[shard]:
                    os.remove(_token_cache_path(context.token_cache_directory, block.index))
    return progress.instances


def _prepare_work_directory(summary_file: str, settings: dict) -> str:
    """Local scratch space next to the summary (tfds spool, tokenized blocks), kept while its settings hold."""
    name = f".{os.path.basename(summary_file)}.work"
    if is_url(summary_file):
        digest = hashlib.sha256(summary_file.encode()).hexdigest()[:16]
        directory = os.path.join(tempfile.gettempdir(), f"albert_pretraining_{digest}{name}")
    else:
        directory = os.path.join(os.path.dirname(summary_file) or ".", name)
    marker = os.path.join(directory, "settings.json")
    if os.path.exists(marker):
        with open(marker, encoding="utf-8") as handle:
            if json.load(handle) == settings:
                return directory
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    with open(marker, "w", encoding="utf-8") as handle:
        json.dump(settings, handle)
    return directory


def _write_shard(path: str, tasks: Sequence[_Task], results: Iterator, progress: "_Progress") -> dict:
    import tensorflow as tf

    directory = os.path.dirname(path)
    if directory:
        tf.io.gfile.makedirs(directory)
    temporary = hidden_incomplete_path(path)
    stats: collections.Counter = collections.Counter()
    with tf.io.TFRecordWriter(temporary) as writer:
        for task in tasks:
            done_task, records, task_stats = next(results)
            if done_task != task:
                raise RuntimeError(f"Results of {done_task} arrived where {task} belongs.")
            for record in records:
                writer.write(record)
            stats.update(task_stats)
            progress.task_done(task.block.num_bytes, task_stats)
    tf.io.gfile.rename(temporary, path, overwrite=True)
    return shard_summary(path, {task.block for task in tasks}, stats)


class _Progress:
    """Logs documents, instances, instances/s and an ETA from the text bytes done."""

    def __init__(self, total_bytes: int, total_shards: int):
        self.total_bytes = total_bytes
        self.total_shards = total_shards
        self.done_bytes = self.documents = self.instances = self.shards = 0
        self.start = self.last_log = time.time()

    def task_done(self, num_bytes: int, stats: Dict[str, int]) -> None:
        self.done_bytes += num_bytes
        self.documents += stats.get("documents", 0)
        self.instances += stats.get("instances", 0)
        if time.time() - self.last_log >= PROGRESS_LOG_SECONDS:
            self.log()

    def shard_done(self) -> None:
        self.shards += 1
        self.log()

    def log(self) -> None:
        self.last_log = time.time()
        elapsed = max(self.last_log - self.start, 1e-9)
        fraction = self.done_bytes / self.total_bytes if self.total_bytes else 1.0
        eta = "?"
        if fraction > 0:
            remaining = int(elapsed * (1 - fraction) / fraction)
            eta = f"{remaining // 3600}:{remaining // 60 % 60:02d}:{remaining % 60:02d}"
        logging.info("%d/%d shards, %d documents, %d instances (%.0f instances/s), %.1f%% of the text, ETA %s",
                     self.shards, self.total_shards, self.documents, self.instances, self.instances / elapsed,
                     100 * fraction, eta)


