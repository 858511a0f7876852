"""CoNLL-2003 named-entity files: reading, tag schemes, and token-classification features.

The data directory holds `train.txt`, `dev.txt` (or `valid.txt`, its name in the original distribution)
and `test.txt`: one token per line with its tag in the last whitespace-separated field (the CoNLL-2003
files put the part-of-speech and chunk tags between them, which are ignored), a blank line between
sentences, and `-DOCSTART-` lines (document boundaries) skipped. Or the sentences come from tensorflow-datasets'
conll2003, prepared locally (`read_tfds_sentences`: its `tokens`, and its `ner` ClassLabel's names as the tags).

Tags are `O` or `<prefix>-<type>` in one scheme, `tag_scheme`:
- `iob1` (the original CoNLL-2003 files): `I-` throughout, `B-` only where a chunk follows one of its
  type. Any IOB2 file reads as the same chunks too, which is why it is the default.
- `iob2`: every chunk starts with `B-`; an `I-X` must follow `B-X` or `I-X`.
- `bioes`: `B-`, `I-`, `E-` (last) and `S-` (single-token chunks); a chunk must open with `B-`/`S-` and
  close with `E-`/`S-`.
A tag outside its scheme is an error naming the file and line. Whatever the scheme, the tags are read as
chunks (tag_schemes.chunks) and the model learns their IOB2 tags, one fixed label set
(`label_list`); predictions are written back in the file's scheme.

Features (the label-alignment rule): every word is split into pieces on its own; `[CLS] pieces [SEP]`;
the word's label id sits on its FIRST piece, and every other position (later pieces, [CLS], [SEP], padding)
has label IGNORED_LABEL (-100), left out of the loss and the metrics. `word_ids` says which word of the
sentence a labelled position is (-1 elsewhere), so predictions map back to words. A word without pieces
(a stray control character) gets `<unk>`, so every word has a prediction. A sentence whose pieces exceed
max_seq_length - 2 is split, between words, into consecutive windows that each fit: every word is
labelled and scored exactly once, and nothing is dropped (a window sees no context from its neighbours;
a single word longer than a window keeps only its first pieces).

Example:
>>> import os, tempfile
>>> directory = tempfile.mkdtemp()
>>> with open(os.path.join(directory, "train.txt"), "w") as handle:
...     _ = handle.write("-DOCSTART- -X- O O\\n\\nEU NNP I-ORG\\nrejects VBZ O\\nGerman JJ I-MISC\\n\\n")
>>> sentences = read_sentences(split_file(directory, "train"), "iob1")
>>> sentences[0].words, sentences[0].tags
(['EU', 'rejects', 'German'], ['I-ORG', 'O', 'I-MISC'])
>>> label_list(sentences)
('O', 'B-MISC', 'I-MISC', 'B-ORG', 'I-ORG')
"""

import dataclasses
import os
from typing import Dict, Iterator, List, Optional, Sequence

import tensorflow as tf
from absl import logging

from data_gen.readers import feature_cache
from data_gen.readers.tag_schemes import OUTSIDE, TAG_SCHEMES, chunks, split_tag, tags_in_scheme

SPLIT_FILES = {"train": ("train.txt",), "dev": ("dev.txt", "valid.txt"), "test": ("test.txt",)}
DOCUMENT_START = "-DOCSTART-"
IGNORED_LABEL = -100
_SCHEME_PREFIXES = {"iob1": ("B", "I"), "iob2": ("B", "I"), "bioes": ("B", "I", "E", "S")}
# BIOES: what may follow an open chunk's tag (B- or I-) of type X: I-X or E-X.
_CONTINUING = ("I", "E")


@dataclasses.dataclass
class ConllSentence:
    """One sentence: its words and their tags (in the file's scheme), and where it starts (`file:line`)."""

    words: List[str]
    tags: List[str]
    source: str


def split_file(data_dir: str, split: str) -> str:
    """The file of `split` (train, dev, test) under data_dir: dev is dev.txt, else valid.txt."""
    if split not in SPLIT_FILES:
        raise ValueError(f"Unknown CoNLL split {split!r}; allowed: {', '.join(SPLIT_FILES)}.")
    candidates = [os.path.join(data_dir, name) for name in SPLIT_FILES[split]]
    for path in candidates:
        if tf.io.gfile.exists(path):
            return path
    raise ValueError(f"No CoNLL {split} file under --data_dir={data_dir}: expected {' or '.join(SPLIT_FILES[split])} "
                     f"(one token per line with its tag last, a blank line between sentences).")


