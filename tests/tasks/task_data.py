"""Tiny data in the real formats of GLUE, RACE, SQuAD and CoNLL-2003, built so that a tiny model learns each task
in a few dozen steps; the task tests (scripts and Python API) share it."""
import json
import random

from albert_tf.config import AlbertConfig
from data_gen.readers import race
from data_gen.pretraining import build_vocab
from data_gen.readers.tag_schemes import tags_in_scheme
from tests.helpers import tiny_config_values

KEYWORD_FILLER = ("the model learns a shared block of attention and feed forward weights that runs at every "
                  "depth").split()

GLUE_TINY_CONFIG = tiny_config_values(vocab_size=120, hidden_size=32, num_hidden_layers=2, intermediate_size=64,
                                      embedding_size=16, max_position_embeddings=64, initializer_range=0.02,
                                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _sentence(rng, keyword_count):
    words = [rng.choice(KEYWORD_FILLER) for _ in range(rng.randint(4, 9))]
    for _ in range(keyword_count):
        words.insert(rng.randint(0, len(words)), "lamb")
    return " ".join(words)


def write_keyword_mrpc(directory, sizes=(("train", 400), ("dev", 64), ("test", 12))):
    """MRPC in its real format; a pair is a 'paraphrase' iff its second sentence says "lamb"."""
    rng = random.Random(0)
    (directory / "MRPC").mkdir(parents=True)
    for split, count in sizes:
        rows = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String" if split != "test" else
                "index\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        for index in range(count):
            label = rng.randint(0, 1)
            first = label if split != "test" else 100 + index
            rows.append(f"{first}\t{1000 + index}\t{2000 + index}\t{_sentence(rng, 0)}\t{_sentence(rng, 3 * label)}")
        (directory / "MRPC" / f"{split}.tsv").write_text("\n".join(rows) + "\n")


# ---- RACE ------------------------------------------------------------------------------------------

def race_article(article_id, questions, answers, options=None, text="the model learns a shared block"):
    options = options or [["red", "green", "blue", "white"] for _ in questions]
    return {"article": text, "questions": questions, "options": options, "answers": answers, "id": article_id}


def write_race_file(path, *articles, merged=False):
    """One article per file as the RACE download, or `merged` JSON lines as the original's all.txt."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if merged:
        path.write_text("".join(json.dumps(article) + "\n" for article in articles))
    else:
        path.write_text(json.dumps(articles[0], indent=1))


def write_keyword_race(directory, sizes=(("train", 120), ("dev", 24), ("test", 8))):
    """A RACE directory where the right option is the one that says "lamb" (per-article files for middle,
    all.txt for high)."""
    rng = random.Random(1)
    for split, articles in sizes:
        for level in race.LEVELS:
            lines = []
            for index in range(articles // 2):
                answers, options, questions = [], [], []
                for _ in range(2):
                    right = rng.randrange(4)
                    choices = [" ".join(rng.choice(KEYWORD_FILLER) for _ in range(3)) for _ in range(4)]
                    choices[right] = choices[right] + " lamb lamb"
                    questions.append("which one is _ here" if rng.random() < 0.5 else "which one")
                    options.append(choices)
                    answers.append("ABCD"[right])
                article = race_article(f"{level}{index}.txt", questions, answers, options,
                                       text=" ".join(rng.choice(KEYWORD_FILLER) for _ in range(30)))
                if level == "middle":
                    write_race_file(directory / "RACE" / split / level / f"{index}.txt", article)
                else:
                    lines.append(article)
            if lines:
                write_race_file(directory / "RACE" / split / level / "all.txt", *lines, merged=True)


# ---- CoNLL-2003 NER ---------------------------------------------------------------------------------
# Filler words with keyword entities: "lamb" is a PER, "prediction batches" a two-word LOC; two lambs side by side are
# two PER chunks (IOB1 writes the second B-PER).

def _keyword_sentence(rng):
    """(words, chunks): filler words with 0-2 "lamb" (PER) and 0-1 "prediction batches" (LOC) put between them."""
    units = [([rng.choice(KEYWORD_FILLER)], None) for _ in range(rng.randint(3, 8))]
    for entity in [(["lamb"], "PER") for _ in range(rng.randint(0, 2))] + [(["prediction", "batches"], "LOC")] * \
            rng.randint(0, 1):
        units.insert(rng.randint(0, len(units)), entity)
    words, chunks = [], []
    for unit_words, entity_type in units:
        if entity_type:
            chunks.append((entity_type, len(words), len(words) + len(unit_words) - 1))
        words += unit_words
    return words, chunks


def write_keyword_conll(directory, tag_scheme="iob1", sizes=(("train", 300), ("valid", 40), ("test", 20))):
    """CoNLL-2003 files in `tag_scheme` (with POS and chunk columns and -DOCSTART- lines, dev as valid.txt)."""
    rng = random.Random(2)
    directory.mkdir(parents=True, exist_ok=True)
    for split, count in sizes:
        lines = ["-DOCSTART- -X- -X- O", ""]
        for _ in range(count):
            tokens, chunks = _keyword_sentence(rng)
            lines += [f"{token} NN I-NP {tag}" for token, tag in zip(tokens, tags_in_scheme(chunks, len(tokens),
                                                                                           tag_scheme))]
            lines.append("")
        (directory / f"{split}.txt").write_text("\n".join(lines) + "\n")


# ---- SQuAD -----------------------------------------------------------------------------------------
# Every context is a line of filler words; an answerable question's context holds one colour word and the
# answer is that word ("Which colour is named?"). For v2.0 a third of the contexts hold no colour.

FILLER = tuple("river stone cloud lamp window garden bridge paper engine forest music table winter harbor".split())
COLOURS = ("Coral", "Violet", "Amber", "Olive")
SQUAD_TINY_CONFIG = tiny_config_values(vocab_size=0, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                                       intermediate_size=64, max_position_embeddings=64, initializer_range=0.02,
                                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def squad_json(path, num_questions, impossible_fraction, seed):
    rng = random.Random(seed)
    paragraphs = []
    for index in range(num_questions):
        words = [rng.choice(FILLER) for _ in range(rng.randint(6, 12))]
        qa = {"id": f"q{seed}-{index}", "question": "Which colour is named?", "answers": [],
              "is_impossible": rng.random() < impossible_fraction}
        if not qa["is_impossible"]:
            position = rng.randint(0, len(words))
            words.insert(position, rng.choice(COLOURS))
            answer_start = sum(len(word) + 1 for word in words[:position])
            qa["answers"] = [{"text": words[position], "answer_start": answer_start}]
        paragraphs.append({"context": " ".join(words) + ".", "qas": [qa]})
    path.write_text(json.dumps({"version": "synthetic", "data": [{"title": "colours", "paragraphs": paragraphs}]}))
    return str(path)


def squad_data_files(directory, version_2):
    """[train, dev, threshold search] SQuAD files of the colour task."""
    impossible = 1 / 3 if version_2 else 0.0
    name = "v2" if version_2 else "v1"
    return [squad_json(directory / f"{split}-{name}.json", count, impossible, seed=seed)
            for split, count, seed in (("train", 320, 1), ("dev", 48, 2), ("search", 48, 3))]


def make_squad_assets(directory):
    """(directory, SentencePiece model, config file) of the colour task."""
    corpus = directory / "corpus.txt"
    rng = random.Random(0)
    words = [word.lower() for word in FILLER + COLOURS + ("which", "colour", "is", "named?")]
    corpus.write_text("".join(" ".join(rng.choice(words) for _ in range(10)) + "\n" for _ in range(400)))
    # Every filler and colour word becomes one piece.
    spm_model = build_vocab.train_sentencepiece([str(corpus)], str(directory / "spm"), vocab_size=56)
    config_path = directory / "albert_config.json"
    AlbertConfig(**dict(SQUAD_TINY_CONFIG, vocab_size=56)).to_json_file(str(config_path))
    return directory, spm_model, str(config_path)


# ---- your own labelled text (run_classifier) --------------------------------------------------------
# Filler sentences with keywords, under a vocabulary where every word is one piece: single-label, the keyword the
# text says three times ("lamb", "prediction" or "none"); multi-label, the set of keywords it says three times each;
# regression, the number of "lamb"s (0 to 3).

OWN_KEYWORDS = ("lamb", "prediction")
KEYWORD_VOCAB_SIZE = 55


def make_keyword_assets(directory):
    """(SentencePiece model, config file) of the keyword tasks: every filler word and keyword is one piece."""
    corpus = directory / "keyword_corpus.txt"
    rng = random.Random(0)
    words = sorted(set(KEYWORD_FILLER)) + list(OWN_KEYWORDS)
    corpus.write_text("".join(" ".join(rng.choice(words) for _ in range(10)) + "\n" for _ in range(400)))
    spm_model = build_vocab.train_sentencepiece([str(corpus)], str(directory / "keyword_spm"),
                                                vocab_size=KEYWORD_VOCAB_SIZE)
    config_path = directory / "albert_config.json"
    # Not shared: with one block at both depths this tiny model learns one keyword and, within 150 steps, never the
    # second (its multi-label F1 stays at 0.5 for that label); unshared it learns both.
    AlbertConfig(**dict(GLUE_TINY_CONFIG, vocab_size=KEYWORD_VOCAB_SIZE, share_type="none")).to_json_file(
        str(config_path))
    return spm_model, str(config_path)


def _own_example(rng, kind):
    words = [rng.choice(KEYWORD_FILLER) for _ in range(rng.randint(3, 7))]
    if kind == "single_label":
        label = rng.choice(("none",) + OWN_KEYWORDS)
        keywords = [] if label == "none" else [label]
    elif kind == "multi_label":
        label = [keyword for keyword in OWN_KEYWORDS if rng.random() < 0.5]
        keywords = label
    else:
        label = float(rng.randint(0, 3))
        keywords = ["lamb"] * int(label)
    for keyword in keywords if kind == "regression" else [keyword for keyword in keywords for _ in range(3)]:
        words.insert(rng.randint(0, len(words)), keyword)
    return " ".join(words), label


def write_labeled_text(path, kind, count, seed=0):
    """`count` keyword examples of `kind` in the format of the path's extension: a TSV or CSV with a header row
    (text, topic; a multi-label field joined with '|'), or JSON lines ({"text", "topic"}, multi-label as a list)."""
    import csv

    rng = random.Random(seed)
    rows = [_own_example(rng, kind) for _ in range(count)]
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps({"text": text, "topic": label}) + "\n" for text, label in rows))
        return path
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t" if path.suffix == ".tsv" else ",",
                            quoting=csv.QUOTE_NONE if path.suffix == ".tsv" else csv.QUOTE_MINIMAL,
                            lineterminator="\n")
        writer.writerow(["text", "topic"])
        writer.writerows([text, "|".join(label) if kind == "multi_label" else label] for text, label in rows)
    return path


def prepare_tfds_conll2003(data_dir, source_dir):
    """Prepares tensorflow-datasets' real conll2003 builder under `data_dir` from the CoNLL files in `source_dir`
    (train.txt, valid.txt, test.txt), which stand in for its download: its own on-disk format, no network."""
    from unittest import mock

    import tensorflow_datasets as tfds
    from etils import epath

    with mock.patch.object(tfds.download.DownloadManager, "download_and_extract",
                           return_value=epath.Path(source_dir)):
        tfds.builder("conll2003", data_dir=str(data_dir)).download_and_prepare()
