"""ALBERT tokenization: SentencePiece with the original text normalisation, or BERT WordPiece.

The released English ALBERT models use a SentencePiece model (`30k-clean.model`); the released Chinese
models ship a WordPiece vocabulary (`vocab_chinese.txt`). Both modes reproduce google-research/albert
`tokenization.py`:

- SentencePiece: `preprocess_text` (whitespace collapsed, NFKD, combining marks dropped, optional
  lowercasing), then SentencePiece pieces, then the digit-comma rule of `encode_pieces` ("▁1990," becomes
  the pieces of "1990" and ","; `DIGIT_COMMA_RULES` for the "▁" that re-encoding adds). Backquote and
  apostrophe pairs (``` `` ``` and `''`) are NOT turned into `"`: that is Hugging Face's addition, absent
  from the original.
- WordPiece: BERT's BasicTokenizer (control characters removed, CJK characters split into single tokens,
  punctuation split, accents stripped when lowercasing) and greedy longest-match-first WordPiece with `##`
  continuations, words over 200 characters becoming `[UNK]`.
"""

import collections
import logging
import re
import unicodedata
from typing import Dict, List, Optional, Sequence

import sentencepiece as spm

logger = logging.getLogger(__name__)

SPIECE_UNDERLINE = "▁"
# What the digit-comma rule does with the word-start marker that re-encoding "990" out of "990," adds.
# "keep_added_marker" is what the original's code does (its step that drops the marker never fires, under Python 2
# or 3), so every released ALBERT model saw those pieces; "drop_added_marker" is the evident intent, and Hugging
# Face's tokenizer. See BUILD_NOTES.md.
DIGIT_COMMA_RULES = ("keep_added_marker", "drop_added_marker")
DEFAULT_DIGIT_COMMA_RULE = "keep_added_marker"
WORDPIECE_PREFIX = "##"
MAX_WORDPIECE_CHARS_PER_WORD = 200

# The ids the original spm_train command gives the special symbols; pretraining data relies on them.
SPECIAL_PIECE_IDS = collections.OrderedDict(
    [("<pad>", 0), ("<unk>", 1), ("[CLS]", 2), ("[SEP]", 3), ("[MASK]", 4)])
_WORDPIECE_SPECIAL_TOKENS = {"<pad>": "[PAD]", "<unk>": "[UNK]", "[CLS]": "[CLS]", "[SEP]": "[SEP]",
                             "[MASK]": "[MASK]"}
_WORDPIECE_SILENT_TOKENS = frozenset({"[PAD]", "[CLS]", "[SEP]", "[MASK]"})


def preprocess_text(text: str, lower: bool = True) -> str:
    """The original's normalisation: collapse whitespace, NFKD, drop combining marks, optionally lowercase.

    Example:
    >>> preprocess_text("  Café\\tNAÏVE  ")
    'cafe naive'
    """
    outputs = " ".join(text.strip().split())
    outputs = unicodedata.normalize("NFKD", outputs)
    outputs = "".join(character for character in outputs if not unicodedata.combining(character))
    if lower:
        outputs = outputs.lower()
    return outputs


def check_digit_comma_rule(digit_comma_rule: str) -> str:
    """Returns `digit_comma_rule` if it is one of `DIGIT_COMMA_RULES`; raises ValueError naming it otherwise."""
    if digit_comma_rule not in DIGIT_COMMA_RULES:
        raise ValueError(f"digit_comma_rule must be one of {', '.join(map(repr, DIGIT_COMMA_RULES))}, got "
                         f"{digit_comma_rule!r}.")
    return digit_comma_rule


def drops_added_marker(piece: str, sub_pieces: Sequence[str], digit_comma_rule: str) -> bool:
    """Whether the digit-comma rule removes the "▁" that re-encoding `piece` (without its comma) put first."""
    return (digit_comma_rule == "drop_added_marker" and not piece.startswith(SPIECE_UNDERLINE) and bool(sub_pieces)
            and sub_pieces[0].startswith(SPIECE_UNDERLINE))


