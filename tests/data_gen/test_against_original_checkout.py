"""Pretraining records, RACE features and the RACE model against the original repository's own
create_pretraining_data.py and race_utils.py, which albert-tensorflow 1.1 does not ship. Runs when
$ALBERT_ORIGINAL_CHECKOUT names a checkout of google-research/albert
(`git clone https://github.com/google-research/albert`); skipped otherwise.

The original draws everything from one `random.Random(random_seed)` and its n-gram lengths from numpy's unseeded
global generator; ours draws from streams seeded per block (BUILD_NOTES, "Pretraining instances"). Here the
original's generator is split into ours: its first shuffle (the documents) from our documents stream, the rest
from our instance stream, and np.random.choice from our n-gram stream by numpy's own rule. Given the same draws,
the records must be the same.
"""
import json
import random
import types

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertMultipleChoice
from albert_tf.checkpoints.loading import load_weights
from albert_tf.tasks import classification_functions
from albert_tf.tokenization import AlbertTokenizer
from data_gen.readers import race
from data_gen.pretraining import create_pretraining_data as pretraining_data
from data_gen.pretraining.pass_records import pass_seed
from tests import helpers, original_albert
from tests.helpers import random_inputs, tiny_config_values

pytestmark = pytest.mark.skipif(original_albert.checkout() is None,
                                reason=f"${original_albert.CHECKOUT_VARIABLE} names no google-research/albert checkout")

SETTINGS = dict(max_seq_length=64, max_predictions_per_seq=10, masked_lm_prob=0.15, short_seq_prob=0.1, ngram=3,
                favor_shorter_ngram=True, do_whole_word_mask=True, random_next_sentence=False, random_seed=12345)
VARIANTS = {
    "defaults": {},
    "NSP": dict(random_next_sentence=True),
    "longer n-grams, no whole words": dict(favor_shorter_ngram=False, do_whole_word_mask=False, ngram=4,
                                           random_seed=7),
    "short sequences": dict(max_seq_length=20, max_predictions_per_seq=3, short_seq_prob=0.5),
}


@pytest.fixture(scope="module")
def corpus_and_model(tmp_path_factory):
    directory = tmp_path_factory.mktemp("original_checkout")
    spm_model = helpers.make_spm_model(str(directory), vocab_size=150, num_documents=200)
    corpus = str(directory / "corpus.txt")
    helpers.write_corpus(corpus, num_documents=150, sentences_per_document=(1, 12), seed=3)
    return corpus, spm_model


def _stream(random_seed, name):
    """Our generator's stream `name` of block 0."""
    return random.Random(pass_seed(random_seed, 0, name))


class _OneGeneratorAsOurStreams:
    """The original's single rng, answered from our streams of block 0, dupe pass 0."""

    def __init__(self, random_seed):
        self._documents = _stream(random_seed, "documents")
        self._instances = _stream(random_seed, "instances/0")
        self._documents_shuffled = False

    def shuffle(self, items):
        if self._documents_shuffled:
            return self._instances.shuffle(items)
        self._documents_shuffled = True
        return self._documents.shuffle(items)

    def random(self):
        return self._instances.random()

    def randint(self, low, high):
        return self._instances.randint(low, high)


def _examples(path):
    return [tf.train.Example.FromString(record.numpy()) for record in tf.data.TFRecordDataset(path)]


def _records_of_both(corpus, directory, settings, spm_model=None, vocab_file=None):
    """The original's records and ours for `corpus`, with a SentencePiece model or a WordPiece vocabulary."""
    tokenization = original_albert.tokenization()
    flags = types.SimpleNamespace(input_file_mode="r", spm_model_file=spm_model, do_lower_case=True,
                                  do_permutation=False, **{k: v for k, v in settings.items() if k != "random_seed"})
    original = original_albert.create_pretraining_data(tokenization, flags,
                                                       _stream(settings["random_seed"], "ngrams/0").random)
    tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case=True, spm_model_file=spm_model)
    instances = original.create_training_instances(
        [corpus], tokenizer, settings["max_seq_length"], 1, settings["short_seq_prob"], settings["masked_lm_prob"],
        settings["max_predictions_per_seq"], _OneGeneratorAsOurStreams(settings["random_seed"]))
    original.write_instance_to_example_files(instances, tokenizer, settings["max_seq_length"],
                                             settings["max_predictions_per_seq"], [str(directory / "theirs.tfrecord")])
    ours_tokenizer = AlbertTokenizer(spm_model_file=spm_model, vocab_file=vocab_file)
    pretraining_data.create_pretraining_data(corpus, [str(directory / "ours.tfrecord")], ours_tokenizer,
                                             dupe_factor=1, **settings)
    return _examples(str(directory / "theirs.tfrecord")), _examples(str(directory / "ours.tfrecord"))


@pytest.mark.parametrize("variant", VARIANTS.values(), ids=VARIANTS.keys())
def test_records_equal_the_originals_given_the_same_draws(corpus_and_model, tmp_path, variant):
    corpus, spm_model = corpus_and_model
    theirs, ours = _records_of_both(corpus, tmp_path, dict(SETTINGS, **variant), spm_model=spm_model)
    assert len(ours) == len(theirs) > 100
    assert [index for index, (a, b) in enumerate(zip(ours, theirs)) if a != b] == []


