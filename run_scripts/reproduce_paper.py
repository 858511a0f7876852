"""Reproduces the paper's measured claims at a budget and writes REPORT.md, results.json and plots.

    python -m run_scripts.reproduce_paper --experiment=all --budget=smoke --output_dir=paper_smoke
    python -m run_scripts.reproduce_paper --experiment=sharing --corpus=my_text.txt --seeds=0,1,2 \
        --output_dir=paper_mine

Every arm is an ordinary pretraining output directory under OUTPUT_DIR/arms: rerunning the same command keeps
the finished arms, resumes a half-trained one from its last checkpoint, and then writes the report. SIGTERM ends
the run with one line naming what it was doing (a training saves its checkpoint first) and exit status 143 (a
shell's 128 + SIGTERM): the report is not written yet.
"""

import signal
import sys

from absl import flags, logging

from albert_tf.experiments.budgets import BUDGETS
from albert_tf.experiments.reproduce import EXPERIMENT_NAMES, ReproduceOptions, run_reproduction
from albert_tf.experiments.stopping import ReproductionStopped
from albert_tf.training import host_allocator
from run_scripts import entry
from run_scripts.training_flags import define_jit_compile_flag

FLAGS = flags.FLAGS
flags.DEFINE_list("experiment", list(ReproduceOptions.experiments),
                  f"Experiments to run, from {', '.join(EXPERIMENT_NAMES)}, or all.")
flags.DEFINE_enum("budget", ReproduceOptions.budget, list(BUDGETS), "How large the models and runs are.")
flags.DEFINE_list("corpus", None, "Text files in the original format (one sentence per line, a blank line between "
                  "documents); by default the built-in docstring corpus.")
flags.DEFINE_bool("include_site_packages", ReproduceOptions.include_site_packages,
                  "Build the built-in corpus from site-packages too (larger).")
flags.DEFINE_list("seeds", [str(seed) for seed in ReproduceOptions.seeds],
                  "Seeds of the models' initialization; every arm runs once per seed.")
flags.DEFINE_string("output_dir", "paper_reproduction", "Where the data, the arms and the report go.")
flags.DEFINE_string("glue_data_dir", None, "A local GLUE copy in the original layout (SST-2/, MNLI/): the sharing "
                    "arms are also fine-tuned on SST-2 and MNLI and scored on their dev sets.")
flags.DEFINE_list("arms", None, "Train and report only the arms of these names (e.g. none,all for a gate before "
                  "the other arms); by default every arm of the experiments.")
define_jit_compile_flag()
# Not 0, as run_pretraining's is: a loop over `reproduce_paper` must not take a stopped run for a finished report.
STOPPED_STATUS = 128 + signal.SIGTERM


def _seeds(values):
    try:
        return [int(value) for value in values]
    except ValueError:
        raise ValueError(f"--seeds={','.join(values)}: every seed must be an integer.") from None


def main(argv):
    del argv
    host_allocator.prefer_training_defaults()
    options = ReproduceOptions(
        output_dir=FLAGS.output_dir, experiments=FLAGS.experiment, budget=FLAGS.budget, corpus=FLAGS.corpus,
        include_site_packages=FLAGS.include_site_packages, seeds=_seeds(FLAGS.seeds), jit_compile=FLAGS.jit_compile,
        glue_data_dir=FLAGS.glue_data_dir, arms=FLAGS.arms)
    try:
        paths = run_reproduction(options)
    except ReproductionStopped as stopped:
        logging.warning("%s", stopped)
        sys.exit(STOPPED_STATUS)
    print(f"Report: {paths['report']}\nResults: {paths['results']}")


if __name__ == "__main__":
    entry.run(main)