def check_tag_scheme(tag_scheme: str) -> str:
    if tag_scheme not in TAG_SCHEMES:
        raise ValueError(f"Unknown --tag_scheme={tag_scheme!r}; allowed: {', '.join(TAG_SCHEMES)}.")
    return tag_scheme


def _check_tag(tag, previous_tag, tag_scheme, where):
    prefix, entity_type = split_tag(tag)
    if tag != OUTSIDE and (prefix not in _SCHEME_PREFIXES[tag_scheme] or not entity_type):
        raise ValueError(f"{where}: tag {tag!r} is not O or {'/'.join(_SCHEME_PREFIXES[tag_scheme])}-<type>, "
                         f"which --tag_scheme={tag_scheme} allows.")
    previous_prefix, previous_type = split_tag(previous_tag)
    opened = previous_prefix in ("B", "I") and tag_scheme != "iob1"
    if tag_scheme == "iob2" and prefix == "I" and not (opened and previous_type == entity_type):
        raise ValueError(f"{where}: {tag} follows {previous_tag}, but in IOB2 an I-{entity_type} must follow "
                         f"B-{entity_type} or I-{entity_type} (IOB1 data needs --tag_scheme=iob1).")
    if tag_scheme == "bioes":
        continues = prefix in _CONTINUING and previous_type == entity_type
        if (opened and not continues) or (not opened and prefix in _CONTINUING):
            raise ValueError(f"{where}: {tag} follows {previous_tag}, but in BIOES a chunk opened by B- or I- "
                             f"continues with I- or E- of its type, and only such a chunk does.")


def read_sentences(path: str, tag_scheme: str = "iob1") -> List[ConllSentence]:
    """The sentences of one CoNLL file, their tags checked against `tag_scheme`."""
    check_tag_scheme(tag_scheme)
    with tf.io.gfile.GFile(path, "r") as handle:
        lines = handle.read().splitlines()
    sentences, words, tags, start = [], [], [], None

    def close(line_number):
        if not words:
            return
        if tag_scheme == "bioes" and split_tag(tags[-1])[0] in ("B", "I"):
            raise ValueError(f"{path}:{line_number}: the sentence ends after {tags[-1]}, which leaves its chunk "
                             f"open; in BIOES a chunk closes with E- or S-.")
        sentences.append(ConllSentence(list(words), list(tags), f"{path}:{start}"))
        words.clear()
        tags.clear()

    for line_number, line in enumerate(lines, start=1):
        fields = line.split()
        if not fields or fields[0] == DOCUMENT_START:
            close(line_number)
            continue
        if len(fields) < 2:
            raise ValueError(f"{path}:{line_number}: {line.strip()!r} has one field; a CoNLL line holds the token "
                             f"and its tag last, separated by whitespace.")
        if not words:
            start = line_number
        _check_tag(fields[-1], tags[-1] if tags else OUTSIDE, tag_scheme, f"{path}:{line_number}")
        words.append(fields[0])
        tags.append(fields[-1])
    close(len(lines) + 1)
    logging.info("Read %d sentences from %s.", len(sentences), path)
    return sentences


def entity_types(sentences: Sequence[ConllSentence]) -> List[str]:
    """The sorted entity types the sentences' tags name."""
    return sorted({entity_type for sentence in sentences for entity_type, _, _ in chunks(sentence.tags)})


def label_list(sentences: Sequence[ConllSentence] = (), types: Optional[Sequence[str]] = None) -> tuple:
    """The model's labels: `O`, then `B-X`, `I-X` for each entity type X (of `types`, else of the sentences)."""
    types = entity_types(sentences) if types is None else sorted(types)
    return (OUTSIDE,) + tuple(f"{prefix}-{entity_type}" for entity_type in types for prefix in ("B", "I"))


def model_tags(sentence: ConllSentence) -> List[str]:
    """The sentence's tags as the model learns them: its chunks in IOB2."""
    return tags_in_scheme(chunks(sentence.tags), len(sentence.tags), "iob2")


