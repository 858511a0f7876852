"""AlbertTokenizer: the original's normalisation, digit-comma rule, special ids, and WordPiece mode."""
import collections
import os
import pickle
import random
import re

import pytest
import sentencepiece as spm

from albert_tf.tokenization import AlbertTokenizer, encode_pieces, load_wordpiece_vocab, preprocess_text
from data_gen.pretraining import build_vocab
from tests import helpers, original_albert


def special_ids(tokenizer):
    return tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id


@pytest.fixture(scope="module")
def digit_comma_model_file(tmp_path_factory):
    """A model that learned "▁1990," and "1990," as single pieces, so the digit-comma rule has work to do."""
    directory = tmp_path_factory.mktemp("digits")
    rng = random.Random(0)
    words = "the year was when people met in city and over million dollars".split()
    corpus = os.path.join(directory, "numbers.txt")
    with open(corpus, "w", encoding="utf-8") as handle:
        for _ in range(3000):
            parts = []
            for _ in range(8):
                draw = rng.random()
                parts.append("1990," if draw < 0.2 else "1,000,000" if draw < 0.3 else "x1990," if draw < 0.35
                             else rng.choice(words))
            handle.write(" ".join(parts) + "\n")
    return build_vocab.train_sentencepiece([corpus], os.path.join(directory, "numbers"), vocab_size=51)


def test_preprocess_text_strips_accents_collapses_whitespace_and_lowercases():
    assert preprocess_text("  Café\t\tNAÏVE \n résumé  ") == "cafe naive resume"
    assert preprocess_text("Café  NAÏVE", lower=False) == "Cafe NAIVE"
    # NFKD folds compatibility characters: the "ﬁ" ligature, full-width letters, superscripts.
    assert preprocess_text("ﬁne ＡＢＣ x²") == "fine abc x2"
    # Unicode whitespace (no-break space, ideographic space) collapses like ASCII whitespace.
    assert preprocess_text("a\u00a0\u00a0b\u3000c") == "a b c"


def test_preprocess_text_keeps_quotes_as_the_original_does():
    # Hugging Face turns `` and '' into "; the original ALBERT does not, nor does it touch curly quotes.
    assert preprocess_text("``Hi'' “curly”") == "``hi'' “curly”"


def test_special_ids_and_vocab_size(spm_model_file):
    tokenizer = AlbertTokenizer(spm_model_file=spm_model_file)
    assert special_ids(tokenizer) == (0, 1, 2, 3, 4)
    assert tokenizer.vocab_size == 120
    tokenizer.check_special_ids()
    assert tokenizer.convert_ids_to_tokens([0, 1, 2, 3, 4]) == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]


@pytest.mark.parametrize("text", [
    "Café naïve RÉSUMÉ",                       # accents and mixed case
    "The   model\tlearns\n\nweights  ",        # whitespace runs, tabs, newlines
    "中文 字符 and the model",                  # CJK (unknown pieces)
    "emoji 🙂 in the text 😀",                  # emoji (unknown pieces)
    "1990 2001 3.5 million",                   # digits without a trailing comma
])
def test_ids_agree_with_raw_sentencepiece_where_no_rule_intervenes(spm_model_file, text):
    tokenizer = AlbertTokenizer(spm_model_file=spm_model_file)
    sp_model = spm.SentencePieceProcessor(model_file=spm_model_file)
    normalized = preprocess_text(text)
    assert tokenizer.tokenize(text) == sp_model.encode(normalized, out_type=str)
    assert tokenizer.encode(text) == sp_model.encode(normalized)


def test_unknown_characters_map_to_unk(spm_model_file):
    tokenizer = AlbertTokenizer(spm_model_file=spm_model_file)
    ids = tokenizer.encode("the 🙂 model")
    assert tokenizer.unk_id in ids
    assert ids.count(tokenizer.unk_id) == 1


def test_do_lower_case_false_keeps_case(spm_model_file):
    cased = AlbertTokenizer(spm_model_file=spm_model_file, do_lower_case=False)
    sp_model = spm.SentencePieceProcessor(model_file=spm_model_file)
    assert cased.normalize("The Model") == "The Model"
    assert cased.encode("The Model") == sp_model.encode("The Model")
    assert cased.encode("The Model") != AlbertTokenizer(spm_model_file=spm_model_file).encode("The Model")


