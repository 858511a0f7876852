"""GLUE: the original processors' file layouts, tfds input, features, metrics, and run_glue end to end."""
import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from albert_tf import AlbertClassifier, AlbertConfig, AlbertEncoder
from albert_tf.checkpoints import loading, writing
from albert_tf.tasks import classification_functions
from albert_tf.tasks import glue as glue_finetuning
from data_gen.readers import glue
from tests import original_albert
from tests.helpers import run_python, run_script
from tests.tasks.task_data import GLUE_TINY_CONFIG, write_keyword_mrpc


# One file per (task, split) in the GLUE download's layout: header rows, column orders and quirks.
GLUE_FILES = {
    "CoLA/train.tsv": "gj04\t1\t\tOur friends won't buy this analysis.\ngj04\t0\t*\tThey drank the pub.\n",
    "CoLA/dev.tsv": "bc01\t1\t\tThe sailors rode the breeze clear of the rocks.\n",
    "CoLA/test.tsv": "index\tsentence\n0\tBill whistled past the house.\n1\tThe car honked.\n",
    "SST-2/train.tsv": "sentence\tlabel\nhide new secretions \t0\nthe greatest \"musicians \t1\n",
    "SST-2/test.tsv": "index\tsentence\n0\tuneasy mishmash of styles\n",
    "MRPC/train.tsv": "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t702876\t702977\tAmrozi accused.\tHe accused.\n",
    "MRPC/test.tsv": "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n7\t1089874\t1089925\tPCCW said.\tThe company said.\n",
    "STS-B/dev.tsv": ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
                      "0\tmain-captions\tMSRvid\t2012test\t0000\tnone\tnone\tA man with a hard hat is dancing.\t"
                      "A man wearing a hard hat is dancing.\t5.000\n"),
    "STS-B/test.tsv": ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\n"
                       "3\tmain-captions\tMSRvid\t2012test\t0024\tnone\tnone\tA girl is styling.\t"
                       "A girl is brushing.\n"),
    "QQP/train.tsv": ("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
                      "133273\t213221\t213222\tHow is the life?\tHow is life?\t1\n"
                      "201841\t303345\t303346\tWhy are African-Americans so beautiful?\n"
                      "402555\t536040\t536041\tHow do I wash?\tWhat is washing?\t0\n"),
    "QQP/test.tsv": "id\tquestion1\tquestion2\n0\tWhy am I?\tWhat am I?\n",
    "MNLI/train.tsv": ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
                       "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n"
                       "0\t31193\t31193n\tgovernment\t( ( C ) )\t( P )\t(ROOT)\t(ROOT)\tConceptually cream.\t"
                       "Product and geography.\tneutral\tneutral\n"),
    "MNLI/dev_matched.tsv": ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
                             "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tlabel2\tlabel3\t"
                             "label4\tlabel5\tgold_label\n"
                             "0\t63735\t63735n\tslate\t( T )\t( T )\t(ROOT)\t(ROOT)\tThe new rights.\t"
                             "Everyone likes it.\tneutral\tentailment\tneutral\tneutral\tneutral\tneutral\n"),
    "MNLI/test_mismatched.tsv": ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
                                 "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\n"
                                 "9\t1\t1c\tletters\t( Y )\t( Y )\t(ROOT)\t(ROOT)\tYour gift.\tGifts help.\n"),
    "QNLI/dev.tsv": "index\tquestion\tsentence\tlabel\n0\tWhat came?\tA thing came.\tnot_entailment\n",
    "RTE/train.tsv": "index\tsentence1\tsentence2\tlabel\n0\tNo weapons.\tWeapons found.\tnot_entailment\n",
    "WNLI/test.tsv": "index\tsentence1\tsentence2\n4\tThe cup fell.\tIt fell.\n",
    "diagnostic/diagnostic.tsv": "index\tsentence1\tsentence2\n0\tThe cat sat.\tThe cat did not sit.\n",
}


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("glue")
    for name, text in GLUE_FILES.items():
        path = directory / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return str(directory)


