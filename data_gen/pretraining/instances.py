"""The original ALBERT pretraining-instance rules, reproduced from google-research/albert create_pretraining_data.py.

`create_instances_from_document`, `create_masked_lm_predictions` and `truncate_seq_pair` draw from `rng` in
the same order as the original. The original draws the n-gram length from the unseeded global numpy RNG;
here it comes from a second seeded `random.Random` (`ngram_rng`), by the same inverse-CDF rule as
`np.random.choice`, so output is reproducible. The original's `do_permutation` branch (off by default,
never used for the released models) is not reproduced; the second shuffle of the n-gram list that only
that branch reads is, because the original draws it whatever the flag says.

A token travels as one int, `token_id << 1 | is_start_piece`, so chunking and truncation move the id and its
whole-word flag together.
"""

import bisect
import dataclasses
import functools
import random
import struct
from typing import List, NamedTuple, Sequence, Tuple

# The original's `_is_start_piece_sp`: ASCII punctuation pieces (its list omits "'", "<", "=", ">") and any
# piece holding a character outside a-z and that punctuation start a word. Its "€" and "£" entries are
# bytes, which never equal a Python 3 str piece; such pieces start a word through the second rule anyway.
_START_PUNCTUATION = frozenset('!"#$%&"()*+,-./:;?@[\\]^_`{|}~')
_CONTINUATION_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz") | _START_PUNCTUATION
_MASK_PROBABILITY = 0.8
_KEEP_GIVEN_NOT_MASKED_PROBABILITY = 0.5


def is_start_piece_sentencepiece(piece: str) -> bool:
    """Whether a SentencePiece piece begins a word for whole-word masking (the original's rule).

    Example:
    >>> [is_start_piece_sentencepiece(p) for p in ["▁the", "ing", ",", "90", "<unk>", "é"]]
    [True, False, True, True, True, True]
    """
    return (piece.startswith("▁") or piece.startswith("<") or piece in _START_PUNCTUATION
            or not all(character.lower() in _CONTINUATION_CHARACTERS for character in piece))


def is_start_piece_wordpiece(piece: str) -> bool:
    """Whether a WordPiece token begins a word: it is not a `##` continuation.

    Example:
    >>> is_start_piece_wordpiece("un"), is_start_piece_wordpiece("##want")
    (True, False)
    """
    return not piece.startswith("##")


def pack_token(token_id: int, is_start_piece: bool) -> int:
    """One token as the instance functions take it: its id and whole-word start flag in one int.

    Example:
    >>> pack_token(7, True), pack_token(7, False), pack_token(7, True) >> 1
    (15, 14, 7)
    """
    return token_id << 1 | int(is_start_piece)


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
    """The original's generation flags, with its defaults; invalid values raise naming the flag.

    Example:
    >>> InstanceOptions(max_seq_length=128, dupe_factor=5).max_num_tokens
    125
    """

    max_seq_length: int = 512
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    ngram: int = 3
    favor_shorter_ngram: bool = True
    do_whole_word_mask: bool = True
    random_next_sentence: bool = False
    dupe_factor: int = 40

    def __post_init__(self):
        # [CLS] A [SEP] B [SEP] with A and B non-empty after truncation, and a short target drawn from
        # randint(2, max_seq_length - 3), needs max_seq_length >= 5.
        _require(self.max_seq_length >= 5, "max_seq_length", self.max_seq_length, "an integer >= 5")
        _require(self.max_predictions_per_seq >= 1, "max_predictions_per_seq", self.max_predictions_per_seq,
                 "an integer >= 1")
        _require(0.0 < self.masked_lm_prob < 1.0, "masked_lm_prob", self.masked_lm_prob,
                 "a probability strictly between 0 and 1")
        _require(0.0 <= self.short_seq_prob <= 1.0, "short_seq_prob", self.short_seq_prob,
                 "a probability between 0 and 1")
        _require(self.ngram >= 1, "ngram", self.ngram, "an integer >= 1")
        _require(self.dupe_factor >= 1, "dupe_factor", self.dupe_factor, "an integer >= 1")

    @property
    def max_num_tokens(self) -> int:
        """Room for segment tokens: max_seq_length less [CLS] and two [SEP]."""
        return self.max_seq_length - 3

    @functools.cached_property
    def ngram_cdf(self) -> Tuple[float, ...]:
        """Cumulative p(n) for n = 1..ngram: p(n) proportional to 1/n, reversed unless favor_shorter_ngram."""
        weights = [1.0 / n for n in range(1, self.ngram + 1)]
        if not self.favor_shorter_ngram:
            weights.reverse()
        total = sum(weights)
        cumulative, running = [], 0.0
        for weight in weights:
            running += weight / total
            cumulative.append(running)
        return tuple(value / cumulative[-1] for value in cumulative)


