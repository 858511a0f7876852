"""AlbertPreprocessor: in-graph normalisation and tokenization equal the Python AlbertTokenizer's; packing
equals the fine-tuning features and the pretraining instances."""
import random
import re
import string
import sys
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.export.preprocessor import AlbertPreprocessor, export_preprocessor
from albert_tf.tokenization import SPIECE_UNDERLINE, AlbertTokenizer, preprocess_text
from data_gen.readers import glue
from data_gen.pretraining import build_vocab
from data_gen.pretraining.instances import (InstanceOptions, SpecialIds, create_instances_from_document,
                                            instance_to_example_bytes, pack_token)
from tests import helpers, original_albert

LONG_TEXT = " ".join(f"Word{index % 17} {1000 + index}, café x{index % 10}," for index in range(1500))

TEST_TEXTS = [
    "Café naïve RÉSUMÉ façade Ångström",
    "In 1990, 2001, and 3,000,000 people; item1990, x9, 12,5 and 7,",
    "Fullwidth ２０２０，and Arabic-Indic ٣, digits ¹²³, ①,",
    'Quotes: "straight" “curly” ``tex\'\' \'single\' ‘curly single’ «guillemets»',
    "東京は日本の首都です。中文也可以 한국어",
    "Emoji: I ❤️ 🐍 👍🏽 🇫🇷 and ✌︎",
    "Whitespace\u3000all\tkinds\n\x1cof\u00a0it\u2028here\x85   ",
    "NUL a\x00B and control \x07 chars",
    "ΟΔΟΣ ΣΑΣ İstanbul STRASSE ß ǅ ﬁ Ⅻ ½ ΑΣ.",
    "e\u0301 a\u0308 \u00a8 Z\u0301\u0327 \U0001D165x",
    "",
    "   ",
    LONG_TEXT,
]

_CORPUS_WORDS = ("the model 1990, 2001, 3,000 item1990, x9, café naïve résumé “quoted” ``tex'' \"plain\" "
                 "東京 日本 首都 ❤️ 🐍 ΟΔΟΣ straße istanbul 12,5 people approximately").split()


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
    """A SentencePiece model, trained with the original flags, whose vocabulary has digit-comma pieces."""
    directory = tmp_path_factory.mktemp("preprocessor_spm")
    rng = random.Random(0)
    lines = []
    for _ in range(600):
        words = [rng.choice(_CORPUS_WORDS) if rng.random() < 0.6
                 else "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 8)))
                 for _ in range(rng.randint(6, 14))]
        lines.append(" ".join(words))
    corpus = directory / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return build_vocab.train_sentencepiece([str(corpus)], str(directory / "spm"), vocab_size=300)


@pytest.fixture(scope="module")
def preprocessor(spm_model):
    return AlbertPreprocessor(spm_model, do_lower_case=True)


def _normalize(preprocessor, texts):
    return [text.decode("utf-8") for text in preprocessor.tokenize.normalize(tf.constant(texts)).numpy()]


def test_tokenize_equals_python_tokenizer_on_test_corpus(spm_model, preprocessor):
    for do_lower_case, model in ((True, preprocessor), (False, AlbertPreprocessor(spm_model, do_lower_case=False))):
        tokenizer = AlbertTokenizer(spm_model_file=spm_model, do_lower_case=do_lower_case)
        graph_ids = model.tokenize(tf.constant(TEST_TEXTS)).to_list()
        for text, ids in zip(TEST_TEXTS, graph_ids):
            assert ids == tokenizer.encode(text), (do_lower_case, text[:60])


def test_test_corpus_exercises_the_digit_comma_rule(spm_model):
    """Both branches of encode_pieces fire: a word-start piece ("▁1990,") and a mid-word one ("9,")."""
    tokenizer = AlbertTokenizer(spm_model_file=spm_model)
    sp_model = tokenizer._sp_model
    word_start, mid_word = 0, 0
    for text in TEST_TEXTS:
        for piece in sp_model.encode(preprocess_text(text), out_type=str):
            if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
                word_start += piece.startswith(SPIECE_UNDERLINE)
                mid_word += not piece.startswith(SPIECE_UNDERLINE)
    assert word_start >= 3 and mid_word >= 1, (word_start, mid_word)