def _read(glue_dir, task, split):
    return [(example.guid, example.text_a, example.text_b, example.label)
            for example in glue.read_examples(glue_dir, glue.get_task(task), split)]


def test_each_task_layout_is_read_as_the_original(glue_dir):
    # CoLA train/dev have no header: the first line is data; label column 1, sentence column 3.
    assert _read(glue_dir, "CoLA", "train") == [("0", "Our friends won't buy this analysis.", None, "1"),
                                                ("1", "They drank the pub.", None, "0")]
    assert _read(glue_dir, "cola", "test") == [("0", "Bill whistled past the house.", None, None),
                                               ("1", "The car honked.", None, None)]
    # SST-2: an unbalanced quote stays in the text (no quoting).
    assert _read(glue_dir, "SST-2", "train")[1] == ("1", "the greatest \"musicians ", None, "1")
    assert _read(glue_dir, "sst-2", "test") == [("0", "uneasy mishmash of styles", None, None)]
    assert _read(glue_dir, "MRPC", "train") == [("0", "Amrozi accused.", "He accused.", "1")]
    assert _read(glue_dir, "MRPC", "test") == [("7", "PCCW said.", "The company said.", None)]
    assert _read(glue_dir, "STS-B", "dev") == [("0", "A man with a hard hat is dancing.",
                                                "A man wearing a hard hat is dancing.", 5.0)]
    assert _read(glue_dir, "STS-B", "test") == [("3", "A girl is styling.", "A girl is brushing.", None)]
    # QQP's malformed row (5 fields) is skipped, as the original.
    assert _read(glue_dir, "QQP", "train") == [("133273", "How is the life?", "How is life?", "1"),
                                               ("402555", "How do I wash?", "What is washing?", "0")]
    assert _read(glue_dir, "QQP", "test") == [("0", "Why am I?", "What am I?", None)]
    assert _read(glue_dir, "MNLI", "train") == [("0", "Conceptually cream.", "Product and geography.", "neutral")]
    # dev_matched: gold_label is the last of 16 columns, not label1.
    assert _read(glue_dir, "MNLI", "dev_matched") == [("0", "The new rights.", "Everyone likes it.", "neutral")]
    assert _read(glue_dir, "MNLI", "test_mismatched") == [("9", "Your gift.", "Gifts help.", None)]
    assert _read(glue_dir, "QNLI", "dev") == [("0", "What came?", "A thing came.", "not_entailment")]
    assert _read(glue_dir, "RTE", "train") == [("0", "No weapons.", "Weapons found.", "not_entailment")]
    assert _read(glue_dir, "WNLI", "test") == [("4", "The cup fell.", "It fell.", None)]
    assert _read(glue_dir, "AX", "test") == [("0", "The cat sat.", "The cat did not sit.", None)]


# run_classifier.py's processor for each task; MNLI's mismatched splits are MisMnliProcessor's.
ORIGINAL_PROCESSORS = {"cola": "ColaProcessor", "sst-2": "Sst2Processor", "mrpc": "MrpcProcessor",
                       "sts-b": "StsbProcessor", "qqp": "QqpProcessor", "mnli": "MnliProcessor",
                       "qnli": "QnliProcessor", "rte": "RteProcessor", "wnli": "WnliProcessor", "ax": "AXProcessor"}
FIXTURE_SPLITS = [(task.name, split) for name in GLUE_FILES
                  for task in glue.GLUE_TASKS.values() if name.startswith(task.directory + "/")
                  for split, file_name in task.split_files.items() if name == f"{task.directory}/{file_name}"]


def _original_examples(classifier_utils, data_dir, task_name, split):
    processor_name = "MisMnliProcessor" if split.endswith("_mismatched") else ORIGINAL_PROCESSORS[task_name]
    processor = getattr(classifier_utils, processor_name)(use_spm=True, do_lower_case=True)
    method = {"train": "get_train_examples", "dev": "get_dev_examples", "test": "get_test_examples"}[
        split.split("_")[0]]
    return getattr(processor, method)(data_dir)


