"""create_pretraining_data's pending shards written by an Apache Beam pipeline, byte-identical to the local run.

The launcher plans the blocks exactly as the local path does; the pipeline then runs the local path's own
per-block, per-pass record generation (`pass_records.generate_pass_records`) where Beam puts it:

1. Fragments. One element per block: its worker reads and tokenizes the block once and writes, for each dupe
   pass, the pass's framed records as the fragment `block-BBBBBBB-pass-PPP.tfrecord` in a hidden fragment
   directory beside the summary, with its counts beside it. Each file is written to a unique temporary name and
   renamed, counts first, so a fragment that exists is complete and a retried or duplicated bundle rewrites
   the same bytes or skips the fragment.
2. Shards. One element per pending shard, with its fragments' counts: shard k is the concatenation, for each
   pass in order and each of its blocks (b % num_shards == k) in ascending order, of fragment (b, pass). It is
   written to a temporary name and renamed; a shard that exists is kept (a retried assembly).
3. The launcher reads each shard's counts from the fragment directory, writes the summary once and removes the
   fragment directory.

No step depends on the runner, the worker count, the bundling or the order in which elements arrive, so the
bytes are the local run's. Records are framed by `tfrecord_framing` and all files go through Beam's
FileSystems: a worker never imports TensorFlow. Beam's WriteToTFRecord would not keep the record order.

Example:
>>> pipeline_arguments("runner=FnApiRunner,direct_running_mode=multi_processing,direct_num_workers=2")
['--runner=FnApiRunner', '--direct_running_mode=multi_processing', '--direct_num_workers=2']
"""

import collections
import dataclasses
import json
import logging
import os
import tempfile
import uuid
from typing import BinaryIO, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from albert_tf.tokenization import AlbertTokenizer
from data_gen.pretraining import tfrecord_framing
from data_gen.pretraining.block_reader import BlockReader
from data_gen.pretraining.blocks import Block, plan_shards
from data_gen.pretraining.instances import InstanceOptions, SpecialIds
from data_gen.pretraining.job_summary import shard_summary, summary_totals, write_summary
from data_gen.pretraining.pass_records import generate_pass_records

__all__ = ["BeamJob", "pipeline_arguments", "write_pending_shards"]

_COPY_CHUNK_BYTES = 16 << 20


def pipeline_arguments(beam_pipeline_options: str) -> List[str]:
    """tensorflow-datasets' option string (a comma list without dashes) as PipelineOptions' flags.

    Example:
    >>> pipeline_arguments("runner=DataflowRunner,project=my-project,region=us-central1")
    ['--runner=DataflowRunner', '--project=my-project', '--region=us-central1']
    """
    items = [item.strip() for item in beam_pipeline_options.split(",")]
    if not all(items):
        raise ValueError(f"--beam_pipeline_options={beam_pipeline_options!r} has an empty item; it must be a comma "
                         "list of Beam options without dashes, e.g. runner=DirectRunner,direct_num_workers=2.")
    dashed = [item for item in items if item.startswith("-")]
    if dashed:
        raise ValueError(f"--beam_pipeline_options item {dashed[0]!r} starts with a dash; write the options "
                         "without dashes, e.g. runner=DirectRunner,direct_num_workers=2.")
    return ["--" + item for item in items]


@dataclasses.dataclass(frozen=True)
class BeamJob:
    """What every worker needs, and nothing it would have to unpickle TensorFlow or a tokenizer for.

    Example:
    >>> job = BeamJob("30k-clean.model", None, True, "original", "text", "text", InstanceOptions(),
    ...               SpecialIds(2, 3, 4, 30000), 12345, "out/.train.summary.json.beam", ("out/train",))
    >>> job.fragment_path(7, 2)
    'out/.train.summary.json.beam/block-0000007-pass-002.tfrecord'
    """
    spm_model_file: Optional[str]
    vocab_file: Optional[str]
    do_lower_case: bool
    digit_comma_rule: str
    input_format: str
    json_text_field: str
    options: InstanceOptions
    special_ids: SpecialIds
    random_seed: int
    fragment_directory: str
    output_files: Tuple[str, ...]

    def fragment_path(self, block_index: int, dupe_pass: int) -> str:
        return _join(self.fragment_directory, f"block-{block_index:07d}-pass-{dupe_pass:03d}.tfrecord")

    def shard_counts_path(self, shard: int) -> str:
        return _join(self.fragment_directory, f"shard-{shard:05d}.json")


