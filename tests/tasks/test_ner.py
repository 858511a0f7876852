"""tasks.ner and run_scripts.run_ner: the token loss, predictions back on words, and a tiny model that learns
keyword tagging from CoNLL files."""
import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertTokenClassifier
from albert_tf.tasks import ner
from albert_tf.tasks.finetuning_options import FinetuningOptions
from data_gen.readers.conll import IGNORED_LABEL, ConllSentence
from tests.helpers import random_inputs, run_script, tiny_config
from tests.tasks.task_data import GLUE_TINY_CONFIG, prepare_tfds_conll2003, write_keyword_conll


def test_the_loss_is_the_mean_cross_entropy_of_the_labelled_positions_only():
    model = AlbertTokenClassifier(tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
                                  num_labels=3, dropout_rate=0.0)
    batch = {name: value for name, value in random_inputs(batch=2, seq=6).items()
             if name in ("input_word_ids", "input_mask", "input_type_ids")}
    labels = np.full([2, 6], IGNORED_LABEL, np.int32)
    labels[0, 1], labels[0, 3], labels[1, 2] = 2, 0, 1
    batch["label_ids"] = tf.constant(labels)
    loss, metrics = ner.token_classification_loss_fn(model, batch)
    log_probs = tf.nn.log_softmax(model(batch, training=False)).numpy()
    expected = -np.mean([log_probs[0, 1, 2], log_probs[0, 3, 0], log_probs[1, 2, 1]])
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    predicted = log_probs.argmax(-1)
    assert float(metrics["accuracy"]) == pytest.approx(np.mean([predicted[0, 1] == 2, predicted[0, 3] == 0,
                                                                predicted[1, 2] == 1]))


def test_predictions_of_windows_return_to_their_words_in_the_data_scheme(tmp_path):
    labels = ("O", "B-LOC", "I-LOC", "B-PER", "I-PER")
    sentences = [ConllSentence(["a", "lamb", "lamb", "b"], ["O", "S-PER", "S-PER", "O"], "x:1"),
                 ConllSentence(["garden", "bridge"], ["B-LOC", "E-LOC"], "x:6")]
    # Sentence 0 is split in two windows; word ids -1 mark [CLS], [SEP], later pieces and padding.
    outputs = {"sentence_index": np.array([0, 0, 1]),
               "word_ids": np.array([[-1, 0, 1, -1, -1], [-1, 2, -1, 3, -1], [-1, 0, -1, 1, -1]]),
               "predictions": np.array([[0, 0, 3, 4, 0], [0, 3, 2, 0, 0], [0, 1, 0, 2, 0]])}
    predicted = ner.predicted_tags(sentences, outputs, labels, "bioes")
    assert predicted == [["O", "S-PER", "S-PER", "O"], ["B-LOC", "E-LOC"]]
    assert ner.predicted_tags(sentences, outputs, labels, "iob1")[0] == ["O", "I-PER", "B-PER", "O"]
    path = tmp_path / "predictions.txt"
    ner.write_predictions(str(path), sentences, predicted)
    assert path.read_text() == "a O O\nlamb S-PER S-PER\nlamb S-PER S-PER\nb O O\n\ngarden B-LOC B-LOC\n" \
                               "bridge E-LOC E-LOC\n\n"


def test_a_scored_split_without_sentences_stops_before_training(tmp_path, tokenizer):
    write_keyword_conll(tmp_path / "data", sizes=(("train", 4), ("valid", 0)))
    options = FinetuningOptions(str(tmp_path / "run"), do_train=True, do_eval=True, max_seq_length=16)
    with pytest.raises(ValueError, match=r"^The CoNLL dev file .*valid\.txt holds no sentences; --do_eval needs at "
                                         r"least one\.$"):
        ner.build_task(ner.NerOptions(options, data_dir=str(tmp_path / "data")), tokenizer)


def read_conll_columns(path):
    """Gold and predicted tag sequences of a `word gold predicted` file, as conlleval reads it."""
    gold, predicted = [[]], [[]]
    for line in path.read_text().splitlines():
        if not line:
            gold.append([])
            predicted.append([])
            continue
        _, gold_tag, predicted_tag = line.split(" ")
        gold[-1].append(gold_tag)
        predicted[-1].append(predicted_tag)
    return [tags for tags in gold if tags], [tags for tags in predicted if tags]


@pytest.mark.slow
@pytest.mark.parametrize("tag_scheme, prefixes", [("iob1", {"O", "I-", "B-"}),
                                                   ("bioes", {"O", "B-", "I-", "E-", "S-"})])