# ---- tensorflow-datasets -------------------------------------------------------------------------

# Our split names and the names tensorflow-datasets gives them (conll2003 calls dev `dev`; others `validation`).
TFDS_SPLITS = {"train": ("train",), "dev": ("dev", "validation"), "test": ("test",)}
TFDS_TAG_FEATURES = ("ner", "ner_tags")


def read_tfds_sentences(name: str, split: str, tag_scheme: str = "iob1",
                        data_dir: Optional[str] = None) -> List[ConllSentence]:
    """The sentences of a split of tensorflow-datasets `name` (e.g. conll2003), which must be prepared locally.

    The dataset's `tokens` are the words and its `ner` (or `ner_tags`) ClassLabel names the tags, checked against
    `tag_scheme` as a file's are. Nothing is downloaded: an unprepared dataset is an error that says how to
    prepare it.
    """
    import tensorflow_datasets as tfds

    check_tag_scheme(tag_scheme)
    if split not in TFDS_SPLITS:
        raise ValueError(f"Unknown CoNLL split {split!r}; allowed: {', '.join(TFDS_SPLITS)}.")
    where = data_dir or "the default data_dir"
    try:
        builder = tfds.builder(name, data_dir=data_dir)
    except tfds.core.registered.DatasetNotFoundError:
        raise ValueError(f"tensorflow-datasets has no dataset {name!r}; --tfds reads conll2003.") from None
    if not builder.is_prepared():
        raise ValueError(f"tensorflow-datasets {name} is not prepared under {where}; prepare it once with "
                         f"`tfds build {name}` where there is internet (with --data_dir=DIR, then pass "
                         f"--tfds_data_dir=DIR here), or give --data_dir with the CoNLL files.")
    tfds_split = next((candidate for candidate in TFDS_SPLITS[split] if candidate in builder.info.splits), None)
    if tfds_split is None:
        raise ValueError(f"tensorflow-datasets {name} under {where} has no {split} split "
                         f"({' or '.join(TFDS_SPLITS[split])}); it has {', '.join(builder.info.splits)}.")
    dataset = builder.as_dataset(split=tfds_split, shuffle_files=False)
    features = builder.info.features
    tag_feature = next((feature for feature in TFDS_TAG_FEATURES if feature in features), None)
    if "tokens" not in features or tag_feature is None:
        raise ValueError(f"tensorflow-datasets {name} has the features {sorted(features)}; reading it as CoNLL needs "
                         f"`tokens` and one of {list(TFDS_TAG_FEATURES)}.")
    tag_names = features[tag_feature].feature.names
    sentences = []
    for index, record in enumerate(dataset.as_numpy_iterator()):
        source = f"tensorflow-datasets {name} {tfds_split}[{index}]"
        words = [token.decode("utf-8") for token in record["tokens"]]
        if not words:
            continue
        tags = [tag_names[int(tag)] for tag in record[tag_feature]]
        for position, tag in enumerate(tags):
            _check_tag(tag, tags[position - 1] if position else OUTSIDE, tag_scheme, f"{source}, word {position}")
        if tag_scheme == "bioes" and split_tag(tags[-1])[0] in ("B", "I"):
            raise ValueError(f"{source}: the sentence ends after {tags[-1]}, which leaves its chunk open; in BIOES a "
                             f"chunk closes with E- or S-.")
        sentences.append(ConllSentence(words, tags, source))
    logging.info("Read %d sentences from tensorflow-datasets %s %s.", len(sentences), name, tfds_split)
    return sentences


# ---- features ------------------------------------------------------------------------------------

def feature_spec(max_seq_length: int) -> Dict[str, tf.TensorSpec]:
    """The cached feature layout: the model inputs, per-position `label_ids` and `word_ids`, and the indices."""
    per_position = tf.TensorSpec([max_seq_length], tf.int32)
    return {"input_word_ids": per_position, "input_mask": per_position, "input_type_ids": per_position,
            "label_ids": per_position, "word_ids": per_position,
            "sentence_index": tf.TensorSpec([], tf.int32), "example_index": tf.TensorSpec([], tf.int32)}


def _word_pieces(tokenizer, word) -> List[int]:
    return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word)) or [tokenizer.unk_id]