class _FragmentWriter:
    """Block -> its dupe passes' fragments; yields (shard, (pass, block index, counts)) for each pass."""

    def __init__(self, job: BeamJob):
        self.job = job
        self._reader: Optional[BlockReader] = None

    def __getstate__(self):
        return {"job": self.job, "_reader": None}  # the tokenizer is rebuilt on each worker

    def __call__(self, block: Block) -> Iterator[Tuple[int, Tuple[int, int, Dict[str, int]]]]:
        shard = block.index % len(self.job.output_files)
        documents = None
        for dupe_pass in range(self.job.options.dupe_factor):
            path = self.job.fragment_path(block.index, dupe_pass)
            counts = _read_counts(path)
            if counts is None:
                stats: collections.Counter = collections.Counter()
                if documents is None:
                    read_stats: collections.Counter = collections.Counter()
                    documents = self._block_reader().read(block, read_stats)
                if dupe_pass == 0:  # reading counts once per block, on its first pass, as the local path
                    stats.update(read_stats)
                records = generate_pass_records(documents, block.index, dupe_pass, self.job.options,
                                                self.job.special_ids, self.job.random_seed, stats)
                counts = dict(stats)
                _write_atomically(_counts_path(path), [json.dumps(counts).encode()])
                # Framed one by one into the file: joined first, the pass's records would be in memory twice.
                _write_atomically(path, map(tfrecord_framing.frame_record, records))
            yield shard, (dupe_pass, block.index, counts)

    def _block_reader(self) -> BlockReader:
        if self._reader is None:
            with tempfile.TemporaryDirectory(prefix="albert_vocabulary_") as directory:
                # The tokenizer reads a URL with tf.io.gfile, which a worker never imports: it reads a local copy,
                # loaded whole, so the copy can go at once.
                tokenizer = AlbertTokenizer(spm_model_file=_local_copy(self.job.spm_model_file, directory),
                                            vocab_file=_local_copy(self.job.vocab_file, directory),
                                            do_lower_case=self.job.do_lower_case,
                                            digit_comma_rule=self.job.digit_comma_rule)
            self._reader = BlockReader(tokenizer, self.job.input_format, self.job.json_text_field,
                                       open_for_reading=_open_for_reading)
        return self._reader


class _ShardAssembler:
    """(shard, ([its blocks], [its fragments' counts])) -> the shard file from its fragments, and its counts."""

    def __init__(self, job: BeamJob):
        self.job = job

    def __call__(self, element) -> None:
        from apache_beam.io.filesystems import CompressionTypes, FileSystems

        shard, (block_lists, fragments) = element
        blocks = sorted(block_lists[0], key=lambda block: block.index)
        expected = [(dupe_pass, block.index) for dupe_pass in range(self.job.options.dupe_factor)
                    for block in blocks]
        by_task = {(dupe_pass, block_index): counts for dupe_pass, block_index, counts in fragments}
        if sorted(by_task) != sorted(expected):
            missing = sorted(set(expected) - set(by_task))
            raise RuntimeError(f"Shard {shard} lacks the fragments (pass, block) {missing[:5]}.")
        path = self.job.output_files[shard]
        stats: collections.Counter = collections.Counter()
        for task in expected:
            stats.update(by_task[task])
        _write_atomically(self.job.shard_counts_path(shard),
                          [json.dumps(shard_summary(path, blocks, stats)).encode()])
        if FileSystems.exists(path):
            return  # a retried assembly: the shard was renamed into place with these bytes
        temporary = _temporary_path(path)
        with FileSystems.create(temporary, compression_type=CompressionTypes.UNCOMPRESSED) as output:
            for dupe_pass, block_index in expected:
                with FileSystems.open(self.job.fragment_path(block_index, dupe_pass),
                                      compression_type=CompressionTypes.UNCOMPRESSED) as fragment:
                    while chunk := fragment.read(_COPY_CHUNK_BYTES):
                        output.write(chunk)
        FileSystems.rename([temporary], [path])


