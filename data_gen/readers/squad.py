"""SQuAD v1.1 / v2.0: readers (the official JSON, tensorflow-datasets) and model features.

Feature semantics follow google-research/albert `squad_utils.convert_examples_to_features`:
`[CLS] question [SEP] document span [SEP]` padded to max_seq_length; the question is truncated to its
first max_query_length pieces; long documents are cut into spans of at most
`max_seq_length - len(question) - 3` pieces that start `doc_stride` pieces apart; a piece that several
spans hold counts only in the span where it has the most context (`max_context_spans`); p_mask is 1 on the
question, both [SEP]s and the padding and 0 on [CLS] (the v2 null answer) and the document. A training
span that does not hold the whole answer gets start = end = 0 (the [CLS] position) and counts as impossible.

Character alignment. The original matches the normalised pieces back to the raw context with an
approximate longest-common-subsequence search (and drops an example when that match is poor). Here the
alignment is exact instead: the normalisation of `preprocess_text` (whitespace collapse, NFKD, combining
marks dropped, lowercasing) is applied one raw character at a time, remembering where each normalised
character came from, and SentencePiece's own offsets place each piece in the normalised text; the
digit-comma re-split of `encode_pieces` ("1990," -> "1990", ",") keeps the offsets of the piece it
splits. Every piece therefore knows the first and last raw context character it covers, and an answer is
recovered as `context[first:last + 1]`, accents, case and punctuation as written.
"""

import collections
import dataclasses
import functools
import json
import os
import random
import time
import unicodedata
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import sentencepiece as spm
import tensorflow as tf
from absl import logging

from albert_tf.tokenization import SPIECE_UNDERLINE, AlbertTokenizer, drops_added_marker, preprocess_text
from data_gen.readers import feature_cache

TFDS_PREFIX = "tfds:"
TFDS_NAMES = ("squad/v1.1", "squad/v2.0")
FIRST_UNIQUE_ID = 1000000000
# The original shuffles the training examples with this seed before making features.
TRAIN_SHUFFLE_SEED = 12345
_LOG_EVERY_EXAMPLES = 5000
MODEL_BATCH_NAMES = ("unique_ids", "input_word_ids", "input_mask", "input_type_ids", "p_mask", "start_positions",
                     "end_positions", "is_impossible")


@dataclasses.dataclass
class SquadExample:
    """One question about one paragraph.

    `answer_texts` holds every gold answer (empty for a v2.0 question without answer) and is what the
    evaluation scores against. For training, `answer_text` / `answer_start` is the one answer trained on
    (the original requires exactly one) and `answer_start` is -1 for an impossible question.
    """

    qas_id: str
    question_text: str
    paragraph_text: str
    answer_texts: List[str]
    answer_text: str = ""
    answer_start: int = -1
    is_impossible: bool = False


@dataclasses.dataclass
class SquadFeature:
    """One document span of one example, as model inputs plus what post-processing needs.

    Sequence-shaped lists have max_seq_length entries. `token_start_char` / `token_end_char` give, at each
    document position, the first and last context character the piece covers (-1 elsewhere), and
    `token_is_max_context` is 1 where this span is the piece's max-context span. `start_position` /
    `end_position` (training only) index the sequence.
    """

    unique_id: int
    example_index: int
    doc_span_index: int
    input_ids: List[int]
    input_mask: List[int]
    segment_ids: List[int]
    p_mask: List[int]
    token_start_char: List[int]
    token_end_char: List[int]
    token_is_max_context: List[int]
    start_position: int = 0
    end_position: int = 0
    is_impossible: bool = False


@dataclasses.dataclass
class ConversionStats:
    """Counts from `convert_examples_to_features`; `skipped_ids` lists the first skipped question ids."""

    num_examples: int = 0
    num_features: int = 0
    num_positive: int = 0
    num_negative: int = 0
    num_skipped: int = 0
    skipped_ids: List[str] = dataclasses.field(default_factory=list)


# ---- reading ---------------------------------------------------------------------------------------