def encode_pieces(sp_model: spm.SentencePieceProcessor, text: str,
                  digit_comma_rule: str = DEFAULT_DIGIT_COMMA_RULE) -> List[str]:
    """SentencePiece pieces of already preprocessed `text`, with the original's digit-comma rule.

    A piece that ends in a digit followed by "," is re-encoded without the comma (and without any "▁") and
    the comma becomes its own piece, so "1990," is tokenized like "1990" in any context. Re-encoding starts a
    word, so its first piece carries a "▁" even when the piece did not start one ("0," of "▁199 0,"):
    "keep_added_marker" (the default, what the original's code does) keeps it, "drop_added_marker" (Hugging
    Face's) removes it again.

    Example (any SentencePiece model; the pieces before the comma depend on the model):
    >>> import sentencepiece as spm
    >>> sp = spm.SentencePieceProcessor(model_file="30k-clean.model")  # doctest: +SKIP
    >>> encode_pieces(sp, "in 1990, they")[-2:]  # doctest: +SKIP
    [',', '▁they']
    """
    check_digit_comma_rule(digit_comma_rule)
    pieces = []
    for piece in sp_model.encode(text, out_type=str):
        if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
            sub_pieces = sp_model.encode(piece[:-1].replace(SPIECE_UNDERLINE, ""), out_type=str)
            if drops_added_marker(piece, sub_pieces, digit_comma_rule):
                if len(sub_pieces[0]) == 1:
                    sub_pieces = sub_pieces[1:]
                else:
                    sub_pieces[0] = sub_pieces[0][1:]
            pieces.extend(sub_pieces)
            pieces.append(",")
        else:
            pieces.append(piece)
    return pieces


def gfile_lines(data: bytes) -> List[bytes]:
    """`data`'s lines as the original's tf.gfile reader gives them: every "\\r" dropped, only "\\n" ends a line.

    Example:
    >>> gfile_lines(b"a\\r\\nb\\rc\\n\\nd\\n")
    [b'a', b'bc', b'', b'd']
    """
    lines = data.replace(b"\r", b"").split(b"\n")
    if not lines[-1]:
        lines.pop()
    return lines


def load_wordpiece_vocab(vocab_file: str) -> Dict[str, int]:
    """Reads a WordPiece vocabulary the original's way: first field of each line, first occurrence wins.

    A repeated token keeps its first id and does not use up an id, so ids follow first occurrences.
    """
    vocab: Dict[str, int] = collections.OrderedDict()
    lines = [line.decode("utf-8") for line in gfile_lines(read_vocabulary_file(vocab_file))]
    for line in lines:
        token = line.strip().split()[0] if line.strip() else " "
        if token not in vocab:
            vocab[token] = len(vocab)
    if not vocab:
        raise ValueError(f"WordPiece vocabulary {vocab_file!r} is empty.")
    return vocab


def read_vocabulary_file(path: str) -> bytes:
    """A vocabulary file's bytes; a URL (gs://, s3://, hdfs://, ram://) is read through tf.io.gfile.

    The original reads its vocabulary with tf.gfile. A local path is read directly, which for a local file is
    what tf.io.gfile does, so that a process which never imports TensorFlow (a Beam worker) can tokenize.

    Example:
    >>> len(read_vocabulary_file("gs://my-bucket/30k-clean.model"))  # doctest: +SKIP
    760289
    """
    if is_url(path):
        import tensorflow as tf

        try:
            with tf.io.gfile.GFile(path, "rb") as handle:
                return handle.read()
        except tf.errors.OpError as error:
            raise OSError(error.message) from None
    with open(path, "rb") as handle:
        return handle.read()


def is_url(path: str) -> bool:
    """Whether `path` is a URL (scheme://...) for tf.io.gfile rather than a local path.

    Example:
    >>> is_url("gs://my-bucket/30k-clean.model"), is_url("30k-clean.model")
    (True, False)
    """
    return bool(_URL.match(path))


_URL = re.compile(r"[a-zA-Z][-a-zA-Z0-9+.]*://")


