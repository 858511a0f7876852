"""The Hugging Face side of the `serve` workload (albert_tf/benchmarking/serving.py), in child processes:

    python -m peers.serving export SPEC_JSON   # the Hugging Face model's ONNX model, from our converted weights
    python -m peers.serving run SPEC_JSON      # a row of AlbertForSequenceClassification in PyTorch

`export` writes what a user of Hugging Face exports without optimum (which cannot be installed beside the pinned
transformers): the ONNX model of torch.onnx.export (TorchScript's exporter, dynamic batch and sequence axes) of the
model with eager attention, whose graph onnxruntime's transformer optimizer recognises (PyTorch's
scaled_dot_product_attention exports in a shape its attention fusion misses). The parent optimizes and quantizes
it, as it does ours: neither needs PyTorch.

`run` times the model as transformers serves it (`from_pretrained`, its default attention, `torch.inference_mode`,
bfloat16 by `torch.autocast("cpu")`) through serving_child.time_serving, which also predicts the dev set when the
spec has one (at batch 1, each example at its own length). Nothing here imports PyTorch, or any framework, at
import time.
"""

import json
import sys

import numpy as np

from albert_tf.benchmarking.peer_protocol import RECORD_MARKER
from albert_tf.benchmarking.serving_child import time_serving

_INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
# Our names of the inputs Hugging Face's model takes, in its argument order.
_OUR_INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
_ONNX_OPSET = 17


def export_hf_onnx(spec: dict) -> str:
    """Writes the ONNX model of the Hugging Face checkpoint in `spec["hf_dir"]` to `spec["onnx_path"]`; returns
    that path."""
    import torch
    import transformers

    model = transformers.AlbertForSequenceClassification.from_pretrained(spec["hf_dir"], attn_implementation="eager")
    example = torch.ones((1, 8), dtype=torch.int64)
    axes = {name: {0: "batch", 1: "sequence"} for name in _INPUT_NAMES}
    torch.onnx.export(model.eval(), (example, example, torch.zeros_like(example)), spec["onnx_path"],
                      input_names=list(_INPUT_NAMES), output_names=["logits"],
                      dynamic_axes={**axes, "logits": {0: "batch"}}, opset_version=_ONNX_OPSET, dynamo=False)
    return spec["onnx_path"]


def _torch(spec: dict):
    import torch
    import transformers

    torch.set_num_threads(spec["threads"])
    torch.set_num_interop_threads(1)
    model = transformers.AlbertForSequenceClassification.from_pretrained(spec["artifact"]).eval()
    bfloat16 = spec["precision"] == "bfloat16"

    def predict(inputs):
        arguments = {name: torch.from_numpy(np.asarray(inputs[ours], np.int64))
                     for name, ours in zip(_INPUT_NAMES, _OUR_INPUT_NAMES)}
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bfloat16):
            return model(**arguments).logits.float().numpy()

    return predict, {"torch": torch.__version__, "transformers": transformers.__version__,
                     "attention": model.config._attn_implementation}


def main(argv):
    command, spec = argv
    spec = json.loads(spec)
    # After site-packages, so nothing there (the onnx extra's directory) shadows the environment's own packages.
    sys.path.extend(spec.get("extra_paths", []))
    if command == "export":
        record = {"path": export_hf_onnx(spec)}
    elif command == "run":
        record = time_serving(spec, _torch)
    else:
        raise ValueError(f"Unknown peers.serving command {command!r}; allowed: export, run.")
    print(RECORD_MARKER + json.dumps(record))


if __name__ == "__main__":
    main(sys.argv[1:])
