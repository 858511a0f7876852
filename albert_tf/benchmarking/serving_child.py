"""One row of the `serve` workload (albert_tf/benchmarking/serving.py) in a Python process of its own:

    python -m albert_tf.benchmarking.serving_child SPEC_JSON
    python -m albert_tf.benchmarking.serving_child mcnemar '{"discordant": [[b, c], ...]}'

The row's runtime loads its artifact as a deployment would and answers the parent's inputs (`time_serving`): the
first answer at batch 1 on the shortest length, timed from the process's start (the imports, the load and the
first call); then, per case (batch 1 at each length, then the batch), `warmup_runs` calls and the timed ones. The
record (seconds of every call, the logits of every case, the peak RSS, the versions) is printed after
peer_protocol.RECORD_MARKER; the parent computes the figures and the drift. With a dev set in the spec, the row
then predicts each of its examples once, untimed, at batch 1 (`predict_dev`), and the record holds their logits.

`mcnemar` computes McNemar's exact p-values for the parent, with scipy from the report's packages: a process of
TensorFlow must not import scipy (albert_tf/experiments/write_report.py says why).

Runtimes: "tensorflow" (the SavedModel's serving_default signature), "xla" (that signature in a tf.function with
jit_compile=True), "tflite" (one model per length; LiteRT's interpreter where ai_edge_litert is installed, else
tf.lite's), "onnxruntime" (CPU provider) and "openvino" (CPU, the row's precision as the inference precision
hint). The Hugging Face model in PyTorch runs from peers/serving.py, through `time_serving` too. Every runtime
gets `threads` threads for its operations and runs one operation at a time (inter-op threads 1 where it has
them), so no two operations share the cores.

Nothing here imports a framework at import time: a row's peak RSS is its runtime's alone.
"""

import json
import os
import sys
import time
from typing import Callable, Dict, List, Tuple

import numpy as np
import psutil

from albert_tf.benchmarking.child_process import add_report_packages_to_path
from albert_tf.benchmarking.peer_protocol import RECORD_MARKER, peak_rss_mb

# Hugging Face's input names, and ours they take their values from.
_HF_INPUT_NAMES = {"input_ids": "input_word_ids", "attention_mask": "input_mask", "token_type_ids": "input_type_ids"}
# What the benchmark may have chosen for TensorFlow's allocator and XLA, recorded where set.
_TENSORFLOW_ENVIRONMENT = ("TF_CPU_ALLOCATOR_USE_BFC", "XLA_FLAGS")
_OPENVINO_PRECISIONS = {"float32": "f32", "bfloat16": "bf16", "int8": "f32"}

Predictor = Callable[[Dict[str, np.ndarray]], np.ndarray]


def _read_cases(inputs_file: str) -> Dict[str, Dict[str, np.ndarray]]:
    """{case: {input name: ids}} from the parent's .npz, whose arrays are named "<case>/<input name>".

    Example:
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "inputs.npz")
    >>> np.savez(path, **{"b1_32/input_mask": np.ones((1, 32), np.int32)})
    >>> {case: sorted(arrays) for case, arrays in _read_cases(path).items()}
    {'b1_32': ['input_mask']}
    """
    cases: Dict[str, Dict[str, np.ndarray]] = {}
    with np.load(inputs_file) as arrays:
        for key in arrays.files:
            case, name = key.split("/")
            cases.setdefault(case, {})[name] = arrays[key]
    return cases


def time_serving(spec: dict, load: Callable[[dict], Tuple[Predictor, dict]]) -> dict:
    """The row's record, `load(spec)` giving (predict, details): predict maps {input name: ids} to the logits.

    `spec` holds "inputs_file" (`_read_cases`), "cases" (their order: batch 1 at each length, then the batch),
    "warmup_runs", "runs" ({case: timed calls}) and what `load` reads.
    """
    process_start = psutil.Process().create_time()
    cases = _read_cases(spec["inputs_file"])
    predict, details = load(spec)
    first_case = spec["cases"][0]
    logits = {first_case: predict(cases[first_case])}
    first_answer_seconds = time.time() - process_start
    seconds = {}
    for case in spec["cases"]:
        for _ in range(spec["warmup_runs"]):
            predict(cases[case])
        seconds[case] = []
        for _ in range(spec["runs"][case]):
            start = time.perf_counter()
            logits[case] = predict(cases[case])
            seconds[case].append(time.perf_counter() - start)
    record = {"row": spec["row"], "first_answer_seconds": first_answer_seconds, "seconds": seconds,
              "logits": {case: np.asarray(values, np.float64).tolist() for case, values in logits.items()},
              "peak_rss_mb": peak_rss_mb(), "threads": spec["threads"], **details}
    if spec.get("dev"):
        start = time.perf_counter()
        record["dev_logits"] = predict_dev(predict, spec["dev"]).tolist()
        record["dev_seconds"] = time.perf_counter() - start
    return record