def test_digit_comma_piece_is_split_and_reencoded(digit_comma_model_file):
    tokenizer = AlbertTokenizer(spm_model_file=digit_comma_model_file)
    sp_model = spm.SentencePieceProcessor(model_file=digit_comma_model_file)
    # The model itself keeps the comma glued to the year.
    assert sp_model.encode("in 1990, the", out_type=str) == ["▁in", "▁1990,", "▁the"]
    # "▁1990," -> the pieces of "1990" (the word start kept) and ",".
    assert tokenizer.tokenize("in 1990, the") == ["▁in"] + sp_model.encode("1990", out_type=str) + [",", "▁the"]
    assert tokenizer.tokenize("in 1990, the") == ["▁in", "▁", "1", "9", "9", "0", ",", "▁the"]
    assert tokenizer.encode("in 1990, the") == sp_model.piece_to_id(["▁in", "▁", "1", "9", "9", "0", ",", "▁the"])


def test_digit_comma_inside_a_word_keeps_the_added_word_start_as_the_original(digit_comma_model_file):
    sp_model = spm.SentencePieceProcessor(model_file=digit_comma_model_file)
    assert sp_model.encode("x1990,", out_type=str) == ["▁", "x", "1990,"]
    # Re-encoding "1990" adds a lone "▁" that the original's code keeps (its drop step never fires).
    assert encode_pieces(sp_model, "x1990,") == ["▁", "x", "▁", "1", "9", "9", "0", ","]
    tokenizer = AlbertTokenizer(spm_model_file=digit_comma_model_file)
    assert tokenizer.tokenize("x1990,") == encode_pieces(sp_model, "x1990,")


def test_digit_comma_inside_a_word_drops_the_added_word_start_on_request(digit_comma_model_file):
    sp_model = spm.SentencePieceProcessor(model_file=digit_comma_model_file)
    # Hugging Face's rule (drop_added_marker): the piece did not start a word, so the "▁" goes.
    assert encode_pieces(sp_model, "x1990,", "drop_added_marker") == ["▁", "x", "1", "9", "9", "0", ","]
    tokenizer = AlbertTokenizer(spm_model_file=digit_comma_model_file, digit_comma_rule="drop_added_marker")
    assert tokenizer.tokenize("x1990,") == ["▁", "x", "1", "9", "9", "0", ","]
    # A piece that starts a word keeps its marker under both rules.
    assert tokenizer.tokenize("in 1990, the") == ["▁in", "▁", "1", "9", "9", "0", ",", "▁the"]


def test_an_unknown_digit_comma_rule_is_one_sentence_naming_it(digit_comma_model_file):
    message = "digit_comma_rule must be one of 'keep_added_marker', 'drop_added_marker', got 'drop'."
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        AlbertTokenizer(spm_model_file=digit_comma_model_file, digit_comma_rule="drop")
    with pytest.raises(ValueError, match=re.escape(message)):
        encode_pieces(spm.SentencePieceProcessor(model_file=digit_comma_model_file), "x", "drop")


def test_commas_between_digit_groups_are_untouched_when_the_piece_ends_in_a_digit(digit_comma_model_file):
    tokenizer = AlbertTokenizer(spm_model_file=digit_comma_model_file)
    assert tokenizer.tokenize("1,000,000 people") == ["▁1,000,000", "▁people"]


def test_decode_inverts_encode_on_normalized_text(spm_model_file):
    tokenizer = AlbertTokenizer(spm_model_file=spm_model_file)
    text = "The  Model learns   WEIGHTS"
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == "the model learns weights"
    assert tokenizer.decode([tokenizer.cls_id] + ids + [tokenizer.sep_id]) == "the model learns weights"
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tokenizer.decode([120])


def test_config_round_trip_and_pickle(spm_model_file):
    tokenizer = AlbertTokenizer(spm_model_file=spm_model_file, do_lower_case=False,
                                digit_comma_rule="drop_added_marker")
    assert tokenizer.get_config()["digit_comma_rule"] == "drop_added_marker"
    assert AlbertTokenizer.from_config(tokenizer.get_config()).get_config() == tokenizer.get_config()
    restored = pickle.loads(pickle.dumps(tokenizer))
    assert restored.encode("The Model") == tokenizer.encode("The Model")
    assert restored.digit_comma_rule == "drop_added_marker"