def test_normalize_equals_preprocess_text_for_every_assigned_code_point(preprocessor):
    """Every code point Python's Unicode database assigns, alone and inside text, as the Python function."""
    code_points = [code_point for code_point in range(sys.maxunicode + 1)
                   if unicodedata.category(chr(code_point)) not in ("Cn", "Cs")]
    for template in ("{}", "x{}Y 1{},"):
        texts = [template.format(chr(code_point), chr(code_point)) for code_point in code_points]
        graph = _normalize(preprocessor, texts)
        differ = [hex(code_point) for code_point, text, result in zip(code_points, texts, graph)
                  if result != preprocess_text(text)]
        assert not differ, differ[:20]


def test_special_cases_of_whitespace_case_and_marks(preprocessor):
    texts = ["a\x00B", "ΟΔΟΣ ΣΑΣ ΑΣ.", "STRASSE ß", "\x1c x\u3000y\x85", "❤\ufe0f", "\U0001D165x",
             "e\u0301"]
    assert _normalize(preprocessor, texts) == [preprocess_text(text) for text in texts]
    # The cases where other ops would differ: NUL kept, final sigma, ß kept (no case folding), Python's
    # whitespace, U+FE0F (Mn, combining class 0) kept, U+1D165 (Mc, combining class 216) dropped.
    assert _normalize(preprocessor, texts) == ["a\x00b", "οδος σας ας.", "strasse ß", "x y",
                                               "❤\ufe0f", "x", "e"]


def test_documented_differences_from_python(preprocessor):
    """BUILD_NOTES: ICU's NFKD knows code points that Python 3.11's Unicode 14 database does not, and the
    final-sigma context ignores characters that TensorFlow's ICU does not know yet."""
    outlined_a = "\U0001CCD6"  # Unicode 16; NFKD "A" in ICU, unassigned for Python 3.11.
    assert unicodedata.category(outlined_a) == "Cn"
    assert preprocess_text(outlined_a) == outlined_a
    assert _normalize(preprocessor, [outlined_a]) == ["a"]
    sigma_after_new_mark = "ab\u0888Σ c"  # U+0888 (Unicode 14) is case-ignorable for Python.
    assert preprocess_text(sigma_after_new_mark) == "ab\u0888ς c"
    assert _normalize(preprocessor, [sigma_after_new_mark]) == ["ab\u0888σ c"]


def test_special_tokens_dict(spm_model, preprocessor):
    tokenizer = AlbertTokenizer(spm_model_file=spm_model)
    special = {key: int(value) for key, value in preprocessor.tokenize.get_special_tokens_dict().items()}
    assert special == {"vocab_size": tokenizer.vocab_size, "start_of_sequence_id": 2, "end_of_segment_id": 3,
                       "padding_id": 0, "mask_id": 4}


def test_bert_pack_inputs_equals_glue_features(spm_model, preprocessor):
    tokenizer = AlbertTokenizer(spm_model_file=spm_model)
    pairs = [(TEST_TEXTS[0], TEST_TEXTS[1]), (LONG_TEXT, TEST_TEXTS[3]), (TEST_TEXTS[2], LONG_TEXT),
             (LONG_TEXT, LONG_TEXT[:700]), (TEST_TEXTS[4], ""), (TEST_TEXTS[5], "   "), ("", TEST_TEXTS[0])]
    seq_length = 48
    for task_name, num_segments in (("sst-2", 1), ("mrpc", 2)):
        task = glue.get_task(task_name)
        examples = [glue.GlueExample(str(index), a, b if num_segments == 2 else None, "0")
                    for index, (a, b) in enumerate(pairs)]
        expected = [glue.convert_example(example, index, task, tokenizer, seq_length)
                    for index, example in enumerate(examples)]
        segments = [preprocessor.tokenize(tf.constant([example.text_a for example in examples]))]
        if num_segments == 2:
            segments.append(preprocessor.tokenize(tf.constant([example.text_b for example in examples])))
        packed = preprocessor.bert_pack_inputs(segments, seq_length=seq_length)
        for key in ("input_word_ids", "input_mask", "input_type_ids"):
            np.testing.assert_array_equal(packed[key].numpy(), [features[key] for features in expected],
                                          err_msg=f"{task_name} {key}")


