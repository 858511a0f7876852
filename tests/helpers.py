"""What many test modules share: the repository's paths, tiny configs and inputs, the run scripts in a subprocess,
small generated data (a text corpus, a SentencePiece model trained on it, number texts, pretraining records) and
the official SQuAD v2.0 evaluation, transcribed. The original's own code runs from tests/original_albert.py."""
import collections
import os
import random
import re
import signal
import string
import subprocess
import time

import numpy as np
import sentencepiece as spm
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf.checkpoints.tf1_names import model_variable_map
from data_gen.pretraining import build_vocab
from tests import forked_scripts

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOY_SCRIPT = os.path.join(REPO_ROOT, "tests", "_toy_training.py")

# The tiny ALBERT most model tests use: factorized (E < H), four blocks, a wide initializer so the outputs
# depend on every weight. Tests that need other sizes override them.
TINY_CONFIG = dict(vocab_size=60, embedding_size=8, hidden_size=16, num_hidden_layers=4, num_attention_heads=2,
                   intermediate_size=32, max_position_embeddings=24, initializer_range=0.2)


def tiny_config_values(**overrides):
    """TINY_CONFIG with `overrides`, as a dict (what an albert_config.json holds)."""
    return dict(TINY_CONFIG, **overrides)


def tiny_config(**overrides):
    """An AlbertConfig of TINY_CONFIG with `overrides`."""
    return AlbertConfig(**tiny_config_values(**overrides))


