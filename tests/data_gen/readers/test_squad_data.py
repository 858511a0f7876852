"""SQuAD readers, character alignment, features, caching and post-processing (data_gen.readers.squad,
data_gen.evaluation.squad_postprocess)."""
import json
import os
import random
import string
import tempfile

import numpy as np
import pytest
import sentencepiece as spm

from albert_tf.tokenization import AlbertTokenizer
from data_gen.evaluation import squad_evaluation, squad_postprocess
from data_gen.readers import squad
from data_gen.readers.squad import FeatureAlignment, SquadExample
from tests import original_albert

PARAGRAPH = "In 1990, Café Naïve RÉSUMÉ met 1,000, PEOPLE (approximately) in Zürich."


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
    """A SentencePiece model that keeps "1990," and "1,000," whole, so the digit-comma rule has work to do.

    The original spm_train flags split digits from other characters (split_by_number), so this model
    is trained directly with split_by_number=False, like the released 30k-clean.model behaves.
    """
    directory = tmp_path_factory.mktemp("squad_spm")
    rng = random.Random(0)
    words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 7))) for _ in range(250)]
    words += ["1990,"] * 40 + ["1,000,"] * 40 + ["cafe", "naive", "resume", "people", "zurich"] * 10
    corpus = directory / "corpus.txt"
    corpus.write_text("".join(" ".join(rng.choice(words) for _ in range(12)) + ".\n" for _ in range(3000)))
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(directory / "squad"), vocab_size=250,
                                   hard_vocab_limit=False, model_type="unigram", pad_id=0, unk_id=1, bos_id=-1,
                                   eos_id=-1,
                                   control_symbols=["[CLS]", "[SEP]", "[MASK]"], split_by_number=False,
                                   minloglevel=2)
    return str(directory / "squad.model")


@pytest.fixture(scope="module")
def tokenizer(spm_model):
    return AlbertTokenizer(spm_model_file=spm_model)


# ---- alignment -----------------------------------------------------------------------------------

def test_normalize_with_alignment_maps_back_to_raw_characters():
    raw = "  Ça\u00a0 va,\tNAÏVE ﬁ  "
    normalized, origins = squad.normalize_with_alignment(raw)
    assert normalized == "ca va, naive fi"
    # Each normalised character comes from the raw character at its origin; the ligature gives two.
    assert [raw[origin] for origin in origins] == list("Ça\u00a0va,\tNAÏVE ﬁﬁ")
    cased, _ = squad.normalize_with_alignment(raw, lower=False)
    assert cased == "Ca va, NAIVE fi"


def test_digit_comma_pieces_keep_their_characters(tokenizer, spm_model):
    raw_pieces = spm.SentencePieceProcessor(model_file=spm_model).encode("in 1990, 1,000,", out_type=str)
    assert "▁1990," in raw_pieces and "▁1,000," in raw_pieces  # the rule has something to split
    tokens = squad.align_paragraph(tokenizer, PARAGRAPH)
    assert tokens.pieces == tokenizer.tokenize(PARAGRAPH)
    assert "▁1990," not in tokens.pieces and "▁1,000," not in tokens.pieces
    texts = [PARAGRAPH[start:end + 1] for start, end in zip(tokens.piece_start_char, tokens.piece_end_char)]
    # Every piece maps to the raw text it came from, in order, digits and the split-off comma separately
    # (a piece that is only a word-start marker maps to the space before the word).
    assert "".join(texts).replace(" ", "") == PARAGRAPH.replace(" ", "")
    comma_after_1990 = PARAGRAPH.index("1990,") + 4
    assert tokens.pieces[tokens.char_first_piece[comma_after_1990]] == ","
    assert tokens.piece_start_char[tokens.char_first_piece[comma_after_1990]] == comma_after_1990


@pytest.mark.parametrize("dropped", ["\u200b", "\ufeff", "\u200e", "\x07"])
def test_digit_comma_piece_next_to_a_character_sentencepiece_drops(tokenizer, dropped):
    # SentencePiece's normaliser removes the character but the piece's span still covers it.
    paragraph = f"Founded in {dropped}1990, it met 1,000{dropped}, PEOPLE."
    tokens = squad.align_paragraph(tokenizer, paragraph)
    assert tokens.pieces == tokenizer.tokenize(paragraph)
    for answer in ("1990", "1,000"):
        first, last = squad.answer_piece_span(tokens, paragraph, answer, paragraph.index(answer))
        assert paragraph[tokens.piece_start_char[first]:tokens.piece_end_char[last] + 1] == answer
    comma_after_1990 = paragraph.index("1990,") + 4
    assert tokens.pieces[tokens.char_first_piece[comma_after_1990]] == ","


@pytest.mark.parametrize("answer", ["1990", "Café Naïve RÉSUMÉ", "1,000", "1,000, PEOPLE", "PEOPLE (approximately)",
                                    "Zürich.", "In 1990,"])
def test_answer_round_trip_recovers_the_exact_original_text(tokenizer, answer):
    tokens = squad.align_paragraph(tokenizer, PARAGRAPH)
    first, last = squad.answer_piece_span(tokens, PARAGRAPH, answer, PARAGRAPH.index(answer))
    recovered = PARAGRAPH[tokens.piece_start_char[first]:tokens.piece_end_char[last] + 1].strip()
    assert recovered == answer