@pytest.mark.parametrize("task_name, split", FIXTURE_SPLITS, ids=[f"{t}-{s}" for t, s in FIXTURE_SPLITS])
def test_features_equal_the_original_classifier_utils(glue_dir, spm_model_file, tokenizer, task_name, split):
    """Each file through the original's processor and convert_single_example, and through ours: the same
    examples in the same order, the same ids (truncated at 12 pieces), mask, segments and label ids, and the
    test rows' index column as the guid that submissions are written with."""
    original_tokenization = original_albert.tokenization()
    classifier_utils = original_albert.classifier_utils(original_tokenization)
    original_tokenizer = original_tokenization.FullTokenizer(None, do_lower_case=True, spm_model_file=spm_model_file)
    task = glue.get_task(task_name)
    max_seq_length = 12
    theirs = _original_examples(classifier_utils, glue_dir, task_name, split)
    ours = glue.read_examples(glue_dir, task, split)

    assert len(ours) == len(theirs) > 0
    label_list = classifier_utils.StsbProcessor(True, True).get_labels() if task.is_regression else list(task.labels)
    for index, (example, original_example) in enumerate(zip(ours, theirs)):
        expected = classifier_utils.convert_single_example(index, original_example, label_list, max_seq_length,
                                                           original_tokenizer, task_name)
        features = glue.convert_example(example, index, task, tokenizer, max_seq_length)
        assert features["input_word_ids"] == expected.input_ids
        assert features["input_mask"] == expected.input_mask
        assert features["input_type_ids"] == expected.segment_ids
        assert features["label_ids"] == expected.label_id
        if split.startswith("test"):
            assert example.guid == original_example.guid


