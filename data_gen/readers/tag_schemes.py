"""Tag schemes (IOB1, IOB2, BIOES): reading a sentence's tags as chunks, and writing chunks in any scheme.

Chunks are read as conlleval.pl reads them (its startOfChunk / endOfChunk rules, with the `S-` rules that
its Python ports and seqeval add for BIOES): a tag is `O` or `<prefix>-<type>`, and a chunk starts at a
`B-` or `S-`, at an `I-` or `E-` that follows `O`, `E-` or `S-`, or at any tag whose type differs from
the previous one. So every scheme, and any tag sequence a model predicts, reads as one list of chunks
(type, first, last), the one internal form: the CoNLL reader rewrites a file's tags into the model's scheme
through it, the evaluation (data_gen.evaluation.conll_evaluation) compares chunks, and `tags_in_scheme` writes
a list of chunks back in any scheme.

Example:
>>> chunks(["B-PER", "I-PER", "O", "I-LOC"])
[('PER', 0, 1), ('LOC', 3, 3)]
>>> tags_in_scheme([("PER", 0, 1), ("LOC", 3, 3)], 4, "bioes")
['B-PER', 'E-PER', 'O', 'S-LOC']
"""

from typing import List, Sequence, Tuple

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