def test_a_space_at_an_answers_end_is_the_next_words_marker_as_in_the_original(tokenizer):
    tokens = squad.align_paragraph(tokenizer, PARAGRAPH)
    start = PARAGRAPH.index("Café")
    first, last = squad.answer_piece_span(tokens, PARAGRAPH, "Café Naïve", start)
    # The original's LCS maps the space after "Naïve" to the "▁" of the next word's first piece.
    assert tokens.pieces[last + 1].startswith("▁")
    assert squad.answer_piece_span(tokens, PARAGRAPH, "Café Naïve ", start) == (first, last + 1)
    assert tokens.pieces[first].startswith("▁")
    assert squad.answer_piece_span(tokens, PARAGRAPH, " Café Naïve", start - 1) == (first, last)


def test_answer_that_does_not_match_its_offsets_is_rejected(tokenizer):
    tokens = squad.align_paragraph(tokenizer, PARAGRAPH)
    assert squad.answer_piece_span(tokens, PARAGRAPH, "1990", PARAGRAPH.index("1990") + 1) is None
    assert squad.answer_piece_span(tokens, PARAGRAPH, "Zürich.", len(PARAGRAPH) - 3) is None
    assert squad.answer_piece_span(tokens, PARAGRAPH, "  ", 2) is None
    # Whitespace differences alone are tolerated, as BERT's reader does.
    start = PARAGRAPH.index("1,000,")
    assert squad.answer_piece_span(tokens, PARAGRAPH, "1,000,\tPEOPLE", start) is not None


def test_wordpiece_tokenizer_is_refused(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n")
    with pytest.raises(ValueError, match="need a SentencePiece model"):
        squad.align_paragraph(AlbertTokenizer(vocab_file=str(vocab)), "a")


# ---- spans and features --------------------------------------------------------------------------

def test_doc_spans_and_max_context():
    spans = squad.doc_spans(10, 4, 3)
    assert spans == [(0, 4), (3, 4), (6, 4)]
    assert squad.doc_spans(4, 4, 3) == [(0, 4)]
    # Token 3: span 0 has (left 3, right 0), span 1 (0, 3): equal scores, the first span wins. Token 4:
    # span 1 (1, 2) beats nothing else; token 6: spans 1 and 2 tie at min 0, the first wins; token 7:
    # span 2 (1, 2).
    assert squad.max_context_spans(spans, 10) == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    # At equal min context the longer span wins (+0.01 per token): token 1 has min 1 in both spans.
    assert squad.max_context_spans([(0, 3), (0, 5)], 5) == [1, 1, 1, 1, 1]


def _long_example(tokenizer):
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
    context = " ".join(words * 3) + " Café Naïve 1990, end."
    answer = "Café Naïve 1990"
    return SquadExample("long", "Which words and which year come right before the end of this paragraph?",
                        context, [answer], answer, context.index(answer))


def test_features_layout_spans_and_positions(tokenizer):
    example = _long_example(tokenizer)
    max_seq_length, max_query_length, doc_stride = 40, 6, 10
    stats = squad.ConversionStats()
    features = list(squad.convert_examples_to_features(
        [example], tokenizer, max_seq_length=max_seq_length, doc_stride=doc_stride,
        max_query_length=max_query_length, is_training=True, stats=stats))
    doc_pieces = tokenizer.tokenize(example.paragraph_text)
    query_ids = tokenizer.encode(example.question_text)
    assert len(query_ids) > max_query_length
    max_doc = max_seq_length - max_query_length - 3
    assert [(f.doc_span_index, f.unique_id) for f in features] == [
        (index, squad.FIRST_UNIQUE_ID + index) for index in range(len(squad.doc_spans(len(doc_pieces), max_doc,
                                                                                      doc_stride)))]
    assert stats.num_features == len(features) > 2 and stats.num_skipped == 0
    doc_offset = max_query_length + 2
    for feature in features:
        length = sum(feature.input_mask)
        assert feature.input_ids[0] == tokenizer.cls_id
        assert feature.input_ids[1:doc_offset - 1] == query_ids[:max_query_length]
        assert feature.input_ids[doc_offset - 1] == tokenizer.sep_id
        assert feature.input_ids[length - 1] == tokenizer.sep_id and feature.input_ids[length:] == [0] * (
            max_seq_length - length)
        assert feature.segment_ids == [0] * doc_offset + [1] * (length - doc_offset) + [0] * (max_seq_length - length)
        assert feature.p_mask == [0] + [1] * (doc_offset - 1) + [0] * (length - doc_offset - 1) + [1] * (
            max_seq_length - length + 1)
        assert all((value >= 0) == (doc_offset <= position < length - 1)
                   for position, value in enumerate(feature.token_start_char))
    # Every document piece is max-context in exactly one span.
    counts = {}
    for feature in features:
        start = feature.doc_span_index * doc_stride
        for position in range(doc_offset, sum(feature.input_mask) - 1):
            counts[start + position - doc_offset] = counts.get(start + position - doc_offset, 0) + \
                feature.token_is_max_context[position]
    assert counts == {piece: 1 for piece in range(len(doc_pieces))}
    # Spans holding the whole answer point at it; the others are impossible with start = end = 0.
    holding = [f for f in features if not f.is_impossible]
    assert holding and all(f.start_position == f.end_position == 0 for f in features if f.is_impossible)
    for feature in holding:
        text = example.paragraph_text[feature.token_start_char[feature.start_position]:
                                      feature.token_end_char[feature.end_position] + 1]
        assert text == "Café Naïve 1990"


def test_training_skips_mismatched_answers_and_evaluation_skips_nothing(tokenizer):
    good = SquadExample("good", "Where?", PARAGRAPH, ["Zürich"], "Zürich", PARAGRAPH.index("Zürich"))
    shifted = SquadExample("shifted", "Where?", PARAGRAPH, ["Zürich"], "Zürich", PARAGRAPH.index("Zürich") + 2)
    impossible = SquadExample("none", "Who?", PARAGRAPH, [], is_impossible=True)
    stats = squad.ConversionStats()
    features = list(squad.convert_examples_to_features(
        [good, shifted, impossible], tokenizer, max_seq_length=64, doc_stride=16, max_query_length=8,
        is_training=True, stats=stats))
    assert (stats.num_examples, stats.num_skipped, stats.skipped_ids) == (3, 1, ["shifted"])
    assert [(f.example_index, f.is_impossible, f.start_position, f.end_position) for f in features][1] == (
        2, True, 0, 0)
    assert features[0].start_position > 0
    evaluation = list(squad.convert_examples_to_features(
        [good, shifted, impossible], tokenizer, max_seq_length=64, doc_stride=16, max_query_length=8,
        is_training=False))
    assert [feature.example_index for feature in evaluation] == [0, 1, 2]


def test_lengths_are_checked(tokenizer):
    with pytest.raises(ValueError, match=r"max_seq_length \(10\) must be greater than max_query_length \(7\) \+ 3"):
        list(squad.convert_examples_to_features([], tokenizer, max_seq_length=10, doc_stride=4, max_query_length=7,
                                                is_training=False))


# ---- readers -------------------------------------------------------------------------------------

def _write_json(path, qas, context=PARAGRAPH):
    path.write_text(json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": [
        {"context": context, "qas": qas}]}]}))
    return str(path)