@pytest.mark.parametrize("task_name", ["mnli", "sts-b"])
def test_classifier_outputs_and_losses_equal_the_original_create_model(glue_dir, tokenizer, tmp_path, task_name):
    """The original's create_model (evaluation mode) on random weights, its checkpoint loaded into AlbertClassifier:
    the same logits, probabilities (or STS-B predictions) and per-example losses on the fixture's examples."""
    task = glue.get_task(task_name)
    examples = [example for split in task.split_files if os.path.exists(glue.split_file(glue_dir, task, split))
                for example in glue.read_examples(glue_dir, task, split)]
    features = [glue.convert_example(example, index, task, tokenizer, 24) for index, example in enumerate(examples)]
    label_dtype = np.float32 if task.is_regression else np.int32
    batch = {name: np.array([feature[name] for feature in features], label_dtype if name == "label_ids" else np.int32)
             for name in features[0]}
    config_values = dict(GLUE_TINY_CONFIG, hidden_act="gelu")

    classifier_utils = original_albert.classifier_utils(original_albert.tokenization())
    with tf.Graph().as_default():
        _, per_example_loss, probabilities, logits, _ = classifier_utils.create_model(
            classifier_utils.modeling.AlbertConfig.from_dict(config_values), False,
            tf.constant(batch["input_word_ids"]), tf.constant(batch["input_mask"]),
            tf.constant(batch["input_type_ids"]), tf.constant(batch["label_ids"]), task.num_labels, False, task.name)
        with original_albert.session_with_random_weights(str(tmp_path / "model.ckpt")) as session:
            expected = session.run({"per_example_loss": per_example_loss, "probabilities": probabilities,
                                    "logits": logits})

    model = AlbertClassifier(AlbertConfig(**config_values), num_labels=task.num_labels)
    loading.load_weights(model, str(tmp_path / "model.ckpt"), format="tf1")
    inputs = {name: tf.constant(value) for name, value in batch.items()}
    if task.is_regression:
        outputs = classification_functions.regression_predict_fn(model, inputs)
        np.testing.assert_allclose(outputs["predictions"].numpy(), expected["logits"], rtol=1e-5, atol=1e-5)
    else:
        outputs = classification_functions.classification_predict_fn(model, inputs)
        np.testing.assert_allclose(outputs["logits"].numpy(), expected["logits"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(outputs["probabilities"].numpy(), expected["probabilities"], atol=1e-6)
    np.testing.assert_allclose(outputs["per_example_loss"].numpy(), expected["per_example_loss"], rtol=1e-5,
                               atol=1e-5)


def test_label_lists_are_the_originals():
    assert glue.get_task("mnli").labels == ("contradiction", "entailment", "neutral")
    assert glue.get_task("rte").labels == ("entailment", "not_entailment")
    assert glue.get_task("cola").labels == ("0", "1") and glue.get_task("sts-b").num_labels == 1


def test_bad_rows_are_errors_naming_file_and_line(tmp_path):
    (tmp_path / "RTE").mkdir()
    (tmp_path / "RTE" / "dev.tsv").write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tmaybe\n")
    with pytest.raises(ValueError, match=r"RTE/dev.tsv:2: label 'maybe' is not one of .*'entailment'"):
        glue.read_examples(str(tmp_path), glue.get_task("rte"), "dev")
    (tmp_path / "MNLI").mkdir()
    (tmp_path / "MNLI" / "train.tsv").write_text("header\n0\tonly\tthree\n")
    with pytest.raises(ValueError, match=r"MNLI/train.tsv:2 has 3 tab-separated fields"):
        glue.read_examples(str(tmp_path), glue.get_task("mnli"), "train")
    with pytest.raises(ValueError, match=r"does not exist; --data_dir must hold CoLA/"):
        glue.read_examples(str(tmp_path), glue.get_task("cola"), "train")
    with pytest.raises(ValueError, match="Unknown GLUE task 'squad'"):
        glue.get_task("squad")


def test_truncate_seq_pair_pops_the_longer_from_the_end():
    tokens_a, tokens_b = list("abcdef"), list("xyz")
    glue.truncate_seq_pair(tokens_a, tokens_b, 6)
    assert tokens_a == list("abc") and tokens_b == list("xyz")
    tokens_a, tokens_b = list("ab"), list("wxyz")
    glue.truncate_seq_pair(tokens_a, tokens_b, 3)  # a tie pops from b
    assert tokens_a == list("ab") and tokens_b == list("w")


def test_features_are_cls_a_sep_b_sep_padded(tokenizer):
    task = glue.get_task("mrpc")
    example = glue.GlueExample("0", "the model learns", "shared weights run at every depth", "1")
    pieces_a, pieces_b = tokenizer.tokenize(example.text_a), tokenizer.tokenize(example.text_b)
    length = len(pieces_a) + len(pieces_b) + 3
    features = glue.convert_example(example, 4, task, tokenizer, length + 2)
    expected = tokenizer.convert_tokens_to_ids(["[CLS]"] + pieces_a + ["[SEP]"] + pieces_b + ["[SEP]"])
    assert features["input_word_ids"] == expected + [0, 0]
    assert features["input_mask"] == [1] * length + [0, 0]
    assert features["input_type_ids"] == [0] * (len(pieces_a) + 2) + [1] * (len(pieces_b) + 1) + [0, 0]
    assert features["label_ids"] == 1 and features["example_index"] == 4

    short = glue.convert_example(example, 0, task, tokenizer, 8)
    kept_a, kept_b = list(pieces_a), list(pieces_b)
    glue.truncate_seq_pair(kept_a, kept_b, 5)
    assert short["input_word_ids"] == tokenizer.convert_tokens_to_ids(
        ["[CLS]"] + kept_a + ["[SEP]"] + kept_b + ["[SEP]"])
    assert len(kept_a) + len(kept_b) == 5 and abs(len(kept_a) - len(kept_b)) <= 1

    single = glue.convert_example(glue.GlueExample("0", "the model", None, None), 0, glue.get_task("cola"),
                                  tokenizer, 6)
    assert single["input_type_ids"] == [0] * 6 and single["label_ids"] == 0
    regression = glue.convert_example(glue.GlueExample("0", "a", "b", 3.2), 0, glue.get_task("sts-b"), tokenizer, 8)
    assert regression["label_ids"] == pytest.approx(3.2)


def test_tfds_examples_with_mock_data():
    with tfds.testing.mock_data(num_examples=4):
        mnli = glue.read_tfds_examples(glue.get_task("mnli"), "dev_mismatched")
        stsb = glue.read_tfds_examples(glue.get_task("sts-b"), "train")
        cola_test = glue.read_tfds_examples(glue.get_task("cola"), "test")
        qnli = glue.read_tfds_examples(glue.get_task("qnli"), "dev")
    assert len(mnli) == 4 and all(example.label in glue.get_task("mnli").labels for example in mnli)
    assert all(isinstance(example.text_b, str) for example in mnli)
    assert all(isinstance(example.label, float) for example in stsb)
    assert all(example.label is None and example.text_b is None for example in cola_test)
    assert all(example.label in ("entailment", "not_entailment") for example in qnli)


def test_tfds_features_are_cached_by_example_content(tokenizer, tmp_path):
    with tfds.testing.mock_data(num_examples=3):
        examples, features = glue.load_split(glue.get_task("rte"), "train", tokenizer, 16, str(tmp_path),
                                             use_tfds=True)
    rows = list(features.dataset().as_numpy_iterator())
    assert features.num_examples == 3 and len(rows) == 3
    labels = [glue.get_task("rte").labels[row["label_ids"]] for row in rows]
    assert labels == [example.label for example in examples]


def test_paper_hparams_are_run_glue_sh_and_yield_to_explicit_flags():
    assert glue_finetuning.paper_hparams("MNLI") == dict(warmup_step=1000, learning_rate=3e-5, train_step=10000,
                                                         save_checkpoints_steps=100, train_batch_size=128)
    assert glue_finetuning.paper_hparams("qnli")["save_checkpoints_steps"] == 200
    assert glue_finetuning.paper_hparams("sts-b", explicit=["train_batch_size"]) == dict(
        warmup_step=214, learning_rate=2e-5, train_step=3598, save_checkpoints_steps=100)
    assert glue_finetuning.paper_hparams("rte", explicit=["num_train_epochs", "save_checkpoints_steps"]) == dict(
        learning_rate=3e-5, train_batch_size=32)
    with pytest.raises(ValueError, match="no hyperparameters for 'wnli'"):
        glue_finetuning.paper_hparams("wnli")


_PRINT_OPTIONS = """
import dataclasses, json, sys
from absl import flags
from albert_tf.tasks.glue import resolve_options
from run_scripts import run_glue
flags.FLAGS(sys.argv)
options = resolve_options(run_glue.glue_options())
print(json.dumps({name: getattr(options, name) for name in sys.argv[-1].split(",")}))
"""


@pytest.mark.slow
def test_paper_hparams_flags_search_every_checkpoint_as_run_glue_sh(tmp_path):
    fields = "save_checkpoints_steps,eval_every_checkpoint,train_step,learning_rate"

    def options(*flags):
        completed = run_python("-c", _PRINT_OPTIONS, "--task_name=RTE", f"--output_dir={tmp_path}",
                               f"--data_dir={tmp_path}", *flags, fields, timeout=300, CUDA_VISIBLE_DEVICES="")
        assert completed.returncode == 0, completed.stderr[-4000:]
        return json.loads(completed.stdout.splitlines()[-1])

    assert options("--use_paper_hparams") == dict(save_checkpoints_steps=100, eval_every_checkpoint=True,
                                                  train_step=800, learning_rate=3e-5)
    assert options("--use_paper_hparams", "--noeval_every_checkpoint", "--save_checkpoints_steps=50") == dict(
        save_checkpoints_steps=50, eval_every_checkpoint=False, train_step=800, learning_rate=3e-5)


def test_tfds_not_prepared_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"glue/rte is not prepared under .*tfds build glue/rte"):
        glue.read_tfds_examples(glue.get_task("rte"), "train", data_dir=str(tmp_path))


def test_metrics_as_glue_reports_them():
    cola = glue_finetuning.compute_metrics(glue.get_task("cola"), [1, 0, 1], [1, 0, 0])
    assert set(cola) == {"mcc", "accuracy"}
    mrpc = glue_finetuning.compute_metrics(glue.get_task("mrpc"), [1, 1, 0, 0], [1, 0, 1, 0])
    assert mrpc == {"f1": pytest.approx(0.5), "accuracy": pytest.approx(0.5)}
    stsb = glue_finetuning.compute_metrics(glue.get_task("sts-b"), [1.0, 2.0, 3.0], [1.0, 3.0, 2.0])
    assert stsb == {"pearson": pytest.approx(0.5), "spearman": pytest.approx(0.5)}
    assert glue_finetuning.prediction_strings(glue.get_task("mnli"), [2, 0]) == ["neutral", "contradiction"]


def test_eval_results_also_use_the_original_run_classifiers_names():
    # The original's keys: eval_accuracy and eval_loss; CoLA adds matthew_corr; STS-B has pearson, MSE and
    # eval_loss (its per-example loss is the squared error).
    assert glue_finetuning.original_metric_names(glue.get_task("sts-b")) == {"MSE": "loss", "eval_loss": "loss"}
    assert glue_finetuning.original_metric_names(glue.get_task("mnli")) == {"eval_accuracy": "accuracy",
                                                                            "eval_loss": "loss"}
    for name, task in glue.GLUE_TASKS.items():
        if glue_finetuning.METRIC_NAMES[name]:
            assert set(glue_finetuning.original_metric_names(task).values()) <= {
                *glue_finetuning.METRIC_NAMES[name], "loss"}, name


def test_changing_max_seq_length_rebuilds_the_cached_features(glue_dir, tokenizer, tmp_path):
    task = glue.get_task("qqp")
    _, first = glue.load_split(task, "train", tokenizer, 16, str(tmp_path), data_dir=glue_dir)
    _, again = glue.load_split(task, "train", tokenizer, 16, str(tmp_path), data_dir=glue_dir)
    _, longer = glue.load_split(task, "train", tokenizer, 24, str(tmp_path), data_dir=glue_dir)
    assert again.path == first.path and longer.path != first.path
    assert first.num_examples == 2
    assert next(longer.dataset().as_numpy_iterator())["input_word_ids"].shape == (24,)


# ---- end to end ------------------------------------------------------------------------------------

def _run_glue(*flags):
    completed = run_script("run_glue", *flags, CUDA_VISIBLE_DEVICES="")
    assert completed.returncode == 0, completed.stderr[-4000:]
    return completed.stderr


@pytest.mark.slow
def test_run_glue_learns_writes_predictions_and_restarts_from_a_tf1_checkpoint(tmp_path, tokenizer):
    write_keyword_mrpc(tmp_path / "glue")
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(json.dumps(GLUE_TINY_CONFIG))
    common = [f"--data_dir={tmp_path / 'glue'}", "--task_name=MRPC", "--max_seq_length=32", "--eval_batch_size=64",
              "--predict_batch_size=64", f"--cached_dir={tmp_path / 'cache'}"]
    # TensorFlow's kernels here, to keep the suite short; the hub-module test below trains under XLA.
    _run_glue(*common, f"--output_dir={tmp_path / 'run'}", f"--albert_config_file={config_file}", "--nojit_compile",
              f"--spm_model_file={tokenizer.spm_model_file}", "--do_train", "--do_eval", "--do_predict",
              "--train_step=60", "--warmup_step=6", "--learning_rate=1e-3", "--train_batch_size=32",
              "--save_checkpoints_steps=30", "--steps_per_loop=30", "--dropout_prob=0.0")
    results = json.loads((tmp_path / "run" / "eval_results.json").read_text())
    assert results["global_step"] == 60 and results["accuracy"] > 0.9 and results["f1"] > 0.9
    # The last checkpoint's block of eval_results.txt also has the original run_classifier's names.
    text = dict(line.split(" = ", 1) for line in (tmp_path / "run" / "eval_results.txt").read_text().splitlines()
                if " = " in line)
    assert float(text["eval_accuracy"]) == pytest.approx(results["accuracy"])
    assert float(text["eval_loss"]) == pytest.approx(results["loss"]) and "matthew_corr" not in text

    submission = (tmp_path / "run" / "MRPC.tsv").read_text().splitlines()
    assert submission[0] == "index\tprediction" and len(submission) == 13
    assert [row.split("\t")[0] for row in submission[1:]] == [str(100 + index) for index in range(12)]
    assert {row.split("\t")[1] for row in submission[1:]} <= {"0", "1"}
    # The original's test_results.tsv: class probabilities, one line per test example, no header.
    probabilities = np.loadtxt(tmp_path / "run" / "test_results.tsv", delimiter="\t")
    assert probabilities.shape == (12, 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), np.ones(12), atol=1e-6)
    assert probabilities.argmax(axis=1).tolist() == [int(row.split("\t")[1]) for row in submission[1:]]
    eval_rows = [row.split("\t") for row in (tmp_path / "run" / "eval_predictions.tsv").read_text().splitlines()]
    assert eval_rows[0] == ["index", "prediction", "label"] and len(eval_rows) == 65
    recomputed = np.mean([prediction == label for _, prediction, label in eval_rows[1:]])
    assert recomputed == pytest.approx(results["accuracy"])

    cached = sorted(os.listdir(tmp_path / "cache"))
    assert len(cached) == 6  # train, dev and test records, each with its metadata

    # The fine-tuned weights, written as an original TF1 checkpoint with its config and vocabulary beside it:
    # a second run evaluates from it (no config or spm flags) and gets the same numbers.
    model = AlbertClassifier(json.loads(config_file.read_text()), num_labels=2)
    loading.load_weights(model, str(tmp_path / "run" / "best"))
    writing.save_checkpoint_directory(model, str(tmp_path / "tf1"), "tf1",
                                            vocab_files=[tokenizer.spm_model_file])
    _run_glue(*common, f"--output_dir={tmp_path / 'from_tf1'}", f"--init_checkpoint={tmp_path / 'tf1'}",
              "--do_eval", "--do_predict", f"--export_dir={tmp_path / 'export'}")
    again = json.loads((tmp_path / "from_tf1" / "eval_results.json").read_text())
    assert again["accuracy"] == pytest.approx(results["accuracy"]) and again["global_step"] == 0
    assert (tmp_path / "from_tf1" / "MRPC.tsv").read_text() == (tmp_path / "run" / "MRPC.tsv").read_text()
    assert sorted(os.listdir(tmp_path / "cache")) == cached  # the same dev and test features were reused

    # The exported SavedModel serves the same predictions from raw ids.
    pairs = [("the model", "lamb lamb the lamb"), ("a block", "of depth")]
    features = [glue.convert_example(glue.GlueExample(str(index), text_a, text_b, None), index,
                                     glue.get_task("mrpc"), tokenizer, 32)
                for index, (text_a, text_b) in enumerate(pairs)]
    serve = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"]
    served = serve(**{name: tf.constant([feature[name] for feature in features], tf.int32)
                      for name in ("input_word_ids", "input_mask", "input_type_ids")})
    assert served["probabilities"].shape == (2, 2)
    assert served["probabilities"].numpy().argmax(-1).tolist() == [1, 0]