class AlbertTokenizer:
    """Text to ALBERT token ids, as google-research/albert tokenizes it.

    Give `spm_model_file` (SentencePiece, the English models) or `vocab_file` (WordPiece, the Chinese
    models); given both, the SentencePiece model is used, as in the original. `tokenize` normalises its
    input first, as every caller of the original does
    (`preprocess_text(text, lower=do_lower_case)` before `encode_pieces`).

    `digit_comma_rule` says what the digit-comma rule of `encode_pieces` does with the "▁" it adds
    (`DIGIT_COMMA_RULES`; the default is the original's, which the released models were trained with).
    WordPiece tokenization has no such rule.

    Any SentencePiece model works here; `check_special_ids` tells whether a model has the special ids that
    pretraining data needs (`<pad>`=0, `<unk>`=1, `[CLS]`=2, `[SEP]`=3, `[MASK]`=4). An id attribute whose
    symbol the vocabulary lacks is None.

    Example (with the released 30k-clean.model, or one made by run_scripts.build_vocab):
    >>> tokenizer = AlbertTokenizer(spm_model_file="30k-clean.model")  # doctest: +SKIP
    >>> tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id  # doctest: +SKIP
    (2, 3, 4)
    >>> tokenizer.decode(tokenizer.encode("Hello  WORLD"))  # doctest: +SKIP
    'hello world'
    """

    def __init__(self, spm_model_file: Optional[str] = None, vocab_file: Optional[str] = None,
                 do_lower_case: bool = True, digit_comma_rule: str = DEFAULT_DIGIT_COMMA_RULE):
        if spm_model_file is None and vocab_file is None:
            raise ValueError("AlbertTokenizer needs spm_model_file (SentencePiece) or vocab_file (WordPiece); got "
                             "neither.")
        if spm_model_file is not None and vocab_file is not None:
            # The original's FullTokenizer takes both (its scripts pass 30k-clean.vocab with 30k-clean.model)
            # and then reads only the SentencePiece model.
            logger.info("Tokenizing with %s; the WordPiece vocab_file %s is not used.", spm_model_file, vocab_file)
            vocab_file = None
        self.spm_model_file = spm_model_file
        self.vocab_file = vocab_file
        self.do_lower_case = do_lower_case
        self.digit_comma_rule = check_digit_comma_rule(digit_comma_rule)
        self._sp_model = None
        self._vocab: Dict[str, int] = {}
        self._inverse_vocab: Dict[int, str] = {}
        if spm_model_file is not None:
            self._sp_model = _load_sentencepiece(spm_model_file)
            self.vocab_size = self._sp_model.get_piece_size()
        else:
            self._vocab = load_wordpiece_vocab(vocab_file)
            self._inverse_vocab = {index: token for token, index in self._vocab.items()}
            self.vocab_size = len(self._vocab)
        self.pad_id = self._special_id("<pad>")
        self.unk_id = self._special_id("<unk>")
        self.cls_id = self._special_id("[CLS]")
        self.sep_id = self._special_id("[SEP]")
        self.mask_id = self._special_id("[MASK]")

    @property
    def uses_sentencepiece(self) -> bool:
        """True for a SentencePiece model, False for a WordPiece vocabulary."""
        return self._sp_model is not None

    @property
    def source(self) -> str:
        """The file the vocabulary came from."""
        return self.spm_model_file if self.uses_sentencepiece else self.vocab_file

    def _special_id(self, piece: str) -> Optional[int]:
        if self.uses_sentencepiece:
            index = self._sp_model.piece_to_id(piece)
            return index if self._sp_model.id_to_piece(index) == piece else None
        return self._vocab.get(_WORDPIECE_SPECIAL_TOKENS[piece])

    def check_special_ids(self) -> None:
        """Raises ValueError naming the first special symbol whose id is not the one pretraining data uses.

        Only SentencePiece models are checked: a WordPiece vocabulary keeps BERT's ids and must only hold
        [UNK], [CLS], [SEP] and [MASK].
        """
        if not self.uses_sentencepiece:
            for token in ("[UNK]", "[CLS]", "[SEP]", "[MASK]"):
                if token not in self._vocab:
                    raise ValueError(f"WordPiece vocabulary {self.vocab_file!r} has no {token} token; pretraining "
                                     "data needs [UNK], [CLS], [SEP] and [MASK].")
            return
        expected = ", ".join(f"{piece}={index}" for piece, index in SPECIAL_PIECE_IDS.items())
        for piece, index in SPECIAL_PIECE_IDS.items():
            actual = self._special_id(piece)
            if actual != index:
                found = "does not contain it" if actual is None else f"gives it id {actual}"
                raise ValueError(
                    f"SentencePiece model {self.spm_model_file!r} {found}, but {piece} must have id {index} "
                    f"(ALBERT needs {expected}; train the model with run_scripts.build_vocab).")

    def normalize(self, text: str) -> str:
        """The text `tokenize` works on: `preprocess_text` for SentencePiece, stripped text for WordPiece.

        An empty result marks a blank line (a document boundary in pretraining text).
        """
        if not isinstance(text, str):
            # The original decoded bytes with errors="ignore", silently dropping bad bytes.
            raise TypeError(f"AlbertTokenizer takes str text, got {type(text).__name__}; decode it first.")
        if self.uses_sentencepiece:
            return preprocess_text(text, lower=self.do_lower_case)
        return text.strip()

    def tokenize(self, text: str) -> List[str]:
        """Pieces (SentencePiece) or word pieces (WordPiece) of raw `text`."""
        return self.tokenize_normalized(self.normalize(text))

    def tokenize_normalized(self, text: str) -> List[str]:
        """Like `tokenize` for text that already went through `normalize`."""
        if self.uses_sentencepiece:
            return encode_pieces(self._sp_model, text, self.digit_comma_rule)
        return [piece for word in _basic_tokenize(text, self.do_lower_case)
                for piece in _wordpiece_tokenize(word, self._vocab)]

    def convert_tokens_to_ids(self, tokens: Sequence[str]) -> List[int]:
        """Token ids; an unknown SentencePiece piece maps to `<unk>`, an unknown WordPiece token is an error."""
        if self.uses_sentencepiece:
            return self._sp_model.piece_to_id(list(tokens))
        ids = []
        for token in tokens:
            if token not in self._vocab:
                raise KeyError(f"Token {token!r} is not in the WordPiece vocabulary {self.vocab_file!r}.")
            ids.append(self._vocab[token])
        return ids

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> List[str]:
        """The pieces or tokens of `ids`."""
        for index in ids:
            if not 0 <= int(index) < self.vocab_size:
                raise ValueError(f"Token id {index} is outside the vocabulary of {self.source!r} "
                                 f"(0..{self.vocab_size - 1}).")
        if self.uses_sentencepiece:
            return self._sp_model.id_to_piece([int(index) for index in ids])
        return [self._inverse_vocab[int(index)] for index in ids]

    def encode(self, text: str) -> List[int]:
        """Token ids of raw `text`: `convert_tokens_to_ids(tokenize(text))`."""
        return self.convert_tokens_to_ids(self.tokenize(text))

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids`. [PAD], [CLS], [SEP] and [MASK] vanish; WordPiece `##` pieces rejoin their word."""
        tokens = self.convert_ids_to_tokens(ids)
        if self.uses_sentencepiece:
            return self._sp_model.decode([int(index) for index in ids])
        words: List[str] = []
        for token in tokens:
            if token in _WORDPIECE_SILENT_TOKENS:
                continue
            if token.startswith(WORDPIECE_PREFIX) and words:
                words[-1] += token[len(WORDPIECE_PREFIX):]
            else:
                words.append(token)
        return " ".join(words)

    def get_config(self) -> dict:
        return {"spm_model_file": self.spm_model_file, "vocab_file": self.vocab_file,
                "do_lower_case": self.do_lower_case, "digit_comma_rule": self.digit_comma_rule}

    @classmethod
    def from_config(cls, config: dict) -> "AlbertTokenizer":
        return cls(**config)

    def __reduce__(self):
        # Pickles as its config (the SentencePiece processor itself does not pickle), e.g. for worker processes.
        return self.__class__.from_config, (self.get_config(),)