def test_read_json_v1_and_v2(tmp_path):
    answer = {"text": "Zürich", "answer_start": PARAGRAPH.index("Zürich")}
    path = _write_json(tmp_path / "v2.json", [
        {"id": "a", "question": "Where?", "answers": [answer, dict(answer, text="in Zürich", answer_start=58)]},
        {"id": "b", "question": "Who?", "answers": [], "is_impossible": True,
         "plausible_answers": [{"text": "PEOPLE", "answer_start": 38}]}])
    examples = squad.read_squad_examples(path, is_training=False)
    assert [(e.qas_id, e.answer_texts, e.is_impossible) for e in examples] == [
        ("a", ["Zürich", "in Zürich"], False), ("b", [], True)]
    assert squad.gold_answers(examples) == {"a": ["Zürich", "in Zürich"], "b": []}
    with pytest.raises(ValueError, match="Training question 'a' in .* has 2 answers"):
        squad.read_squad_examples(path, is_training=True)
    single = _write_json(tmp_path / "train.json", [
        {"id": "a", "question": "Where?", "answers": [answer]},
        {"id": "b", "question": "Who?", "answers": [], "is_impossible": True}])
    train = squad.read_squad_examples(single, is_training=True)
    assert [(e.answer_text, e.answer_start, e.is_impossible) for e in train] == [
        ("Zürich", answer["answer_start"], False), ("", -1, True)]


def test_read_errors_name_the_file(tmp_path):
    repeated = _write_json(tmp_path / "repeated.json", [{"id": "a", "question": "?", "answers": []}] * 2)
    with pytest.raises(ValueError, match="Question id 'a' appears 2 times in .*repeated.json"):
        squad.read_squad_examples(repeated, is_training=False)
    (tmp_path / "bad.json").write_text("{\"paragraphs\": []}")
    with pytest.raises(ValueError, match="bad.json.*no top-level \"data\" list"):
        squad.read_squad_examples(str(tmp_path / "bad.json"), is_training=False)
    missing = _write_json(tmp_path / "missing.json", [{"id": "a", "answers": []}])
    with pytest.raises(ValueError, match="missing.json' lacks the key 'question' after 0 questions"):
        squad.read_squad_examples(missing, is_training=False)
    with pytest.raises(ValueError, match="tfds:squad/v3:train.*is not a tensorflow-datasets source"):
        squad.read_squad_examples("tfds:squad/v3:train", is_training=False)


def test_unprepared_tfds_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="'squad/v2.0' .*split 'train'.* not prepared .*nothing is downloaded"):
        squad.read_squad_examples("tfds:squad/v2.0:train", is_training=True, tfds_data_dir=str(tmp_path))


@pytest.mark.parametrize("name", ["squad/v1.1", "squad/v2.0"])
def test_read_tfds_with_mock_data(name, tokenizer, tmp_path):
    import tensorflow_datasets as tfds

    with tfds.testing.mock_data(num_examples=4):
        examples = squad.read_squad_examples(f"tfds:{name}:validation", is_training=False)
    assert len(examples) == 4
    assert all(isinstance(example.paragraph_text, str) and example.qas_id for example in examples)
    assert all(isinstance(text, str) for example in examples for text in example.answer_texts)
    # Evaluation features of every example, keyed by the examples' content.
    features = squad.load_features(f"tfds:{name}:validation", examples, tokenizer, max_seq_length=32,
                                   doc_stride=8, max_query_length=8, is_training=False, cached_dir=str(tmp_path))
    alignment = FeatureAlignment.from_cached(features)
    assert sorted(set(alignment.example_index.tolist())) == [0, 1, 2, 3]


# ---- caching -------------------------------------------------------------------------------------