def read_squad_examples(source: str, is_training: bool, tfds_data_dir: Optional[str] = None) -> List[SquadExample]:
    """Examples from a SQuAD JSON file, or from `tfds:squad/v1.1:<split>` / `tfds:squad/v2.0:<split>`.

    A tensorflow-datasets source must already be prepared under `tfds_data_dir` (or the default data
    directory); nothing is downloaded. Splits are "train" and "validation" and take tfds slicing, e.g.
    `tfds:squad/v2.0:train[:5%]`.

    Example:
    >>> examples = read_squad_examples("dev-v1.1.json", is_training=False)  # doctest: +SKIP
    >>> examples[0].answer_texts  # doctest: +SKIP
    ['Denver Broncos', 'Denver Broncos', 'Denver Broncos']
    """
    if source.startswith(TFDS_PREFIX):
        name, split = parse_tfds_source(source)
        return _read_tfds(name, split, is_training, tfds_data_dir, source)
    with tf.io.gfile.GFile(source, "r") as reader:
        try:
            data = json.load(reader)
        except json.JSONDecodeError as error:
            raise ValueError(f"SQuAD file {source!r} is not valid JSON: {error}.") from error
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise ValueError(f"SQuAD file {source!r} has no top-level \"data\" list; expected the official SQuAD "
                         "JSON layout {\"data\": [{\"paragraphs\": [{\"context\", \"qas\"}]}]}.")
    examples = []
    try:
        for article in data["data"]:
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    answers = qa.get("answers", [])
                    examples.append(_make_example(
                        qas_id=str(qa["id"]), question=qa["question"], context=paragraph["context"],
                        answer_texts=[answer["text"] for answer in answers],
                        answer_starts=[answer["answer_start"] for answer in answers],
                        is_impossible=bool(qa.get("is_impossible", False)), is_training=is_training,
                        source=source))
    except KeyError as error:
        raise ValueError(f"SQuAD file {source!r} lacks the key {error} after {len(examples)} questions; each "
                         "paragraph needs \"context\" and \"qas\", each question \"id\", \"question\" and "
                         "\"answers\" with \"text\" and \"answer_start\".") from None
    _check_unique_ids(examples, source)
    return examples


def parse_tfds_source(source: str) -> Tuple[str, str]:
    """Splits "tfds:squad/v2.0:validation" into ("squad/v2.0", "validation"), checking the name."""
    name, separator, split = source[len(TFDS_PREFIX):].partition(":")
    if name not in TFDS_NAMES or not separator or not split:
        raise ValueError(f"SQuAD source {source!r} is not a tensorflow-datasets source of the form "
                         f"tfds:<name>:<split> with name one of {', '.join(TFDS_NAMES)}, e.g. "
                         "tfds:squad/v2.0:validation.")
    return name, split


def _read_tfds(name, split, is_training, data_dir, source):
    import tensorflow_datasets as tfds  # Only this input path needs it; importing it is slow.

    try:
        dataset = tfds.load(name, split=split, data_dir=data_dir, download=False)
    except (AssertionError, FileNotFoundError, tfds.core.registered.DatasetNotFoundError) as error:
        raise FileNotFoundError(f"tensorflow-datasets {name!r} (split {split!r}) from {source!r} is not prepared "
                                f"in {data_dir or 'the default data directory'}; prepare it with `tfds build "
                                f"{name}` where there is network access (nothing is downloaded here): "
                                f"{error}") from error
    examples = []
    for record in tfds.as_numpy(dataset):
        answers = record["answers"]
        examples.append(_make_example(
            qas_id=_text(record["id"]), question=_text(record["question"]), context=_text(record["context"]),
            answer_texts=[_text(text) for text in answers["text"]],
            answer_starts=[int(start) for start in answers["answer_start"]],
            is_impossible=bool(record.get("is_impossible", False)), is_training=is_training, source=source))
    _check_unique_ids(examples, source)
    return examples