def _load_sentencepiece(spm_model_file: str) -> spm.SentencePieceProcessor:
    sp_model = spm.SentencePieceProcessor()
    try:
        sp_model.load_from_serialized_proto(read_vocabulary_file(spm_model_file))
    except OSError as error:
        raise FileNotFoundError(f"Cannot read SentencePiece model {spm_model_file!r}: {error}.") from error
    except RuntimeError as error:
        raise ValueError(f"{spm_model_file!r} is not a SentencePiece model: {error}.") from error
    return sp_model


# BERT's BasicTokenizer, as the original's WordPiece mode runs it.

def _basic_tokenize(text: str, do_lower_case: bool) -> List[str]:
    text = _pad_cjk_characters(_clean_text(text))
    words = []
    for word in text.split():
        if do_lower_case:
            word = _strip_accents(word.lower())
        words.extend(_split_on_punctuation(word))
    return " ".join(words).split()


def _clean_text(text: str) -> str:
    output = []
    for character in text:
        code_point = ord(character)
        if code_point == 0 or code_point == 0xFFFD or _is_control(character):
            continue
        output.append(" " if _is_whitespace(character) else character)
    return "".join(output)


def _pad_cjk_characters(text: str) -> str:
    return "".join(f" {character} " if _is_cjk_character(ord(character)) else character for character in text)