def test_model_with_other_special_ids_is_rejected_naming_the_id(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the model learns shared weights\n" * 200, encoding="utf-8")
    # spm_train defaults: <unk>=0, <s>=1, </s>=2, no <pad>, no [CLS].
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(tmp_path / "default"), vocab_size=20,
                                   minloglevel=2)
    tokenizer = AlbertTokenizer(spm_model_file=str(tmp_path / "default.model"))
    assert tokenizer.unk_id == 0 and tokenizer.cls_id is None
    assert tokenizer.encode("the model") == spm.SentencePieceProcessor(
        model_file=str(tmp_path / "default.model")).encode("the model")
    with pytest.raises(ValueError, match=r"does not contain it, but <pad> must have id 0"):
        tokenizer.check_special_ids()


def test_empty_text_and_bytes(spm_model_file):
    tokenizer = AlbertTokenizer(spm_model_file=spm_model_file)
    assert tokenizer.tokenize("  \t\n") == [] and tokenizer.encode("") == []
    with pytest.raises(TypeError, match="takes str text, got bytes"):
        tokenizer.tokenize(b"the model")


def test_constructor_errors(spm_model_file, tmp_path):
    with pytest.raises(ValueError, match="needs spm_model_file .SentencePiece. or vocab_file .WordPiece.; got neither"):
        AlbertTokenizer()
    with pytest.raises(FileNotFoundError, match="missing.model"):
        AlbertTokenizer(spm_model_file=str(tmp_path / "missing.model"))
    not_a_model = tmp_path / "not_a.model"
    not_a_model.write_bytes(b"plain text")
    with pytest.raises(ValueError, match="not a SentencePiece model"):
        AlbertTokenizer(spm_model_file=str(not_a_model))


# WordPiece mode (the released Chinese models' vocab_chinese.txt).

_WORDPIECE_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "want", "##want", "##ed", "wa", "un", "runn",
                     "##ing", ",", "!", "?", "hello", "how", "are", "you", "ah", "zz", "\u535a", "\u63a8", "cafe",
                     "want"]


@pytest.fixture
def wordpiece_vocab_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("".join(token + "\n" for token in _WORDPIECE_TOKENS), encoding="utf-8")
    return str(path)


def test_both_files_given_tokenize_with_sentencepiece_as_the_original(spm_model_file, wordpiece_vocab_file):
    both = AlbertTokenizer(spm_model_file=spm_model_file, vocab_file=wordpiece_vocab_file)
    assert both.vocab_file is None
    assert both.encode("the model runs") == AlbertTokenizer(spm_model_file=spm_model_file).encode("the model runs")


def test_wordpiece_vocabulary_drops_carriage_returns_as_tf_gfile(tmp_path):
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_bytes(b"[PAD]\r\n[UNK]\r\r\nwa\rnt\n\nzz")
    assert load_wordpiece_vocab(str(vocab_file)) == {"[PAD]": 0, "[UNK]": 1, "want": 2, " ": 3, "zz": 4}


def test_wordpiece_greedy_longest_match(wordpiece_vocab_file):
    tokenizer = AlbertTokenizer(vocab_file=wordpiece_vocab_file)
    tokens = tokenizer.tokenize("UNwant\u00e9d,running")
    assert tokens == ["un", "##want", "##ed", ",", "runn", "##ing"]
    assert tokenizer.convert_tokens_to_ids(tokens) == [9, 6, 7, 12, 10, 11]
    assert tokenizer.tokenize("unwantedX running") == ["[UNK]", "runn", "##ing"]
    assert tokenizer.tokenize("a" * 201) == ["[UNK]"]


def test_wordpiece_repeated_vocabulary_token_keeps_its_first_id(wordpiece_vocab_file):
    tokenizer = AlbertTokenizer(vocab_file=wordpiece_vocab_file)
    assert tokenizer.vocab_size == len(_WORDPIECE_TOKENS) - 1
    assert tokenizer.convert_tokens_to_ids(["want"]) == [5]