def test_cached_features_and_alignment(tokenizer, tmp_path):
    answer = {"text": "Zürich", "answer_start": PARAGRAPH.index("Zürich")}
    path = _write_json(tmp_path / "dev.json", [{"id": "a", "question": "Where?", "answers": [answer]},
                                               {"id": "b", "question": "Who met?", "answers": [answer]}])
    examples = squad.read_squad_examples(path, is_training=False)
    kwargs = dict(doc_stride=8, max_query_length=8, is_training=False, cached_dir=str(tmp_path / "cache"))
    cached = squad.load_features(path, examples, tokenizer, max_seq_length=24, **kwargs)
    again = squad.load_features(path, examples, tokenizer, max_seq_length=24, **kwargs)
    longer = squad.load_features(path, examples, tokenizer, max_seq_length=32, **kwargs)
    assert again.path == cached.path and longer.path != cached.path
    features = list(squad.convert_examples_to_features(examples, tokenizer, max_seq_length=24, doc_stride=8,
                                                       max_query_length=8, is_training=False))
    assert cached.num_examples == len(features) > 2
    expected = FeatureAlignment.from_features(features)
    actual = FeatureAlignment.from_cached(cached)
    for field in ("unique_ids", "example_index", "token_start_char", "token_end_char", "token_is_max_context"):
        np.testing.assert_array_equal(getattr(actual, field), getattr(expected, field))
    batch = next(iter(cached.dataset().map(squad.model_batch).batch(2)))
    assert sorted(batch) == ["input_mask", "input_type_ids", "input_word_ids", "p_mask", "unique_ids"]
    assert batch["p_mask"].dtype.name == "float32"
    assert batch["input_word_ids"].numpy()[0].tolist() == features[0].input_ids


# ---- post-processing -----------------------------------------------------------------------------

CONTEXT = "Ann met Bob in Paris."


def _alignment():
    """Two spans of CONTEXT ([CLS] q [SEP] <doc> [SEP]): span 0 = Ann met Bob, span 1 = Bob in Paris.

    Pieces: Ann(0-2) met(4-6) Bob(8-10) in(12-13) Paris.(15-20). "Bob" is max context in span 0.
    """
    starts = [[-1, -1, -1, 0, 4, 8, -1, -1], [-1, -1, -1, 8, 12, 15, -1, -1]]
    ends = [[-1, -1, -1, 2, 6, 10, -1, -1], [-1, -1, -1, 10, 13, 20, -1, -1]]
    max_context = [[0, 0, 0, 1, 1, 1, 0, 0], [0, 0, 0, 0, 1, 1, 0, 0]]
    return FeatureAlignment(unique_ids=np.array([11, 12]), example_index=np.array([0, 0]),
                            token_start_char=np.array(starts), token_end_char=np.array(ends),
                            token_is_max_context=np.array(max_context))


def test_postprocess_v1_on_crafted_logits():
    example = SquadExample("q", "Where?", CONTEXT, ["Paris"])
    start = np.full((2, 8), -10.0)
    end = np.full((2, 8), -10.0)
    start[1, 3], end[1, 3] = 9.0, 1.0    # "Bob" in span 1 is not max context: never a start there
    start[1, 5], end[1, 5] = 4.0, 5.0    # "Paris." -> 9
    start[0, 4], end[0, 5] = 3.0, 2.0    # "met Bob" -> 5
    start[0, 1], end[0, 1] = 20.0, 20.0  # question position: invalid
    start[1, 4], end[1, 4] = 0.5, 6.0    # "in" -> 6.5, "in Paris." -> 5.5; (5, 4) ends before it starts
    results = {"unique_ids": np.array([12, 11]), "start_logits": start[::-1], "end_logits": end[::-1]}
    # The 4 best starts x 4 best ends of each span; beyond the four above, only "Ann met Bob" (-8) and
    # "Ann" (-20) are valid, and they fall outside the n-best.
    predictions, nbest = squad_postprocess.postprocess_v1([example], _alignment(), results, n_best_size=4,
                                                          max_answer_length=3)
    assert predictions == {"q": "Paris."}
    entries = nbest["q"]
    assert [entry["text"] for entry in entries] == ["Paris.", "in", "in Paris.", "met Bob"]
    assert [entry["start_logit"] + entry["end_logit"] for entry in entries] == [9.0, 6.5, 5.5, 5.0]
    assert sum(entry["probability"] for entry in entries) == pytest.approx(1.0)
    assert entries[0]["probability"] == pytest.approx(1 / (1 + np.exp(-2.5) + np.exp(-3.5) + np.exp(-4.0)))
    assert list(entries[0]) == ["text", "probability", "start_logit", "end_logit"]


def test_postprocess_v1_without_valid_answer_gives_empty():
    example = SquadExample("q", "Where?", CONTEXT, ["Paris"])
    logits = np.zeros((2, 8))
    predictions, nbest = squad_postprocess.postprocess_v1([example], _alignment(), {
        "unique_ids": np.array([11, 12]), "start_logits": logits, "end_logits": logits}, max_answer_length=0)
    assert predictions == {"q": "empty"} and nbest["q"][0]["probability"] == 1.0


