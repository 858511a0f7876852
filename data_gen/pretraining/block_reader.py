"""Reading a block of the input into tokenized documents, as the original create_pretraining_data reads its input.

The text format is one sentence per line with a blank line between documents (the end of a block also ends a
document); JSON lines hold a document per line, its text field split into sentences at line breaks. Undecodable
bytes are replaced by U+FFFD and counted; the original failed on them.

Example:
>>> stats = collections.Counter()
>>> decode_utf8(b"caf\\xc3\\xa9 \\xff!", stats), stats["undecodable_bytes"]
('café \ufffd!', 1)
"""

import collections
import dataclasses
import json
from typing import BinaryIO, Callable, Dict, List

from albert_tf.tokenization import AlbertTokenizer, gfile_lines
from data_gen.pretraining.blocks import Block, Segment, gfile_open_for_reading
from data_gen.pretraining.instances import is_start_piece_sentencepiece, is_start_piece_wordpiece, pack_token


@dataclasses.dataclass
class BlockReader:
    """Reads a block's documents (text or JSON lines) as sentences of packed tokens (`instances.pack_token`).

    Sentences are normalised and tokenized as the original reads them; `stats` counts the documents, sentences,
    tokens and undecodable bytes read. `open_for_reading` opens a path for reading bytes (tf.io.gfile's by
    default; the Beam workers give Beam's FileSystems).
    """

    tokenizer: AlbertTokenizer
    input_format: str
    json_text_field: str
    open_for_reading: Callable[[str], BinaryIO] = gfile_open_for_reading
    start_piece_cache: Dict[str, bool] = dataclasses.field(default_factory=dict)

    def read(self, block: Block, stats: collections.Counter) -> List[List[List[int]]]:
        documents: List[List[List[int]]] = []
        for segment in block.segments:
            with self.open_for_reading(segment.path) as handle:
                handle.seek(segment.start)
                data = handle.read(segment.end - segment.start)
            if self.input_format == "text":
                self._read_text(data, documents, stats)
            else:
                self._read_json_lines(data, segment, documents, stats)
        stats["documents"] += len(documents)
        return documents

    def _read_text(self, data: bytes, documents: list, stats: collections.Counter) -> None:
        # "\r\n" and "\r\r\n" endings read as "\n", and a bare "\r" joins the text around it.
        document: List[List[int]] = []
        for raw_line in gfile_lines(data):
            sentence = self.tokenizer.normalize(decode_utf8(raw_line, stats))
            if not sentence:
                if document:
                    documents.append(document)
                document = []
                continue
            self._append_sentence(sentence, document, stats)
        if document:
            documents.append(document)

    def _read_json_lines(self, data: bytes, segment: Segment, documents: list, stats: collections.Counter) -> None:
        for line_offset, raw_line in enumerate(_split_lines(data)):
            line = decode_utf8(raw_line, stats)
            if not line.strip():
                continue
            where = f"{segment.path}:{segment.first_line + line_offset}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{where} is not a JSON object ({error.msg}); JSON lines input needs one "
                                 "object per line.") from None
            text = record.get(self.json_text_field) if isinstance(record, dict) else None
            if not isinstance(text, str):
                found = f"its fields: {sorted(record)}" if isinstance(record, dict) else type(record).__name__
                raise ValueError(f"{where} has no string field {self.json_text_field!r} (--json_text_field); "
                                 f"{found}.")
            document: List[List[int]] = []
            for sentence_line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
                sentence = self.tokenizer.normalize(sentence_line)
                if sentence:
                    self._append_sentence(sentence, document, stats)
            if document:
                documents.append(document)

    def _append_sentence(self, sentence: str, document: list, stats: collections.Counter) -> None:
        pieces = self.tokenizer.tokenize_normalized(sentence)
        if not pieces:
            return
        ids = self.tokenizer.convert_tokens_to_ids(pieces)
        document.append([pack_token(token_id, self._is_start_piece(piece)) for token_id, piece in zip(ids, pieces)])
        stats["sentences"] += 1
        stats["tokens"] += len(pieces)

    def _is_start_piece(self, piece: str) -> bool:
        cached = self.start_piece_cache.get(piece)
        if cached is None:
            rule = is_start_piece_sentencepiece if self.tokenizer.uses_sentencepiece else is_start_piece_wordpiece
            cached = self.start_piece_cache[piece] = rule(piece)
        return cached


def _split_lines(data: bytes) -> List[bytes]:
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    return lines


def decode_utf8(data: bytes, stats: collections.Counter) -> str:
    """UTF-8 with each undecodable byte run replaced by U+FFFD (as errors="replace"), counting the bytes."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    pieces, position = [], 0
    while True:
        try:
            pieces.append(data[position:].decode("utf-8"))
            return "".join(pieces)
        except UnicodeDecodeError as error:
            pieces.append(data[position:position + error.start].decode("utf-8"))
            pieces.append("\ufffd")
            stats["undecodable_bytes"] += error.end - error.start
            position += error.end
