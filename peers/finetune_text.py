"""The peers' rows of the `finetune_text` workload, each run in a child process of its own
(albert_tf/benchmarking/finetune_text.py runs it): fine-tuning a text classifier on the token ids the parent wrote.

- transformers: AlbertForSequenceClassification in eager PyTorch, as a training loop of Hugging Face's Trainer
  runs it: a DataLoader whose DataCollatorWithPadding pads each batch to its longest example, in random order or,
  with "group_by_length", drawn by transformers' LengthGroupedSampler (what `group_by_length` makes the Trainer use,
  for prediction too), torch's AdamW, clipping to norm 1.0, bfloat16 by `torch.autocast("cpu")`.
- keras-hub: AlbertTextClassifier's own `fit` and `predict` (Keras' compile defaults, XLA included where Keras
  takes it) on the ids at sequence_length, as its preprocessor would pack them, under the Keras dtype policy.

Each run fine-tunes one epoch and predicts the dev set, timed end to end after the imports, reads its peak RSS,
then times `timed_epochs` more epochs and a second prediction. Nothing here imports TensorFlow, Keras or PyTorch at
import time: the transformers child would otherwise carry TensorFlow's memory in its peak RSS.
"""

import importlib
import platform
import sys
import time
from typing import Callable, Dict, Tuple

import numpy as np

from albert_tf.benchmarking.peer_protocol import check_peer_run, peak_rss_mb, run_peer_child
from peers.peer_models import CLIP_NORM, keras_adamw, keras_hub_backbone, torch_adamw

_IMPORTS = {"transformers": ("torch", "transformers"), "keras-hub": ("tensorflow", "keras", "keras_hub")}


def _transformers_run(spec: dict, precision: str, data: Dict[str, np.ndarray]) -> Tuple[Callable, Callable, dict]:
    """(train one epoch, predict the dev set, details) of AlbertForSequenceClassification in PyTorch."""
    import torch
    import transformers
    from transformers.trainer_pt_utils import LengthGroupedSampler

    torch.manual_seed(spec["seed"])
    model = transformers.AlbertForSequenceClassification(transformers.AlbertConfig(**spec["hf_config"]))
    collator = transformers.DataCollatorWithPadding(transformers.AlbertTokenizer(vocab_file=spec["spm_model_file"]))
    train, dev = _unpadded(data, "train"), _unpadded(data, "dev")

    def loader(examples, shuffle):
        generator = torch.Generator().manual_seed(spec["seed"])
        if spec["group_by_length"]:
            sampler = LengthGroupedSampler(spec["batch_size"], lengths=[len(example["input_ids"])
                                                                        for example in examples], generator=generator)
        elif shuffle:
            sampler = torch.utils.data.RandomSampler(examples, generator=generator)
        else:
            sampler = torch.utils.data.SequentialSampler(examples)
        return torch.utils.data.DataLoader(examples, batch_size=spec["batch_size"], sampler=sampler,
                                           collate_fn=collator)

    train_batches, dev_batches = loader(train, shuffle=True), loader(dev, shuffle=False)
    optimizer = torch_adamw(model, spec["learning_rate"])

    def autocast():
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bfloat16")

    def train_epoch():
        model.train()
        for batch in train_batches:
            optimizer.zero_grad(set_to_none=True)
            with autocast():
                loss = model(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)
            optimizer.step()
        return float(loss.detach())

    def predict():
        model.eval()
        with torch.inference_mode(), autocast():
            return sum(len(model(**batch).logits) for batch in dev_batches)

    return train_epoch, predict, {
        "mixed_precision": "bfloat16 autocast" if precision == "bfloat16" else "float32", "jit_compile": None,
        "transformers": transformers.__version__, "torch": torch.__version__, "torch_threads": torch.get_num_threads()}


