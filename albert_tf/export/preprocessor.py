"""AlbertPreprocessor: raw strings -> encoder inputs, in the TensorFlow graph (the TF-Hub preprocessor API).

`export_preprocessor` writes it as a SavedModel.

The text rules are those of `albert_tf.tokenization` (the original's `preprocess_text` and `encode_pieces`),
rebuilt from TensorFlow and tensorflow-text ops so that an exported SavedModel tokenizes without Python:

1. invalid UTF-8 becomes U+FFFD (as `bytes.decode("utf-8", "replace")`);
2. whitespace runs collapse to one space and the ends are stripped (`" ".join(text.strip().split())`),
   with Python's `str.isspace` set, not RE2's ASCII `\\s`;
3. NFKD (`tensorflow_text.normalize_utf8`);
4. characters with a non-zero canonical combining class are dropped (`unicodedata.combining`), not RE2's
   `\\p{Mn}`: the two sets differ by 1123 code points (U+FE0F, the emoji variation selector, is Mn with
   combining class 0 and is kept);
5. lowercasing with `tf.strings.lower(encoding="utf-8")` (ICU, which shares Python's full mappings and its
   final-sigma rule, unlike `tensorflow_text.case_fold_utf8`, which also applies NFKC and folds "ß" to "ss"),
   applied between NUL characters because that op stops at the first NUL, then corrected for the code points
   where this TensorFlow's ICU is older than Python's Unicode database;
6. SentencePiece pieces (`tensorflow_text.SentencepieceTokenizer`), with the digit-comma rule: a piece ending
   in a digit and "," is re-tokenized without the comma, and the comma becomes its own piece; the word-start
   marker that re-tokenizing adds to a piece that did not start a word is kept ("keep_added_marker", the
   original's) or removed ("drop_added_marker"), as the `digit_comma_rule` it was built with says. The
   SavedModel carries that choice as the string variable `digit_comma_rule`.

The character sets of steps 2, 4 and 5 are read from the exporting Python's `unicodedata` when the
preprocessor is built, so the graph follows the Python tokenizer code point by code point. Two differences
remain (see BUILD_NOTES.md): ICU's NFKD also decomposes 118 code points that Python 3.11's Unicode 14
database leaves unassigned, and ICU's final-sigma rule (Σ -> ς at a word end) does not know the cased and
case-ignorable characters that Unicode 14 added, so a Σ next to one of them may get the other form.
"""

import functools
import logging
import os
import shutil
import sys
import tempfile
import unicodedata
from typing import Dict, List, NamedTuple, Sequence

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.checkpoints.hub_module import SPM_MODEL_ASSET
from albert_tf.export.saved_objects import check_file
from albert_tf.tokenization import DEFAULT_DIGIT_COMMA_RULE, SPIECE_UNDERLINE, AlbertTokenizer

logger = logging.getLogger(__name__)

DEFAULT_SEQ_LENGTH = 128
# The original pads input_ids, input_mask and segment_ids with 0 whatever the <pad> piece is.
PADDING_ID = 0
_MAX_CODE_POINT = sys.maxunicode
_SURROGATES = range(0xD800, 0xE000)


class _PythonTextRules(NamedTuple):
    """RE2 character classes and the lowercase corrections that reproduce Python's str methods."""

    whitespace_class: str
    combining_class: str
    digit_class: str
    lowercase_fixes: Dict[str, str]


def _re2_class(code_points: Sequence[int]) -> str:
    """An RE2 character class matching exactly `code_points` (sorted, non-empty)."""
    ranges: List[List[int]] = []
    for code_point in code_points:
        if ranges and code_point == ranges[-1][1] + 1:
            ranges[-1][1] = code_point
        else:
            ranges.append([code_point, code_point])
    parts = [f"\\x{{{start:X}}}" if start == end else f"\\x{{{start:X}}}-\\x{{{end:X}}}" for start, end in ranges]
    return "[" + "".join(parts) + "]"