def _text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _make_example(*, qas_id, question, context, answer_texts, answer_starts, is_impossible, is_training, source):
    example = SquadExample(qas_id=qas_id, question_text=question, paragraph_text=context,
                           answer_texts=[] if is_impossible else list(answer_texts), is_impossible=is_impossible)
    if is_training and not is_impossible:
        if len(answer_texts) != 1:
            raise ValueError(f"Training question {qas_id!r} in {source!r} has {len(answer_texts)} answers; a "
                             "training question needs exactly one answer, or is_impossible=true.")
        example.answer_text = answer_texts[0]
        example.answer_start = int(answer_starts[0])
    return example


def _check_unique_ids(examples, source):
    counts = collections.Counter(example.qas_id for example in examples)
    repeated = [qas_id for qas_id, count in counts.items() if count > 1]
    if repeated:
        raise ValueError(f"Question id {repeated[0]!r} appears {counts[repeated[0]]} times in {source!r} "
                         f"({len(repeated)} repeated id(s)); predictions are keyed by id, so ids must be unique.")


def gold_answers(examples: Iterable[SquadExample]) -> Dict[str, List[str]]:
    """question id -> gold answer texts (empty for a question without answer), what evaluation scores."""
    return {example.qas_id: list(example.answer_texts) for example in examples}


# ---- character alignment ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ParagraphTokens:
    """A paragraph's pieces and where they lie in the raw text.

    `piece_start_char[i]` / `piece_end_char[i]`: first and last raw character piece i covers (a piece made
    only of a word-start marker gets an empty range, end = start - 1). `char_first_piece[c]` /
    `char_last_piece[c]`: the first and last piece raw character c contributes to, -1 for whitespace and
    characters the normalisation removes. `space_piece[c]`: for the whitespace character that a word-start
    marker stands for, that marker's piece (the next word's first piece, or a piece of the marker alone);
    -1 for every other character.
    """

    pieces: List[str]
    piece_start_char: List[int]
    piece_end_char: List[int]
    char_first_piece: List[int]
    char_last_piece: List[int]
    space_piece: List[int]


def normalize_with_alignment(text: str, lower: bool = True) -> Tuple[str, List[int]]:
    """`preprocess_text(text, lower)` and, for each of its characters, the index of the raw character it came from.

    Example:
    >>> normalize_with_alignment("  Café  X")
    ('cafe x', [2, 3, 4, 5, 6, 8])
    """
    characters, origins = [], []
    pending_space = None
    seen_word = False
    for index, character in enumerate(text):
        if character.isspace():
            if seen_word and pending_space is None:
                pending_space = index
            continue
        seen_word = True
        if pending_space is not None:
            characters.append(" ")
            origins.append(pending_space)
            pending_space = None
        for part in unicodedata.normalize("NFKD", character):
            if not unicodedata.combining(part):
                characters.append(part)
                origins.append(index)
    normalized = "".join(characters)
    if lower:
        # Lowercasing the whole string keeps the final-sigma rule; after NFKD it never changes the length.
        normalized = normalized.lower()
    expected = preprocess_text(text, lower=lower)
    if normalized != expected or len(origins) != len(normalized):
        raise ValueError(f"Character alignment failed for the text starting {text[:60]!r}: the character-wise "
                         f"normalisation gives {normalized[:60]!r} but preprocess_text gives {expected[:60]!r}.")
    return normalized, origins