def test_run_ner_learns_keyword_tags_and_reports_conlleval_scores(tmp_path, tokenizer, tag_scheme, prefixes):
    seqeval_metrics = pytest.importorskip("seqeval.metrics")
    write_keyword_conll(tmp_path / "data", tag_scheme=tag_scheme)
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(json.dumps(GLUE_TINY_CONFIG))
    completed = run_script(
        "run_ner", f"--data_dir={tmp_path / 'data'}", f"--albert_config_file={config_file}",
        f"--spm_model_file={tokenizer.spm_model_file}", f"--output_dir={tmp_path / 'run'}", "--max_seq_length=24",
        f"--tag_scheme={tag_scheme}",
        "--do_train", "--do_eval", "--do_predict", "--train_step=150", "--warmup_step=15", "--learning_rate=2e-3",
        "--train_batch_size=16", "--save_checkpoints_steps=50", "--steps_per_loop=50", "--dropout_prob=0.0",
        "--eval_batch_size=64", "--predict_batch_size=64", CUDA_VISIBLE_DEVICES="")
    assert completed.returncode == 0, completed.stderr[-4000:]
    run = tmp_path / "run"
    results = json.loads((run / "eval_results.json").read_text())
    assert results["global_step"] == 150 and results["f1"] > 0.9, results
    assert (run / "labels.txt").read_text().split() == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]

    gold, predicted = read_conll_columns(run / "eval_predictions.txt")
    assert len(gold) == 40 and {tag[:2] for tags in predicted for tag in tags} <= prefixes
    assert results["f1"] == pytest.approx(seqeval_metrics.f1_score(gold, predicted))
    assert results["precision"] == pytest.approx(seqeval_metrics.precision_score(gold, predicted))
    assert results["recall"] == pytest.approx(seqeval_metrics.recall_score(gold, predicted))
    assert (run / "best" / "eval_predictions.txt").exists()

    test_gold, test_predicted = read_conll_columns(run / "test_predictions.txt")
    test_results = json.loads((run / "predict_results.json").read_text())
    assert len(test_gold) == 20 and test_results["f1"] > 0.8 and test_results["loss"] > 0.0
    assert test_results["f1"] == pytest.approx(seqeval_metrics.f1_score(test_gold, test_predicted))


@pytest.mark.slow
def test_run_ner_reports_a_bad_line_in_one_sentence(tmp_path, tokenizer):
    write_keyword_conll(tmp_path / "data", tag_scheme="iob2", sizes=(("train", 4), ("valid", 2)))
    train_file = tmp_path / "data" / "train.txt"
    with open(train_file, "a") as handle:
        handle.write("lamb NN I-NP X-PER\n")
    bad_line = len(train_file.read_text().splitlines())
    completed = run_script("run_ner", f"--data_dir={tmp_path / 'data'}", f"--spm_model_file={tokenizer.spm_model_file}",
                           "--preset=albert-base", f"--output_dir={tmp_path / 'run'}", "--tag_scheme=iob2",
                           CUDA_VISIBLE_DEVICES="")
    assert completed.returncode != 0
    assert completed.stderr.strip().splitlines()[-1] == (
        f"error: {train_file}:{bad_line}: tag 'X-PER' is not O or B/I-<type>, which --tag_scheme=iob2 allows.")


def test_the_data_is_a_directory_or_tensorflow_datasets_not_both(tmp_path, tokenizer):
    options = FinetuningOptions(str(tmp_path / "run"), do_train=True, max_seq_length=16)
    for data_dir, tfds_name, ending in ((None, None, "one of them."), ("conll", "conll2003", "not both.")):
        with pytest.raises(ValueError, match=f"^Give --data_dir \\(the CoNLL files\\) or --tfds=conll2003, {ending}$"):
            ner.build_task(ner.NerOptions(options, data_dir=data_dir, tfds_name=tfds_name), tokenizer)


@pytest.mark.slow
def test_run_ner_reads_tensorflow_datasets_conll2003(tmp_path, tokenizer):
    seqeval_metrics = pytest.importorskip("seqeval.metrics")
    write_keyword_conll(tmp_path / "files", tag_scheme="iob2", sizes=(("train", 300), ("valid", 40), ("test", 20)))
    prepare_tfds_conll2003(tmp_path / "tfds", tmp_path / "files")
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(json.dumps(GLUE_TINY_CONFIG))
    completed = run_script(
        "run_ner", "--tfds=conll2003", f"--tfds_data_dir={tmp_path / 'tfds'}", "--tag_scheme=iob2",
        f"--albert_config_file={config_file}", f"--spm_model_file={tokenizer.spm_model_file}",
        f"--output_dir={tmp_path / 'run'}", "--max_seq_length=24", "--do_train", "--do_eval", "--do_predict",
        "--train_step=150", "--warmup_step=15", "--learning_rate=2e-3", "--train_batch_size=16",
        "--save_checkpoints_steps=150", "--steps_per_loop=50", "--dropout_prob=0.0", "--eval_batch_size=64",
        "--predict_batch_size=64", "--nojit_compile", CUDA_VISIBLE_DEVICES="")
    assert completed.returncode == 0, completed.stderr[-4000:]
    run = tmp_path / "run"
    results = json.loads((run / "eval_results.json").read_text())
    assert results["global_step"] == 150 and results["f1"] > 0.9, results
    assert (run / "labels.txt").read_text().split() == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    gold, predicted = read_conll_columns(run / "eval_predictions.txt")
    assert len(gold) == 40 and results["f1"] == pytest.approx(seqeval_metrics.f1_score(gold, predicted))
    # The dev split's sentences, in tensorflow-datasets' order, with the files' words and gold tags.
    written = sorted(line.split(" ")[:2] for line in (run / "eval_predictions.txt").read_text().splitlines() if line)
    source = sorted(line.split(" ")[::3] for line in (tmp_path / "files" / "valid.txt").read_text().splitlines()
                    if line and not line.startswith("-DOCSTART-"))
    assert written == source
    assert len(read_conll_columns(run / "test_predictions.txt")[0]) == 20
