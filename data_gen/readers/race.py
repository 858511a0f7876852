"""RACE: reading the dataset and the original's 4-choice features.

The layout is `RACE/{train,dev,test}/{middle,high}/*.txt` (give the directory that holds `RACE/`, or
`RACE/` itself). A file holds one JSON article {"article", "questions", "options", "answers", "id"}
(the released files, one per article) or one article per line (the merged `all.txt` that the original
run_race reads). When a level directory holds an `all.txt` beside per-article files, only `all.txt` is
read (reading both would count every question twice, as the original would), with a warning.

Each question becomes 4 sequences `[CLS] article [SEP] qa_i [SEP]` (google-research/albert
race_utils.py): qa_i is the question with "_" replaced by option i if it has a blank, else question + " " +
option i; qa_i keeps its LAST max_qa_length tokens, then the article is cut to fit max_seq_length.
"""

import dataclasses
import json
import os
from typing import Dict, List, Sequence

import tensorflow as tf
from absl import logging

from data_gen.readers import feature_cache

LEVELS = ("middle", "high")
ANSWER_LETTERS = ("A", "B", "C", "D")
MERGED_FILE = "all.txt"


@dataclasses.dataclass
class RaceExample:
    """One question: `label` is the index of the right option (0-3), `level` "middle" or "high".

    Example:
    >>> example = RaceExample("high1.txt-0", "high", "Tom has a cat.", "Tom has a _.", ["cat", "dog", "cow", "hen"], 0)
    >>> [question_with_option(example.question, option) for option in example.options][:2]
    ['Tom has a cat.', 'Tom has a dog.']
    """

    example_id: str
    level: str
    article: str
    question: str
    options: Sequence[str]
    label: int


def race_directory(data_dir: str) -> str:
    """The RACE/ directory: data_dir/RACE, or data_dir itself when it already holds train/dev/test."""
    nested = os.path.join(data_dir, "RACE")
    if tf.io.gfile.isdir(nested):
        return nested
    if any(tf.io.gfile.isdir(os.path.join(data_dir, split)) for split in ("train", "dev", "test")):
        return data_dir
    raise ValueError(f"--data_dir={data_dir!r} holds neither RACE/ nor train/, dev/, test/; expected "
                     "RACE/{train,dev,test}/{middle,high}/*.txt.")


def selected_levels(high_only: bool = False, middle_only: bool = False) -> List[str]:
    """The levels --high_only / --middle_only leave (both set is an error)."""
    if high_only and middle_only:
        raise ValueError("Give at most one of --high_only and --middle_only.")
    return ["high"] if high_only else ["middle"] if middle_only else list(LEVELS)


def level_files(data_dir: str, split: str, levels: Sequence[str]) -> List[str]:
    """The .txt files of a split's levels, sorted; `all.txt` alone where it exists."""
    files = []
    for level in levels:
        directory = os.path.join(race_directory(data_dir), split, level)
        if not tf.io.gfile.isdir(directory):
            raise ValueError(f"RACE directory {directory} does not exist (split {split!r}, level {level!r}).")
        names = sorted(name for name in tf.io.gfile.listdir(directory) if name.endswith(".txt"))
        if MERGED_FILE in names and len(names) > 1:
            logging.warning("%s holds %s and %d other .txt file(s); reading only %s so that no question is "
                            "counted twice.", directory, MERGED_FILE, len(names) - 1, MERGED_FILE)
            names = [MERGED_FILE]
        if not names:
            raise ValueError(f"RACE directory {directory} holds no .txt files.")
        files.extend(os.path.join(directory, name) for name in names)
    return files


def _articles(path):
    with tf.io.gfile.GFile(path, "r") as handle:
        text = handle.read()
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return [(1, whole)]
    articles = []
    for line_number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            articles.append((line_number, json.loads(line)))
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{line_number} is not a JSON article ({error}).") from None
    return articles


def read_examples(data_dir: str, split: str, levels: Sequence[str] = LEVELS) -> List[RaceExample]:
    """Every question of a split's levels, in file order; bad answers or options name the file and question."""
    examples = []
    for path in level_files(data_dir, split, levels):
        level = os.path.basename(os.path.dirname(path))
        for line_number, article in _articles(path):
            examples.extend(_article_examples(article, level, f"{path}:{line_number}"))
    logging.info("Read %d RACE %s questions (%s).", len(examples), split, ", ".join(levels))
    return examples