@pytest.mark.parametrize("seq_length", [3, 4, 5, 12])
def test_round_robin_trimming_keeps_what_the_original_truncation_keeps(preprocessor, seq_length):
    lengths = [(a, b) for a in range(0, 13) for b in range(0, 13)]
    segment_a = tf.ragged.constant([list(range(10, 10 + a)) for a, _ in lengths], dtype=tf.int32)
    segment_b = tf.ragged.constant([list(range(50, 50 + b)) for _, b in lengths], dtype=tf.int32)
    packed = preprocessor.bert_pack_inputs([segment_a, segment_b], seq_length=seq_length)
    for row, (a, b) in enumerate(lengths):
        # The original's convert_single_example: b is tested after its truncation.
        tokens_a, tokens_b = list(range(10, 10 + a)), list(range(50, 50 + b))
        if tokens_b:
            glue.truncate_seq_pair(tokens_a, tokens_b, seq_length - 3)
        else:
            tokens_a = tokens_a[:seq_length - 2]
        expected = [2] + tokens_a + [3] + (tokens_b + [3] if tokens_b else [])
        types = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1 if tokens_b else 0)
        padding = [0] * (seq_length - len(expected))
        assert packed["input_word_ids"][row].numpy().tolist() == expected + padding, (a, b)
        assert packed["input_type_ids"][row].numpy().tolist() == types + padding, (a, b)
        assert packed["input_mask"][row].numpy().tolist() == [1] * len(expected) + padding, (a, b)


def test_packing_matches_pretraining_instances(preprocessor):
    """Unmasked, a create_pretraining_data instance is exactly bert_pack_inputs of its two segments."""
    sentences = [[pack_token(token, True) for token in range(10 + start, 14 + start)] for start in range(0, 40, 4)]
    options = InstanceOptions(max_seq_length=64, max_predictions_per_seq=5, dupe_factor=1, short_seq_prob=0.0)
    instances = create_instances_from_document([sentences], 0, options, SpecialIds(2, 3, 4, 100),
                                               random.Random(1), random.Random(2))
    assert instances
    for instance in instances:
        ids = list(instance.input_ids)
        for position, label in zip(instance.masked_lm_positions, instance.masked_lm_ids):
            ids[position] = label
        first_sep, last_sep = ids.index(3), len(ids) - 1
        packed = preprocessor.bert_pack_inputs(
            [tf.ragged.constant([ids[1:first_sep]], dtype=tf.int32),
             tf.ragged.constant([ids[first_sep + 1:last_sep]], dtype=tf.int32)], seq_length=64)
        example = tf.train.Example.FromString(instance_to_example_bytes(instance, 64, 5))
        features = example.features.feature
        padded_ids = ids + [0] * (64 - len(ids))
        assert packed["input_word_ids"][0].numpy().tolist() == padded_ids
        assert packed["input_type_ids"][0].numpy().tolist() == list(features["segment_ids"].int64_list.value)
        assert packed["input_mask"][0].numpy().tolist() == list(features["input_mask"].int64_list.value)


def test_empty_batch_and_empty_strings_are_defined(preprocessor):
    empty = preprocessor(tf.constant([], tf.string))
    assert {key: tuple(value.shape) for key, value in empty.items()} == {
        "input_word_ids": (0, 128), "input_mask": (0, 128), "input_type_ids": (0, 128)}
    blank = preprocessor(tf.constant(["", " \t "]))
    assert blank["input_word_ids"].numpy()[:, :3].tolist() == [[2, 3, 0], [2, 3, 0]]
    assert blank["input_mask"].numpy().sum() == 4
    assert preprocessor.tokenize(tf.constant([], tf.string)).shape.as_list() == [0, None]