def _require(condition: bool, flag: str, value, allowed: str) -> None:
    if not condition:
        raise ValueError(f"--{flag}={value} is invalid: it must be {allowed}.")


class SpecialIds(NamedTuple):
    """The ids instance generation writes: [CLS], [SEP], [MASK], and the vocabulary size for random tokens."""
    cls_id: int
    sep_id: int
    mask_id: int
    vocab_size: int


class TrainingInstance(NamedTuple):
    """One sentence pair, unpadded: ids after masking, segments, word starts, and the masked-LM targets."""
    input_ids: List[int]
    segment_ids: List[int]
    token_boundary: List[int]
    masked_lm_positions: List[int]
    masked_lm_ids: List[int]
    is_random_next: bool


def create_instances_from_document(documents: Sequence[Sequence[Sequence[int]]], document_index: int,
                                   options: InstanceOptions, special_ids: SpecialIds, rng: random.Random,
                                   ngram_rng: random.Random) -> List[TrainingInstance]:
    """The original's instances for `documents[document_index]`; documents are lists of packed-token sentences.

    Sentences accumulate until a target length (max_seq_length - 3, or with probability short_seq_prob a
    random length from 2). Segment A takes a random number of leading sentences. With SOP (the default)
    label 1 is the two segments swapped and label 0 is the original order; a one-sentence chunk takes B
    from a random other document with label 1. With random_next_sentence (NSP) B is random with
    probability 1/2 and the unused sentences are put back.

    Example:
    >>> options = InstanceOptions(max_seq_length=16, max_predictions_per_seq=3, dupe_factor=1)
    >>> sentence = [pack_token(i, True) for i in range(10, 14)]
    >>> instances = create_instances_from_document([[sentence, sentence]], 0, options,
    ...     SpecialIds(cls_id=2, sep_id=3, mask_id=4, vocab_size=30), random.Random(0), random.Random(1))
    >>> instances[0].segment_ids
    [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
    """
    document = documents[document_index]
    max_num_tokens = options.max_num_tokens
    target_seq_length = max_num_tokens
    if rng.random() < options.short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)

    instances = []
    current_chunk: List[Sequence[int]] = []
    current_length = 0
    i = 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        if i == len(document) - 1 or current_length >= target_seq_length:
            a_end = 1
            if len(current_chunk) >= 2:
                a_end = rng.randint(1, len(current_chunk) - 1)
            tokens_a = [token for sentence in current_chunk[:a_end] for token in sentence]
            tokens_b: List[int] = []
            if len(current_chunk) == 1 or (options.random_next_sentence and rng.random() < 0.5):
                is_random_next = True
                target_b_length = target_seq_length - len(tokens_a)
                # Ten tries at a different document; a block of one document falls back to itself.
                for _ in range(10):
                    random_document_index = rng.randint(0, len(documents) - 1)
                    if random_document_index != document_index:
                        break
                random_document = documents[random_document_index]
                random_start = rng.randint(0, len(random_document) - 1)
                for j in range(random_start, len(random_document)):
                    tokens_b.extend(random_document[j])
                    if len(tokens_b) >= target_b_length:
                        break
                # The sentences B did not use go back into the document.
                i -= len(current_chunk) - a_end
            elif not options.random_next_sentence and rng.random() < 0.5:
                is_random_next = True
                tokens_b = [token for sentence in current_chunk[a_end:] for token in sentence]
                tokens_a, tokens_b = tokens_b, tokens_a
            else:
                is_random_next = False
                tokens_b = [token for sentence in current_chunk[a_end:] for token in sentence]
            truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
            instances.append(make_instance(tokens_a, tokens_b, is_random_next, options, special_ids, rng,
                                           ngram_rng))
            current_chunk = []
            current_length = 0
        i += 1
    return instances


