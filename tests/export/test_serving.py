"""albert_tf.export.serving: a fine-tuned model's serving signature, by its input names."""
import keras
import numpy as np
import tensorflow as tf

from albert_tf.export.serving import export_saved_model


def _model():
    inputs = {name: keras.Input((3,), dtype="int32", name=name) for name in ("input_word_ids", "input_mask")}
    summed = keras.layers.Add()([keras.layers.Embedding(10, 4)(inputs["input_word_ids"]),
                                 keras.layers.Embedding(2, 4)(inputs["input_mask"])])
    return keras.Model(inputs, keras.layers.Dense(2)(keras.layers.Flatten()(summed)))


def test_serving_signature_takes_the_input_names_and_returns_the_serving_fn_outputs(tmp_path):
    model = _model()
    signature = {name: tf.TensorSpec([None, 3], tf.int32) for name in ("input_word_ids", "input_mask")}
    inputs = {"input_word_ids": tf.constant([[1, 2, 3], [4, 5, 0]]), "input_mask": tf.constant([[1, 1, 1], [1, 1, 0]])}
    expected = model(inputs, training=False)

    def serving_fn(serving_model, features):
        logits = serving_model(features, training=False)
        return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}

    export_saved_model(model, signature, serving_fn, str(tmp_path / "with_fn"))
    served = tf.saved_model.load(str(tmp_path / "with_fn")).signatures["serving_default"]
    assert sorted(served.structured_input_signature[1]) == ["input_mask", "input_word_ids"]
    outputs = served(**inputs)
    np.testing.assert_allclose(outputs["logits"], expected, atol=1e-6)
    np.testing.assert_allclose(outputs["probabilities"], tf.nn.softmax(expected, axis=-1), atol=1e-6)

    export_saved_model(model, signature, None, str(tmp_path / "without_fn"))
    served = tf.saved_model.load(str(tmp_path / "without_fn")).signatures["serving_default"]
    np.testing.assert_allclose(served(**inputs)["outputs"], expected, atol=1e-6)


def test_each_weight_is_saved_once(tmp_path):
    model = _model()
    signature = {name: tf.TensorSpec([None, 3], tf.int32) for name in ("input_word_ids", "input_mask")}
    export_saved_model(model, signature, None, str(tmp_path / "export"))
    saved = tf.train.load_checkpoint(str(tmp_path / "export" / "variables" / "variables"))
    names = [name for name in saved.get_variable_to_shape_map() if name != "_CHECKPOINTABLE_OBJECT_GRAPH"]
    assert len(names) == len(model.weights)
    assert sum(np.prod(shape) for name, shape in saved.get_variable_to_shape_map().items() if name in names) == (
        model.count_params())
