"""One model workload in a Python process of its own, so that its peak RSS is the workload's alone (what
workloads.run_in_subprocess runs):

    python -m albert_tf.benchmarking.workload_child WORKLOAD SETTINGS_JSON

SETTINGS_JSON is a BenchmarkSettings' fields as JSON; the record is printed as JSON after CHILD_RECORD_MARKER.
"""

import json
import sys

from albert_tf.benchmarking.workloads import CHILD_RECORD_MARKER, BenchmarkSettings, run_model_workload


def main(argv):
    workload, settings = argv
    record = run_model_workload(workload, BenchmarkSettings(**json.loads(settings)))
    print(CHILD_RECORD_MARKER + json.dumps(record))


if __name__ == "__main__":
    main(sys.argv[1:])
