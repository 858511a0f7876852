"""tasks.text_classification and run_scripts.run_classifier: the multi-label loss, the metrics against scikit-learn
and scipy, label resolution, the output files, and a tiny model that learns each kind of label from generated TSV,
JSON-lines and CSV files."""
import json
import re

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertClassifier
from albert_tf.tasks import text_classification
from albert_tf.tasks.finetuning_options import FinetuningOptions
from albert_tf.tasks.text_classification import TextClassificationOptions
from data_gen.readers import labeled_text
from data_gen.readers.labeled_text import MULTI_LABEL, REGRESSION, SINGLE_LABEL, LabeledTextError, LabeledTextSchema
from tests.helpers import guide_snippet, random_inputs, run_script, tiny_config
from tests.tasks.task_data import make_keyword_assets, write_labeled_text

sk_metrics = pytest.importorskip("sklearn.metrics")
stats = pytest.importorskip("scipy.stats")


def test_the_multi_label_loss_is_the_mean_binary_cross_entropy_and_predictions_are_sigmoids():
    model = AlbertClassifier(tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), num_labels=3,
                             dropout_rate=0.0)
    batch = {name: value for name, value in random_inputs(batch=2, seq=6).items()
             if name in ("input_word_ids", "input_mask", "input_type_ids")}
    labels = np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]], np.float32)
    batch.update(label_ids=tf.constant(labels), example_index=tf.constant([0, 1]))
    loss, _ = text_classification.multi_label_loss_fn(model, batch)
    logits = model(batch, training=False).numpy().astype(np.float64)
    probabilities = 1 / (1 + np.exp(-logits))
    bce = -(labels * np.log(probabilities) + (1 - labels) * np.log(1 - probabilities))
    assert float(loss) == pytest.approx(bce.mean(), rel=1e-5)
    outputs = text_classification.multi_label_predict_fn(model, batch)
    np.testing.assert_allclose(outputs["probabilities"].numpy(), probabilities, rtol=1e-5)
    np.testing.assert_allclose(outputs["per_example_loss"].numpy(), bce.mean(axis=1), rtol=1e-5)


def test_metrics_of_each_kind_against_sklearn_and_scipy():
    rng = np.random.default_rng(0)
    single = LabeledTextSchema("text", "topic")
    true = rng.integers(0, 3, 40)
    logits = rng.normal(size=(40, 3)) + 2 * np.eye(3)[true]
    predicted = text_classification.predictions_from_outputs(single, {"logits": logits}, 0.5)
    results = text_classification.compute_metrics(single, predicted, true, ("a", "b", "c"))
    assert results == pytest.approx({"accuracy": sk_metrics.accuracy_score(true, predicted),
                                     "macro_f1": sk_metrics.f1_score(true, predicted, average="macro"),
                                     "micro_f1": sk_metrics.f1_score(true, predicted, average="micro")})

    multi = LabeledTextSchema("text", "topic", label_kind=MULTI_LABEL)
    indicators = (rng.random((40, 3)) < 0.4).astype(np.float32)
    probabilities = np.clip(indicators * 0.6 + rng.random((40, 3)) * 0.5, 0, 1)
    # The decision rule: a label whose probability is at least the threshold; 0.5 itself counts.
    probabilities[0] = [0.5, 0.4999, 0.9]
    predicted = text_classification.predictions_from_outputs(multi, {"probabilities": probabilities}, 0.5)
    assert predicted[0].tolist() == [1, 0, 1]
    results = text_classification.compute_metrics(multi, predicted, indicators, ("rain", "sun", "wind"))
    per_label = sk_metrics.f1_score(indicators, predicted, average=None, zero_division=0)
    assert results == pytest.approx({
        "micro_f1": sk_metrics.f1_score(indicators, predicted, average="micro", zero_division=0),
        "macro_f1": sk_metrics.f1_score(indicators, predicted, average="macro", zero_division=0),
        "exact_match": sk_metrics.accuracy_score(indicators, predicted),
        "f1_rain": per_label[0], "f1_sun": per_label[1], "f1_wind": per_label[2]})

    regression = LabeledTextSchema("text", "score", label_kind=REGRESSION)
    scores = rng.normal(size=40)
    predicted = text_classification.predictions_from_outputs(
        regression, {"predictions": scores + rng.normal(size=40)}, 0.5)
    results = text_classification.compute_metrics(regression, predicted, scores, ())
    assert results == pytest.approx({"pearson": stats.pearsonr(predicted, scores)[0],
                                     "spearman": stats.spearmanr(predicted, scores)[0]})