def _v2_results():
    # Beam of 2 starts x 2 ends; end beam j of start i sits at i * 2 + j.
    return {"unique_ids": np.array([11, 12]),
            "start_top_log_probs": np.array([[-0.5, -1.0], [-0.2, -3.0]]),
            "start_top_index": np.array([[5, 1], [5, 3]]),
            "end_top_log_probs": np.array([[-0.1, -2.0, -0.1, -0.1], [-0.3, -0.4, -0.1, -0.1]]),
            "end_top_index": np.array([[5, 6, 1, 5], [5, 4, 3, 3]]),
            "cls_logits": np.array([1.5, -0.25])}


def test_postprocess_v2_on_crafted_beam():
    example = SquadExample("q", "Where?", CONTEXT, ["Paris"])
    best, nbest, null_odds = squad_postprocess.postprocess_v2([example], _alignment(), _v2_results())
    # Valid: span 0 (5, 5) "Bob" -0.6; span 1 (5, 5) "Paris." -0.5. (5, 6) ends on [SEP], (1, .) is the
    # question, (5, 4) ends before its start, span 1's start 3 is not max context.
    assert [(entry["text"], entry["start_log_prob"] + entry["end_log_prob"]) for entry in nbest["q"]] == [
        ("Paris.", pytest.approx(-0.5)), ("Bob", pytest.approx(-0.6))]
    assert best == {"q": "Paris."}
    assert null_odds == {"q": -0.25}  # the smaller cls_logit of the two spans
    assert squad_postprocess.apply_null_threshold(best, null_odds, -0.25) == {"q": "Paris."}
    assert squad_postprocess.apply_null_threshold(best, null_odds, -0.3) == {"q": ""}
    assert squad_postprocess.apply_null_threshold(best, null_odds, None) == {"q": "Paris."}


def test_postprocess_needs_every_result_and_writes_official_files(tmp_path):
    example = SquadExample("q", "Where?", CONTEXT, ["Paris"])
    results = _v2_results()
    with pytest.raises(ValueError, match="No model result for feature unique_id 12"):
        squad_postprocess.postprocess_v2([example], _alignment(), dict(results, unique_ids=np.array([11, 13])))
    best, nbest, null_odds = squad_postprocess.postprocess_v2([example], _alignment(), results)
    paths = squad_postprocess.write_prediction_files(str(tmp_path), best, nbest, null_odds)
    assert json.loads(open(paths["predictions.json"]).read()) == {"q": "Paris."}
    assert json.loads(open(paths["null_odds.json"]).read()) == {"q": -0.25}
    assert json.loads(open(paths["nbest_predictions.json"]).read())["q"][0]["text"] == "Paris."


# ---- against the original's squad_utils ------------------------------------------------------------

_DIGIT_COMMA_ANSWERS = [
    ("Cafe people 1990, met in Zurich.", "people "),
    ("Cafe people 1990, met in Zurich.", "Cafe people "),
    ("Cafe people 1990, met in Zurich.", "1990"),
    ("We modify 1990, covered the people of Zurich.", "modify "),
    (PARAGRAPH, "met "),
    (PARAGRAPH, "RÉSUMÉ met "),
    (PARAGRAPH, "Café Naïve "),
    (PARAGRAPH, " Café Naïve"),
    (PARAGRAPH, "1,000, PEOPLE "),
    ("Cafe x1990, met 1990,1990, and 1,000, people.", "x1990"),
    ("Cafe x1990, met 1990,1990, and 1,000, people.", "met "),
    ("Cafe x1990, met 1990,1990, and 1,000, people.", "and "),
]


def _original_features(squad_utils, original_tokenization, spm_model, examples, is_training, **lengths):
    """The original squad_utils' features of our `examples` (their training answers and impossibility too)."""
    features = []
    squad_utils.convert_examples_to_features(
        [squad_utils.SquadExample(example.qas_id, example.question_text, example.paragraph_text,
                                  orig_answer_text=example.answer_text, start_position=example.answer_start,
                                  is_impossible=example.is_impossible) for example in examples],
        original_tokenization.FullTokenizer(None, do_lower_case=True, spm_model_file=spm_model),
        is_training=is_training, output_fn=features.append, do_lower_case=True, **lengths)
    return features


def _original_training_positions(spm_model, digit_comma_rule, examples, max_seq_length):
    original = original_albert.tokenization(digit_comma_rule)
    features = _original_features(original_albert.squad_utils(original), original, spm_model, examples, True,
                                  max_seq_length=max_seq_length, doc_stride=32, max_query_length=16)
    return [(feature.input_ids, feature.start_position, feature.end_position) for feature in features]


@pytest.mark.parametrize("digit_comma_rule", ["keep_added_marker", "drop_added_marker"])
def test_an_answer_ending_in_the_space_before_a_digit_comma_word_ends_at_that_words_first_piece(
        spm_model, digit_comma_rule):
    tokenizer = AlbertTokenizer(spm_model_file=spm_model, digit_comma_rule=digit_comma_rule)
    paragraph, answer = "Cafe people 1990, met in Zurich.", "people "
    tokens = squad.align_paragraph(tokenizer, paragraph)
    assert "▁1990," in spm.SentencePieceProcessor(model_file=spm_model).encode(paragraph.lower(), out_type=str)
    first, last = squad.answer_piece_span(tokens, paragraph, answer, paragraph.index(answer))
    # "▁1990," is split into the pieces of "1990" and ","; the space before it went to the first of those.
    assert tokens.pieces[first] == "▁people"
    assert last == first + 1 and tokens.pieces[last].startswith("▁")
    assert tokens.char_first_piece[paragraph.index("1990")] in (last, last + 1)

