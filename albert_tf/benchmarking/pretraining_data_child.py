"""create_pretraining_data in a Python process of its own, so that its rate and peak memory are the job's alone
(what pretraining_data_throughput.measure_throughput runs):

    python -m albert_tf.benchmarking.pretraining_data_child ARGUMENTS_JSON

ARGUMENTS_JSON holds `input_files`, `output_file`, `num_output_shards`, `spm_model_file` and create_pretraining_data's
keyword arguments; the job's seconds and totals are printed as JSON after CHILD_SUMMARY_MARKER.
"""

import json
import sys

from albert_tf.benchmarking.pretraining_data_throughput import CHILD_SUMMARY_MARKER
from data_gen.pretraining.create_pretraining_data import create_pretraining_data, output_shard_paths


def main(argv):
    (arguments,) = argv
    arguments = json.loads(arguments)
    output_files = output_shard_paths(arguments.pop("output_file"), arguments.pop("num_output_shards"))
    summary = create_pretraining_data(arguments.pop("input_files"), output_files, arguments.pop("spm_model_file"),
                                      **arguments)
    print(CHILD_SUMMARY_MARKER + json.dumps({"seconds": summary["seconds"], "totals": summary["totals"]}))


if __name__ == "__main__":
    main(sys.argv[1:])
