"""data_gen.readers.conll: the CoNLL-2003 reader, its tag schemes, and the first-piece label alignment."""
import re

import numpy as np
import pytest

from data_gen.readers import conll
from data_gen.readers.conll import IGNORED_LABEL, ConllSentence

TRAIN = """-DOCSTART- -X- -X- O

EU NNP B-NP I-ORG
rejects VBZ B-VP O
German JJ B-NP I-MISC
call NN I-NP O
. . O O

Peter NNP B-NP I-PER
Blackburn NNP I-NP I-PER
-DOCSTART- -X- -X- O
BRUSSELS NNP B-NP I-LOC
"""


def write(directory, name, text):
    path = directory / name
    path.write_text(text)
    return str(path)


def test_reads_sentences_skipping_docstart_with_the_tag_last(tmp_path):
    path = write(tmp_path, "train.txt", TRAIN)
    sentences = conll.read_sentences(conll.split_file(str(tmp_path), "train"), "iob1")
    assert [sentence.words for sentence in sentences] == [["EU", "rejects", "German", "call", "."],
                                                          ["Peter", "Blackburn"], ["BRUSSELS"]]
    assert sentences[1].tags == ["I-PER", "I-PER"] and sentences[1].source == f"{path}:9"
    assert conll.entity_types(sentences) == ["LOC", "MISC", "ORG", "PER"]
    assert conll.model_tags(sentences[0]) == ["B-ORG", "O", "B-MISC", "O", "O"]


def test_dev_is_dev_txt_else_valid_txt_and_a_missing_file_is_named(tmp_path):
    write(tmp_path, "valid.txt", "a O\n")
    assert conll.split_file(str(tmp_path), "dev").endswith("valid.txt")
    write(tmp_path, "dev.txt", "a O\n")
    assert conll.split_file(str(tmp_path), "dev").endswith("dev.txt")
    with pytest.raises(ValueError, match="No CoNLL test file under --data_dir=.*: expected test.txt"):
        conll.split_file(str(tmp_path), "test")


@pytest.mark.parametrize("text, scheme, line, message", [
    ("EU I-ORG\nrejects\n", "iob1", 2, "'rejects' has one field"),
    ("EU X-ORG\n", "iob1", 1, "tag 'X-ORG' is not O or B/I-<type>"),
    ("EU S-ORG\n", "iob2", 1, "tag 'S-ORG' is not O or B/I-<type>"),
    ("EU B-\n", "bioes", 1, "tag 'B-' is not O or B/I/E/S-<type>"),
    ("a O\nEU I-ORG\n", "iob2", 2, "I-ORG follows O, but in IOB2 an I-ORG must follow B-ORG or I-ORG"),
    ("EU B-ORG\nx I-PER\n", "iob2", 2, "I-PER follows B-ORG"),
    ("EU B-ORG\nx O\n", "bioes", 2, "O follows B-ORG, but in BIOES a chunk opened by B- or I- continues"),
    ("EU O\nx E-ORG\n", "bioes", 2, "E-ORG follows O"),
    ("EU B-ORG\nx I-ORG\n\n", "bioes", 3, "the sentence ends after I-ORG, which leaves its chunk open"),
])
def test_a_bad_line_is_named_by_file_and_line(tmp_path, text, scheme, line, message):
    path = write(tmp_path, "train.txt", text)
    with pytest.raises(ValueError, match=f"{path}:{line}: .*{message}"):
        conll.read_sentences(path, scheme)


@pytest.mark.parametrize("scheme, tags", [
    ("iob1", ["I-PER", "I-PER", "B-PER", "O", "I-LOC"]),
    ("iob2", ["B-PER", "I-PER", "B-PER", "O", "B-LOC"]),
    ("bioes", ["B-PER", "E-PER", "S-PER", "O", "S-LOC"]),
])
def test_every_scheme_reads_as_the_same_model_tags(tmp_path, scheme, tags):
    path = write(tmp_path, "train.txt", "".join(f"w{index} {tag}\n" for index, tag in enumerate(tags)))
    (sentence,) = conll.read_sentences(path, scheme)
    assert conll.model_tags(sentence) == ["B-PER", "I-PER", "B-PER", "O", "B-LOC"]
    with pytest.raises(ValueError, match="Unknown --tag_scheme='bio'; allowed: iob1, iob2, bioes"):
        conll.read_sentences(path, "bio")


def test_labels_sit_on_the_first_piece_of_each_word(tokenizer):
    labels = conll.label_list(types=["LOC", "PER"])
    assert labels == ("O", "B-LOC", "I-LOC", "B-PER", "I-PER")
    words = ["international", "sentencepiece", "a", "blocks"]
    sentence = ConllSentence(words, ["B-PER", "I-PER", "O", "B-LOC"], "test:1")
    (feature,) = conll.sentence_features([sentence], labels, tokenizer, max_seq_length=32)
    pieces = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(word)) for word in words]
    assert any(len(word_pieces) > 1 for word_pieces in pieces)
    expected_ids = [tokenizer.cls_id] + [piece for word_pieces in pieces for piece in word_pieces] + [tokenizer.sep_id]
    length = len(expected_ids)
    assert feature["input_word_ids"] == expected_ids + [0] * (32 - length)
    assert feature["input_mask"] == [1] * length + [0] * (32 - length)
    firsts = np.cumsum([1] + [len(word_pieces) for word_pieces in pieces[:-1]])
    label_ids, word_ids = np.array(feature["label_ids"]), np.array(feature["word_ids"])
    assert label_ids[firsts].tolist() == [3, 4, 0, 1] and word_ids[firsts].tolist() == [0, 1, 2, 3]
    others = np.setdiff1d(np.arange(32), firsts)
    assert (label_ids[others] == IGNORED_LABEL).all() and (word_ids[others] == -1).all()


