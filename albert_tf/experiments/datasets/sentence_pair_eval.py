"""Pure, balanced sentence-pair evaluation sets: SOP from same-chunk pairs only, NSP from consecutive against
other-document segments.

The original generator's held-out instances are neither: a one-segment chunk takes a random-document B with label 1,
even under SOP, so its SOP set mixes the two tasks and leans to label 1. Here every pair (A, B) is two consecutive
runs of whole sentences of one document, and it gives two records, so each set is exactly 50/50:
- SOP: (A, B) label 0 and (B, A) label 1;
- NSP: (A, B) label 0 and (A, B') label 1, B' the same number of tokens taken from another document.
Labels follow the original's next_sentence_labels (1 = swapped or random B); the records carry n-gram masked-LM
targets as create_pretraining_data's do, so the same files also evaluate the masked LM.

Example (it needs a SentencePiece model, so it is not run here):
>>> counts = write_sentence_pair_eval_set("holdout.txt", "eval/sop.tfrecord", "spm.model", "sop",
...                                       max_seq_length=128, max_predictions_per_seq=20)  # doctest: +SKIP
>>> counts["label_0"] == counts["label_1"]  # doctest: +SKIP
True
"""

import collections
import os
import random
from typing import Dict, List, Sequence, Union

from albert_tf.tokenization import AlbertTokenizer
from data_gen import file_io
from data_gen.pretraining.block_reader import BlockReader
from data_gen.pretraining.blocks import Block, Segment
from data_gen.pretraining.instances import InstanceOptions, SpecialIds, instance_to_example_bytes, make_instance

TASKS = ("sop", "nsp")


def _read_documents(path: str, tokenizer: AlbertTokenizer) -> List[List[List[int]]]:
    """The file's documents as lists of packed-token sentences, read as create_pretraining_data reads text."""
    block = Block(0, (Segment(path, 0, file_io.file_size(path), 1),))
    return BlockReader(tokenizer, "text", "text").read(block, collections.Counter())


def _consecutive_pairs(document: Sequence[List[int]], max_num_tokens: int, rng: random.Random):
    """Chunks of whole sentences up to max_num_tokens, each split at a random sentence boundary into (A, B)."""
    chunk: List[List[int]] = []
    length = 0
    for sentence in document:
        chunk.append(sentence)
        length += len(sentence)
        if length >= max_num_tokens:
            if len(chunk) >= 2:
                a_end = rng.randint(1, len(chunk) - 1)
                yield [t for s in chunk[:a_end] for t in s], [t for s in chunk[a_end:] for t in s]
            chunk, length = [], 0
    if len(chunk) >= 2:
        a_end = rng.randint(1, len(chunk) - 1)
        yield [t for s in chunk[:a_end] for t in s], [t for s in chunk[a_end:] for t in s]


def _fit(tokens_a: List[int], tokens_b: List[int], max_num_tokens: int):
    """Trims A from its start and B from its end, keeping the tokens next to the boundary between them."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        if len(tokens_a) > len(tokens_b):
            del tokens_a[0]
        else:
            tokens_b.pop()
    return tokens_a, tokens_b


def write_sentence_pair_eval_set(input_file: str, output_file: str, tokenizer: Union[AlbertTokenizer, str],
                                 task: str, *, max_seq_length: int, max_predictions_per_seq: int,
                                 random_seed: int = 12345) -> Dict[str, int]:
    """Writes the pure, balanced `task` ("sop" or "nsp") set of `input_file` to one TFRecord file; returns counts
    ({"pairs", "label_0", "label_1", "masked_lm_predictions"}). Both files may be local or URLs (gs://, ...)."""
    import tensorflow as tf

    if task not in TASKS:
        raise ValueError(f"task={task!r} is not a sentence-pair task; allowed: {', '.join(TASKS)}.")
    if isinstance(tokenizer, str):
        tokenizer = AlbertTokenizer(spm_model_file=tokenizer)
    options = InstanceOptions(max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions_per_seq,
                              dupe_factor=1)
    special_ids = SpecialIds(tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id, tokenizer.vocab_size)
    documents = _read_documents(input_file, tokenizer)
    if task == "nsp" and len(documents) < 2:
        raise ValueError(f"{input_file}: NSP pairs need at least 2 documents; it holds {len(documents)}.")
    rng, ngram_rng = random.Random(random_seed), random.Random(random_seed + 1)
    counts = collections.Counter()
    records = []
    for index, document in enumerate(documents):
        for tokens_a, tokens_b in _consecutive_pairs(document, options.max_num_tokens, rng):
            # Fitted once, so both records of a pair hold the same tokens of A (and for SOP of B).
            tokens_a, tokens_b = _fit(tokens_a, tokens_b, options.max_num_tokens)
            if task == "sop":
                pairs = [(tokens_a, tokens_b, False), (tokens_b, tokens_a, True)]
            else:
                other = rng.choice([i for i in range(len(documents)) if i != index])
                other_tokens = [t for s in documents[other] for t in s]
                start = rng.randint(0, max(0, len(other_tokens) - len(tokens_b)))
                pairs = [(tokens_a, tokens_b, False), (tokens_a, other_tokens[start:start + len(tokens_b)], True)]
            for first, second, label in pairs:
                instance = make_instance(list(first), list(second), label, options, special_ids, rng, ngram_rng)
                records.append(instance_to_example_bytes(instance, max_seq_length, max_predictions_per_seq))
                counts[f"label_{int(label)}"] += 1
                counts["masked_lm_predictions"] += len(instance.masked_lm_ids)
            counts["pairs"] += 1
    if not counts["pairs"]:
        raise ValueError(f"{input_file}: no document has two sentences, so there is no {task} pair to write.")
    directory = os.path.dirname(output_file)
    if directory:
        file_io.makedirs(directory)
    temporary = output_file + ".incomplete"
    with tf.io.TFRecordWriter(temporary) as writer:
        for record in records:
            writer.write(record)
    file_io.replace(temporary, output_file)
    return {key: counts[key] for key in ("pairs", "label_0", "label_1", "masked_lm_predictions")}