def _options(tmp_path, finetuning=None, **changes):
    values = dict(text_field="text", label_field="topic", train_file=str(tmp_path / "train.tsv"),
                  eval_file=str(tmp_path / "dev.tsv"))
    values.update(changes)
    return TextClassificationOptions(finetuning or FinetuningOptions(str(tmp_path / "run"), do_train=True), **values)


def test_labels_are_sorted_given_or_those_of_labels_txt(tmp_path):
    (tmp_path / "train.tsv").write_text("text\ttopic\nGoal\tsport\nRain\tweather\nVote\tpolitics\n")
    options = _options(tmp_path)
    examples = text_classification.read_split_examples(options)
    assert text_classification.resolve_labels(options, examples) == ("politics", "sport", "weather")
    assert (tmp_path / "run" / "labels.txt").read_text() == "politics\nsport\nweather\n"
    # A rerun on the same output_dir keeps the file's order, whatever the training file now holds.
    (tmp_path / "run" / "labels.txt").write_text("weather\nsport\npolitics\n")
    assert text_classification.resolve_labels(options, examples) == ("weather", "sport", "politics")
    with pytest.raises(LabeledTextError, match=re.escape(
            f"--labels=sport,weather,politics differ from {tmp_path / 'run' / 'labels.txt'} (weather,sport,politics), "
            "the labels of the model in --output_dir; give the same labels in the same order, or another "
            "--output_dir.")):
        text_classification.resolve_labels(_options(tmp_path, labels=["sport", "weather", "politics"]), examples)
    fresh = FinetuningOptions(str(tmp_path / "other"), do_train=True)
    assert text_classification.resolve_labels(_options(tmp_path, fresh, labels=["sport", "weather", "politics"]),
                                              examples) == ("sport", "weather", "politics")


def test_label_resolution_errors(tmp_path):
    (tmp_path / "train.tsv").write_text("text\ttopic\nGoal\tsport\n")
    evaluation_only = FinetuningOptions(str(tmp_path / "run"), do_eval=True)
    (tmp_path / "dev.tsv").write_text("text\ttopic\nGoal\tsport\n")
    with pytest.raises(LabeledTextError, match=re.escape(
            "No labels for the model: give --labels, train with --do_train (the labels of --train_file), or use the "
            "--output_dir of a run that wrote labels.txt.")):
        text_classification.resolve_labels(_options(tmp_path, evaluation_only), {})
    options = _options(tmp_path)
    with pytest.raises(LabeledTextError, match=re.escape(
            "A classifier needs at least two labels, got ['sport']; for one yes/no label use --multi_label.")):
        text_classification.resolve_labels(options, text_classification.read_split_examples(options))
    with pytest.raises(LabeledTextError, match=re.escape(
            "--labels=a,b names classes, but --regression predicts a number.")):
        text_classification.resolve_labels(_options(tmp_path, regression=True, labels=["a", "b"]), {})
    with pytest.raises(LabeledTextError, match=re.escape(
            "The labels of --labels name ['a'] more than once: ['a', 'b', 'a'].")):
        text_classification.resolve_labels(_options(tmp_path, labels=["a", "b", "a"]), {})


def test_option_errors_stop_before_training(tmp_path, tokenizer):
    (tmp_path / "train.tsv").write_text("text\ttopic\n")
    cases = [(_options(tmp_path, eval_file=None, finetuning=FinetuningOptions(str(tmp_path), do_eval=True)),
              "--do_eval needs --eval_file."),
             (_options(tmp_path), f"The train file {tmp_path / 'train.tsv'} holds no examples; --do_train needs at "
                                  f"least one."),
             (_options(tmp_path, multi_label=True, regression=True), "Give --multi_label or --regression, not both."),
             (_options(tmp_path, label_separator="|"), "--label_separator='|' splits multi-label fields; it needs "
                                                       "--multi_label."),
             (_options(tmp_path, multi_label=True, multi_label_threshold=1.0),
              "--multi_label_threshold must be between 0 and 1, got 1.0.")]
    for options, message in cases:
        with pytest.raises(LabeledTextError, match=f"^{re.escape(message)}$"):
            text_classification.build_task(options, tokenizer)


