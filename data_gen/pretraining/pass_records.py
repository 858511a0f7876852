"""One dupe pass over one block -> its serialized records: the work the local writer's processes and the Beam
pipeline's workers both do, so that both write the same bytes.

A block pass depends only on (random_seed, block index, pass, the block's documents): each of its random streams
is seeded from those by SHA-256, so the output does not depend on the worker count or on which worker runs it.

Example:
>>> from data_gen.pretraining.instances import pack_token
>>> sentence = [pack_token(token_id, True) for token_id in range(10, 30)]
>>> stats = collections.Counter()
>>> records = generate_pass_records([[sentence, sentence], [sentence]], 0, 0,
...                                 InstanceOptions(max_seq_length=32, dupe_factor=1), SpecialIds(2, 3, 4, 100),
...                                 12345, stats)
>>> len(records) == stats["instances"] == stats["next_sentence_label_0"] + stats["next_sentence_label_1"]
True
"""

import collections
import hashlib
import random
from typing import List

from data_gen.pretraining.instances import (InstanceOptions, SpecialIds, create_instances_from_document,
                                            instance_to_example_bytes)


def pass_seed(random_seed: int, block_index: int, stream: str) -> int:
    """The seed of one random stream of a block ("documents", "instances/PASS" or "ngrams/PASS")."""
    digest = hashlib.sha256(f"{random_seed}/{block_index}/{stream}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def generate_pass_records(documents: List[List[List[int]]], block_index: int, dupe_pass: int,
                          options: InstanceOptions, special_ids: SpecialIds, random_seed: int,
                          stats: collections.Counter) -> List[bytes]:
    """One of the original's dupe_factor passes over a block: instances of every document, shuffled.

    The documents are shuffled once per block (the same order in every pass, as the original shuffles
    its corpus once); each pass draws from its own seeded streams.
    """
    documents = list(documents)
    random.Random(pass_seed(random_seed, block_index, "documents")).shuffle(documents)
    rng = random.Random(pass_seed(random_seed, block_index, f"instances/{dupe_pass}"))
    ngram_rng = random.Random(pass_seed(random_seed, block_index, f"ngrams/{dupe_pass}"))
    records = []
    for document_index in range(len(documents)):
        for instance in create_instances_from_document(documents, document_index, options, special_ids, rng,
                                                       ngram_rng):
            records.append(instance_to_example_bytes(instance, options.max_seq_length,
                                                     options.max_predictions_per_seq))
            stats["masked_lm_predictions"] += len(instance.masked_lm_positions)
            stats[f"next_sentence_label_{int(instance.is_random_next)}"] += 1
    rng.shuffle(records)
    stats["instances"] += len(records)
    return records
