"""One run of an albert-tf row of the `finetune_text` workload (albert_tf/benchmarking/finetune_text.py), in a
Python process of its own:

    python -m albert_tf.benchmarking.finetune_text_child SPEC_JSON

It runs the library's fine-tuning of a text classifier, `run_text_classification` (what run_scripts.run_classifier
runs), as the spec's options say (dynamic padding, or `pad_to_max_seq_length`), twice:
1. as a user runs it: fine-tune one epoch and predict the dev set (do_train, do_predict), timed end to end, the
   model's building, tracing and compiling included; the process's peak RSS is read after it;
2. for the steady rates: a second run fine-tunes 1 + `timed_epochs` epochs and predicts the dev set twice (do_eval,
   then do_predict, in the same batches); its first epoch and first prediction trace and compile, the later
   epochs and the second prediction are timed.
Both runs read the features the parent built into their cache, so no row tokenizes. The Trainer's training calls
and predictions are timed from outside (`TrainerTiming`); the runs are the library's, unchanged. The record is
printed as JSON after peer_protocol.RECORD_MARKER, as the peers' are.
"""

import json
import os
import sys
import tempfile
import time
from typing import Dict, List

from albert_tf.benchmarking.peer_protocol import RECORD_MARKER, peak_rss_mb


class TrainerTiming:
    """Within `with`, the time at which each training call of the library's Trainer returned, by the optimizer
    step it reached (the step it started from too), and the seconds of each prediction; the Trainer runs unchanged.

    Example:
    >>> with TrainerTiming() as timing:  # doctest: +SKIP
    ...     run_text_classification(options)
    >>> timing.seconds_between_steps(6, 12), timing.prediction_seconds  # doctest: +SKIP
    (41.7, [3.1])
    """

    def __init__(self):
        self.step_times: Dict[int, float] = {}
        self.prediction_seconds: List[float] = []
        self.trainer = None
        self._originals = None

    def __enter__(self):
        from albert_tf.training.trainer import Trainer

        make_train_function, predict = self._originals = Trainer.make_train_function, Trainer.predict
        timing = self

        def timed_make_train_function(trainer, *args, **kwargs):
            train_steps = make_train_function(trainer, *args, **kwargs)
            timing.trainer = trainer
            timing.step_times[trainer.step] = time.perf_counter()

            def timed_train_steps(*args, **kwargs):
                results = train_steps(*args, **kwargs)
                timing.step_times[results["step"]] = time.perf_counter()
                return results

            return timed_train_steps

        def timed_predict(trainer, *args, **kwargs):
            start = time.perf_counter()
            outputs = predict(trainer, *args, **kwargs)
            timing.prediction_seconds.append(time.perf_counter() - start)
            return outputs

        Trainer.make_train_function, Trainer.predict = timed_make_train_function, timed_predict
        return self

    def __exit__(self, *exception):
        from albert_tf.training.trainer import Trainer

        Trainer.make_train_function, Trainer.predict = self._originals

    def seconds_between_steps(self, first: int, last: int) -> float:
        """The seconds from the training call that reached step `first` to the one that reached `last`."""
        missing = sorted({first, last} - set(self.step_times))
        if missing:
            raise RuntimeError(f"The run's training calls reached steps {sorted(self.step_times)}, not {missing}.")
        return self.step_times[last] - self.step_times[first]


def text_classification_options(spec: dict, output_dir: str, num_train_epochs: int, **what_to_do):
    """The TextClassificationOptions of a run of `spec` (see `run_ours`) into `output_dir`; `what_to_do` are
    FinetuningOptions' do_train, do_eval and do_predict.

    Example:
    >>> spec = {"options": {"max_seq_length": 128, "train_batch_size": 32}, "text": {"text_field": "sentence_a"}}
    >>> options = text_classification_options(spec, "/tmp/run", 2, do_train=True)
    >>> options.finetuning.num_train_epochs, options.finetuning.max_seq_length, options.text_field
    (2.0, 128, 'sentence_a')
    """
    from albert_tf.tasks.finetuning_options import FinetuningOptions
    from albert_tf.tasks.text_classification import TextClassificationOptions

    return TextClassificationOptions(FinetuningOptions(output_dir=output_dir, num_train_epochs=float(num_train_epochs),
                                                       train_step=None, **spec["options"], **what_to_do),
                                     **spec["text"])


def run_ours(spec: dict) -> dict:
    """The two runs the module's docstring describes; the row's record (seconds, peak RSS, the compile path).

    `spec` holds "options" (FinetuningOptions' fields but output_dir, the epochs and what to do), "text"
    (TextClassificationOptions' fields but `finetuning`), "timed_epochs", "train_examples" (whole batches) and
    "dev_examples".
    """
    start = time.perf_counter()
    import tensorflow as tf

    from albert_tf.tasks.text_classification import run_text_classification

    import_seconds = time.perf_counter() - start
    epochs = spec["timed_epochs"]
    steps_per_epoch = spec["train_examples"] // spec["options"]["train_batch_size"]
    with tempfile.TemporaryDirectory() as directory:
        with TrainerTiming() as end_to_end:
            start = time.perf_counter()
            run_text_classification(text_classification_options(spec, os.path.join(directory, "end_to_end"), 1,
                                                                do_train=True, do_predict=True))
            end_to_end_seconds = time.perf_counter() - start
        peak_rss = peak_rss_mb()
        with TrainerTiming() as timing:
            run_text_classification(text_classification_options(spec, os.path.join(directory, "steady"), 1 + epochs,
                                                                do_train=True, do_eval=True, do_predict=True))
    if len(timing.prediction_seconds) != 2:
        raise RuntimeError(f"The steady run predicted {len(timing.prediction_seconds)} times, not twice (do_eval, "
                           "do_predict).")
    # jit_compile="auto" may choose by the steps a run takes: the two runs' choices can differ.
    choice = timing.trainer.jit_compile_choice
    return {"implementation": "albert-tf", "mixed_precision": spec["options"]["mixed_precision"],
            "jit_compile": choice.jit_compile, "jit_compile_choice": choice.describe(),
            "end_to_end_jit_compile_choice": end_to_end.trainer.jit_compile_choice.describe(),
            "import_seconds": import_seconds, "end_to_end_seconds": end_to_end_seconds, "peak_rss_mb": peak_rss,
            "timed_epochs": epochs,
            "train_seconds": timing.seconds_between_steps(steps_per_epoch, (1 + epochs) * steps_per_epoch),
            "predict_seconds": timing.prediction_seconds[-1], "tensorflow": tf.__version__}


def main(argv):
    spec, = argv
    print(RECORD_MARKER + json.dumps(run_ours(json.loads(spec))))


if __name__ == "__main__":
    main(sys.argv[1:])