def test_bad_arguments_raise_clear_errors(spm_model, preprocessor):
    with pytest.raises(ValueError, match="1 or 2 ragged segments"):
        preprocessor.bert_pack_inputs([preprocessor.tokenize(tf.constant(["a"]))] * 3)
    with pytest.raises(tf.errors.InvalidArgumentError, match="seq_length must leave room"):
        preprocessor.bert_pack_inputs([preprocessor.tokenize(tf.constant(["a"]))] * 2, seq_length=2)
    with pytest.raises(ValueError, match="seq_length must be an integer of at least 3"):
        AlbertPreprocessor(spm_model, seq_length=2)
    with pytest.raises(FileNotFoundError, match="Cannot read SentencePiece model"):
        AlbertPreprocessor(spm_model + ".missing")


def test_invalid_utf8_is_replaced_as_python_decodes_it(spm_model, preprocessor):
    raw = [b"\xff\xfeab 1990,", b"caf\xc3", b"\xed\xa0\x80x", b"\xc0\xafz", b"\xe2\x82\xe2\x82\xac"]
    tokenizer = AlbertTokenizer(spm_model_file=spm_model)
    assert preprocessor.tokenize(tf.constant(raw)).to_list() == [
        tokenizer.encode(text.decode("utf-8", "replace")) for text in raw]


@pytest.fixture(scope="module")
def number_spm_model(tmp_path_factory):
    return helpers.make_number_spm_model(str(tmp_path_factory.mktemp("preprocessor_numbers")))


@pytest.mark.parametrize("digit_comma_rule", ["keep_added_marker", "drop_added_marker"])
def test_tokenize_equals_the_originals_ids_on_generated_number_texts(number_spm_model, digit_comma_rule):
    """In the graph as in Python: the default is what the original's code does, drop_added_marker Hugging Face's."""
    original = original_albert.tokenization(digit_comma_rule)
    original_tokenizer = original.FullTokenizer(None, do_lower_case=True, spm_model_file=number_spm_model)
    texts = helpers.number_texts(400)
    expected = [original_tokenizer.convert_tokens_to_ids(original_tokenizer.tokenize(
        original.preprocess_text(text, lower=True))) for text in texts]
    preprocessor = AlbertPreprocessor(number_spm_model, digit_comma_rule=digit_comma_rule)
    assert preprocessor.tokenize(tf.constant(texts)).to_list() == expected
    python_tokenizer = AlbertTokenizer(spm_model_file=number_spm_model, digit_comma_rule=digit_comma_rule)
    assert [python_tokenizer.encode(text) for text in texts] == expected


def test_the_exported_preprocessor_carries_its_digit_comma_rule(number_spm_model, tmp_path):
    import tensorflow_text  # noqa: F401  (registers the preprocessor's ops)

    texts = ["in 1990, they", "x12, item7, and 45,"] + helpers.number_texts(50)
    for digit_comma_rule in ("keep_added_marker", "drop_added_marker"):
        export_dir = export_preprocessor(number_spm_model, str(tmp_path / digit_comma_rule),
                                         digit_comma_rule=digit_comma_rule)
        loaded = tf.saved_model.load(export_dir)
        assert loaded.digit_comma_rule.numpy().decode("utf-8") == digit_comma_rule
        tokenizer = AlbertTokenizer(spm_model_file=number_spm_model, digit_comma_rule=digit_comma_rule)
        assert loaded.tokenize(tf.constant(texts)).to_list() == [tokenizer.encode(text) for text in texts]
    preprocessor = AlbertPreprocessor(number_spm_model, digit_comma_rule="drop_added_marker")
    assert preprocessor.get_config()["digit_comma_rule"] == "drop_added_marker"
    assert AlbertPreprocessor.from_config(preprocessor.get_config()).get_config() == preprocessor.get_config()


def test_an_unknown_digit_comma_rule_is_refused_before_anything_is_written(number_spm_model, tmp_path):
    message = "digit_comma_rule must be one of 'keep_added_marker', 'drop_added_marker', got 'keep'."
    with pytest.raises(ValueError, match=re.escape(message)):
        AlbertPreprocessor(number_spm_model, digit_comma_rule="keep")
    with pytest.raises(ValueError, match=re.escape(message)):
        export_preprocessor(number_spm_model, str(tmp_path / "bad"), digit_comma_rule="keep")
    assert not (tmp_path / "bad").exists()