def _icu_lowercase_fixes() -> Dict[str, str]:
    """Characters that `tf.strings.lower` leaves as they are but Python's `str.lower` changes.

    They are letters newer than the ICU inside this TensorFlow. A character that ICU maps to something
    other than Python's result cannot be corrected after the fact and is an error here.
    """
    characters = [chr(code_point) for code_point in range(1, _MAX_CODE_POINT + 1) if code_point not in _SURROGATES]
    lowered = tf.strings.lower(tf.constant([character.encode("utf-8") for character in characters]),
                               encoding="utf-8").numpy()
    fixes = {}
    for character, icu_lower in zip(characters, lowered):
        icu_lower = icu_lower.decode("utf-8")
        if icu_lower == character.lower():
            continue
        if icu_lower != character:
            raise ValueError(f"tf.strings.lower maps U+{ord(character):04X} to {icu_lower!r}, Python's str.lower to "
                             f"{character.lower()!r}; this TensorFlow cannot reproduce the Python tokenizer.")
        fixes[character] = character.lower()
    return fixes


@functools.lru_cache(maxsize=1)
def python_text_rules() -> _PythonTextRules:
    """The character sets of Python's `str.isspace`, `unicodedata.combining` and `str.isdigit`, and the
    lowercase corrections, as this Python and this TensorFlow define them (computed once per process)."""
    code_points = [code_point for code_point in range(_MAX_CODE_POINT + 1) if code_point not in _SURROGATES]
    return _PythonTextRules(
        whitespace_class=_re2_class([cp for cp in code_points if chr(cp).isspace()]),
        combining_class=_re2_class([cp for cp in code_points if unicodedata.combining(chr(cp))]),
        digit_class=_re2_class([cp for cp in code_points if chr(cp).isdigit()]),
        lowercase_fixes=_icu_lowercase_fixes())