def test_a_long_sentence_is_split_between_words_into_windows_that_label_every_word_once(tokenizer):
    words = [f"block{index}" for index in range(30)]
    sentence = ConllSentence(words, ["O", "B-PER"] * 15, "test:1")
    labels = conll.label_list(types=["PER"])
    features = list(conll.sentence_features([sentence, sentence], labels, tokenizer, max_seq_length=16))
    assert len(features) > 4 and [feature["example_index"] for feature in features] == list(range(len(features)))
    first = [feature for feature in features if feature["sentence_index"] == 0]
    labelled = [word for feature in first for word in feature["word_ids"] if word >= 0]
    assert labelled == list(range(30))
    for feature in first:
        assert sum(feature["input_mask"]) <= 16 and feature["input_word_ids"][0] == tokenizer.cls_id
        assert [label for label in feature["label_ids"] if label != IGNORED_LABEL] == [
            [0, 1][word % 2] for word in feature["word_ids"] if word >= 0]


def test_an_unknown_tag_names_the_sentence(tokenizer):
    with pytest.raises(ValueError, match=r"test:7: the sentence's tags \['B-ORG'\] are not among the model's labels"):
        list(conll.sentence_features([ConllSentence(["EU"], ["B-ORG"], "test:7")], conll.label_list(types=["PER"]),
                                     tokenizer, 16))


def test_features_are_cached_by_content_and_parameters(tmp_path, tokenizer):
    write(tmp_path, "train.txt", TRAIN)
    labels = conll.label_list(types=["LOC", "MISC", "ORG", "PER"])
    sentences, features = conll.load_split(str(tmp_path), "train", tokenizer, 16, str(tmp_path / "cache"), "iob1",
                                           labels)
    assert features.num_examples >= 3 and len(sentences) == 3
    rows = list(features.dataset())
    assert rows[0]["label_ids"].dtype.name == "int32" and int(rows[0]["label_ids"][0]) == IGNORED_LABEL
    _, again = conll.load_split(str(tmp_path), "train", tokenizer, 16, str(tmp_path / "cache"), "iob1", labels)
    _, longer = conll.load_split(str(tmp_path), "train", tokenizer, 24, str(tmp_path / "cache"), "iob1", labels)
    assert again.path == features.path and longer.path != features.path


# ---- tensorflow-datasets conll2003 -----------------------------------------------------------------

@pytest.fixture(scope="module")
def tfds_conll2003(tmp_path_factory):
    """(CoNLL files, tfds data_dir): tensorflow-datasets' conll2003 builder prepared from generated CoNLL files."""
    from tests.tasks.task_data import prepare_tfds_conll2003, write_keyword_conll

    directory = tmp_path_factory.mktemp("tfds_conll2003")
    write_keyword_conll(directory / "files", tag_scheme="iob2", sizes=(("train", 12), ("valid", 5), ("test", 4)))
    prepare_tfds_conll2003(directory / "tfds", directory / "files")
    return directory / "files", directory / "tfds"


def test_tfds_conll2003_reads_as_its_source_files(tfds_conll2003):
    files, data_dir = tfds_conll2003
    for split, name in (("train", "train.txt"), ("dev", "valid.txt"), ("test", "test.txt")):
        from_tfds = conll.read_tfds_sentences("conll2003", split, "iob2", str(data_dir))
        from_files = conll.read_sentences(str(files / name), "iob2")
        # tensorflow-datasets stores a split in its own order (by a hash of each example's key), not the file's.
        assert sorted((sentence.words, sentence.tags) for sentence in from_tfds) == \
            sorted((sentence.words, sentence.tags) for sentence in from_files)
    assert from_tfds[0].source == "tensorflow-datasets conll2003 test[0]"


def test_tfds_tags_are_checked_against_the_scheme(tfds_conll2003):
    _, data_dir = tfds_conll2003
    # The generated data is IOB2; a lamb after O is I-PER in IOB1, B-PER here, which BIOES refuses to leave open.
    with pytest.raises(ValueError, match=r"^tensorflow-datasets conll2003 train\[\d+\]: the sentence ends after|"
                                         r"^tensorflow-datasets conll2003 train\[\d+\], word \d+: "):
        conll.read_tfds_sentences("conll2003", "train", "bioes", str(data_dir))


def test_tfds_conll2003_features_are_cached_by_the_sentences(tfds_conll2003, tokenizer, tmp_path):
    _, data_dir = tfds_conll2003
    sentences = conll.read_tfds_sentences("conll2003", "dev", "iob2", str(data_dir))
    labels = conll.label_list(sentences)
    _, features = conll.load_split(None, "dev", tokenizer, 16, str(tmp_path), "iob2", labels, sentences=sentences)
    assert features.num_examples >= len(sentences) == 5
    again = conll.load_split(None, "dev", tokenizer, 16, str(tmp_path), "iob2", labels, sentences=sentences[:4])[1]
    assert again.num_examples < features.num_examples and len(list(tmp_path.iterdir())) == 4


def test_tfds_not_prepared_says_how_to_prepare_it(tmp_path):
    with pytest.raises(ValueError, match=re.escape(
            f"tensorflow-datasets conll2003 is not prepared under {tmp_path}; prepare it once with `tfds build "
            f"conll2003` where there is internet (with --data_dir=DIR, then pass --tfds_data_dir=DIR here), or give "
            f"--data_dir with the CoNLL files.")):
        conll.read_tfds_sentences("conll2003", "train", data_dir=str(tmp_path))