@pytest.mark.parametrize("digit_comma_rule", ["keep_added_marker", "drop_added_marker"])
def test_training_features_equal_the_originals_around_digit_comma_words(spm_model, digit_comma_rule):
    tokenizer = AlbertTokenizer(spm_model_file=spm_model, digit_comma_rule=digit_comma_rule)
    examples = [SquadExample(f"q{index}", "Which words come here?", paragraph, [answer], answer,
                             paragraph.index(answer.strip()) - (len(answer) - len(answer.lstrip())))
                for index, (paragraph, answer) in enumerate(_DIGIT_COMMA_ANSWERS)]
    ours = [(feature.input_ids, feature.start_position, feature.end_position) for feature in
            squad.convert_examples_to_features(examples, tokenizer, max_seq_length=64, doc_stride=32,
                                               max_query_length=16, is_training=True)]
    assert ours == _original_training_positions(spm_model, digit_comma_rule, examples, max_seq_length=64)


def test_training_features_equal_the_originals_after_characters_outside_ascii(spm_model):
    """A dash, a currency sign and a CJK character survive preprocessing as more than one UTF-8 byte; answers after
    them keep their places (the original as its repository's head counts characters; albert-tensorflow 1.1 fails)."""
    tokenizer = AlbertTokenizer(spm_model_file=spm_model)
    cases = [("Prices rose \u2014 sharply in 1990, in Zurich.", "in Zurich"),
             ("The \u20ac price met \u4e2d people.", "people")]
    examples = [SquadExample(f"q{index}", "Which words come here?", paragraph, [answer], answer,
                             paragraph.index(answer)) for index, (paragraph, answer) in enumerate(cases)]
    ours = [(feature.input_ids, feature.start_position, feature.end_position) for feature in
            squad.convert_examples_to_features(examples, tokenizer, max_seq_length=64, doc_stride=32,
                                               max_query_length=16, is_training=True)]
    assert ours == _original_training_positions(spm_model, "keep_added_marker", examples, max_seq_length=64)
    assert all(start > 0 for _, start, _ in ours)


def _random_paragraph(rng):
    words = ["cafe", "naive", "resume", "people", "zurich", "1990,", "1,000,", "met", "in", "the", "\u2014", "\u20ac"]
    return " ".join(rng.choice(words) for _ in range(rng.randint(4, 40))).capitalize() + "."


# Paragraph parts where answer texts have gone wrong: runs of punctuation, digits followed by commas, quotes and
# brackets, characters outside ASCII, and word-start markers that stand alone (a paragraph's leading space).
_SPAN_TEXT_PARTS = ["cafe", "naive", "1990,", "1,000,", "9,", "42", "(For", "example,", '"quoted"', "...", "--", "!?",
                    "(a)", "Zürich", "naïve", "\u2014", "\u20ac5", "\u4e2d\u6587", "a,b", "3.5", "'s", "e.g.", ")", "(",
                    ",", '"']


def _span_text_paragraph(rng):
    text = rng.choice(["", " ", "  "])
    for index in range(rng.randint(1, 20)):
        text += (rng.choice([" ", " ", "  ", "", " \t"]) if index else "") + rng.choice(_SPAN_TEXT_PARTS)
    return text + rng.choice(["", ".", " "])


def test_every_span_text_equals_the_originals(spm_model, tokenizer):
    """The text of every (start, end) pair of document pieces, as post-processing cuts it, against the original's
    `paragraph[tok_start_to_orig_index[start]:tok_end_to_orig_index[end] + 1].strip()` on the same features.
    Paragraphs the original drops ("MISMATCH DETECTED": its alignment matched under 80% of the characters) are not
    compared; ours answers them (BUILD_NOTES, "SQuAD")."""
    rng = random.Random(5)
    examples = [SquadExample(f"q{index}", "Which word?", paragraph, [])
                for index, paragraph in enumerate(_span_text_paragraph(rng) for _ in range(120)) if paragraph.strip()]
    lengths = dict(max_seq_length=48, doc_stride=16, max_query_length=8)
    ours = list(squad.convert_examples_to_features(examples, tokenizer, is_training=False, **lengths))
    original = original_albert.tokenization()
    theirs = {(feature.example_index, feature.doc_span_index): feature for feature in _original_features(
        original_albert.squad_utils(original), original, spm_model, examples, False, **lengths)}
    alignment = FeatureAlignment.from_features(ours)
    compared = empty = 0
    for row, feature in enumerate(ours):
        their = theirs.get((feature.example_index, feature.doc_span_index))
        if their is None:
            continue
        offset = their.tokens.index("[SEP]") + 1
        paragraph = examples[feature.example_index].paragraph_text
        pieces = len(their.tok_start_to_orig_index)
        for start in range(pieces):
            for end in range(start, min(pieces, start + 12)):
                ours_text = squad_postprocess.span_text(paragraph, alignment, row, offset + start, offset + end)
                expected = paragraph[their.tok_start_to_orig_index[start]:their.tok_end_to_orig_index[end] + 1].strip()
                assert ours_text == expected, (paragraph, start, end)
                compared += 1
                empty += not expected
    assert compared > 50000 and empty > 20
    assert len(theirs) < len(ours)  # the original drops some of these short paragraphs