def _keras_hub_run(spec: dict, precision: str, data: Dict[str, np.ndarray]) -> Tuple[Callable, Callable, dict]:
    """(train one epoch, predict the dev set, details) of keras-hub's AlbertTextClassifier, by `fit` and `predict`."""
    import keras
    import keras_hub
    import tensorflow as tf

    policy = "mixed_bfloat16" if precision == "bfloat16" else "float32"
    keras.mixed_precision.set_global_policy(policy)
    keras.utils.set_random_seed(spec["seed"])
    classifier = keras_hub.models.AlbertTextClassifier(keras_hub_backbone(spec["config"]), spec["num_labels"],
                                                       preprocessor=None, dropout=spec["classifier_dropout"])
    classifier.compile(optimizer=keras_adamw(spec["learning_rate"]))

    def features(split):
        return {"token_ids": data[f"{split}_input_word_ids"], "segment_ids": data[f"{split}_input_type_ids"],
                "padding_mask": data[f"{split}_input_mask"]}

    train = tf.data.Dataset.from_tensor_slices((features("train"), data["train_label_ids"]))
    train = train.shuffle(len(data["train_label_ids"]), seed=spec["seed"]).batch(spec["batch_size"])
    dev = tf.data.Dataset.from_tensor_slices(features("dev")).batch(spec["batch_size"])

    def train_epoch():
        return float(classifier.fit(train, epochs=1, verbose=0).history["loss"][-1])

    def predict():
        return len(classifier.predict(dev, verbose=0))

    return train_epoch, predict, {"mixed_precision": policy, "jit_compile": classifier.jit_compile,
                                  "keras_hub": keras_hub.__version__, "keras": keras.__version__,
                                  "tensorflow": tf.__version__}


def _unpadded(data: Dict[str, np.ndarray], split: str) -> list:
    """The examples of a split as transformers' datasets hold them: ids without padding, the label if any."""
    examples = []
    for index, length in enumerate(data[f"{split}_input_mask"].sum(axis=1)):
        example = {"input_ids": data[f"{split}_input_word_ids"][index, :length].tolist(),
                   "token_type_ids": data[f"{split}_input_type_ids"][index, :length].tolist(),
                   "attention_mask": [1] * int(length)}
        if split == "train":
            example["labels"] = int(data["train_label_ids"][index])
        examples.append(example)
    return examples


_RUNS = {"transformers": _transformers_run, "keras-hub": _keras_hub_run}


def run_peer_finetuning(peer: str, precision: str, spec: dict) -> dict:
    """`peer`'s row in `precision` as the module's docstring says; its record (seconds, peak RSS, versions).

    `spec` holds "config" (our AlbertConfig's dict), "hf_config" (its transformers config with the labels),
    "num_labels", "ids_file" (an .npz of the train and dev features), "spm_model_file", "batch_size",
    "learning_rate", "classifier_dropout", "timed_epochs", "seed" and "group_by_length".
    """
    check_peer_run(peer, precision, tuple(_RUNS), what="finetune_text peer")
    with np.load(spec["ids_file"]) as arrays:
        data = {name: arrays[name] for name in arrays.files}
    start = time.perf_counter()
    for module in _IMPORTS[peer]:
        importlib.import_module(module)
    import_seconds = time.perf_counter() - start
    start = time.perf_counter()
    train_epoch, predict, details = _RUNS[peer](spec, precision, data)
    first_loss = train_epoch()
    predict()
    end_to_end_seconds = time.perf_counter() - start
    peak_rss = peak_rss_mb()
    start = time.perf_counter()
    for _ in range(spec["timed_epochs"]):
        loss = train_epoch()
    train_seconds = time.perf_counter() - start
    start = time.perf_counter()
    predicted = predict()
    predict_seconds = time.perf_counter() - start
    if predicted != len(data["dev_input_mask"]):
        raise RuntimeError(f"{peer} predicted {predicted} dev examples of {len(data['dev_input_mask'])}.")
    return {"implementation": peer, "precision": precision, **details, "import_seconds": import_seconds,
            "end_to_end_seconds": end_to_end_seconds, "peak_rss_mb": peak_rss,
            "timed_epochs": spec["timed_epochs"], "train_seconds": train_seconds, "predict_seconds": predict_seconds,
            "first_loss": first_loss, "loss": loss, "python": platform.python_version()}


def main(argv):
    """The child's entry, `python -m peers.finetune_text PEER PRECISION SPEC_JSON` (peer_protocol.run_peer_child)."""
    run_peer_child(argv, run_peer_finetuning)


if __name__ == "__main__":
    main(sys.argv[1:])
