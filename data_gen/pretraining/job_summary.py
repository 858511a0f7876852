"""The summary a create_pretraining_data job keeps beside its shards (by default OUTPUT.summary.json): the settings
the bytes depend on, each finished shard's counts and the totals. A rerun with the same settings resumes from it,
keeping the finished shards; one with other settings fails rather than mix outputs.

Example:
>>> shards = [shard_summary("out/train-00000-of-00002", [], {"instances": 3, "documents": 1}), None]
>>> total = summary_totals(shards, spooled_undecodable_bytes=0)
>>> total["instances"], total["shards_written"]
(3, 1)
"""

import dataclasses
import hashlib
import json
import os
from typing import Dict, Iterable, List, Optional, Sequence

from albert_tf.tokenization import AlbertTokenizer, read_vocabulary_file
from data_gen.file_io import hidden_incomplete_path
from data_gen.pretraining.blocks import Block, file_size
from data_gen.pretraining.instances import InstanceOptions

_LABEL_MEANING = "next_sentence_labels: 0 = segments in order, 1 = swapped (SOP) or random B (NSP)"


def shard_summary(path: str, blocks: Iterable[Block], stats: Dict[str, int]) -> dict:
    """A shard's entry in the summary: its path, blocks, text bytes and counts."""
    blocks = set(blocks)
    shard = {"path": path, "blocks": len(blocks), "text_bytes": sum(block.num_bytes for block in blocks)}
    shard.update({key: stats.get(key, 0) for key in _COUNTS})
    return shard


_COUNTS = ("documents", "sentences", "tokens", "instances", "masked_lm_predictions", "next_sentence_label_0",
           "next_sentence_label_1", "undecodable_bytes")


def summary_totals(shards: Sequence[Optional[dict]], spooled_undecodable_bytes: int) -> dict:
    """The summary's totals over the finished shards (None: not written yet), with the tfds spool's bad bytes."""
    done = [shard for shard in shards if shard is not None]
    totals = {key: sum(shard[key] for shard in done) for key in _COUNTS}
    totals["undecodable_bytes"] += spooled_undecodable_bytes
    totals["shards_written"] = len(done)
    totals["blocks"] = sum(shard["blocks"] for shard in done)
    return totals


def job_settings(input_files, input_format, json_text_field, tfds_name, tfds_split, tfds_text_feature,
                 tokenizer: AlbertTokenizer, options: InstanceOptions, random_seed, block_bytes,
                 output_files) -> dict:
    """What the job's bytes depend on: the input (files and sizes, or the tfds split), the tokenizer (its file's
    SHA-256), the generation options, the seed, the block size and the outputs."""
    vocabulary_sha256 = hashlib.sha256(read_vocabulary_file(tokenizer.source)).hexdigest()
    source = ({"tfds_name": tfds_name, "tfds_split": tfds_split, "tfds_text_feature": tfds_text_feature}
              if input_format == "tfds" else
              {"input_files": [[path, file_size(path)] for path in input_files],
               "json_text_field": json_text_field if input_format == "jsonl" else None})
    return {"input_format": input_format, **source,
            "tokenizer": {"file": tokenizer.source, "sha256": vocabulary_sha256,
                          "sentencepiece": tokenizer.uses_sentencepiece, "do_lower_case": tokenizer.do_lower_case,
                          "digit_comma_rule": tokenizer.digit_comma_rule},
            **dataclasses.asdict(options), "random_seed": random_seed, "block_bytes": block_bytes,
            "output_files": list(output_files)}


def resume_summary(summary_file: str, settings: dict, output_files: Sequence[str]) -> dict:
    """The summary to continue: the previous one when its settings match; finished shards are kept."""
    import tensorflow as tf

    existing = [path for path in output_files if tf.io.gfile.exists(path)]
    previous = None
    if tf.io.gfile.exists(summary_file):
        with tf.io.gfile.GFile(summary_file, "r") as handle:
            previous = json.load(handle)
    if existing and previous is None:
        raise FileExistsError(f"Output {existing[0]!r} exists but its summary {summary_file!r} does not, so its "
                              "settings cannot be checked; delete the old outputs or restore the summary.")
    if previous is not None and existing and previous.get("settings") != settings:
        changed = sorted(key for key in set(settings) | set(previous.get("settings", {}))
                         if settings.get(key) != previous.get("settings", {}).get(key))
        raise ValueError(f"Outputs such as {existing[0]!r} were written with other settings ({', '.join(changed)} "
                         f"differ, see {summary_file!r}); delete them or write elsewhere.")
    shards: List[Optional[dict]] = [None] * len(output_files)
    spooled_undecodable_bytes = 0
    if previous is not None and existing:
        spooled_undecodable_bytes = previous.get("spooled_undecodable_bytes", 0)
        for shard, path in enumerate(output_files):
            if path in existing:
                shards[shard] = previous["shards"][shard]
    return {"complete": False, "settings": settings, "label_meaning": _LABEL_MEANING,
            "totals": summary_totals(shards, spooled_undecodable_bytes),
            "spooled_undecodable_bytes": spooled_undecodable_bytes, "shards": shards}


def write_summary(summary_file: str, summary: dict) -> None:
    """Writes `summary` as JSON to `summary_file` (local or a URL), atomically: a hidden file renamed into place."""
    import tensorflow as tf

    directory = os.path.dirname(summary_file)
    if directory:
        tf.io.gfile.makedirs(directory)
    temporary = hidden_incomplete_path(summary_file)
    with tf.io.gfile.GFile(temporary, "w") as handle:
        handle.write(json.dumps(summary, indent=1) + "\n")
    tf.io.gfile.rename(temporary, summary_file, overwrite=True)