def make_instance(tokens_a: List[int], tokens_b: List[int], is_random_next: bool, options: InstanceOptions,
                  special_ids: SpecialIds, rng: random.Random, ngram_rng: random.Random) -> TrainingInstance:
    """[CLS] A [SEP] B [SEP] from two segments of packed tokens, with its masked-LM targets drawn from `rng`."""
    ids = [special_ids.cls_id] + [token >> 1 for token in tokens_a] + [special_ids.sep_id]
    ids += [token >> 1 for token in tokens_b] + [special_ids.sep_id]
    starts = [True] + [bool(token & 1) for token in tokens_a] + [True]
    starts += [bool(token & 1) for token in tokens_b] + [True]
    separator_positions = (0, len(tokens_a) + 1, len(ids) - 1)
    segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
    output_ids, positions, labels, token_boundary = create_masked_lm_predictions(
        ids, starts, separator_positions, options, special_ids, rng, ngram_rng)
    return TrainingInstance(output_ids, segment_ids, token_boundary, positions, labels, is_random_next)


def create_masked_lm_predictions(ids: Sequence[int], starts: Sequence[bool], separator_positions: Sequence[int],
                                 options: InstanceOptions, special_ids: SpecialIds, rng: random.Random,
                                 ngram_rng: random.Random) -> Tuple[List[int], List[int], List[int], List[int]]:
    """The original's n-gram masking; returns (masked ids, positions, label ids, token_boundary).

    Candidates are whole words (a start piece and its continuations; with do_whole_word_mask off, single
    pieces). Visiting candidates in random order, an n-gram of n words (p(n) from `options.ngram_cdf`) is
    shortened until it fits the budget num_to_predict = min(max_predictions_per_seq,
    max(1, round(len * masked_lm_prob))), and skipped if it still does not fit or overlaps a masked token.
    Each chosen token becomes [MASK] 80%, stays 10%, becomes a random vocabulary id 10%.
    [CLS] and [SEP] are never candidates.

    Example:
    >>> options = InstanceOptions(max_seq_length=8, max_predictions_per_seq=2)
    >>> ids, starts = [2, 10, 11, 3, 12, 3], [True, True, False, True, True, True]
    >>> masked, positions, labels, boundary = create_masked_lm_predictions(
    ...     ids, starts, (0, 3, 5), options, SpecialIds(2, 3, 4, 30), random.Random(0), random.Random(0))
    >>> boundary
    [1, 1, 0, 1, 1, 1]
    """
    separators = frozenset(separator_positions)
    token_boundary = [0] * len(ids)
    cand_indexes: List[List[int]] = []
    for index in range(len(ids)):
        if index in separators:
            token_boundary[index] = 1
            continue
        # A continuation joins the previous candidate even across a [SEP], as in the original.
        if options.do_whole_word_mask and cand_indexes and not starts[index]:
            cand_indexes[-1].append(index)
        else:
            cand_indexes.append([index])
            if starts[index]:
                token_boundary[index] = 1

    output_ids = list(ids)
    num_to_predict = min(options.max_predictions_per_seq,
                         max(1, int(round(len(ids) * options.masked_lm_prob))))
    # Shuffling candidate start positions permutes exactly as the original's shuffle of its n-gram list.
    visit_order = list(range(len(cand_indexes)))
    rng.shuffle(visit_order)

    masked: List[Tuple[int, int]] = []
    covered = set()
    for start in visit_order:
        if len(masked) >= num_to_predict:
            break
        n = bisect.bisect_right(options.ngram_cdf, ngram_rng.random()) + 1
        index_set = _flatten(cand_indexes[start:start + n])
        n -= 1
        while len(masked) + len(index_set) > num_to_predict:
            if n == 0:
                break
            index_set = _flatten(cand_indexes[start:start + n])
            n -= 1
        if len(masked) + len(index_set) > num_to_predict:
            continue
        if any(index in covered for index in index_set):
            continue
        for index in index_set:
            covered.add(index)
            if rng.random() < _MASK_PROBABILITY:
                output_ids[index] = special_ids.mask_id
            elif rng.random() < _KEEP_GIVEN_NOT_MASKED_PROBABILITY:
                output_ids[index] = ids[index]
            else:
                output_ids[index] = rng.randint(0, special_ids.vocab_size - 1)
            masked.append((index, ids[index]))
    # The original shuffles its n-gram list again here for do_permutation, whatever the flag; the draws keep
    # the rest of the document's instances on the original's random stream.
    rng.shuffle(visit_order)
    masked.sort()
    return output_ids, [index for index, _ in masked], [label for _, label in masked], token_boundary