class _Tokenize(tf.Module):
    """`tokenize(strings [B]) -> ragged int32 ids [B, (T)]` plus `get_special_tokens_dict()`."""

    def __init__(self, spm_model_file: str, do_lower_case: bool, digit_comma_rule: str, special_ids: Dict[str, int],
                 name="tokenize"):
        super().__init__(name=name)
        with tf.io.gfile.GFile(spm_model_file, "rb") as handle:
            model_proto = handle.read()
        self.do_lower_case = do_lower_case
        self._drops_added_marker = digit_comma_rule == "drop_added_marker"
        self._special_ids = dict(special_ids)
        self._sentencepiece = tf_text.SentencepieceTokenizer(model=model_proto, out_type=tf.string)
        rules = python_text_rules()
        self._whitespace_pattern = rules.whitespace_class + "+"
        self._combining_pattern = rules.combining_class
        self._digit_comma_pattern = "(?s).*" + rules.digit_class + ","
        self._lowercase_table = None
        if do_lower_case and rules.lowercase_fixes:
            self._lowercase_table = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(list(rules.lowercase_fixes), list(rules.lowercase_fixes.values()),
                                                    key_dtype=tf.string, value_dtype=tf.string),
                default_value="")

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def __call__(self, strings):
        pieces = self._split_digit_commas(self._sentencepiece.tokenize(self.normalize(strings)))
        return self._sentencepiece.string_to_id(pieces)

    @tf.function(input_signature=[], autograph=False)
    def get_special_tokens_dict(self):
        return {key: tf.constant(value, tf.int32) for key, value in self._special_ids.items()}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def normalize(self, strings):
        """`albert_tf.tokenization.preprocess_text` on a batch of strings."""
        text = tf.strings.unicode_transcode(strings, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)
        text = tf.strings.regex_replace(text, self._whitespace_pattern, " ")
        text = tf.strings.regex_replace(text, "^ | $", "")
        text = tf_text.normalize_utf8(text, "NFKD")
        text = tf.strings.regex_replace(text, self._combining_pattern, "")
        if self.do_lower_case:
            text = self._lowercase(text)
        return text

    def _lowercase(self, text):
        # tf.strings.lower stops at the first NUL, so the text is lowered between NULs. reduce_join's
        # separator would lose a NUL too: each part carries its NUL as data, and the last one is cut off.
        parts = tf.ragged.map_flat_values(tf.strings.lower, tf.strings.split(text, sep="\x00"), encoding="utf-8")
        text = tf.strings.reduce_join(parts + tf.constant("\x00"), axis=-1)
        length = tf.strings.length(text)
        text = tf.strings.substr(text, tf.zeros_like(length), length - 1)
        if self._lowercase_table is None:
            return text
        characters = tf.strings.unicode_split(text, "UTF-8")
        fixed = tf.ragged.map_flat_values(self._lowercase_table.lookup, characters)
        characters = tf.ragged.map_flat_values(tf.where, fixed == "", characters, fixed)
        return tf.strings.reduce_join(characters, axis=-1)

    def _split_digit_commas(self, pieces):
        """The original `encode_pieces` rule on ragged string pieces [B, (P)]."""
        flat_pieces = pieces.flat_values
        is_digit_comma = tf.strings.regex_full_match(flat_pieces, self._digit_comma_pattern)
        matched = tf.boolean_mask(flat_pieces, is_digit_comma)
        starts_word = tf.strings.regex_full_match(matched, "(?s)" + SPIECE_UNDERLINE + ".*")
        without_comma = tf.strings.regex_replace(matched, ",$", "")
        sub_pieces = self._sentencepiece.tokenize(tf.strings.regex_replace(without_comma, SPIECE_UNDERLINE, ""))
        if self._drops_added_marker:
            sub_pieces = self._drop_added_markers(sub_pieces, starts_word)
        commas = tf.RaggedTensor.from_tensor(tf.fill([tf.size(matched), 1], ","), row_splits_dtype=tf.int64)
        replacements = tf.concat([sub_pieces, commas], axis=1)

        # Every piece becomes a short list: itself, or its replacement; then the lists are flattened per row.
        unchanged = tf.RaggedTensor.from_tensor(flat_pieces[:, tf.newaxis], row_splits_dtype=tf.int64)
        candidates = tf.concat([unchanged, replacements], axis=0)
        num_pieces = tf.size(flat_pieces, out_type=tf.int64)
        replacement_index = num_pieces + tf.cumsum(tf.cast(is_digit_comma, tf.int64)) - 1
        choice = tf.where(is_digit_comma, replacement_index, tf.range(num_pieces))
        return pieces.with_flat_values(tf.gather(candidates, choice)).merge_dims(-2, -1)

    @staticmethod
    def _drop_added_markers(sub_pieces, starts_word):
        """Removes the word-start marker that re-tokenizing put first, in the rows whose piece did not start a word."""
        values = sub_pieces.values
        row_of_value = sub_pieces.value_rowids()
        is_first = tf.range(tf.size(values, out_type=tf.int64)) == tf.gather(sub_pieces.row_starts(), row_of_value)
        needs_strip = (is_first & ~tf.gather(starts_word, row_of_value)
                       & tf.strings.regex_full_match(values, "(?s)" + SPIECE_UNDERLINE + ".*"))
        values = tf.where(needs_strip, tf.strings.regex_replace(values, "^" + SPIECE_UNDERLINE, ""), values)
        return tf.ragged.boolean_mask(sub_pieces.with_values(values), sub_pieces.with_values(values != ""))


