"""data_gen.readers.tag_schemes' chunks and data_gen.evaluation.conll_evaluation's scores, checked against seqeval (its
default, conlleval mode)."""
import numpy as np
import pytest

from data_gen.evaluation.conll_evaluation import entity_scores
from data_gen.readers.tag_schemes import OUTSIDE, TAG_SCHEMES, chunks, tags_in_scheme

seqeval_metrics = pytest.importorskip("seqeval.metrics")
seqeval_sequence_labeling = pytest.importorskip("seqeval.metrics.sequence_labeling")

TYPES = ("PER", "LOC", "ORG")


def random_tags(rng, length, prefixes):
    """Any tag sequence, valid in no scheme in particular: what a model may predict."""
    return [OUTSIDE if rng.random() < 0.4 else f"{rng.choice(prefixes)}-{rng.choice(TYPES)}"
            for _ in range(length)]


def random_chunks(rng, length):
    """Non-overlapping chunks, some adjacent with the same type (where IOB1 needs its B-)."""
    found, position = [], 0
    while position < length:
        position += int(rng.integers(0, 3))
        last = position + int(rng.integers(0, 3))
        if last >= length:
            break
        found.append((str(rng.choice(TYPES[:2])), position, last))
        position = last + 1
    return found


@pytest.mark.parametrize("prefixes", [("B", "I"), ("B", "I", "E", "S")], ids=["iob", "bioes"])
def test_chunks_and_scores_agree_with_seqeval_on_any_tags(prefixes):
    rng = np.random.default_rng(0)
    gold = [random_tags(rng, int(rng.integers(1, 12)), prefixes) for _ in range(200)]
    predicted = [[tag if rng.random() < 0.7 else random_tags(rng, 1, prefixes)[0] for tag in sentence]
                 for sentence in gold]
    for sentence in gold:
        expected = sorted(seqeval_sequence_labeling.get_entities(sentence), key=lambda chunk: chunk[1])
        assert chunks(sentence) == [tuple(chunk) for chunk in expected], sentence
    scores = entity_scores(gold, predicted)
    assert 0.2 < scores["f1"] < 0.9
    assert scores["precision"] == pytest.approx(seqeval_metrics.precision_score(gold, predicted))
    assert scores["recall"] == pytest.approx(seqeval_metrics.recall_score(gold, predicted))
    assert scores["f1"] == pytest.approx(seqeval_metrics.f1_score(gold, predicted))
    assert scores["accuracy"] == pytest.approx(seqeval_metrics.accuracy_score(gold, predicted))


@pytest.mark.parametrize("scheme", TAG_SCHEMES)
def test_tags_in_scheme_read_back_as_the_same_chunks(scheme):
    rng = np.random.default_rng(1)
    for _ in range(200):
        length = int(rng.integers(1, 12))
        sentence_chunks = random_chunks(rng, length)
        assert chunks(tags_in_scheme(sentence_chunks, length, scheme)) == sentence_chunks


def test_tags_in_scheme_writes_each_scheme_as_defined():
    sentence_chunks = [("PER", 0, 1), ("PER", 2, 2), ("LOC", 4, 4)]
    assert tags_in_scheme(sentence_chunks, 5, "iob1") == ["I-PER", "I-PER", "B-PER", "O", "I-LOC"]
    assert tags_in_scheme(sentence_chunks, 5, "iob2") == ["B-PER", "I-PER", "B-PER", "O", "B-LOC"]
    assert tags_in_scheme(sentence_chunks, 5, "bioes") == ["B-PER", "E-PER", "S-PER", "O", "S-LOC"]
    with pytest.raises(ValueError, match="Unknown tag scheme 'bio'; allowed: iob1, iob2, bioes"):
        tags_in_scheme(sentence_chunks, 5, "bio")


def test_scores_without_chunks_are_zero_and_mismatched_lengths_are_errors():
    assert entity_scores([["O", "O"]], [["O", "O"]]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "accuracy": 1.0}
    with pytest.raises(ValueError, match="Sentence 0 has 2 gold tags but 1 predicted ones"):
        entity_scores([["O", "O"]], [["O"]])