def random_inputs(batch=2, seq=7, vocab=60, seed=0, num_predictions=3, padding=2, with_type_ids=True,
                  with_predictions=True):
    """Encoder inputs: random word ids, the last `padding` positions of row 1 padded, segment B from seq // 2
    (all zeros without `with_type_ids`), plus `num_predictions` masked-LM positions unless `with_predictions`
    is False."""
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, seq), np.int32)
    mask[1, seq - padding:] = 0
    type_ids = (np.arange(seq) >= seq // 2).astype(np.int32)[None].repeat(batch, 0)
    inputs = {"input_word_ids": tf.constant(rng.integers(0, vocab, (batch, seq)), tf.int32),
              "input_mask": tf.constant(mask),
              "input_type_ids": tf.constant(type_ids) if with_type_ids else tf.zeros((batch, seq), tf.int32)}
    if with_predictions:
        inputs["masked_lm_positions"] = tf.constant(rng.integers(0, seq - 2, (batch, num_predictions)), tf.int32)
    return inputs


def random_value(name, shape, rng):
    """Random weights that keep activations near unit scale and attention far from uniform, so the
    outputs depend on every variable (deep random stacks otherwise collapse every token to one state)."""
    if name.endswith("/gamma"):
        value = 1.0 + 0.2 * rng.normal(size=shape)
    elif len(shape) == 1:
        value = 0.2 * rng.normal(size=shape)
    elif "embeddings" in name:
        value = rng.normal(size=shape)
    else:
        fan_in = shape[-1] if name.endswith("output_weights") else shape[0]
        sharpness = 2.0 if "/self/query/" in name or "/self/key/" in name else 1.0
        value = sharpness * rng.normal(0, 1 / np.sqrt(fan_in), shape)
    return value.astype(np.float32)


def randomize(model, seed=0):
    """Every variable gets distinct random values, so a swapped or skipped one changes the numbers."""
    rng = np.random.default_rng(seed)
    for name, variable in sorted(model_variable_map(model).items()):
        variable.assign(random_value(name, tuple(variable.shape), rng))
    return model


def run_python(*arguments, timeout=600, **env):
    """Runs this Python with `arguments` from the repository root; output is captured as text.

    TensorFlow's C++ logs are quiet (TF_CPP_MIN_LOG_LEVEL=2) unless `env` says otherwise; `env` adds to
    the environment (e.g. CUDA_VISIBLE_DEVICES=""). The program is a fork of a process that has imported
    TensorFlow already where that stands for a fresh one (tests/forked_scripts.py).
    """
    return forked_scripts.run(arguments, env=script_environment(**env), timeout=timeout)


script_environment = forked_scripts.script_environment


def user_environment(**env):
    """The environment a user has, with `env`: no TF_CPP_MIN_LOG_LEVEL, so that a script quiets TensorFlow's start-up
    lines as it does for a user (run_scripts/entry.py), whatever the machine's CUDA probe prints."""
    return {name: value for name, value in {**os.environ, **env}.items() if name != "TF_CPP_MIN_LOG_LEVEL"}


def guide_snippet(name, guide="export.md"):
    """The fenced block that follows `<!-- snippet: NAME -->` in docs/<guide>, so the guide's code is what runs."""
    with open(os.path.join(REPO_ROOT, "docs", guide), encoding="utf-8") as handle:
        text = handle.read()
    match = re.search(r"<!-- snippet: " + re.escape(name) + r" -->\n```[a-z]*\n(.*?)```", text, re.DOTALL)
    assert match, f"docs/{guide} has no snippet {name!r}"
    return match.group(1)


def run_script(name, *flags, timeout=600, **env):
    """Runs `python -m run_scripts.<name> *flags` as run_python does."""
    return run_python("-m", f"run_scripts.{name}", *flags, timeout=timeout, **env)


def start_python(*arguments, stdout=subprocess.DEVNULL, **env):
    """Starts this Python with `arguments` as run_python would run it, and returns the process at once: its stderr
    is a text pipe to read as it runs (to signal it at a given point), its stdout goes to `stdout`."""
    return forked_scripts.popen(arguments, env=script_environment(**env), stdout=stdout)


def start_script(name, *flags, **env):
    """start_python for `python -m run_scripts.<name> *flags`."""
    return start_python("-m", f"run_scripts.{name}", *flags, **env)


def sigterm_on_log_line(process, marker, timeout=300):
    """Sends SIGTERM to `process` (a script started with a text stderr pipe), as a cluster manager would, once a
    line of its stderr contains `marker`; returns the rest of its stderr after it has exited."""
    deadline = time.time() + timeout
    for line in process.stderr:
        if marker in line:
            process.send_signal(signal.SIGTERM)
            break
        assert time.time() < deadline, f"the run never logged {marker!r}"
    else:
        raise AssertionError(f"the run ended without logging {marker!r}")
    return process.communicate(timeout=timeout)[1]


# The words write_corpus draws its sentences from.
CORPUS_WORDS = ("the model learns a shared block of attention and feed forward weights that runs at every depth "
                "sentence order prediction swaps two segments while masked language modelling hides tokens "
                "embedding tables are factorized into a small vocabulary projection followed by a dense layer "
                "training uses lamb with warmup and polynomial decay on large batches of text documents "
                "café naïve résumé 1990, 2001, 3.5 million people (approximately) — quoted \"words\" here"
                ).split()


def write_corpus(path, num_documents=40, sentences_per_document=(2, 8), seed=0):
    """Writes documents in the original format: one sentence per line, a blank line between documents."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for _ in range(num_documents):
            for _ in range(rng.randint(*sentences_per_document)):
                words = [rng.choice(CORPUS_WORDS) for _ in range(rng.randint(4, 16))]
                handle.write(" ".join(words).capitalize() + ".\n")
            handle.write("\n")
    return path


def make_spm_model(directory, vocab_size=120, num_documents=60):
    """Trains a tiny SentencePiece model with the original flags and returns its .model path."""
    corpus = write_corpus(os.path.join(directory, "spm_corpus.txt"), num_documents=num_documents)
    return build_vocab.train_sentencepiece([corpus], os.path.join(directory, "tiny_spm"), vocab_size=vocab_size)


def number_text(rng):
    """A sentence with many numbers followed by commas, inside and at the start of words."""
    words = []
    for _ in range(rng.randint(3, 12)):
        draw = rng.random()
        number = str(rng.choice([rng.randint(0, 9), rng.randint(10, 99), rng.randint(100, 9999)]))
        if draw < 0.3:
            words.append(number + ",")
        elif draw < 0.4:
            words.append(rng.choice(["x", "item", "b", "(", "$"]) + number + ",")
        elif draw < 0.5:
            words.append(f"{rng.randint(1, 999)},{rng.randint(0, 999):03d}" + rng.choice(["", ","]))
        elif draw < 0.6:
            words.append(number + rng.choice([".", "", ",,", ",5"]))
        else:
            words.append(rng.choice("the year in 1990 people met and over million dollars modify covered".split()))
    return " ".join(words)


def number_texts(count, first_seed=0):
    """`count` generated `number_text` sentences, one per seed."""
    return [number_text(random.Random(seed)) for seed in range(first_seed, first_seed + count)]


def make_number_spm_model(directory, vocab_size=200):
    """A digit-heavy SentencePiece model that keeps digits and commas together, so the digit-comma rule has work
    to do in and at the start of words (split_by_number=False, as 30k-clean.model behaves)."""
    rng = random.Random(1)
    corpus = os.path.join(directory, "number_corpus.txt")
    with open(corpus, "w", encoding="utf-8") as handle:
        handle.write("".join(number_text(rng) + "\n" for _ in range(3000)))
    prefix = os.path.join(directory, "numbers")
    spm.SentencePieceTrainer.train(input=corpus, model_prefix=prefix, vocab_size=vocab_size, hard_vocab_limit=False,
                                   model_type="unigram", pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
                                   control_symbols=["[CLS]", "[SEP]", "[MASK]"], split_by_number=False,
                                   minloglevel=2)
    return prefix + ".model"

def write_pretraining_records(path, num_records=64, max_seq_length=16, max_predictions=3, vocab_size=60, seed=0):
    """Writes learnable pretraining records in the original format.

    Segment A holds ids in [10, 30) and segment B ids in [30, 50), each an ascending run, so a masked id
    is predictable from its neighbours; label 1 (SOP negative) swaps the two segments.
    """
    rng = np.random.default_rng(seed)
    half = (max_seq_length - 3) // 2
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(num_records):
            a = [10 + (int(rng.integers(0, 20)) + i) % 20 for i in range(half)]
            b = [30 + (int(rng.integers(0, 20)) + i) % 20 for i in range(half)]
            label = int(rng.integers(0, 2))
            first, second = (b, a) if label else (a, b)
            tokens = [2] + first + [3] + second + [3]
            segments = [0] * (len(first) + 2) + [1] * (len(second) + 1)
            positions = sorted(rng.choice(np.arange(1, len(tokens) - 1), max_predictions, replace=False).tolist())
            positions = [p for p in positions if tokens[p] != 3]
            masked_ids = [tokens[p] for p in positions]
            inputs = list(tokens)
            for p in positions:
                inputs[p] = 4
            pad = max_seq_length - len(tokens)
            pad_predictions = max_predictions - len(positions)
            features = {
                "input_ids": inputs + [0] * pad,
                "input_mask": [1] * len(tokens) + [0] * pad,
                "segment_ids": segments + [0] * pad,
                "token_boundary": [1] * len(tokens) + [0] * pad,
                "masked_lm_positions": positions + [0] * pad_predictions,
                "masked_lm_ids": masked_ids + [0] * pad_predictions,
                "next_sentence_labels": [label],
            }
            example = {name: tf.train.Feature(int64_list=tf.train.Int64List(value=values))
                       for name, values in features.items()}
            example["masked_lm_weights"] = tf.train.Feature(float_list=tf.train.FloatList(
                value=[1.0] * len(positions) + [0.0] * pad_predictions))
            writer.write(tf.train.Example(features=tf.train.Features(feature=example)).SerializeToString())
    return path


# ---- the official SQuAD v2.0 evaluation, transcribed -----------------------------------------------
# evaluate-v2.0.py's get_raw_scores, apply_no_ans_threshold, make_eval_dict and main, written out here so that
# tests check our scoring against the official semantics and not against itself. `dataset` is the file's "data".

def _official_normalize_answer(s):
    s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(re.compile(r"\b(a|an|the)\b", re.UNICODE), " ", s).split())


def _official_get_tokens(s):
    if not s:
        return []
    return _official_normalize_answer(s).split()


def _official_compute_f1(a_gold, a_pred):
    gold_toks = _official_get_tokens(a_gold)
    pred_toks = _official_get_tokens(a_pred)
    num_same = sum((collections.Counter(gold_toks) & collections.Counter(pred_toks)).values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        return int(gold_toks == pred_toks)
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    return (2 * precision * recall) / (precision + recall)


def _official_make_eval_dict(exact_scores, f1_scores, qid_list=None):
    qid_list = qid_list or list(exact_scores)
    total = len(qid_list)
    return {"exact": 100.0 * sum(exact_scores[k] for k in qid_list) / total,
            "f1": 100.0 * sum(f1_scores[k] for k in qid_list) / total, "total": total}


def official_squad_v2_eval(dataset, preds, na_probs=None, na_prob_thresh=1.0):
    """What `evaluate-v2.0.py data.json pred.json [--na-prob-file na_probs.json]` prints, as a dict."""
    qid_to_has_ans = {qa["id"]: bool(qa["answers"]) for article in dataset for p in article["paragraphs"]
                      for qa in p["qas"]}
    exact_raw, f1_raw = {}, {}
    for article in dataset:
        for p in article["paragraphs"]:
            for qa in p["qas"]:
                gold_answers = [a["text"] for a in qa["answers"] if _official_normalize_answer(a["text"])]
                if not gold_answers:
                    gold_answers = [""]
                a_pred = preds[qa["id"]]
                exact_raw[qa["id"]] = max(int(_official_normalize_answer(a) == _official_normalize_answer(a_pred))
                                          for a in gold_answers)
                f1_raw[qa["id"]] = max(_official_compute_f1(a, a_pred) for a in gold_answers)
    probs = na_probs if na_probs is not None else {k: 0.0 for k in preds}

    def thresholded(scores):
        return {qid: float(not qid_to_has_ans[qid]) if probs[qid] > na_prob_thresh else s for qid, s in scores.items()}

    exact_thresh, f1_thresh = thresholded(exact_raw), thresholded(f1_raw)
    out_eval = _official_make_eval_dict(exact_thresh, f1_thresh)
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [k for k, v in qid_to_has_ans.items() if v == wanted]
        if qids:
            out_eval.update({f"{prefix}_{k}": v
                             for k, v in _official_make_eval_dict(exact_thresh, f1_thresh, qids).items()})
    if na_probs is not None:
        for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
            num_no_ans = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
            cur_score = best_score = num_no_ans
            best_thresh = 0.0
            for qid in sorted(na_probs, key=lambda k: na_probs[k]):
                if qid not in raw:
                    continue
                if qid_to_has_ans[qid]:
                    diff = raw[qid]
                else:
                    diff = -1 if preds[qid] else 0
                cur_score += diff
                if cur_score > best_score:
                    best_score = cur_score
                    best_thresh = na_probs[qid]
            out_eval[f"best_{name}"] = 100.0 * best_score / len(raw)
            out_eval[f"best_{name}_thresh"] = best_thresh
    return out_eval


def squad_dataset(questions):
    """The SQuAD file's "data" for [(id, context, [answer texts])], one paragraph per question; no answers is
    SQuAD v2's unanswerable question (an answer's answer_start is where its text first occurs, else 0)."""
    paragraphs = [{"context": context, "qas": [{
        "id": qas_id, "question": "Which word?", "is_impossible": not answers,
        "answers": [{"text": text, "answer_start": max(context.find(text), 0)} for text in answers]}]}
        for qas_id, context, answers in questions]
    return [{"title": "generated", "paragraphs": paragraphs}]


def xla_compiled_functions(function):
    """Names of the functions that the traces of tf.function `function` mark for XLA compilation."""
    names = set()
    for concrete in function._list_all_concrete_functions():
        for library_function in concrete.graph.as_graph_def().library.function:
            if library_function.attr["_XlaMustCompile"].b:
                names.add(library_function.signature.name)
    return names