def test_an_eval_label_the_training_file_lacks_names_its_line_and_where_the_labels_came_from(tmp_path, tokenizer):
    (tmp_path / "train.tsv").write_text("text\ttopic\nthe model\tsport\na block\tweather\n")
    (tmp_path / "dev.tsv").write_text("text\ttopic\nthe model\tsport\na block\tpolitics\n")
    finetuning = FinetuningOptions(str(tmp_path / "run"), do_train=True, do_eval=True, max_seq_length=8,
                                   cached_dir=str(tmp_path / "cache"))
    with pytest.raises(LabeledTextError, match=f"^{re.escape(str(tmp_path / 'dev.tsv'))}:3: label 'politics' is not "
                                               f"one of the model's labels \\['sport', 'weather'\\] \\(collected "
                                               f"from --train_file {re.escape(str(tmp_path / 'train.tsv'))}; give "
                                               f"--labels to name others\\)\\.$"):
        text_classification.build_task(_options(tmp_path, finetuning), tokenizer)


def test_prediction_files(tmp_path):
    multi = LabeledTextSchema("text", "topic", label_kind=MULTI_LABEL)
    outputs = {"probabilities": np.array([[0.9, 0.2], [0.1, 0.3]])}
    text_classification.write_predictions(str(tmp_path), multi, outputs, 0.5, ("rain", "sun"))
    assert (tmp_path / "predictions.tsv").read_text() == 'index\tprediction\n0\t["rain"]\n1\t[]\n'
    assert np.loadtxt(tmp_path / "test_results.tsv").tolist() == [[0.9, 0.2], [0.1, 0.3]]
    regression = LabeledTextSchema("text", "score", label_kind=REGRESSION)
    text_classification.write_predictions(str(tmp_path), regression, {"predictions": np.array([1.5, -2.0])}, 0.5, ())
    assert (tmp_path / "predictions.tsv").read_text() == "index\tprediction\n0\t1.5\n1\t-2.0\n"
    assert (tmp_path / "test_results.tsv").read_text() == "1.5\n-2.0\n"


# ---- end to end ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def keyword_assets(tmp_path_factory):
    """(SentencePiece model, config file) of the keyword tasks."""
    return make_keyword_assets(tmp_path_factory.mktemp("keyword_assets"))


def _run_classifier(data, keyword_assets, kind, extension, *flags, steps=60):
    spm_model, config_file = keyword_assets
    for split, count, seed in (("train", 400, 0), ("dev", 64, 1), ("test", 12, 2)):
        write_labeled_text(data / f"{split}.{extension}", kind, count, seed=seed)
    completed = run_script(
        "run_classifier", f"--train_file={data / f'train.{extension}'}", f"--eval_file={data / f'dev.{extension}'}",
        f"--predict_file={data / f'test.{extension}'}", "--text_field=text", "--label_field=topic", *flags,
        f"--albert_config_file={config_file}", f"--spm_model_file={spm_model}", f"--output_dir={data / 'run'}",
        f"--export_dir={data / 'export'}", "--max_seq_length=24", "--do_train", "--do_eval", "--do_predict",
        f"--train_step={steps}", f"--warmup_step={steps // 10}", "--learning_rate=2e-3", "--train_batch_size=32",
        f"--save_checkpoints_steps={steps // 2}", f"--steps_per_loop={steps // 2}", "--dropout_prob=0.0",
        "--eval_batch_size=64", "--predict_batch_size=64", "--nojit_compile", CUDA_VISIBLE_DEVICES="")
    assert completed.returncode == 0, completed.stderr[-4000:]
    run = data / "run"
    results = json.loads((run / "eval_results.json").read_text())
    assert results["global_step"] == steps
    assert (run / "best" / "ckpt-best.index").exists() and (run / "best" / "eval_predictions.tsv").exists()
    rows = [line.split("\t") for line in (run / "eval_predictions.tsv").read_text().splitlines()]
    assert rows[0] == ["index", "prediction", "label"] and [row[0] for row in rows[1:]] == list(map(str, range(64)))
    text = dict(line.split(" = ", 1) for line in (run / "eval_results.txt").read_text().splitlines() if " = " in line)
    assert float(text["eval_loss"]) == pytest.approx(results["loss"])
    predictions = [line.split("\t") for line in (run / "predictions.tsv").read_text().splitlines()]
    assert predictions[0] == ["index", "prediction"] and len(predictions) == 13
    served = _serve(data, spm_model, kind, extension)
    return results, rows[1:], predictions[1:], np.loadtxt(run / "test_results.tsv", ndmin=2), served, text