def test_where_normalisation_drops_or_expands_characters_a_span_is_the_raw_text_its_pieces_came_from(spm_model,
                                                                                                     tokenizer):
    """The documented difference (BUILD_NOTES, "SQuAD"): SentencePiece drops a zero-width space and expands "⅓" to
    "1⁄3"; the original's approximate alignment matches no piece to either, so its spans land on a neighbour (the
    pieces of "⅓" alone answer the zero-width space before them). Ours answer the raw characters the pieces came
    from, without whitespace or format characters at the ends."""
    paragraph = "word\u200b cafe fine \u200b \u2153 cafe."
    examples = [SquadExample("q0", "Which word?", paragraph, [])]
    lengths = dict(max_seq_length=48, doc_stride=16, max_query_length=8)
    ours = list(squad.convert_examples_to_features(examples, tokenizer, is_training=False, **lengths))
    original = original_albert.tokenization()
    [their] = _original_features(original_albert.squad_utils(original), original, spm_model, examples, False,
                                 **lengths)
    offset = their.tokens.index("[SEP]") + 1
    pieces = their.tokens[offset:their.tokens.index("[SEP]", offset)]
    alignment = FeatureAlignment.from_features(ours)

    def texts(first_piece, last_piece):
        end = len(pieces) - 1 - pieces[::-1].index(last_piece)
        start = end - pieces[end::-1].index(first_piece)
        return (squad_postprocess.span_text(paragraph, alignment, 0, offset + start, offset + end),
                paragraph[their.tok_start_to_orig_index[start]:their.tok_end_to_orig_index[end] + 1].strip())

    assert texts("1", "<unk>") == ("\u2153", "\u200b")
    # The second "cafe": the original's alignment gives its piece the "⅓" before it.
    assert texts("\u2581cafe", "\u2581cafe") == ("cafe", "\u2153 cafe")
    whole = (squad_postprocess.span_text(paragraph, alignment, 0, offset, offset + len(pieces) - 1),
             paragraph[their.tok_start_to_orig_index[0]:their.tok_end_to_orig_index[-1] + 1].strip())
    assert whole == (paragraph, paragraph)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_predictions_equal_the_originals_on_random_model_outputs(spm_model, tokenizer, version):
    """The original's accumulate_predictions / write_predictions against postprocess_v1 / v2 on the same features
    (several spans per question) and random model outputs: the same answers, n-best texts, probabilities and
    scores, and for v2 the same null odds. The beams point anywhere, the question and padding included. The
    paragraphs hold runs of punctuation, digits followed by commas, quotes, brackets, text outside ASCII and
    word-start markers that stand alone (those the original keeps: it drops a paragraph its alignment matched
    under 80%)."""
    rng = random.Random(1)
    lengths = dict(max_seq_length=40, doc_stride=12, max_query_length=8)
    original = original_albert.tokenization()
    squad_utils = original_albert.squad_utils(original)
    candidates = [_span_text_paragraph(rng) for _ in range(16)]
    kept = {feature.example_index for feature in _original_features(
        squad_utils, original, spm_model, [SquadExample(f"c{index}", "Which word?", paragraph, [])
                                           for index, paragraph in enumerate(candidates)], False, **lengths)}
    paragraphs = ([PARAGRAPH] + [_random_paragraph(rng) for _ in range(8)]
                  + [paragraph for index, paragraph in enumerate(candidates) if index in kept])
    assert len(paragraphs) > 9 + 8
    examples = [SquadExample(f"q{index}-{question}", f"Which {question}?", paragraph, [])
                for index, paragraph in enumerate(paragraphs) for question in ("word", "place")]
    ours = list(squad.convert_examples_to_features(examples, tokenizer, is_training=False, **lengths))
    theirs = _original_features(squad_utils, original, spm_model, examples, False, **lengths)
    for field in ("input_ids", "input_mask", "segment_ids", "p_mask", "doc_span_index", "example_index"):
        assert [getattr(feature, field) for feature in ours] == [getattr(feature, field) for feature in theirs], field
    assert [[int(feature.token_is_max_context.get(position, False)) for position in range(lengths["max_seq_length"])]
            for feature in theirs] == [feature.token_is_max_context for feature in ours]
    assert len(ours) > len(examples)  # some questions have several spans
    numbers = np.random.default_rng(2)
    n_best_size, max_answer_length, seq = 6, 8, lengths["max_seq_length"]
    unique_ids = np.array([feature.unique_id for feature in ours])
    if version == "v1":
        logits = numbers.normal(size=(2, len(ours), seq))
        # The first question's best span is its paragraph's first piece alone: a word-start marker by itself.
        first_piece = theirs[0].tokens.index("[SEP]") + 1
        assert theirs[0].tokens[first_piece] == "\u2581"
        logits[:, 0, first_piece] = 10.0
        results = {"unique_ids": unique_ids, "start_logits": logits[0], "end_logits": logits[1]}
        raw = [squad_utils.RawResult(feature.unique_id, list(logits[0, row]), list(logits[1, row]))
               for row, feature in enumerate(theirs)]
        predictions, nbest = squad_postprocess.postprocess_v1(examples, FeatureAlignment.from_features(ours),
                                                              results, n_best_size, max_answer_length)
        null_odds = None
        score_names = ("start_logit", "end_logit")
    else:
        start_n_top = end_n_top = 4
        # Top-k beams, as the model's: distinct positions in decreasing log-probability, per start for the ends.
        start_index = np.stack([numbers.choice(seq, start_n_top, replace=False) for _ in ours])
        end_index = np.stack([np.concatenate([numbers.choice(seq, end_n_top, replace=False)
                                              for _ in range(start_n_top)]) for _ in ours])
        start_log_probs = -np.sort(numbers.exponential(size=(len(ours), start_n_top)), axis=1)
        end_log_probs = -np.sort(numbers.exponential(size=(len(ours), start_n_top, end_n_top)), axis=2).reshape(
            len(ours), -1)
        cls_logits = numbers.normal(size=len(ours))
        results = {"unique_ids": unique_ids, "start_top_log_probs": start_log_probs, "start_top_index": start_index,
                   "end_top_log_probs": end_log_probs, "end_top_index": end_index, "cls_logits": cls_logits}
        raw = [squad_utils.RawResultV2(feature.unique_id, start_log_probs[row], start_index[row],
                                       end_log_probs[row], end_index[row], cls_logits[row])
               for row, feature in enumerate(theirs)]
        predictions, nbest, null_odds = squad_postprocess.postprocess_v2(
            examples, FeatureAlignment.from_features(ours), results, n_best_size, max_answer_length)
        score_names = ("start_log_prob", "end_log_prob")

    directory = tempfile.mkdtemp()
    files = [os.path.join(directory, name) for name in ("predictions.json", "nbest.json", "null_odds.json")]
    result_dict = {}
    if version == "v1":
        squad_utils.accumulate_predictions_v1(result_dict, examples, theirs, raw, n_best_size, max_answer_length)
        expected = squad_utils.write_predictions_v1(result_dict, examples, theirs, raw, n_best_size,
                                                    max_answer_length, *files[:2])
    else:
        cls_dict = {}
        squad_utils.accumulate_predictions_v2(result_dict, cls_dict, examples, theirs, raw, n_best_size,
                                              max_answer_length, start_n_top, end_n_top)
        expected, expected_null_odds = squad_utils.write_predictions_v2(
            result_dict, cls_dict, examples, theirs, raw, n_best_size, max_answer_length, *files, None)
        assert null_odds == pytest.approx(dict(expected_null_odds))
        # The original's reported v2 figures (squad_utils.evaluate_v2) against ours, with gold answers that the
        # best answers sometimes match, and unanswerable questions.
        gold = {example.qas_id: ([predictions[example.qas_id] or "cafe"] if index % 3 == 0 else
                                 [example.paragraph_text.split()[0]] if index % 3 == 1 else [])
                for index, example in enumerate(examples)}
        dataset = [{"paragraphs": [{"qas": [{"id": qas_id, "answers": [{"text": text} for text in answers]}
                                            for qas_id, answers in gold.items()]}]}]
        expected_scores = squad_utils.evaluate_v2(result_dict, cls_dict, dataset, examples, theirs, raw, n_best_size,
                                                  max_answer_length, *files)
        scores = squad_evaluation.evaluate_v2_as_original(gold, predictions, null_odds)
        assert scores["exact_match"] == pytest.approx(expected_scores["exact"])
        assert scores["f1"] == pytest.approx(expected_scores["f1"])
        assert scores["null_score_diff_threshold"] == pytest.approx(expected_scores["null_score_diff_threshold"])
        assert 0 < scores["f1"] < 100
    with open(files[1], encoding="utf-8") as handle:
        expected_nbest = json.load(handle)
    assert predictions == dict(expected)
    assert sum(text not in ("", "empty") for text in predictions.values()) > len(examples) // 2
    if version == "v1":
        assert predictions[examples[0].qas_id] == PARAGRAPH[0]
    for qas_id, entries in expected_nbest.items():
        assert [entry["text"] for entry in nbest[qas_id]] == [entry["text"] for entry in entries], qas_id
        for ours_entry, entry in zip(nbest[qas_id], entries):
            assert ours_entry["probability"] == pytest.approx(entry["probability"])
            assert ours_entry[score_names[0]] == pytest.approx(entry["start_log_prob"])
            assert ours_entry[score_names[1]] == pytest.approx(entry["end_log_prob"])


