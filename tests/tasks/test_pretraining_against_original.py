"""Pretraining side by side with google-research/albert's own code (tests/original_albert.py).

The original's AlbertModel, pretraining heads and create_optimizer run in a TF1 graph on random weights and one batch
of records; its checkpoints go through our strict loader into the library's Pretraining run. The same weights give
the same outputs and losses, and the same steps of LAMB or AdamW (warm-up, decay, clipping, weight decay) give the
same weights, compared under the original's variable names in checkpoints each side wrote. Its model_fn's
evaluation metrics over several batches equal the Trainer's.
"""
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer
from albert_tf.checkpoints import formats
from albert_tf.checkpoints.loading import load_weights
from albert_tf.checkpoints.writing import save_weights
from albert_tf.tasks.pretraining import Pretraining, PretrainingOptions
from albert_tf.training.pretraining_losses import pretraining_loss, pretraining_metric_sums
from albert_tf.training.trainer import Trainer
from data_gen.pretraining.input_pipeline import RECORD_FEATURES, make_pretraining_dataset, pretraining_dataset_fn
from tests import original_albert
from tests.helpers import tiny_config_values, write_pretraining_records

BATCH_SIZE = 8
MAX_SEQ_LENGTH = 16
MAX_PREDICTIONS = 3
# Warm-up over the first two steps, then linear decay: every branch of the original's schedule is taken.
SCHEDULE = dict(learning_rate=0.05, num_train_steps=4, num_warmup_steps=2)
# A softmax ignores what every key adds alike, so the key bias's gradient is zero but for rounding, which Adam's
# normalisation turns into steps of about 1e-4 on either side.
KEY_BIAS = "/self/key/bias"

CONFIGS = {
    "factorized, one group": {},
    "two groups of two inner blocks, relu": dict(num_hidden_groups=2, inner_group_num=2, hidden_act="relu"),
    "E equal to H": dict(embedding_size=16),
}


def _batch(tmp_path):
    path = write_pretraining_records(str(tmp_path / "records.tfrecord"), num_records=BATCH_SIZE,
                                     max_seq_length=MAX_SEQ_LENGTH, max_predictions=MAX_PREDICTIONS)
    dataset = make_pretraining_dataset(path, batch_size=BATCH_SIZE, max_seq_length=MAX_SEQ_LENGTH,
                                       max_predictions_per_seq=MAX_PREDICTIONS, is_training=False)
    batch = {name: value.numpy() for name, value in next(iter(dataset)).items()}
    assert 0 < batch["next_sentence_labels"].sum() < BATCH_SIZE  # both sentence orders
    return batch


def _run_original(config_values, batch, directory, optimizer="lamb", num_steps=0):
    """Builds the original's pretraining graph on random weights, saved to `directory`/start, then takes
    `num_steps` steps of its train op and saves `directory`/end.

    Returns the start weights' outputs: encoder layers, pooled output, the heads' log-probabilities and losses.
    """
    modeling = original_albert.modeling()
    heads = original_albert.run_pretraining(modeling)
    optimization = original_albert.optimization()
    with tf.Graph().as_default():
        config = modeling.AlbertConfig.from_dict(config_values)
        model = modeling.AlbertModel(config=config, is_training=True, input_ids=tf.constant(batch["input_word_ids"]),
                                     input_mask=tf.constant(batch["input_mask"]),
                                     token_type_ids=tf.constant(batch["input_type_ids"]),
                                     use_one_hot_embeddings=False)
        masked_lm_loss, _, masked_lm_log_probs = heads.get_masked_lm_output(
            config, model.get_sequence_output(), model.get_embedding_table(),
            tf.constant(batch["masked_lm_positions"]), tf.constant(batch["masked_lm_ids"]),
            tf.constant(batch["masked_lm_weights"]))
        sentence_order_loss, _, sentence_order_log_probs = heads.get_sentence_order_output(
            config, model.get_pooled_output(), tf.constant(batch["next_sentence_labels"]))
        total_loss = masked_lm_loss + sentence_order_loss
        train_op = optimization.create_optimizer(
            total_loss, SCHEDULE["learning_rate"], SCHEDULE["num_train_steps"], SCHEDULE["num_warmup_steps"],
            use_tpu=False, optimizer=optimizer)
        with original_albert.session_with_random_weights(str(directory / "start")) as session:
            outputs = session.run(dict(
                encoder_outputs=model.get_all_encoder_layers(), pooled_output=model.get_pooled_output(),
                masked_lm_log_probs=masked_lm_log_probs, sentence_order_log_probs=sentence_order_log_probs,
                masked_lm_loss=masked_lm_loss, sentence_order_loss=sentence_order_loss))
            for _ in range(num_steps):
                session.run(train_op)
            tf.compat.v1.train.Saver().save(session, str(directory / "end"), write_meta_graph=False)
    return outputs


