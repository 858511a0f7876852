"""conlleval's entity (chunk) scoring for IOB1, IOB2 and BIOES tags, and rewriting tags between the schemes.

Chunks are read as conlleval.pl reads them (its startOfChunk / endOfChunk rules, with the `S-` rules that
its Python ports and seqeval add for BIOES): a tag is `O` or `<prefix>-<type>`, and a chunk starts at a
`B-` or `S-`, at an `I-` or `E-` that follows `O`, `E-` or `S-`, or at any tag whose type differs from
the previous one. So every scheme, and any tag sequence a model predicts, reads as one list of chunks
(type, first, last), the one internal form: the metrics compare chunks, and `tags_in_scheme` writes a
list of chunks back in any scheme.

Scores are conlleval's: precision = correct chunks / predicted chunks, recall = correct / gold chunks
(a chunk is correct when its type and both boundaries match), F1 their harmonic mean; each is 0 when its
denominator is. Sentences are scored as separate sequences, as the blank lines of conlleval's input keep them.
`accuracy` is conlleval's token accuracy: the fraction of tokens whose tag is exactly the gold tag.

Example:
>>> chunks(["B-PER", "I-PER", "O", "I-LOC"])
[('PER', 0, 1), ('LOC', 3, 3)]
>>> tags_in_scheme([("PER", 0, 1), ("LOC", 3, 3)], 4, "bioes")
['B-PER', 'E-PER', 'O', 'S-LOC']
>>> scores = entity_scores([["B-PER", "I-PER", "O", "B-LOC"]], [["B-PER", "I-PER", "O", "O"]])
>>> scores["precision"], scores["recall"], round(scores["f1"], 4)
(1.0, 0.5, 0.6667)
"""

from typing import Dict, List, Sequence, Tuple

TAG_SCHEMES = ("iob1", "iob2", "bioes")
OUTSIDE = "O"

Chunk = Tuple[str, int, int]


def split_tag(tag: str) -> Tuple[str, str]:
    """(prefix, type) of a tag: ('O', '') for `O`, ('B', 'PER') for `B-PER`."""
    if tag == OUTSIDE:
        return OUTSIDE, ""
    prefix, _, entity_type = tag.partition("-")
    return prefix, entity_type


def _ends_chunk(previous_prefix, previous_type, prefix, entity_type) -> bool:
    if previous_prefix in ("E", "S"):
        return True
    if previous_prefix in ("B", "I") and prefix in ("B", "S", OUTSIDE):
        return True
    return previous_prefix != OUTSIDE and previous_type != entity_type


def _starts_chunk(previous_prefix, previous_type, prefix, entity_type) -> bool:
    if prefix in ("B", "S"):
        return True
    if previous_prefix in ("E", "S", OUTSIDE) and prefix in ("E", "I"):
        return True
    return prefix != OUTSIDE and previous_type != entity_type


def chunks(tags: Sequence[str]) -> List[Chunk]:
    """The chunks (type, first index, last index) of one sentence's tags, by conlleval's rules."""
    found = []
    previous_prefix, previous_type, start = OUTSIDE, "", None
    for index, tag in enumerate(list(tags) + [OUTSIDE]):
        prefix, entity_type = split_tag(tag)
        if start is not None and _ends_chunk(previous_prefix, previous_type, prefix, entity_type):
            found.append((previous_type, start, index - 1))
            start = None
        if _starts_chunk(previous_prefix, previous_type, prefix, entity_type):
            start = index
        previous_prefix, previous_type = prefix, entity_type
    return found


def tags_in_scheme(sentence_chunks: Sequence[Chunk], length: int, scheme: str) -> List[str]:
    """The tags of a sentence of `length` tokens holding `sentence_chunks` (non-overlapping), in `scheme`.

    IOB1 starts a chunk with `I-` unless the chunk before it ends just before and has the same type; IOB2
    starts every chunk with `B-`; BIOES marks single-token chunks `S-` and last tokens `E-`.
    """
    if scheme not in TAG_SCHEMES:
        raise ValueError(f"Unknown tag scheme {scheme!r}; allowed: {', '.join(TAG_SCHEMES)}.")
    tags = [OUTSIDE] * length
    previous_end, previous_type = None, None
    for entity_type, first, last in sentence_chunks:
        inside = [f"I-{entity_type}"] * (last - first + 1)
        if scheme == "iob2" or (scheme == "iob1" and previous_end == first - 1 and previous_type == entity_type):
            inside[0] = f"B-{entity_type}"
        elif scheme == "bioes":
            if first == last:
                inside = [f"S-{entity_type}"]
            else:
                inside[0], inside[-1] = f"B-{entity_type}", f"E-{entity_type}"
        tags[first:last + 1] = inside
        previous_end, previous_type = last, entity_type
    return tags


def entity_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> Dict[str, float]:
    """conlleval's precision, recall and F1 of the chunks, and its token accuracy, over sentences of tags.

    `gold` and `predicted` hold one tag sequence per sentence, of equal lengths; the two may use
    different schemes, since both are read as chunks.
    """
    if len(gold) != len(predicted):
        raise ValueError(f"entity_scores got {len(gold)} gold sentences but {len(predicted)} predicted ones.")
    correct = found_gold = found_predicted = correct_tags = num_tags = 0
    for index, (gold_tags, predicted_tags) in enumerate(zip(gold, predicted)):
        if len(gold_tags) != len(predicted_tags):
            raise ValueError(f"Sentence {index} has {len(gold_tags)} gold tags but {len(predicted_tags)} "
                             f"predicted ones.")
        gold_chunks, predicted_chunks = set(chunks(gold_tags)), set(chunks(predicted_tags))
        correct += len(gold_chunks & predicted_chunks)
        found_gold += len(gold_chunks)
        found_predicted += len(predicted_chunks)
        correct_tags += sum(g == p for g, p in zip(gold_tags, predicted_tags))
        num_tags += len(gold_tags)
    precision = correct / found_predicted if found_predicted else 0.0
    recall = correct / found_gold if found_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1,
            "accuracy": correct_tags / num_tags if num_tags else 0.0}