@pytest.mark.slow
def test_run_glue_from_an_exported_hub_module(tmp_path, tokenizer):
    """--hub_module_handle: config, vocabulary and encoder weights all come from the export."""
    from albert_tf.export.tfhub_encoder import export_hub_modules

    write_keyword_mrpc(tmp_path / "glue", sizes=(("train", 400), ("dev", 64)))
    config = AlbertConfig.from_dict(GLUE_TINY_CONFIG)
    # A fixed starting point: from some random encoders, 60 steps do not reach the accuracy asserted below.
    keras.utils.set_random_seed(0)
    pretrained = AlbertEncoder(config)
    writing.save_checkpoint_directory(pretrained, str(tmp_path / "tf1"), "tf1")
    export_hub_modules(str(tmp_path / "hub"), config, tokenizer.spm_model_file,
                       init_checkpoint=str(tmp_path / "tf1"), seq_length=32)
    log = _run_glue(f"--data_dir={tmp_path / 'glue'}", "--task_name=MRPC", "--max_seq_length=32",
                    f"--cached_dir={tmp_path / 'cache'}", f"--output_dir={tmp_path / 'run'}",
                    f"--hub_module_handle={tmp_path / 'hub'}", "--do_train", "--do_eval", "--train_step=60",
                    "--warmup_step=6", "--learning_rate=1e-3", "--train_batch_size=32", "--steps_per_loop=30",
                    "--dropout_prob=0.0", "--eval_batch_size=64")
    assert "hub module" in log
    results = json.loads((tmp_path / "run" / "eval_results.json").read_text())
    assert results["global_step"] == 60 and results["accuracy"] > 0.9

    restarted = AlbertClassifier(config, num_labels=2)
    loading.load_weights(restarted, str(tmp_path / "run"))
    assert not np.allclose(restarted.encoder.pooler.kernel.numpy(), pretrained.pooler.kernel.numpy())


