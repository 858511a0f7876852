"""Blocks: the input cut, in order, into runs of whole documents, and the blocks each output shard gets.

A block is create_pretraining_data's unit of work: about `block_bytes` of text, closed at the first document
boundary after that many bytes, named by the byte ranges (segments) of the files it spans. Block b goes to output
shard b % num_shards. The local writer and the Beam pipeline plan the same blocks, so they write the same bytes.

Example:
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "corpus.txt")
>>> with open(path, "w") as handle:
...     _ = handle.write("One.\\nTwo.\\n\\nThree.\\n\\nFour.\\n")
>>> [(block.index, block.num_bytes, block.num_documents) for block in plan_blocks([path], "text", 8, 2)]
[(0, 11, 1), (1, 8, 1), (2, 6, 1)]
"""

import dataclasses
import io
import logging
import math
import time
from typing import BinaryIO, Iterator, List, Sequence, Tuple

# tf.io.gfile reads line by line slowly (a Python call per line), so the planner reads chunks and splits them;
# a chunk is copied about four times while it is split, so it stays small (16 MiB chunks cost the launcher 99 MB).
_READ_CHUNK_BYTES = 1 << 20
PROGRESS_LOG_SECONDS = 10.0
# Below this many documents a block is too small a pool for the random segment B and the document shuffle.
_FEW_DOCUMENTS_PER_BLOCK = 20


# Input and output paths are anything tf.io.gfile opens (local, gs://, s3://, hdfs://, ram://). The Beam
# pipeline's workers, which never import TensorFlow, give the block reader Beam's FileSystems instead.

def gfile_open_for_reading(path: str) -> BinaryIO:
    """`path` open for reading bytes through tf.io.gfile."""
    import tensorflow as tf

    return tf.io.gfile.GFile(path, "rb")


def file_size(path: str) -> int:
    """The size in bytes of the file at `path`, through tf.io.gfile."""
    import tensorflow as tf

    return tf.io.gfile.stat(path).length


def _lines(handle: BinaryIO) -> Iterator[bytes]:
    """The lines of an open binary file, each with its b"\\n" (the last one maybe without), read in large chunks."""
    rest = b""
    while chunk := handle.read(_READ_CHUNK_BYTES):
        data = rest + chunk
        end = data.rfind(b"\n") + 1
        rest = data[end:]
        yield from io.BytesIO(data[:end])
    if rest:
        yield rest


@dataclasses.dataclass(frozen=True)
class Segment:
    """The bytes [start, end) of the file at `path`, whose first line is line `first_line` of the file."""

    path: str
    start: int
    end: int
    first_line: int


@dataclasses.dataclass(frozen=True)
class Block:
    """Block `index`: whole documents, in the byte ranges of one or more files."""

    index: int
    segments: Tuple[Segment, ...]
    # As the scanner counts them; the reader's exact blank-line test can only find more.
    num_documents: int = dataclasses.field(default=0, compare=False)

    @property
    def num_bytes(self) -> int:
        return sum(segment.end - segment.start for segment in self.segments)