def _model_weights(prefix):
    """A TF1 checkpoint's variables by name, without the optimizer's slots and step."""
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if name != formats.GLOBAL_STEP_NAME and not name.endswith(formats.OPTIMIZER_SLOT_SUFFIXES)}


@pytest.mark.parametrize("overrides", CONFIGS.values(), ids=CONFIGS.keys())
def test_outputs_and_losses_match_the_original(tmp_path, overrides):
    config_values = tiny_config_values(**overrides)
    batch = _batch(tmp_path)
    expected = _run_original(config_values, batch, tmp_path)

    model = AlbertPretrainer(AlbertConfig(**config_values))
    load_weights(model, str(tmp_path / "start"), format="tf1")
    inputs = {name: tf.constant(value) for name, value in batch.items()}
    encoder_outputs = model.encoder(inputs)
    outputs = model(inputs)
    loss, parts = pretraining_loss(outputs, inputs)

    assert len(encoder_outputs["encoder_outputs"]) == len(expected["encoder_outputs"])
    for ours, theirs in zip(encoder_outputs["encoder_outputs"], expected["encoder_outputs"]):
        np.testing.assert_allclose(ours.numpy(), theirs, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(encoder_outputs["pooled_output"].numpy(), expected["pooled_output"], atol=2e-5)
    masked_lm_log_probs = tf.nn.log_softmax(outputs["mlm_logits"]).numpy().reshape(-1, config_values["vocab_size"])
    np.testing.assert_allclose(masked_lm_log_probs, expected["masked_lm_log_probs"], rtol=1e-4, atol=5e-5)
    np.testing.assert_allclose(tf.nn.log_softmax(outputs["sop_logits"]).numpy(), expected["sentence_order_log_probs"],
                               atol=2e-5)
    assert float(parts["masked_lm_loss"]) == pytest.approx(expected["masked_lm_loss"], rel=1e-5)
    assert float(parts["sentence_order_loss"]) == pytest.approx(expected["sentence_order_loss"], rel=1e-5)
    assert float(loss) == pytest.approx(expected["masked_lm_loss"] + expected["sentence_order_loss"], rel=1e-5)


@pytest.mark.slow
# Two runs cover both optimizers and the three configs' differences that training adds to the outputs tests
# (factorized embeddings, groups of inner blocks, relu; E = H); each costs 10-20 s of tracing.
@pytest.mark.parametrize("optimizer, config_name", [
    ("lamb", "two groups of two inner blocks, relu"),
    ("adamw", "E equal to H"),
])
def test_training_steps_match_the_original(tmp_path, optimizer, config_name):
    config_values = tiny_config_values(**CONFIGS[config_name])
    batch = _batch(tmp_path)
    _run_original(config_values, batch, tmp_path, optimizer=optimizer, num_steps=SCHEDULE["num_train_steps"])

    options = PretrainingOptions(
        output_dir=str(tmp_path / "ours"), init_checkpoint=str(tmp_path / "start"), optimizer=optimizer,
        train_batch_size=BATCH_SIZE, max_seq_length=MAX_SEQ_LENGTH, max_predictions_per_seq=MAX_PREDICTIONS,
        save_checkpoints_steps=SCHEDULE["num_train_steps"], jit_compile=False, **SCHEDULE)
    run = Pretraining(AlbertConfig(**config_values), options)

    def dataset_fn(input_context, batch_size, skip_batches):
        return tf.data.Dataset.from_tensor_slices(batch).repeat().batch(batch_size).skip(skip_batches)

    assert run.train(dataset_fn)["step"] == SCHEDULE["num_train_steps"]
    ours = _model_weights(save_weights(run.model, str(tmp_path / "ours_tf1" / "model.ckpt"), format="tf1"))
    start, theirs = _model_weights(str(tmp_path / "start")), _model_weights(str(tmp_path / "end"))

    assert sorted(ours) == sorted(theirs)
    moved_by_noise = {}
    for name in sorted(theirs):
        change = np.abs(theirs[name] - start[name]).max()
        if name.endswith(KEY_BIAS):
            moved_by_noise[name] = max(change, np.abs(ours[name] - start[name]).max())
            continue
        # Adam's step divides by sqrt(v) + 1e-6, so a coordinate with a tiny gradient turns float32 rounding
        # into differences of a small fraction of a percent of the change; an off-by-one warm-up or a LAMB trust
        # ratio on the excluded variables fails by far more.
        np.testing.assert_allclose(ours[name], theirs[name], rtol=0, atol=5e-3 * change, err_msg=name)
    assert moved_by_noise and max(moved_by_noise.values()) < 1e-3, moved_by_noise


def test_evaluation_metrics_match_the_original_model_fn(tmp_path):
    """run_pretraining.py's model_fn in EVAL mode and its metric_fn (tf.metrics over 11 records in batches of 4, 4
    and 3) against Trainer.evaluate with pretraining_metric_sums over the same records, from its checkpoint."""
    config_values = tiny_config_values()
    path = write_pretraining_records(str(tmp_path / "records.tfrecord"), num_records=11, max_seq_length=MAX_SEQ_LENGTH,
                                     max_predictions=MAX_PREDICTIONS)
    lengths = dict(max_seq_length=MAX_SEQ_LENGTH, max_predictions_per_seq=MAX_PREDICTIONS)
    batches = [{name: value.numpy() for name, value in batch.items()}
               for batch in make_pretraining_dataset(path, batch_size=4, is_training=False, **lengths)]
    assert [len(batch["input_word_ids"]) for batch in batches] == [4, 4, 3]
    labels = np.concatenate([batch["masked_lm_ids"][batch["masked_lm_weights"] > 0] for batch in batches])

    def favour_label(name, value):
        if name == "cls/predictions/output_bias":  # every prediction this label: right for some, never padding
            value[np.bincount(labels).argmax()] = 100.0
        return value

    assert any((batch["masked_lm_weights"] == 0).any() for batch in batches)  # padded predictions to leave out

    modeling = original_albert.modeling()
    run_pretraining = original_albert.run_pretraining(modeling)
    with tf.Graph().as_default():
        features = {record_name: tf.compat.v1.placeholder(
                        tf.float32 if name == "masked_lm_weights" else tf.int32, [None, *batches[0][name].shape[1:]])
                    for record_name, (name, _, _) in RECORD_FEATURES.items()}
        model_fn = run_pretraining.model_fn_builder(
            modeling.AlbertConfig.from_dict(config_values), None, 0.001, 10, 1, False, False, "lamb", 1.0, 0)
        spec = model_fn(features, None, "eval", {})
        metric_fn, metric_values = spec["eval_metrics"]
        metrics = metric_fn(*metric_values)
        with original_albert.session_with_random_weights(str(tmp_path / "model.ckpt"), favour_label) as session:
            session.run(tf.compat.v1.local_variables_initializer())
            losses = []
            for batch in batches:
                feed = {features[record_name]: batch[name] for record_name, (name, _, _) in RECORD_FEATURES.items()}
                losses.append(session.run([spec["loss"], {key: update for key, (_, update) in metrics.items()}],
                                          feed)[0])
            expected = session.run({key: value for key, (value, _) in metrics.items()})
    expected["loss"] = np.mean(losses)  # the Estimator's eval loss: the mean of the batches' losses

    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = AlbertPretrainer(AlbertConfig(**config_values))
    load_weights(model, str(tmp_path / "model.ckpt"), format="tf1")
    trainer = Trainer(strategy, model, None, None, model_dir=str(tmp_path / "ours"), jit_compile=False)
    results = trainer.evaluate(pretraining_dataset_fn(path, is_training=False, **lengths),
                               lambda model, batch: pretraining_metric_sums(model(batch, training=False), batch), 4)

    assert sorted(results) == sorted(expected)
    for name in sorted(expected):
        assert results[name] == pytest.approx(float(expected[name]), rel=1e-5), name
    assert 0 < expected["masked_lm_accuracy"] < 1 and 0 < expected["sentence_order_accuracy"] < 1