class _PieceAligner:
    """SentencePiece pieces with offsets, for one tokenizer; caches the last paragraphs it aligned."""

    def __init__(self, tokenizer: AlbertTokenizer):
        if not tokenizer.uses_sentencepiece:
            raise ValueError(f"SQuAD features need a SentencePiece model (--spm_model_file); the tokenizer reads "
                             f"the WordPiece vocabulary {tokenizer.vocab_file!r}.")
        self._tokenizer = tokenizer
        self._sp_model = spm.SentencePieceProcessor(model_file=tokenizer.spm_model_file)
        self.align = functools.lru_cache(maxsize=64)(self._align)

    def _pieces_with_spans(self, normalized: str) -> List[Tuple[str, int, int]]:
        """encode_pieces with [begin, end) character spans in `normalized`."""
        encoded = self._sp_model.encode(normalized, return_type="offset_mapping")
        spans = []
        for piece, (begin, end) in zip(encoded["pieces"], encoded["offsets"]):
            if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
                spans.extend(self._split_digit_comma(piece, begin, end, normalized))
            else:
                spans.append((piece, begin, end))
        return spans

    def _split_digit_comma(self, piece, begin, end, normalized):
        text = piece.replace(SPIECE_UNDERLINE, "")
        # Each character of the piece where it stands in the span: SentencePiece's normaliser drops some
        # characters (zero-width spaces, byte-order marks, controls) that the span still covers.
        positions, position = [], begin
        for character in text:
            while position < end and normalized[position] != character:
                position += 1
            if position == end:
                raise ValueError(f"Piece {piece!r} does not match its text {normalized[begin:end]!r} in the "
                                 f"paragraph starting {normalized[:60]!r}.")
            positions.append(position)
            position += 1
        encoded = self._sp_model.encode(text[:-1], return_type="offset_mapping")
        sub_spans = []
        for sub_piece, (sub_begin, sub_end) in zip(encoded["pieces"], encoded["offsets"]):
            if sub_end > sub_begin:
                sub_spans.append((sub_piece, positions[sub_begin], positions[sub_end - 1] + 1))
            else:
                sub_spans.append((sub_piece, positions[sub_begin], positions[sub_begin]))
        first_piece, first_begin, first_end = sub_spans[0]
        if drops_added_marker(piece, [first_piece], self._tokenizer.digit_comma_rule):
            sub_spans = sub_spans[1:] if len(first_piece) == 1 else [(first_piece[1:], first_begin, first_end)] + \
                sub_spans[1:]
        # The first sub-piece also covers the word-start space before it (" 45," of "▁45,"), as SentencePiece's
        # own offsets do: a training answer that ends in that space ends at this sub-piece.
        first_piece, first_begin, first_end = sub_spans[0]
        while first_begin > begin and normalized[first_begin - 1].isspace():
            first_begin -= 1
        sub_spans[0] = (first_piece, first_begin, first_end)
        return sub_spans + [(",", positions[-1], positions[-1] + 1)]

    def _align(self, text: str) -> ParagraphTokens:
        normalized, origins = normalize_with_alignment(text, lower=self._tokenizer.do_lower_case)
        spans = self._pieces_with_spans(normalized)
        pieces = [piece for piece, _, _ in spans]
        expected = self._tokenizer.tokenize_normalized(normalized)
        if pieces != expected:
            raise ValueError(f"Piece alignment disagrees with the tokenizer on the paragraph starting {text[:60]!r}: "
                             f"{pieces[:12]} vs {expected[:12]}.")
        char_first_piece = [-1] * len(text)
        char_last_piece = [-1] * len(text)
        space_piece = [-1] * len(text)
        piece_start_char, piece_end_char = [], []
        for piece_index, (_, begin, end) in enumerate(spans):
            content = [position for position in range(begin, end) if not normalized[position].isspace()]
            covered = content or list(range(begin, end))
            if covered:
                piece_start_char.append(origins[covered[0]])
                piece_end_char.append(origins[covered[-1]])
            else:
                start = origins[begin] if begin < len(origins) else len(text)
                piece_start_char.append(start)
                piece_end_char.append(start - 1)
            for position in content:
                character = origins[position]
                if char_first_piece[character] < 0:
                    char_first_piece[character] = piece_index
                char_last_piece[character] = piece_index
            for position in range(begin, end):
                if normalized[position].isspace() and space_piece[origins[position]] < 0:
                    space_piece[origins[position]] = piece_index
        return ParagraphTokens(pieces=pieces, piece_start_char=piece_start_char, piece_end_char=piece_end_char,
                               char_first_piece=char_first_piece, char_last_piece=char_last_piece,
                               space_piece=space_piece)