def plan_blocks(input_files: Sequence[str], input_format: str, block_bytes: int, num_shards: int) -> List[Block]:
    """Blocks of about `block_bytes` of text; smaller blocks when needed to give every shard at least one."""
    total_bytes = sum(file_size(path) for path in input_files)
    budget = max(1, min(block_bytes, math.ceil(total_bytes / num_shards)))
    while True:
        blocks = _scan_blocks(input_files, input_format, budget)
        if len(blocks) >= num_shards or budget == 1:
            return blocks
        budget = max(1, budget // 2)


def _scan_blocks(input_files: Sequence[str], input_format: str, budget: int) -> List[Block]:
    """One pass over the bytes: a block closes at the first document boundary after `budget` bytes.

    A document boundary is a line with only ASCII whitespace (text) or any line end (JSON lines); the
    end of a file ends a document too. Readers apply the exact blank-line test later, which only ever
    finds more boundaries inside a block, never fewer.
    """
    blocks: List[Block] = []
    segments: List[Segment] = []
    block_size = block_documents = 0
    block_has_document = False
    scanned_bytes, last_log = 0, time.time()
    for path in input_files:
        segment_start, segment_line, offset, line_number = 0, 1, 0, 0
        file_documents = 0
        in_document = False
        with gfile_open_for_reading(path) as handle:
            for line in _lines(handle):
                offset += len(line)
                line_number += 1
                if line_number % 1_000_000 == 0 and time.time() - last_log >= PROGRESS_LOG_SECONDS:
                    logging.info("Planning: %d blocks in the first %.0f MB", len(blocks),
                                 (scanned_bytes + offset) / 1e6)
                    last_log = time.time()
                block_size += len(line)
                blank = not line.strip()
                if input_format == "text":
                    if not blank:
                        in_document = block_has_document = True
                        continue
                    if in_document:
                        file_documents += 1
                        block_documents += 1
                        in_document = False
                elif not blank:
                    file_documents += 1
                    block_documents += 1
                    block_has_document = True
                if block_has_document and block_size >= budget:
                    segments.append(Segment(path, segment_start, offset, segment_line))
                    blocks.append(Block(len(blocks), tuple(segments), block_documents))
                    segments, block_size, block_documents, block_has_document = [], 0, 0, False
                    segment_start, segment_line = offset, line_number + 1
        if in_document:
            file_documents += 1
            block_documents += 1
        if file_documents == 0:
            raise ValueError(f"Input file {path!r} holds no documents: it is empty or blank.")
        if offset > segment_start:
            segments.append(Segment(path, segment_start, offset, segment_line))
        scanned_bytes += offset
    if segments and block_has_document:
        blocks.append(Block(len(blocks), tuple(segments), block_documents))
    elif segments and blocks:
        blocks[-1] = Block(blocks[-1].index, blocks[-1].segments + tuple(segments),
                           blocks[-1].num_documents + block_documents)
    return blocks


def plan_shards(input_files: Sequence[str], input_format: str, block_bytes: int,
                output_files: Sequence[str]) -> List[List[Block]]:
    """The blocks of each output shard: block b goes to shard b % len(output_files), in ascending order."""
    logging.info("Planning blocks over %d input file(s) for %d shard(s)", len(input_files), len(output_files))
    blocks = plan_blocks(input_files, input_format, block_bytes, len(output_files))
    logging.info("Planned %d blocks (%.1f MB of text)", len(blocks), sum(block.num_bytes for block in blocks) / 1e6)
    shard_blocks = [blocks[shard::len(output_files)] for shard in range(len(output_files))]
    empty_shards = [output_files[shard] for shard, assigned in enumerate(shard_blocks) if not assigned]
    if empty_shards:
        logging.warning("%d shard(s) get no documents (the input has %d document blocks): %s",
                        len(empty_shards), len(blocks), ", ".join(empty_shards[:5]))
    _warn_of_small_blocks(blocks, len(output_files))
    return shard_blocks


def _warn_of_small_blocks(blocks: Sequence[Block], num_shards: int) -> None:
    """Warns when splitting the input so that every shard gets a block left blocks of few documents."""
    total_documents = sum(block.num_documents for block in blocks)
    small = [block for block in blocks if block.num_documents < _FEW_DOCUMENTS_PER_BLOCK]
    if len(blocks) > 1 and small and total_documents >= _FEW_DOCUMENTS_PER_BLOCK:
        logging.warning(
            "%d of %d blocks hold fewer than %d documents (the fewest: %d), because the input's %d documents are "
            "split so that each of the %d output shards gets a block. Segment B of a one-segment chunk (and "
            "with random_next_sentence any random B) comes from another document of the same block, or from "
            "the same document in a block of one; write fewer output shards to draw from more documents.",
            len(small), len(blocks), _FEW_DOCUMENTS_PER_BLOCK, min(block.num_documents for block in small),
            total_documents, num_shards)