def _article_examples(article, level, where):
    missing = [key for key in ("article", "questions", "options", "answers", "id") if key not in article]
    if missing:
        raise ValueError(f"{where}: the article has no {missing} (RACE articles have article, questions, options, "
                         "answers and id).")
    questions, options, answers = article["questions"], article["options"], article["answers"]
    if not len(questions) == len(options) == len(answers):
        raise ValueError(f"{where}: article {article['id']!r} has {len(questions)} questions, {len(options)} "
                         f"option lists and {len(answers)} answers; they must be equal.")
    examples = []
    for index, (question, choices, answer) in enumerate(zip(questions, options, answers)):
        if len(choices) != len(ANSWER_LETTERS):
            raise ValueError(f"{where}: question {index} of article {article['id']!r} has {len(choices)} options; "
                             f"RACE questions have exactly {len(ANSWER_LETTERS)}.")
        if answer not in ANSWER_LETTERS:
            raise ValueError(f"{where}: question {index} of article {article['id']!r} has answer {answer!r}; "
                             f"allowed: {', '.join(ANSWER_LETTERS)}.")
        examples.append(RaceExample(f"{article['id']}-{index}", level, article["article"], question, list(choices),
                                    ANSWER_LETTERS.index(answer)))
    return examples


# ---- features ------------------------------------------------------------------------------------

def question_with_option(question: str, option: str) -> str:
    """The original's qa_i: the blank "_" filled with the option, or the option appended after a space.

    The original normalises the question and the option each on its own first (`process_text`, which
    `convert_example` does with the tokenizer's `normalize`): an option's own edge whitespace then never
    reaches the blank, and a compatibility underscore such as "＿" becomes the "_" that is filled.
    """
    return question.replace("_", option) if "_" in question else " ".join([question, option])


def feature_spec(max_seq_length: int) -> Dict[str, tf.TensorSpec]:
    """[4, max_seq_length] inputs, the answer index, the example's position and its level (0 middle, 1 high)."""
    choices = tf.TensorSpec([len(ANSWER_LETTERS), max_seq_length], tf.int32)
    scalar = tf.TensorSpec([], tf.int32)
    return {"input_word_ids": choices, "input_mask": choices, "input_type_ids": choices, "label_ids": scalar,
            "example_index": scalar, "level": scalar}


def convert_example(example: RaceExample, index: int, tokenizer, max_seq_length: int, max_qa_length: int) -> Dict:
    """The 4 padded `[CLS] article [SEP] qa_i [SEP]` sequences of one question, truncated as the original."""
    if not 0 < max_qa_length <= max_seq_length - 3:
        raise ValueError(f"--max_qa_length={max_qa_length} must be in 1..max_seq_length - 3 "
                         f"({max_seq_length - 3}).")
    article_tokens = tokenizer.tokenize(example.article)
    question = tokenizer.normalize(example.question)
    features = {"input_word_ids": [], "input_mask": [], "input_type_ids": []}
    for option in example.options:
        qa_tokens = tokenizer.tokenize(question_with_option(question, tokenizer.normalize(option)))[-max_qa_length:]
        context = article_tokens[:max_seq_length - 3 - len(qa_tokens)]
        tokens = ["[CLS]"] + context + ["[SEP]"] + qa_tokens + ["[SEP]"]
        padding = [0] * (max_seq_length - len(tokens))
        features["input_word_ids"].append(tokenizer.convert_tokens_to_ids(tokens) + padding)
        features["input_mask"].append([1] * len(tokens) + padding)
        features["input_type_ids"].append([0] * (len(context) + 2) + [1] * (len(qa_tokens) + 1) + padding)
    features.update(label_ids=example.label, example_index=index, level=LEVELS.index(example.level))
    return features


def load_split(data_dir: str, split: str, tokenizer, max_seq_length: int, max_qa_length: int, cached_dir: str,
               levels: Sequence[str] = LEVELS):
    """Reads a split and its cached features; returns (examples, feature_cache.CachedFeatures)."""
    examples = read_examples(data_dir, split, levels)
    fingerprint = feature_cache.files_fingerprint(level_files(data_dir, split, levels))
    key = feature_cache.cache_key(f"race/{split}", fingerprint, tokenizer,
                                  {"max_seq_length": max_seq_length, "max_qa_length": max_qa_length,
                                   "levels": list(levels)})

    def make_features():
        for index, example in enumerate(examples):
            yield convert_example(example, index, tokenizer, max_seq_length, max_qa_length)

    features = feature_cache.load_or_build(cached_dir, f"race_{split}_{'_'.join(levels)}", key,
                                           feature_spec(max_seq_length), make_features)
    return examples, features