def align_paragraph(tokenizer: AlbertTokenizer, text: str) -> ParagraphTokens:
    """The pieces of `text` (as `tokenizer.tokenize` gives them) with their raw character ranges.

    Example:
    >>> tokens = align_paragraph(AlbertTokenizer(spm_model_file="30k-clean.model"), "Café, 1990,")  # doctest: +SKIP
    >>> [("Café, 1990,"[s:e + 1]) for s, e in zip(tokens.piece_start_char, tokens.piece_end_char)]  # doctest: +SKIP
    ['Café', ',', '1990', ',']
    """
    return _PieceAligner(tokenizer).align(text)


def answer_piece_span(tokens: ParagraphTokens, paragraph_text: str, answer_text: str,
                      answer_start: int) -> Optional[Tuple[int, int]]:
    """(first piece, last piece) of a training answer, or None when the text does not match its offsets.

    The answer must equal `paragraph_text[answer_start:answer_start + len(answer_text)]` up to whitespace
    (the check BERT's reader makes) and cover at least one piece. A space at either end of the answer counts
    as the word-start marker it became, as the original's character alignment counts it: "Broncos " ends at
    the next word's first piece.
    """
    answer_end = answer_start + len(answer_text) - 1
    if not answer_text.strip() or answer_start < 0 or answer_end >= len(paragraph_text):
        return None
    if " ".join(paragraph_text[answer_start:answer_end + 1].split()) != " ".join(answer_text.split()):
        return None
    first = next((tokens.char_first_piece[c] for c in range(answer_start, answer_end + 1)
                  if tokens.char_first_piece[c] >= 0), None)
    last = next((tokens.char_last_piece[c] for c in range(answer_end, answer_start - 1, -1)
                 if tokens.char_last_piece[c] >= 0), None)
    if first is None or last is None:
        return None
    if tokens.space_piece[answer_start] >= 0:
        first = tokens.space_piece[answer_start]
    if tokens.space_piece[answer_end] >= 0:
        last = tokens.space_piece[answer_end]
    return first, last


# ---- features --------------------------------------------------------------------------------------

def doc_spans(num_tokens: int, max_tokens_per_span: int, doc_stride: int) -> List[Tuple[int, int]]:
    """(start, length) sliding windows over a document, as the original cuts them.

    Example:
    >>> doc_spans(10, 4, 3)
    [(0, 4), (3, 4), (6, 4)]
    """
    spans = []
    start = 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens_per_span)
        spans.append((start, length))
        if start + length == num_tokens:
            break
        start += min(length, doc_stride)
    return spans


def max_context_spans(spans: Sequence[Tuple[int, int]], num_tokens: int) -> List[int]:
    """For each document token, the span that gives it the most context (the original's _check_is_max_context).

    A token's context in a span is min(left, right) + 0.01 * span length; the first best span wins ties.

    Example:
    >>> max_context_spans([(0, 4), (3, 4)], 7)
    [0, 0, 0, 0, 1, 1, 1]
    """
    best_scores = [None] * num_tokens
    best_spans = [-1] * num_tokens
    for index, (start, length) in enumerate(spans):
        end = start + length - 1
        for position in range(start, end + 1):
            score = min(position - start, end - position) + 0.01 * length
            if best_scores[position] is None or score > best_scores[position]:
                best_scores[position], best_spans[position] = score, index
    return best_spans


def check_lengths(max_seq_length: int, doc_stride: int, max_query_length: int) -> None:
    """Raises ValueError unless the three lengths leave room for a document (the original's check)."""
    if max_seq_length <= max_query_length + 3:
        raise ValueError(f"max_seq_length ({max_seq_length}) must be greater than max_query_length "
                         f"({max_query_length}) + 3, to leave room for [CLS], two [SEP]s and the document.")
    if doc_stride < 1:
        raise ValueError(f"doc_stride must be a positive number of pieces, got {doc_stride}.")