def predict_dev(predict: Predictor, dev: dict) -> np.ndarray:
    """The logits of every example of the dev set (`dev["inputs_file"]`: the inputs zero-padded to one length),
    each alone at batch 1: cut to its own length, or padded to `dev["fixed_length"]` where that is set (a runtime
    of fixed shapes).

    Example:
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "dev.npz")
    >>> np.savez(path, input_word_ids=np.array([[2, 7, 3, 0], [2, 7, 8, 3]]), input_mask=np.array([[1, 1, 1, 0],
    ...          [1, 1, 1, 1]]), input_type_ids=np.zeros((2, 4), np.int32))
    >>> lengths = lambda inputs: np.array([[inputs["input_word_ids"].shape[1], 0.0]])
    >>> predict_dev(lengths, {"inputs_file": path, "fixed_length": None})[:, 0].tolist()
    [3.0, 4.0]
    >>> predict_dev(lengths, {"inputs_file": path, "fixed_length": 4})[:, 0].tolist()
    [4.0, 4.0]
    """
    with np.load(dev["inputs_file"]) as arrays:
        inputs = {name: arrays[name] for name in arrays.files}
    lengths = inputs["input_mask"].sum(axis=1)
    logits = []
    for index, length in enumerate(lengths):
        width = dev["fixed_length"] or int(length)
        example = {name: np.ascontiguousarray(value[index:index + 1, :width]) for name, value in inputs.items()}
        logits.append(np.asarray(predict(example), np.float64)[0])
    return np.array(logits)


def mcnemar_p_values(spec: dict) -> List[float]:
    """The exact two-sided McNemar p-value of each [b, c] of `spec["discordant"]` (the examples only the
    reference gets right, only the other gets right): scipy.stats.binomtest(b, b + c, 0.5), 1 where b + c is 0.
    scipy comes from REPORT_PACKAGES (.venv/report), which no TensorFlow process has on its path."""
    add_report_packages_to_path()
    from scipy.stats import binomtest

    return [float(binomtest(b, b + c, 0.5).pvalue) if b + c else 1.0 for b, c in spec["discordant"]]


def _model_feeds(inputs: Dict[str, np.ndarray], names_and_dtypes) -> Dict[str, np.ndarray]:
    """`inputs` under the model's input names (ours, or Hugging Face's) in the dtypes it takes."""
    return {name: np.asarray(inputs[_HF_INPUT_NAMES.get(name, name)], dtype) for name, dtype in names_and_dtypes}


def _tensorflow(spec: dict) -> Tuple[Predictor, dict]:
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(spec["threads"])
    tf.config.threading.set_inter_op_parallelism_threads(1)
    loaded = tf.saved_model.load(spec["artifact"])
    signature = loaded.signatures["serving_default"]
    function = tf.function(signature, jit_compile=True) if spec["runtime"] == "xla" else signature

    def predict(inputs, model=loaded):  # the loaded object owns the variables the signature reads
        return function(**{name: tf.constant(value) for name, value in inputs.items()})["logits"].numpy()

    environment = {name: os.environ[name] for name in _TENSORFLOW_ENVIRONMENT if name in os.environ}
    return predict, {"tensorflow": tf.__version__, "tensorflow_environment": environment}


def _tflite(spec: dict) -> Tuple[Predictor, dict]:
    try:
        from ai_edge_litert.interpreter import Interpreter
        interpreter_name = "ai_edge_litert"
    except ImportError:
        import tensorflow as tf
        Interpreter, interpreter_name = tf.lite.Interpreter, f"tf.lite (tensorflow {tf.__version__})"
    paths = spec["artifact"]
    current = {}

    def predict(inputs):
        length = str(inputs["input_word_ids"].shape[1])
        if length not in current:
            # One model in memory at a time, as a deployment at one length holds.
            current.clear()
            interpreter = Interpreter(model_path=paths[length], num_threads=spec["threads"])
            current[length] = interpreter.get_signature_runner("serving_default")
        return current[length](**inputs)["logits"]

    return predict, {"tflite_interpreter": interpreter_name}


def _onnxruntime(spec: dict) -> Tuple[Predictor, dict]:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = spec["threads"]
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(spec["artifact"], options, providers=["CPUExecutionProvider"])
    names_and_dtypes = [(port.name, np.int64 if "int64" in port.type else np.int32) for port in session.get_inputs()]

    def predict(inputs):
        return session.run(["logits"], _model_feeds(inputs, names_and_dtypes))[0]

    return predict, {"onnxruntime": onnxruntime.__version__}


def _openvino(spec: dict) -> Tuple[Predictor, dict]:
    import openvino

    core = openvino.Core()
    compiled = core.compile_model(core.read_model(spec["artifact"]), "CPU", {
        "INFERENCE_NUM_THREADS": spec["threads"], "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_PRECISION_HINT": _OPENVINO_PRECISIONS[spec["precision"]]})
    request = compiled.create_infer_request()
    names_and_dtypes = [(port.get_any_name(), port.get_element_type().to_dtype()) for port in compiled.inputs]
    logits = compiled.output("logits")

    def predict(inputs):
        return request.infer(_model_feeds(inputs, names_and_dtypes))[logits].copy()

    precision = compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
    return predict, {"openvino": openvino.__version__, "openvino_inference_precision": precision}


_LOADERS = {"tensorflow": _tensorflow, "xla": _tensorflow, "tflite": _tflite, "onnxruntime": _onnxruntime,
           "openvino": _openvino}


def main(argv):
    if argv[0] == "mcnemar":
        print(RECORD_MARKER + json.dumps({"p_values": mcnemar_p_values(json.loads(argv[1]))}))
        return
    spec, = argv
    spec = json.loads(spec)
    # After site-packages, so nothing there (the onnx extra's directory) shadows the environment's own packages.
    sys.path.extend(spec.get("extra_paths", []))
    print(RECORD_MARKER + json.dumps(time_serving(spec, _LOADERS[spec["runtime"]])))


if __name__ == "__main__":
    main(sys.argv[1:])