def write_pending_shards(beam_pipeline_options: str, tokenizer: AlbertTokenizer, input_format: str,
                         json_text_field: str, options: InstanceOptions, random_seed: int,
                         input_files: Sequence[str], output_files: Sequence[str], pending: Sequence[int],
                         summary: dict, summary_file: str, block_bytes: int) -> int:
    """Writes the `pending` shards with a Beam pipeline and fills in their summary entries; returns instances.

    `create_pretraining_data(..., beam_pipeline_options=...)` calls it; the arguments are that job's.
    """
    import apache_beam as beam
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.options.pipeline_options import PipelineOptions

    pipeline_options = PipelineOptions(pipeline_arguments(beam_pipeline_options))
    shard_blocks = plan_shards(input_files, input_format, block_bytes, output_files)
    fragment_directory = _prepare_fragment_directory(summary_file, summary["settings"])
    special_ids = SpecialIds(tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id, tokenizer.vocab_size)
    job = BeamJob(tokenizer.spm_model_file, tokenizer.vocab_file, tokenizer.do_lower_case,
                  tokenizer.digit_comma_rule, input_format, json_text_field, options, special_ids, random_seed,
                  fragment_directory, tuple(output_files))
    pending_blocks = [block for shard in pending for block in shard_blocks[shard]]
    # Written before the run, so that a rerun after a failed run checks the settings and resumes it.
    write_summary(summary_file, summary)
    logging.info("Beam: %d blocks x %d passes into %d pending shard(s); fragments in %s", len(pending_blocks),
                 options.dupe_factor, len(pending), fragment_directory)
    with beam.Pipeline(options=pipeline_options) as pipeline:
        fragments = (pipeline
                     | "Blocks" >> beam.Create(pending_blocks)
                     | "WriteFragments" >> beam.FlatMap(_FragmentWriter(job)))
        shards = pipeline | "Shards" >> beam.Create([(shard, shard_blocks[shard]) for shard in pending])
        _ = ((shards, fragments)
             | "GroupByShard" >> beam.CoGroupByKey()
             | "AssembleShards" >> beam.Map(_ShardAssembler(job)))
    instances = 0
    for shard in pending:
        with FileSystems.open(job.shard_counts_path(shard)) as handle:
            summary["shards"][shard] = json.loads(handle.read())
        instances += summary["shards"][shard]["instances"]
    summary["totals"] = summary_totals(summary["shards"], summary["spooled_undecodable_bytes"])
    FileSystems.delete([fragment_directory])
    return instances


def _prepare_fragment_directory(summary_file: str, settings: dict) -> str:
    """The fragment directory beside the summary, kept (with its finished fragments) while its settings hold."""
    from apache_beam.io.filesystems import FileSystems

    directory, name = _split(summary_file)
    fragment_directory = _join(directory, f".{name}.beam")
    marker = _join(fragment_directory, "settings.json")
    if FileSystems.exists(marker):
        with FileSystems.open(marker) as handle:
            if json.loads(handle.read()) == settings:
                return fragment_directory
    if FileSystems.exists(fragment_directory):
        FileSystems.delete([fragment_directory])
    FileSystems.mkdirs(fragment_directory)
    _write_atomically(marker, [json.dumps(settings).encode()])
    return fragment_directory


def _open_for_reading(path: str) -> BinaryIO:
    """A seekable binary handle through Beam's FileSystems; never decompressed, as block offsets are raw bytes."""
    from apache_beam.io.filesystems import CompressionTypes, FileSystems

    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def _local_copy(path: Optional[str], directory: str) -> Optional[str]:
    """`path` itself when local, else a copy of it in the local `directory`, read through Beam's FileSystems."""
    from apache_beam.io.filesystems import FileSystems

    if path is None or FileSystems.get_scheme(path) is None:
        return path
    copy = os.path.join(directory, FileSystems.split(path)[1])
    with _open_for_reading(path) as source, open(copy, "wb") as destination:
        destination.write(source.read())
    return copy


def _read_counts(fragment_path: str) -> Optional[Dict[str, int]]:
    """A finished fragment's counts, or None when the fragment is not written yet."""
    from apache_beam.io.filesystems import FileSystems

    if not FileSystems.exists(fragment_path):
        return None
    with FileSystems.open(_counts_path(fragment_path)) as handle:
        return json.loads(handle.read())


def _counts_path(fragment_path: str) -> str:
    return fragment_path[:-len(".tfrecord")] + ".json"


def _write_atomically(path: str, chunks: Iterable[bytes]) -> None:
    from apache_beam.io.filesystems import CompressionTypes, FileSystems

    temporary = _temporary_path(path)
    with FileSystems.create(temporary, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        for chunk in chunks:
            handle.write(chunk)
    FileSystems.rename([temporary], [path])


def _temporary_path(path: str) -> str:
    # Hidden and unique per attempt: concurrent attempts never write into one file, and globs skip it.
    directory, name = _split(path)
    return _join(directory, f".{name}.{uuid.uuid4().hex}.incomplete")


def _split(path: str) -> Tuple[str, str]:
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.split(path)


def _join(directory: str, name: str) -> str:
    from apache_beam.io.filesystems import FileSystems

    return FileSystems.join(directory, name)