@pytest.mark.slow
def test_a_glue_run_reads_its_hub_module_once(tmp_path, tokenizer, monkeypatch):
    """The config, the SentencePiece model and the weights of --hub_module_handle come from one reading of the
    export (model_source.ModelSource), not one per use."""
    from albert_tf.checkpoints import hub_module
    from albert_tf.export.tfhub_encoder import export_hub_modules
    from albert_tf.tasks.finetuning_options import FinetuningOptions

    write_keyword_mrpc(tmp_path / "glue", sizes=(("train", 4), ("dev", 4)))
    config = AlbertConfig.from_dict(GLUE_TINY_CONFIG)
    writing.save_checkpoint_directory(AlbertEncoder(config), str(tmp_path / "tf1"), "tf1")
    hub = str(tmp_path / "hub")
    export_hub_modules(hub, config, tokenizer.spm_model_file, init_checkpoint=str(tmp_path / "tf1"), seq_length=32)
    read_hub_module, load_checkpoint = hub_module.read_hub_module, tf.train.load_checkpoint
    modules_read, checkpoints_opened = [], []
    monkeypatch.setattr(hub_module, "read_hub_module",
                        lambda handle: modules_read.append(handle) or read_hub_module(handle))
    monkeypatch.setattr(tf.train, "load_checkpoint",
                        lambda path: checkpoints_opened.append(path) or load_checkpoint(path))
    results = glue_finetuning.run_glue(glue_finetuning.GlueOptions(
        FinetuningOptions(str(tmp_path / "run"), hub_module_handle=hub, max_seq_length=32, do_train=True,
                          do_eval=True, train_step=2, train_batch_size=2, eval_batch_size=4, jit_compile=False),
        task_name="MRPC", data_dir=str(tmp_path / "glue")))
    assert results["eval"]["global_step"] == 2
    assert modules_read == [hub]
    assert [path for path in checkpoints_opened if path.startswith(hub)] == [
        os.path.join(hub, "encoder", "variables", "variables")]