def sentence_windows(sentence: ConllSentence, tokenizer, max_seq_length: int) -> List[List[tuple]]:
    """The sentence's words as windows of (word index, piece ids) that each fit max_seq_length - 2 pieces."""
    budget = max_seq_length - 2
    if budget < 1:
        raise ValueError(f"max_seq_length={max_seq_length} leaves no room for a word beside [CLS] and [SEP].")
    windows, window, used = [], [], 0
    for word_index, word in enumerate(sentence.words):
        pieces = _word_pieces(tokenizer, word)[:budget]
        if used + len(pieces) > budget:
            windows.append(window)
            window, used = [], 0
        window.append((word_index, pieces))
        used += len(pieces)
    windows.append(window)
    return windows


def convert_window(window, labels: Sequence[int], sentence_index: int, example_index: int, tokenizer,
                   max_seq_length: int) -> Dict[str, object]:
    """`[CLS] pieces [SEP]` ids zero-padded, the label of each word on its first piece (IGNORED_LABEL elsewhere)."""
    input_ids = [tokenizer.cls_id]
    label_ids, word_ids = [IGNORED_LABEL], [-1]
    for word_index, pieces in window:
        input_ids += pieces
        label_ids += [labels[word_index]] + [IGNORED_LABEL] * (len(pieces) - 1)
        word_ids += [word_index] + [-1] * (len(pieces) - 1)
    input_ids.append(tokenizer.sep_id)
    label_ids.append(IGNORED_LABEL)
    word_ids.append(-1)
    padding = max_seq_length - len(input_ids)
    return {"input_word_ids": input_ids + [0] * padding, "input_mask": [1] * len(input_ids) + [0] * padding,
            "input_type_ids": [0] * max_seq_length, "label_ids": label_ids + [IGNORED_LABEL] * padding,
            "word_ids": word_ids + [-1] * padding, "sentence_index": sentence_index, "example_index": example_index}


def sentence_features(sentences: Sequence[ConllSentence], labels: Sequence[str], tokenizer,
                      max_seq_length: int) -> Iterator[Dict[str, object]]:
    """The features of every window of every sentence, in order; a tag outside `labels` is an error."""
    label_ids = {label: index for index, label in enumerate(labels)}
    example_index = 0
    for sentence_index, sentence in enumerate(sentences):
        tags = model_tags(sentence)
        unknown = sorted(set(tags) - set(label_ids))
        if unknown:
            raise ValueError(f"{sentence.source}: the sentence's tags {unknown} are not among the model's labels "
                             f"{list(labels)}.")
        for window in sentence_windows(sentence, tokenizer, max_seq_length):
            yield convert_window(window, [label_ids[tag] for tag in tags], sentence_index, example_index, tokenizer,
                                 max_seq_length)
            example_index += 1


def load_split(data_dir: Optional[str], split: str, tokenizer, max_seq_length: int, cached_dir: str, tag_scheme: str,
               labels: Sequence[str], sentences: Optional[List[ConllSentence]] = None):
    """Reads a split (unless its `sentences` are given) and its cached features.

    Without `data_dir` the `sentences` (e.g. from tensorflow-datasets, `read_tfds_sentences`) are the data.
    Returns (sentences, feature_cache.CachedFeatures); one feature per window, so a split has at least as
    many features as sentences. The cache is keyed by the file's content (the sentences' without a file), the
    tokenizer, max_seq_length, the tag scheme and the labels.
    """
    if data_dir is None:
        if sentences is None:
            raise ValueError(f"The CoNLL {split} split needs a --data_dir or its sentences.")
        fingerprint = feature_cache.records_fingerprint(dataclasses.asdict(sentence) for sentence in sentences)
    else:
        path = split_file(data_dir, split)
        if sentences is None:
            sentences = read_sentences(path, tag_scheme)
        fingerprint = feature_cache.files_fingerprint([path])
    key = feature_cache.cache_key(f"conll/{split}", fingerprint, tokenizer,
                                  {"max_seq_length": max_seq_length, "tag_scheme": tag_scheme,
                                   "labels": list(labels)})
    features = feature_cache.load_or_build(cached_dir, f"conll_{split}", key, feature_spec(max_seq_length),
                                           lambda: sentence_features(sentences, labels, tokenizer, max_seq_length))
    return sentences, features
