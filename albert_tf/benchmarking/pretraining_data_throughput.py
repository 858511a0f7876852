"""Measuring create_pretraining_data: a synthetic corpus, and a run in a child process with its rate and peak memory.

The generator runs in the child (`python -m albert_tf.benchmarking.pretraining_data_child`), so this module imports
nothing of data_gen.
"""

import itertools
import json
import os
import random
from typing import Optional, Sequence, Tuple, Union

from albert_tf.benchmarking.child_process import run_python_child

_SYLLABLES = ("ba be bi bo bu ca ce co da de di do fa fe fi ga ge go ha he hi ho ka ke ki ko la le li lo ma me mi "
              "mo na ne ni no pa pe pi po ra re ri ro sa se si so ta te ti to va ve vi wa we ya yo za ze").split()
_SYNTHETIC_EXTRAS = ("1990,", "2001,", "1,000,000", "café", "naïve", "(approximately)", "\"quoted\"", "e.g.", "don't")


def write_synthetic_corpus(path: str, num_documents: int, seed: int = 0,
                           sentences_per_document: Tuple[int, int] = (4, 40), vocabulary_words: int = 5000) -> str:
    """Writes random documents in the original text format (sentence per line, blank line between documents).

    Words are made of syllables and drawn with Zipf frequencies (p proportional to 1/rank) from a vocabulary
    that depends only on `vocabulary_words`, so corpora of any size share it.

    Example:
    >>> write_synthetic_corpus("/tmp/synthetic.txt", num_documents=3)  # doctest: +SKIP
    '/tmp/synthetic.txt'
    """
    vocabulary_rng = random.Random(vocabulary_words)
    vocabulary = sorted({"".join(vocabulary_rng.choices(_SYLLABLES, k=vocabulary_rng.randint(1, 4)))
                         for _ in range(vocabulary_words)}) + list(_SYNTHETIC_EXTRAS)
    vocabulary_rng.shuffle(vocabulary)
    cumulative = list(itertools.accumulate(1.0 / rank for rank in range(1, len(vocabulary) + 1)))
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for _ in range(num_documents):
            for _ in range(rng.randint(*sentences_per_document)):
                words = rng.choices(vocabulary, cum_weights=cumulative, k=rng.randint(5, 30))
                handle.write(" ".join(words).capitalize() + ".\n")
            handle.write("\n")
    return path


# The child process (pretraining_data_child) prints the job's time and totals on a line that starts with this.
CHILD_SUMMARY_MARKER = "SUMMARY "


def measure_throughput(input_files: Union[str, Sequence[str]], output_dir: str, spm_model_file: str, *,
                       num_workers: Optional[int] = None, num_output_shards: int = 1, poll_seconds: float = 0.2,
                       **generation_arguments) -> dict:
    """Runs `create_pretraining_data` in a child process; returns its rate and the peak memory of its processes.

    Peak memory is sampled every `poll_seconds` (`child_process.ChildRun`): `peak_pss_bytes` is the proportional
    set size summed over the child and its workers, which falls as other processes on the machine import
    TensorFlow; `peak_anonymous_bytes` the PSS of their anonymous pages (heap), which does not;
    `peak_main_rss_bytes` the resident size of the child (the launcher) and `peak_worker_rss_bytes` that of its
    largest worker (None without workers).
    Rates exclude the child's start-up (importing TensorFlow). `num_workers` (default 1) are local worker
    processes; with `beam_pipeline_options` among the generation arguments the Beam pipeline runs instead, its
    workers counted in the peak PSS, and the per-worker rate is None (the runner chooses its workers).

    Example:
    >>> result = measure_throughput("corpus.txt", "/tmp/bench", "tiny.model", num_workers=2,
    ...                             max_seq_length=128, dupe_factor=2)  # doctest: +SKIP
    >>> result["peak_pss_bytes"] > 0, result["num_workers"]  # doctest: +SKIP
    (True, 2)
    """
    os.makedirs(output_dir, exist_ok=True)
    arguments = dict(generation_arguments, input_files=input_files, spm_model_file=spm_model_file,
                     num_workers=num_workers, output_file=os.path.join(output_dir, "measure.tfrecord"),
                     num_output_shards=num_output_shards)
    child = run_python_child(["-m", "albert_tf.benchmarking.pretraining_data_child", json.dumps(arguments)],
                             CHILD_SUMMARY_MARKER, "create_pretraining_data failed in the measuring child",
                             memory_poll_seconds=poll_seconds)
    result = child.record
    instances, seconds = result["totals"]["instances"], result["seconds"]
    local_workers = None if generation_arguments.get("beam_pipeline_options") else num_workers or 1
    return {"instances": instances, "documents": result["totals"]["documents"], "blocks": result["totals"]["blocks"],
            "seconds": seconds,
            "num_workers": local_workers, "instances_per_second": instances / seconds,
            "instances_per_second_per_worker": instances / seconds / local_workers if local_workers else None,
            "peak_pss_bytes": child.peak_pss_bytes, "peak_anonymous_bytes": child.peak_anonymous_bytes,
            "peak_main_rss_bytes": child.peak_rss_bytes,
            "peak_worker_rss_bytes": child.peak_descendant_rss_bytes or None}