def _strip_accents(text: str) -> str:
    return "".join(character for character in unicodedata.normalize("NFD", text)
                   if unicodedata.category(character) != "Mn")


def _split_on_punctuation(word: str) -> List[str]:
    pieces: List[List[str]] = []
    start_new_piece = True
    for character in word:
        if _is_punctuation(character):
            pieces.append([character])
            start_new_piece = True
        else:
            if start_new_piece:
                pieces.append([])
            start_new_piece = False
            pieces[-1].append(character)
    return ["".join(piece) for piece in pieces]


def _wordpiece_tokenize(word: str, vocab: Dict[str, int]) -> List[str]:
    """Greedy longest-match-first split of one word; a word with an unmatchable rest is one [UNK]."""
    if len(word) > MAX_WORDPIECE_CHARS_PER_WORD:
        return ["[UNK]"]
    pieces = []
    start = 0
    while start < len(word):
        end = len(word)
        match = None
        while start < end:
            candidate = word[start:end] if start == 0 else WORDPIECE_PREFIX + word[start:end]
            if candidate in vocab:
                match = candidate
                break
            end -= 1
        if match is None:
            return ["[UNK]"]
        pieces.append(match)
        start = end
    return pieces


def _is_whitespace(character: str) -> bool:
    return character in " \t\n\r" or unicodedata.category(character) == "Zs"


def _is_control(character: str) -> bool:
    if character in "\t\n\r":
        return False
    return unicodedata.category(character) in ("Cc", "Cf")


def _is_punctuation(character: str) -> bool:
    # All non-alphanumeric ASCII counts as punctuation ("$", "^", "`" are not Unicode punctuation).
    code_point = ord(character)
    if 33 <= code_point <= 47 or 58 <= code_point <= 64 or 91 <= code_point <= 96 or 123 <= code_point <= 126:
        return True
    return unicodedata.category(character).startswith("P")


def _is_cjk_character(code_point: int) -> bool:
    # The CJK Unified Ideographs blocks; Hangul, Hiragana and Katakana are written with spaces and excluded.
    return (0x4E00 <= code_point <= 0x9FFF or 0x3400 <= code_point <= 0x4DBF
            or 0x20000 <= code_point <= 0x2A6DF or 0x2A700 <= code_point <= 0x2B73F
            or 0x2B740 <= code_point <= 0x2B81F or 0x2B820 <= code_point <= 0x2CEAF
            or 0xF900 <= code_point <= 0xFAFF or 0x2F800 <= code_point <= 0x2FA1F)