def convert_examples_to_features(examples: Sequence[SquadExample], tokenizer: AlbertTokenizer, *,
                                 max_seq_length: int, doc_stride: int, max_query_length: int, is_training: bool,
                                 stats: Optional[ConversionStats] = None) -> Iterator[SquadFeature]:
    """Yields the features of `examples` in order; `stats` (if given) is filled in as they are made.

    A training answer whose text does not match its offsets is skipped and counted in `stats`
    (`num_skipped`, `skipped_ids`); evaluation examples are never skipped.

    Example:
    >>> tokenizer = AlbertTokenizer(spm_model_file="30k-clean.model")  # doctest: +SKIP
    >>> example = SquadExample("q1", "Who?", "Ann met Bob.", ["Bob"], "Bob", 8)
    >>> features = list(convert_examples_to_features([example], tokenizer, max_seq_length=32, doc_stride=8,
    ...                                              max_query_length=8, is_training=True))  # doctest: +SKIP
    """
    check_lengths(max_seq_length, doc_stride, max_query_length)
    stats = stats if stats is not None else ConversionStats()
    aligner = _PieceAligner(tokenizer)
    unique_id = FIRST_UNIQUE_ID
    started = time.time()
    for example_index, example in enumerate(examples):
        if example_index and example_index % _LOG_EVERY_EXAMPLES == 0:
            rate = example_index / max(time.time() - started, 1e-9)
            logging.info("SQuAD features: %d/%d examples, %d features (%d positive, %d negative), %.0f examples/s, "
                         "ETA %.0f s", example_index, len(examples), stats.num_features, stats.num_positive,
                         stats.num_negative, rate, (len(examples) - example_index) / rate)
        stats.num_examples += 1
        query_ids = tokenizer.encode(example.question_text)[:max_query_length]
        tokens = aligner.align(example.paragraph_text)
        answer_span = None
        if is_training and not example.is_impossible:
            answer_span = answer_piece_span(tokens, example.paragraph_text, example.answer_text,
                                            example.answer_start)
            if answer_span is None:
                stats.num_skipped += 1
                if len(stats.skipped_ids) < 5:
                    stats.skipped_ids.append(example.qas_id)
                continue
        doc_ids = tokenizer.convert_tokens_to_ids(tokens.pieces)
        spans = doc_spans(len(doc_ids), max_seq_length - len(query_ids) - 3, doc_stride)
        best_spans = max_context_spans(spans, len(doc_ids))
        for span_index, span in enumerate(spans):
            feature = _make_feature(tokenizer, example, example_index, unique_id, span_index, best_spans, span,
                                    query_ids, doc_ids, tokens, answer_span, max_seq_length, is_training)
            unique_id += 1
            stats.num_features += 1
            if feature.is_impossible:
                stats.num_negative += 1
            else:
                stats.num_positive += 1
            yield feature


def _make_feature(tokenizer, example, example_index, unique_id, span_index, best_spans, span, query_ids, doc_ids,
                  tokens, answer_span, max_seq_length, is_training):
    span_start, span_length = span
    doc_offset = len(query_ids) + 2
    input_ids = [tokenizer.cls_id] + query_ids + [tokenizer.sep_id] + doc_ids[span_start:span_start + span_length] + \
        [tokenizer.sep_id]
    segment_ids = [0] * doc_offset + [1] * (span_length + 1)
    p_mask = [0] + [1] * (len(query_ids) + 1) + [0] * span_length + [1]
    padding = max_seq_length - len(input_ids)
    span_end = span_start + span_length
    token_start_char = [-1] * doc_offset + tokens.piece_start_char[span_start:span_end] + [-1] * (padding + 1)
    token_end_char = [-1] * doc_offset + tokens.piece_end_char[span_start:span_end] + [-1] * (padding + 1)
    token_is_max_context = [0] * doc_offset + [int(best == span_index) for best in best_spans[span_start:span_end]] \
        + [0] * (padding + 1)
    feature = SquadFeature(
        unique_id=unique_id, example_index=example_index, doc_span_index=span_index,
        input_ids=input_ids + [0] * padding, input_mask=[1] * len(input_ids) + [0] * padding,
        segment_ids=segment_ids + [0] * padding, p_mask=p_mask + [1] * padding,
        token_start_char=token_start_char, token_end_char=token_end_char,
        token_is_max_context=token_is_max_context, is_impossible=example.is_impossible)
    if is_training and answer_span is not None:
        first, last = answer_span
        if span_start <= first and last < span_start + span_length:
            feature.start_position = first - span_start + doc_offset
            feature.end_position = last - span_start + doc_offset
        else:
            feature.is_impossible = True
    return feature