def _flatten(words: Sequence[Sequence[int]]) -> List[int]:
    return [index for word in words for index in word]


def truncate_seq_pair(tokens_a: List[int], tokens_b: List[int], max_num_tokens: int, rng: random.Random) -> None:
    """Trims the longer list (B on ties) one token at a time from a random end until both fit, in place.

    Example:
    >>> a, b = list(range(6)), [9, 9]
    >>> truncate_seq_pair(a, b, 5, random.Random(0))
    >>> len(a), len(b)
    (3, 2)
    """
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


# tf.train.Example, encoded directly: workers stay free of TensorFlow, and the bytes are fixed (features
# in the original's order) whatever protobuf version is installed.

FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "token_boundary", "masked_lm_positions",
                 "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")


def instance_to_example_bytes(instance: TrainingInstance, max_seq_length: int, max_predictions_per_seq: int) -> bytes:
    """The serialized tf.train.Example the original writes for `instance`, zero padded.

    Features: input_ids, input_mask, segment_ids, token_boundary (int64, max_seq_length);
    masked_lm_positions, masked_lm_ids (int64), masked_lm_weights (float, 1.0 real / 0.0 padding)
    (max_predictions_per_seq); next_sentence_labels (int64 [1]: 1 = swapped or random B).

    Example:
    >>> instance = TrainingInstance([2, 4, 3, 7, 3], [0, 0, 0, 1, 1], [1, 1, 1, 1, 1], [1], [9], True)
    >>> len(instance_to_example_bytes(instance, max_seq_length=8, max_predictions_per_seq=2))
    241
    """
    length = len(instance.input_ids)
    if length > max_seq_length:
        raise ValueError(f"An instance of {length} tokens does not fit max_seq_length={max_seq_length}.")
    padding = max_seq_length - length
    prediction_padding = max_predictions_per_seq - len(instance.masked_lm_positions)
    features = (
        ("input_ids", _int64_feature(list(instance.input_ids) + [0] * padding)),
        ("input_mask", _int64_feature([1] * length + [0] * padding)),
        ("segment_ids", _int64_feature(list(instance.segment_ids) + [0] * padding)),
        ("token_boundary", _int64_feature(list(instance.token_boundary) + [0] * padding)),
        ("masked_lm_positions", _int64_feature(list(instance.masked_lm_positions) + [0] * prediction_padding)),
        ("masked_lm_ids", _int64_feature(list(instance.masked_lm_ids) + [0] * prediction_padding)),
        ("masked_lm_weights", _float_feature([1.0] * len(instance.masked_lm_ids) + [0.0] * prediction_padding)),
        ("next_sentence_labels", _int64_feature([1 if instance.is_random_next else 0])),
    )
    entries = b"".join(_length_delimited(1, _length_delimited(1, name.encode()) + _length_delimited(2, feature))
                       for name, feature in features)
    return _length_delimited(1, entries)


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # int64 on the wire: negatives take ten bytes, as protobuf writes them
    output = bytearray()
    while value > 0x7F:
        output.append(value & 0x7F | 0x80)
        value >>= 7
    output.append(value)
    return bytes(output)


@functools.lru_cache(maxsize=None)
def _small_varints() -> Tuple[bytes, ...]:
    return tuple(_varint(value) for value in range(1 << 16))


def _length_delimited(field_number: int, payload: bytes) -> bytes:
    table = _small_varints()
    length = len(payload)
    return table[field_number << 3 | 2] + (table[length] if length < len(table) else _varint(length)) + payload


def _int64_feature(values: Sequence[int]) -> bytes:
    if not values:
        packed = b""
    elif min(values) >= 0 and max(values) < 0x80:
        packed = bytes(values)  # one byte per value
    elif min(values) >= 0 and max(values) < 1 << 16:
        table = _small_varints()
        packed = b"".join([table[value] for value in values])
    else:
        packed = b"".join([_varint(value) for value in values])
    int64_list = _length_delimited(1, packed) if packed else b""
    return _length_delimited(3, int64_list)


def _float_feature(values: Sequence[float]) -> bytes:
    packed = struct.pack(f"<{len(values)}f", *values)
    float_list = _length_delimited(1, packed) if packed else b""
    return _length_delimited(2, float_list)