class _BertPackInputs(tf.Module):
    """`bert_pack_inputs([segment_a, (segment_b)], seq_length=None) -> encoder inputs`.

    As the original's convert_single_example: `[CLS] a [SEP] b [SEP]` (type ids 0, then 1 from b on),
    the longer segment trimmed first (b on ties, which round-robin trimming gives too), zero padding;
    a row whose b is empty is packed as `[CLS] a [SEP]` with room for seq_length - 2 tokens of a, and a
    row whose b the trimming empties (seq_length 3 or 4) as `[CLS] a [SEP]` with its trimmed a.
    """

    def __init__(self, special_ids: Dict[str, int], default_seq_length: int, name="bert_pack_inputs"):
        super().__init__(name=name)
        self._start_of_sequence_id = special_ids["start_of_sequence_id"]
        self._end_of_segment_id = special_ids["end_of_segment_id"]
        self.default_seq_length = default_seq_length

    @tf.function(autograph=False)
    def __call__(self, inputs, seq_length=None):
        if not 1 <= len(inputs) <= 2:
            raise ValueError(f"bert_pack_inputs takes a list of 1 or 2 ragged segments, got {len(inputs)}.")
        seq_length = tf.cast(self.default_seq_length if seq_length is None else seq_length, tf.int32)
        check = tf.debugging.assert_greater_equal(
            seq_length, len(inputs) + 1,
            message=f"bert_pack_inputs: seq_length must leave room for [CLS] and {len(inputs)} [SEP]")
        with tf.control_dependencies([check]):
            seq_length = tf.identity(seq_length)
        segments = [tf.cast(segment, tf.int32) for segment in inputs]
        trimmed = self._trim(segments, seq_length)
        packed = self._combine(trimmed, seq_length)
        if len(segments) == 1:
            return packed
        # The original tests b after its truncation: a b trimmed away leaves `[CLS] a [SEP]`.
        a_of_the_pair = self._combine(trimmed[:1], seq_length)
        a_alone = self._combine(self._trim(segments[:1], seq_length), seq_length)
        b_given = (segments[1].row_lengths() > 0)[:, tf.newaxis]
        b_kept = (trimmed[1].row_lengths() > 0)[:, tf.newaxis]
        return {key: tf.where(b_kept, value, tf.where(b_given, a_of_the_pair[key], a_alone[key]))
                for key, value in packed.items()}

    @staticmethod
    def _trim(segments, seq_length):
        budget = seq_length - len(segments) - 1
        return tf_text.RoundRobinTrimmer(max_seq_length=budget).trim(segments)

    def _combine(self, trimmed, seq_length):
        word_ids, type_ids = tf_text.combine_segments(trimmed, start_of_sequence_id=self._start_of_sequence_id,
                                                      end_of_segment_id=self._end_of_segment_id)
        input_word_ids, input_mask = tf_text.pad_model_inputs(word_ids, max_seq_length=seq_length,
                                                              pad_value=PADDING_ID)
        input_type_ids, _ = tf_text.pad_model_inputs(tf.cast(type_ids, tf.int32), max_seq_length=seq_length)
        return {"input_word_ids": input_word_ids, "input_mask": tf.cast(input_mask, tf.int32),
                "input_type_ids": input_type_ids}