def _serve(data, spm_model, kind, extension):
    """The exported model's outputs for the test file's examples."""
    from albert_tf.tokenization import AlbertTokenizer

    tokenizer = AlbertTokenizer(spm_model_file=spm_model)
    schema = LabeledTextSchema("text", "topic", label_kind=kind)
    examples = labeled_text.read_examples(str(data / f"test.{extension}"), schema, with_labels=False)
    features = [labeled_text.convert_example(example, index, tokenizer, 24, schema, ())
                for index, example in enumerate(examples)]
    serve = tf.saved_model.load(str(data / "export")).signatures["serving_default"]
    outputs = serve(**{name: tf.constant([feature[name] for feature in features], tf.int32)
                       for name in ("input_word_ids", "input_mask", "input_type_ids")})
    return {name: value.numpy() for name, value in outputs.items()}


def _serve_raw_text(data, keyword_assets, kind, extension, *flags):
    """The outputs for the test file's texts of the model that run_classifier, rerun to export alone as
    docs/export.md says, writes with --with_preprocessing: strings in."""
    spm_model, _ = keyword_assets
    export_dir = str(data / "raw_text_export")
    completed = run_script(
        "run_classifier", f"--output_dir={data / 'run'}", "--text_field=text", "--label_field=topic", *flags,
        f"--spm_model_file={spm_model}", f"--export_dir={export_dir}", "--with_preprocessing", "--max_seq_length=24",
        CUDA_VISIBLE_DEVICES="")
    assert completed.returncode == 0, completed.stderr[-4000:]
    guide = {"export_dir": export_dir}
    exec(guide_snippet("raw_text_classifier"), guide)
    classifier = guide["classifier"]
    assert guide["probabilities"].shape == (1, 3 if kind == SINGLE_LABEL else 2)
    schema = LabeledTextSchema("text", "topic", label_kind=kind)
    texts = [example.text_a for example in
             labeled_text.read_examples(str(data / f"test.{extension}"), schema, with_labels=False)]
    served = classifier.signatures["serving_default"](text_a=tf.constant(texts))
    np.testing.assert_allclose(classifier(tf.constant(texts))["probabilities"], served["probabilities"], atol=1e-6)
    return {name: value.numpy() for name, value in served.items()}


@pytest.mark.slow
def test_run_classifier_single_label_from_tsv(tmp_path, keyword_assets):
    results, rows, predictions, probabilities, served, text = _run_classifier(
        tmp_path, keyword_assets, SINGLE_LABEL, "tsv")
    assert (tmp_path / "run" / "labels.txt").read_text().split() == ["lamb", "none", "prediction"]
    assert results["accuracy"] > 0.9, results
    predicted, gold = [row[1] for row in rows], [row[2] for row in rows]
    assert results["accuracy"] == pytest.approx(sk_metrics.accuracy_score(gold, predicted))
    assert results["macro_f1"] == pytest.approx(sk_metrics.f1_score(gold, predicted, average="macro"))
    assert results["micro_f1"] == pytest.approx(sk_metrics.f1_score(gold, predicted, average="micro"))
    assert float(text["eval_accuracy"]) == pytest.approx(results["accuracy"])
    # test_results.tsv holds each example's softmax in labels.txt's order; the export serves the same.
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    labels = ["lamb", "none", "prediction"]
    assert [labels[index] for index in probabilities.argmax(axis=1)] == [row[1] for row in predictions]
    np.testing.assert_allclose(served["probabilities"], probabilities, atol=1e-5)
    raw_text = _serve_raw_text(tmp_path, keyword_assets, SINGLE_LABEL, "tsv")
    np.testing.assert_allclose(raw_text["probabilities"], probabilities, atol=1e-5)