def test_wordpiece_cjk_punctuation_whitespace_and_case(wordpiece_vocab_file):
    lower = AlbertTokenizer(vocab_file=wordpiece_vocab_file)
    assert lower.tokenize("ah\u535a\u63a8zz") == ["ah", "\u535a", "\u63a8", "zz"]
    assert lower.tokenize(" \tHeLLo!how  \n Are yoU?  ") == ["hello", "!", "how", "are", "you", "?"]
    assert lower.tokenize("Caf\u00e9\u0000\u200b") == ["cafe"]  # NUL and a format character are dropped
    assert lower.tokenize("hello \U0001F642") == ["hello", "[UNK]"]
    cased = AlbertTokenizer(vocab_file=wordpiece_vocab_file, do_lower_case=False)
    assert cased.tokenize("HeLLo hello") == ["[UNK]", "hello"]


def test_wordpiece_special_ids_decode_and_checks(wordpiece_vocab_file, tmp_path):
    tokenizer = AlbertTokenizer(vocab_file=wordpiece_vocab_file)
    assert special_ids(tokenizer) == (0, 1, 2, 3, 4)
    tokenizer.check_special_ids()
    ids = [tokenizer.cls_id] + tokenizer.encode("unwanted running, ah") + [tokenizer.sep_id, tokenizer.pad_id]
    assert tokenizer.decode(ids) == "unwanted running , ah"
    no_mask = tmp_path / "no_mask.txt"
    no_mask.write_text("[UNK]\n[CLS]\n[SEP]\nhello\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"no \[MASK\] token"):
        AlbertTokenizer(vocab_file=str(no_mask)).check_special_ids()


def _check_against_the_original(tokenizer, original, original_tokenizer, text, lower):
    """Asserts that our pieces and ids of `text` are the original's (its preprocess_text, then its SentencePiece
    FullTokenizer); returns the ids."""
    pieces = original_tokenizer.tokenize(original.preprocess_text(text, lower=lower))
    assert tokenizer.tokenize(text) == [original.printable_text(piece) for piece in pieces], repr(text)
    ids = original_tokenizer.convert_tokens_to_ids(pieces)
    assert tokenizer.encode(text) == ids, repr(text)
    return ids


@pytest.fixture(scope="module")
def number_model_file(tmp_path_factory):
    return helpers.make_number_spm_model(str(tmp_path_factory.mktemp("number_spm")))


GENERATED_NUMBER_TEXTS = helpers.number_texts(400)

@pytest.mark.parametrize("digit_comma_rule", ["keep_added_marker", "drop_added_marker"])
def test_pieces_and_ids_equal_the_originals_on_generated_number_texts(number_model_file, digit_comma_rule):
    """The default is what the original's code does; drop_added_marker is what its code meant (Hugging Face's)."""
    original = original_albert.tokenization(digit_comma_rule)
    original_tokenizer = original.FullTokenizer(None, do_lower_case=True, spm_model_file=number_model_file)
    tokenizer = AlbertTokenizer(spm_model_file=number_model_file, digit_comma_rule=digit_comma_rule)
    for text in GENERATED_NUMBER_TEXTS:
        _check_against_the_original(tokenizer, original, original_tokenizer, text, lower=True)


def test_the_two_digit_comma_rules_differ_on_many_generated_texts(number_model_file):
    keep = AlbertTokenizer(spm_model_file=number_model_file)
    drop = AlbertTokenizer(spm_model_file=number_model_file, digit_comma_rule="drop_added_marker")
    differ = [text for text in GENERATED_NUMBER_TEXTS if keep.encode(text) != drop.encode(text)]
    assert len(differ) >= 40, len(differ)
    # Where they differ, the kept rule has an extra word start: the re-encoded piece's "▁".
    for text in differ:
        kept, dropped = keep.tokenize(text), drop.tokenize(text)
        assert "".join(kept).replace("▁", "") == "".join(dropped).replace("▁", "")
        assert "".join(kept).count("▁") > "".join(dropped).count("▁")


def test_the_original_gives_bytes_to_sentencepiece_and_gets_the_same_pieces(number_model_file):
    """The original re-encodes `six.ensure_binary(piece[:-1])`: sentencepiece 0.2.3 returns str pieces for bytes
    input, the same as for the str, so the oracle's pieces compare with ours directly."""
    sp_model = spm.SentencePieceProcessor(model_file=number_model_file)
    for text in ("1990", "45", "12,000", "item7"):
        assert sp_model.EncodeAsPieces(text.encode("utf-8")) == sp_model.EncodeAsPieces(text)
        assert all(isinstance(piece, str) for piece in sp_model.EncodeAsPieces(text.encode("utf-8")))


def _mixed_script_texts(rng, count):
    """Texts of words, their pieces' glue, and the characters BERT's basic tokenizer treats apart: CJK ideographs,
    ASCII and Unicode punctuation, accents, controls and format characters, odd whitespace, emoji, long words."""
    words = ["want", "unwanted", "running", "Hello", "HOW", "are", "you", "Caf\u00e9", "na\u00efve",
             "\u00c5ngstr\u00f6m", "\u535a\u63a8", "\u4e2d\u6587", "\uff21\uff22", "\ufb01ne", "x" * 201, "ah", "zz",
             "1,000", "$5", "\U0001F642", "r\u00e9sum\u00e9s"]
    glue = [" ", "  ", "\t", "\n", "\u00a0", "\u3000", ",", "!", "?", "-", "\u2014", "\u3002", "\u00bf", "'", "\"",
            "\u0000", "\u200b", "\ufffd", "\x07", "\u0301"]
    return ["".join(rng.choice(words) + rng.choice(glue) for _ in range(rng.randint(1, 12))) for _ in range(count)]


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_wordpiece_tokens_and_ids_equal_the_originals(tmp_path, do_lower_case):
    """The Chinese models' WordPiece mode against the original's FullTokenizer(vocab_file) on generated texts."""
    rng = random.Random(5)
    pieces = ["want", "##want", "##ed", "un", "runn", "##ing", "run", "hello", "how", "are", "you", "cafe", "caf",
              "##e", "na", "##ive", "ah", "zz", "1", "##0", "000", ",", "!", "?", "-", "$", "5", "\u535a", "\u63a8",
              "\u4e2d", "\u6587", "\u3002", "\u2014", "\u00bf", "'", "\"", "fine", "\ufb01", "##ne", "Hello", "HOW",
              "Caf\u00e9", "##s", "resume", "angstrom", "\u00c5ngstr\u00f6m", "A", "a", "b"]
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("".join(token + "\n" for token in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + pieces),
                          encoding="utf-8")
    original = original_albert.tokenization().FullTokenizer(str(vocab_file), do_lower_case=do_lower_case)
    tokenizer = AlbertTokenizer(vocab_file=str(vocab_file), do_lower_case=do_lower_case)
    known = 0
    for text in _mixed_script_texts(rng, 300):
        expected = original.tokenize(text)
        assert tokenizer.tokenize(text) == expected, repr(text)
        assert tokenizer.encode(text) == original.convert_tokens_to_ids(expected), repr(text)
        known += sum(token != "[UNK]" for token in expected)
    assert known > 1000


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_sentencepiece_pieces_and_ids_equal_the_originals_on_mixed_script_texts(tmp_path, do_lower_case):
    """SentencePiece mode against the original's preprocess_text and FullTokenizer(spm_model_file) on the texts
    above (accents, CJK, controls, format characters, odd whitespace, emoji), with a model trained on them."""
    rng = random.Random(7)
    corpus = tmp_path / "mixed.txt"
    corpus.write_text("".join(text.replace("\n", " ") + "\n" for text in _mixed_script_texts(rng, 1500)),
                      encoding="utf-8")
    model_file = build_vocab.train_sentencepiece([str(corpus)], str(tmp_path / "mixed"), vocab_size=120)
    original = original_albert.tokenization()
    original_tokenizer = original.FullTokenizer(None, do_lower_case=do_lower_case, spm_model_file=model_file)
    tokenizer = AlbertTokenizer(spm_model_file=model_file, do_lower_case=do_lower_case)
    seen = collections.Counter()
    for text in _mixed_script_texts(rng, 300):
        seen.update(_check_against_the_original(tokenizer, original, original_tokenizer, text, do_lower_case))
    # Most of the vocabulary is met, and so are unknown pieces (controls, characters the model left out).
    assert len(seen) > 60 and seen[tokenizer.unk_id] > 50, seen