def shuffled_training_examples(examples: Sequence[SquadExample]) -> List[SquadExample]:
    """The examples in the order the original trains on them: shuffled with random.Random(12345)."""
    shuffled = list(examples)
    random.Random(TRAIN_SHUFFLE_SEED).shuffle(shuffled)
    return shuffled


# ---- cached features -------------------------------------------------------------------------------

def feature_spec(max_seq_length: int, is_training: bool) -> Dict[str, tf.TensorSpec]:
    """The cached feature layout, under the model's input names.

    Both: unique_ids, input_word_ids, input_mask, input_type_ids, p_mask. Training adds start_positions,
    end_positions and is_impossible (the original's labels); evaluation adds question_index,
    token_start_char, token_end_char and token_is_max_context, what post-processing needs.
    """
    sequence = tf.TensorSpec([max_seq_length], tf.int32)
    scalar = tf.TensorSpec([], tf.int32)
    spec = {"unique_ids": scalar, "input_word_ids": sequence, "input_mask": sequence, "input_type_ids": sequence,
            "p_mask": sequence}
    if is_training:
        spec.update(start_positions=scalar, end_positions=scalar, is_impossible=scalar)
    else:
        spec.update(question_index=scalar, token_start_char=sequence, token_end_char=sequence,
                    token_is_max_context=sequence)
    return spec


def feature_values(feature: SquadFeature, is_training: bool) -> Dict[str, object]:
    """`feature` as the dict `feature_spec` describes."""
    values = {"unique_ids": feature.unique_id, "input_word_ids": feature.input_ids, "input_mask": feature.input_mask,
              "input_type_ids": feature.segment_ids, "p_mask": feature.p_mask}
    if is_training:
        values.update(start_positions=feature.start_position, end_positions=feature.end_position,
                      is_impossible=int(feature.is_impossible))
    else:
        values.update(question_index=feature.example_index, token_start_char=feature.token_start_char,
                      token_end_char=feature.token_end_char, token_is_max_context=feature.token_is_max_context)
    return values


def load_features(source: str, examples: Sequence[SquadExample], tokenizer: AlbertTokenizer, *, max_seq_length: int,
                  doc_stride: int, max_query_length: int, is_training: bool,
                  cached_dir: str) -> feature_cache.CachedFeatures:
    """The cached features of `examples` (read from `source`), built when no complete cache matches.

    The cache is keyed by the content of `source` (of the examples, for tensorflow-datasets), the
    tokenizer and the three lengths. Training features are made from the examples in the original's
    shuffled order (`shuffled_training_examples`); skipped training answers are counted in a warning.

    Example:
    >>> examples = read_squad_examples("train-v2.0.json", is_training=True)  # doctest: +SKIP
    >>> features = load_features("train-v2.0.json", examples, tokenizer, max_seq_length=384, doc_stride=128,
    ...                          max_query_length=64, is_training=True, cached_dir="/tmp/cache")  # doctest: +SKIP
    """
    check_lengths(max_seq_length, doc_stride, max_query_length)
    if source.startswith(TFDS_PREFIX):
        fingerprint = feature_cache.records_fingerprint(dataclasses.asdict(example) for example in examples)
    else:
        fingerprint = feature_cache.files_fingerprint([source])
    params = {"max_seq_length": max_seq_length, "doc_stride": doc_stride, "max_query_length": max_query_length,
              "is_training": is_training, "train_shuffle_seed": TRAIN_SHUFFLE_SEED}
    key = feature_cache.cache_key("squad", fingerprint, tokenizer, params)

    def make_features():
        ordered = shuffled_training_examples(examples) if is_training else examples
        stats = ConversionStats()
        for feature in convert_examples_to_features(ordered, tokenizer, max_seq_length=max_seq_length,
                                                    doc_stride=doc_stride, max_query_length=max_query_length,
                                                    is_training=is_training, stats=stats):
            yield feature_values(feature, is_training)
        logging.info("SQuAD features of %s: %d examples -> %d features (%d with an answer in the span, %d "
                     "without).", source, stats.num_examples, stats.num_features, stats.num_positive,
                     stats.num_negative)
        if stats.num_skipped:
            logging.warning("Skipped %d of %d training questions in %s whose answer text does not match its "
                            "offsets in the context (first: %s).", stats.num_skipped, stats.num_examples, source,
                            ", ".join(stats.skipped_ids))

    name = "squad_{}_{}".format("train" if is_training else "eval", _file_stem(source))
    return feature_cache.load_or_build(cached_dir, name, key, feature_spec(max_seq_length, is_training),
                                       make_features)