def test_training_features_equal_the_originals_with_unanswerable_questions_and_several_spans(spm_model, tokenizer):
    """v2.0 training data: answerable questions whose answer lies outside some of their spans, and unanswerable
    ones; every span's ids, p_mask, positions and impossibility equal the original's."""
    rng = random.Random(4)
    examples = []
    for index in range(12):
        paragraph = _random_paragraph(rng)
        if index % 3 == 2:
            examples.append(SquadExample(f"q{index}", "Which word?", paragraph, [], "", -1, is_impossible=True))
            continue
        words = paragraph.split()
        word_index = rng.randrange(len(words))
        start = len(" ".join(words[:word_index])) + (1 if word_index else 0)
        examples.append(SquadExample(f"q{index}", "Which word?", paragraph, [words[word_index]], words[word_index],
                                     start))
    lengths = dict(max_seq_length=40, doc_stride=12, max_query_length=8)
    ours = list(squad.convert_examples_to_features(examples, tokenizer, is_training=True, **lengths))
    original = original_albert.tokenization()
    theirs = _original_features(original_albert.squad_utils(original), original, spm_model, examples, True, **lengths)

    assert len(ours) == len(theirs) > len(examples)
    for field in ("input_ids", "p_mask", "start_position", "end_position", "is_impossible"):
        assert [getattr(feature, field) for feature in ours] == [getattr(feature, field) for feature in theirs], field
    impossible = [feature.is_impossible for feature in ours]
    assert 0 < sum(impossible) < len(impossible)
    assert any(feature.is_impossible and not examples[feature.example_index].is_impossible for feature in ours)