def test_records_equal_the_originals_with_a_wordpiece_vocabulary(corpus_and_model, tmp_path):
    """The Chinese models' path: BERT's basic tokenizer and WordPiece, whole words told by the "##" prefix. Half
    the corpus's words are whole tokens, the other half split into characters."""
    corpus, _ = corpus_and_model
    basic_tokenizer = original_albert.tokenization().BasicTokenizer(do_lower_case=True)
    words = sorted(set(basic_tokenizer.tokenize(" ".join(helpers.CORPUS_WORDS))))
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words[::2]
    for word in words[1::2]:
        tokens += [word[0]] + ["##" + character for character in word[1:]]
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("".join(token + "\n" for token in dict.fromkeys(tokens)), encoding="utf-8")
    theirs, ours = _records_of_both(corpus, tmp_path, SETTINGS, vocab_file=str(vocab_file))
    assert len(ours) == len(theirs) > 100
    assert [index for index, (a, b) in enumerate(zip(ours, theirs)) if a != b] == []
    ids = np.concatenate([example.features.feature["input_ids"].int64_list.value for example in ours])
    assert np.mean(ids[ids > 0] == 1) < 0.05  # [UNK] is rare: the words and their pieces are in the vocabulary


def _race_article(rng, level, index):
    words = ("the model learns a shared block of attention and feed forward weights that runs at every depth "
             "Café naïve RÉSUMÉ 1990, 1,000, people — € 中 x12,").split()

    def text(length):
        return " ".join(rng.choice(words) for _ in range(length))

    questions = ["What is _ ?", "_ comes first", "The end is _", "Two _ blanks _ here", "No blank at all?",
                 "Fullwidth \uff3f blank", "  spaced   question  _  ", "Tab\tseparated _"]
    count = rng.randint(1, 4)
    return {"id": f"{level}{index}.txt", "article": text(rng.choice([3, 20, 80, 200])),
            "questions": [rng.choice(questions) for _ in range(count)],
            "options": [[rng.choice(["", " lead", "trail ", "  both  ", text(1), text(3), text(12), "A_B"])
                         for _ in range(4)] for _ in range(count)],
            "answers": [rng.choice("ABCD") for _ in range(count)]}


def test_race_features_equal_the_originals(corpus_and_model, tmp_path):
    """Blanks at either end, several blanks, a fullwidth blank, empty and space-edged options, accents, long
    articles and long questions, at three lengths: the same four sequences and label per question."""
    _, spm_model = corpus_and_model
    rng = random.Random(0)
    for level in race.LEVELS:
        directory = tmp_path / "RACE" / "dev" / level
        directory.mkdir(parents=True)
        (directory / "all.txt").write_text(
            "".join(json.dumps(_race_article(rng, level, index)) + "\n" for index in range(20)), encoding="utf-8")
    tokenization = original_albert.tokenization()
    race_utils = original_albert.race_utils(tokenization)
    theirs = race_utils.RaceProcessor(True, True, False, False).get_dev_examples(str(tmp_path))
    ours = race.read_examples(str(tmp_path), "dev")
    original_tokenizer = tokenization.FullTokenizer(None, do_lower_case=True, spm_model_file=spm_model)
    tokenizer = AlbertTokenizer(spm_model_file=spm_model)

    assert len(ours) == len(theirs) > 40
    for max_seq_length, max_qa_length in [(64, 16), (128, 40), (24, 8)]:
        for index, (example, original_example) in enumerate(zip(ours, theirs)):
            expected = race_utils.convert_single_example(index, original_example, 4, max_seq_length,
                                                         original_tokenizer, max_qa_length)
            features = race.convert_example(example, index, tokenizer, max_seq_length, max_qa_length)
            assert features["input_word_ids"] == expected.input_ids, (index, max_seq_length)
            assert features["input_mask"] == expected.input_mask, (index, max_seq_length)
            assert features["input_type_ids"] == expected.segment_ids, (index, max_seq_length)
            assert features["label_ids"] == expected.label_id, (index, max_seq_length)


def test_race_model_outputs_equal_the_originals(tmp_path):
    """race_utils.create_model in evaluation mode on random weights, its checkpoint loaded into AlbertMultipleChoice:
    the same logits, probabilities and per-example losses over the four choices."""
    config_values = tiny_config_values()
    inputs = {name: value.numpy() for name, value in random_inputs(batch=8, seq=7, with_predictions=False).items()}
    inputs = {name: value.reshape(2, 4, 7) for name, value in inputs.items()}
    labels = np.array([3, 1], np.int32)
    race_utils = original_albert.race_utils(original_albert.tokenization())
    with tf.Graph().as_default():
        _, per_example_loss, probabilities, logits, _ = race_utils.create_model(
            race_utils.modeling.AlbertConfig.from_dict(config_values), False, tf.constant(inputs["input_word_ids"]),
            tf.constant(inputs["input_mask"]), tf.constant(inputs["input_type_ids"]), tf.constant(labels), 4, False,
            7, 0.1, None)
        with original_albert.session_with_random_weights(str(tmp_path / "model.ckpt")) as session:
            expected = session.run({"per_example_loss": per_example_loss, "probabilities": probabilities,
                                    "logits": logits})

    model = AlbertMultipleChoice(AlbertConfig(**config_values), num_choices=4)
    load_weights(model, str(tmp_path / "model.ckpt"), format="tf1")
    outputs = classification_functions.classification_predict_fn(model, {**{name: tf.constant(value) for name, value in
                                                               inputs.items()},
                                                           "label_ids": tf.constant(labels),
                                                           "example_index": tf.constant([0, 1])})
    np.testing.assert_allclose(outputs["logits"].numpy(), expected["logits"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outputs["probabilities"].numpy(), expected["probabilities"], atol=1e-6)
    np.testing.assert_allclose(outputs["per_example_loss"].numpy(), expected["per_example_loss"], rtol=1e-5,
                               atol=1e-5)