def _file_stem(source):
    stem = source[len(TFDS_PREFIX):] if source.startswith(TFDS_PREFIX) else os.path.basename(source)
    return "".join(character if character.isalnum() or character in "-." else "_" for character in stem)


def model_batch(features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """Cached features -> what the models, losses and predictions read (p_mask as float32).

    Keeps unique_ids, the encoder inputs, p_mask and the training labels; drops the alignment arrays,
    which post-processing reads with `FeatureAlignment.from_cached` instead.
    """
    batch = {name: features[name] for name in MODEL_BATCH_NAMES if name in features}
    batch["p_mask"] = tf.cast(batch["p_mask"], tf.float32)
    return batch


@dataclasses.dataclass
class FeatureAlignment:
    """What post-processing needs of every evaluation feature, as arrays (row i = feature i).

    unique_ids, example_index: [N]; token_start_char, token_end_char, token_is_max_context: [N, S].
    A document position has token_start_char >= 0.
    """

    unique_ids: np.ndarray
    example_index: np.ndarray
    token_start_char: np.ndarray
    token_end_char: np.ndarray
    token_is_max_context: np.ndarray

    @classmethod
    def from_features(cls, features: Sequence[SquadFeature]) -> "FeatureAlignment":
        return cls(unique_ids=np.array([f.unique_id for f in features], np.int64),
                   example_index=np.array([f.example_index for f in features], np.int64),
                   token_start_char=np.array([f.token_start_char for f in features], np.int64),
                   token_end_char=np.array([f.token_end_char for f in features], np.int64),
                   token_is_max_context=np.array([f.token_is_max_context for f in features], np.int64))

    @classmethod
    def from_cached(cls, features: feature_cache.CachedFeatures, batch_size: int = 1024) -> "FeatureAlignment":
        """Reads the alignment of cached evaluation features (`load_features(..., is_training=False)`)."""
        names = {"unique_ids": "unique_ids", "question_index": "example_index",
                 "token_start_char": "token_start_char", "token_end_char": "token_end_char",
                 "token_is_max_context": "token_is_max_context"}
        missing = [name for name in names if name not in features.feature_spec]
        if missing:
            raise ValueError(f"Features {features.path!r} lack {missing}: they are training features, not "
                             "evaluation features.")
        columns = {field: [] for field in names.values()}
        dataset = features.dataset().map(lambda values: {name: values[name] for name in names})
        for batch in dataset.batch(batch_size).as_numpy_iterator():
            for name, field in names.items():
                columns[field].append(batch[name].astype(np.int64))
        sequence_length = features.feature_spec["token_start_char"].shape[0]
        return cls(**{field: np.concatenate(parts) if parts else
                      np.zeros((0,) if field in ("unique_ids", "example_index") else (0, sequence_length), np.int64)
                      for field, parts in columns.items()})