@pytest.mark.slow
def test_run_classifier_multi_label_from_json_lines(tmp_path, keyword_assets):
    results, rows, predictions, probabilities, served, _ = _run_classifier(
        tmp_path, keyword_assets, MULTI_LABEL, "jsonl", "--multi_label", steps=150)
    labels = (tmp_path / "run" / "labels.txt").read_text().split()
    assert labels == ["lamb", "prediction"]
    assert results["micro_f1"] > 0.9 and results["exact_match"] > 0.8, results

    def indicators(cells):
        return np.array([[label in json.loads(cell) for label in labels] for cell in cells], int)

    predicted, gold = indicators([row[1] for row in rows]), indicators([row[2] for row in rows])
    per_label = sk_metrics.f1_score(gold, predicted, average=None, zero_division=0)
    assert results["f1_lamb"] == pytest.approx(per_label[0]) and results["f1_prediction"] == pytest.approx(per_label[1])
    assert results["micro_f1"] == pytest.approx(sk_metrics.f1_score(gold, predicted, average="micro"))
    assert results["macro_f1"] == pytest.approx(sk_metrics.f1_score(gold, predicted, average="macro"))
    assert results["exact_match"] == pytest.approx(sk_metrics.accuracy_score(gold, predicted))
    # Sigmoid probabilities, one per label (they need not sum to one), thresholded at 0.5 into predictions.tsv.
    assert probabilities.shape == (12, 2)
    assert (indicators([row[1] for row in predictions]) == (probabilities >= 0.5)).all()
    np.testing.assert_allclose(served["probabilities"], probabilities, atol=1e-5)
    np.testing.assert_allclose(served["probabilities"], 1 / (1 + np.exp(-served["logits"])), atol=1e-6)
    raw_text = _serve_raw_text(tmp_path, keyword_assets, MULTI_LABEL, "jsonl", "--multi_label")
    np.testing.assert_allclose(raw_text["probabilities"], probabilities, atol=1e-5)


@pytest.mark.slow
def test_run_classifier_regression_from_csv(tmp_path, keyword_assets):
    results, rows, predictions, scores, served, text = _run_classifier(
        tmp_path, keyword_assets, REGRESSION, "csv", "--regression")
    assert not (tmp_path / "run" / "labels.txt").exists()
    assert results["pearson"] > 0.9, results
    predicted, gold = np.array([float(row[1]) for row in rows]), np.array([float(row[2]) for row in rows])
    assert results["pearson"] == pytest.approx(stats.pearsonr(predicted, gold)[0])
    assert results["spearman"] == pytest.approx(stats.spearmanr(predicted, gold)[0])
    assert float(text["MSE"]) == pytest.approx(np.mean((predicted - gold) ** 2), rel=1e-4)
    assert scores.shape == (12, 1)
    np.testing.assert_allclose(scores[:, 0], [float(row[1]) for row in predictions])
    np.testing.assert_allclose(served["predictions"], scores[:, 0], atol=1e-5)


@pytest.mark.slow
def test_run_classifier_reports_a_bad_label_in_one_line(tmp_path, keyword_assets):
    spm_model, _ = keyword_assets
    write_labeled_text(tmp_path / "train.csv", SINGLE_LABEL, 8)
    with open(tmp_path / "train.csv", "a") as handle:
        handle.write("a shared block,sheep\n")
    completed = run_script("run_classifier", f"--train_file={tmp_path / 'train.csv'}", "--text_field=text",
                           "--label_field=topic", "--labels=lamb,none,prediction", "--do_train",
                           f"--spm_model_file={spm_model}", "--preset=albert-base", f"--output_dir={tmp_path / 'run'}",
                           CUDA_VISIBLE_DEVICES="")
    assert completed.returncode == 1
    assert completed.stderr.strip().splitlines()[-1] == (
        f"error: {tmp_path / 'train.csv'}:10: label 'sheep' is not one of the model's labels "
        "['lamb', 'none', 'prediction'] (--labels).")