class AlbertPreprocessor(tf.Module):
    """Raw strings to the encoder's three int32 inputs, as one tf.Module with TF-Hub's preprocessor API.

    - `preprocessor(strings [B])` -> `input_word_ids`, `input_mask`, `input_type_ids` [B, seq_length]
      (`[CLS] text [SEP]`, zero padded).
    - `preprocessor.tokenize(strings [B])` -> ragged int32 ids [B, (T)], exactly
      `AlbertTokenizer(spm_model_file, do_lower_case=..., digit_comma_rule=...).encode(text)` per string.
    - `preprocessor.tokenize.get_special_tokens_dict()` -> int32 scalars `vocab_size`,
      `start_of_sequence_id` ([CLS]), `end_of_segment_id` ([SEP]), `padding_id` (0, as the original pads),
      `mask_id` ([MASK]).
    - `preprocessor.bert_pack_inputs([a] or [a, b], seq_length=None)` -> the same dict,
      `[CLS] a [SEP] b [SEP]` with type ids 0 then 1, trimmed round-robin to fit, exactly as the
      fine-tuning features (data_gen.readers.glue.convert_example) lay them out.

    Example:
    >>> preprocessor = AlbertPreprocessor("30k-clean.model", do_lower_case=True)  # doctest: +SKIP
    >>> preprocessor(tf.constant(["Hello world!"]))["input_word_ids"].shape  # doctest: +SKIP
    TensorShape([1, 128])
    """

    def __init__(self, spm_model_file: str, do_lower_case: bool = True, seq_length: int = DEFAULT_SEQ_LENGTH,
                 digit_comma_rule: str = DEFAULT_DIGIT_COMMA_RULE, name="albert_preprocessor"):
        super().__init__(name=name)
        tokenizer = AlbertTokenizer(spm_model_file=spm_model_file, do_lower_case=do_lower_case,
                                    digit_comma_rule=digit_comma_rule)
        special_ids = {"vocab_size": tokenizer.vocab_size, "start_of_sequence_id": tokenizer.cls_id,
                       "end_of_segment_id": tokenizer.sep_id, "padding_id": PADDING_ID,
                       "mask_id": tokenizer.mask_id}
        missing = [key for key, value in special_ids.items() if value is None]
        if missing:
            raise ValueError(f"SentencePiece model {spm_model_file!r} lacks the symbol(s) for {missing}; the "
                             "preprocessor needs [CLS], [SEP] and [MASK] (train it with run_scripts.build_vocab).")
        if not isinstance(seq_length, int) or seq_length < 3:
            raise ValueError(f"seq_length must be an integer of at least 3 (room for [CLS] and two [SEP]), "
                             f"got {seq_length!r}.")
        self.spm_model_file = spm_model_file
        self.sp_model_file = tf.saved_model.Asset(spm_model_file)
        self.do_lower_case = do_lower_case
        self.seq_length = seq_length
        # A variable, so that the SavedModel says which rule its graph applies.
        self.digit_comma_rule = tf.Variable(digit_comma_rule, trainable=False, dtype=tf.string,
                                            name="digit_comma_rule")
        self.tokenize = _Tokenize(spm_model_file, do_lower_case, digit_comma_rule, special_ids)
        self.bert_pack_inputs = _BertPackInputs(special_ids, seq_length)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def __call__(self, strings):
        return self.bert_pack_inputs([self.tokenize(strings)])

    def get_config(self):
        return {"spm_model_file": self.spm_model_file, "do_lower_case": self.do_lower_case,
                "seq_length": self.seq_length, "digit_comma_rule": self.digit_comma_rule.numpy().decode("utf-8"),
                "name": self.name}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def export_preprocessor(spm_model_file: str, export_dir: str, do_lower_case: bool = True,
                        seq_length: int = DEFAULT_SEQ_LENGTH, digit_comma_rule: str = DEFAULT_DIGIT_COMMA_RULE) -> str:
    """Writes the AlbertPreprocessor SavedModel to `export_dir` and returns it.

    Loading it needs `import tensorflow_text` (its SentencePiece and normalisation ops).

    Example:
    >>> export_preprocessor("30k-clean.model", "/tmp/albert_hub/preprocessor")  # doctest: +SKIP
    '/tmp/albert_hub/preprocessor'
    """
    check_file(spm_model_file, "spm_model_file")
    with tempfile.TemporaryDirectory() as staging:
        spm_path = os.path.join(staging, SPM_MODEL_ASSET)
        shutil.copyfile(spm_model_file, spm_path)
        preprocessor = AlbertPreprocessor(spm_path, do_lower_case=do_lower_case, seq_length=seq_length,
                                          digit_comma_rule=digit_comma_rule)
        trace_preprocessor(preprocessor)
        tf.saved_model.save(preprocessor, export_dir, signatures={"serving_default": preprocessor.__call__})
    logger.info("Exported the preprocessor (seq_length %d, digit_comma_rule %s) to %s", seq_length, digit_comma_rule,
                export_dir)
    return export_dir


def trace_preprocessor(preprocessor: AlbertPreprocessor) -> None:
    """Traces `bert_pack_inputs` for 1 and 2 segments, with the default and with a given seq_length."""
    segment_spec = tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1, row_splits_dtype=tf.int64)
    for num_segments in (1, 2):
        segments = [segment_spec] * num_segments
        preprocessor.bert_pack_inputs.__call__.get_concrete_function(segments)
        preprocessor.bert_pack_inputs.__call__.get_concrete_function(
            segments, seq_length=tf.TensorSpec([], tf.int32, name="seq_length"))
