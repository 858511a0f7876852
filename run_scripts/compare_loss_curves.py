"""Loss curves of training runs side by side, and how far each lies from a reference run.

    python -m run_scripts.compare_loss_curves --run=float32=demo_f32/model/train \
        --run=float32_seed2=demo_f32_seed2/model/train --run=mixed_bfloat16=demo_bf16/model/train

The first --run is the reference. Each names a run and its TensorBoard summary directory (the Trainer's
summary_dir; `<output_dir>/train` for run_pretraining, `<output_dir>/model/train` for the demo). A second seed
of the reference configuration shows the run-to-run noise that another run is judged against.
"""

import json

from absl import app, flags

from albert_tf.benchmarking.tables import compare_curves, curves_table
from albert_tf.training.summaries import read_scalars
from run_scripts import entry

FLAGS = flags.FLAGS
flags.DEFINE_multi_string("run", [], "NAME=SUMMARY_DIR of a run; the first is the reference. At least two.")
flags.DEFINE_string("scalar", "loss", "The summary scalar to compare.")
flags.DEFINE_integer("every", 1, "Show every n-th logged step in the table.")
flags.DEFINE_string("output_json", None, "Also write the curves and the differences to this JSON file.")


def _parse_runs(specs):
    runs = {}
    for spec in specs:
        name, separator, summary_dir = spec.partition("=")
        if not separator or not name or not summary_dir:
            raise app.UsageError(f"--run={spec!r} must be NAME=SUMMARY_DIR.")
        if name in runs:
            raise app.UsageError(f"--run name {name!r} is given twice.")
        runs[name] = summary_dir
    if len(runs) < 2:
        raise app.UsageError("Give at least two --run flags: a reference and a run to compare with it.")
    return runs


def main(argv):
    del argv
    runs = _parse_runs(FLAGS.run)
    curves = {name: read_scalars(summary_dir, FLAGS.scalar) for name, summary_dir in runs.items()}
    reference = next(iter(runs))
    differences = compare_curves(curves, reference)
    print(curves_table(curves, FLAGS.every))
    print()
    print(f"| run | mean abs. difference from {reference} | max | at the last common step | common steps |")
    print("|---|---|---|---|---|")
    for name, difference in differences.items():
        print(f"| {name} | {difference['mean_abs']:.4f} | {difference['max_abs']:.4f} | "
              f"{difference['last_abs']:.4f} | {difference['steps']} |")
    if FLAGS.output_json:
        with open(FLAGS.output_json, "w") as handle:
            json.dump({"scalar": FLAGS.scalar, "reference": reference, "curves": curves,
                       "differences": differences}, handle, indent=2)


if __name__ == "__main__":
    entry.run(main)
