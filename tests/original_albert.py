"""google-research/albert's own code (albert-tensorflow 1.1, requirements-test-oracles.txt), run as is under
tf.compat.v1: the oracle for side-by-side tests. tokenization and the data code of squad_utils and classifier_utils
run in Python; modeling.py, the task heads and the optimizers build a TF1 graph. create_pretraining_data.py and
race_utils.py are not in that package: they are read from a checkout of the repository when
$ALBERT_ORIGINAL_CHECKOUT names one (tests/data_gen/test_against_original_checkout.py).

Some of TF1 is gone from TensorFlow 2.21 and is supplied here, with TF 1.15's semantics:
- `tensorflow.contrib.layers.layer_norm` (scope `LayerNorm` by default, variables `beta` and `gamma` over the
  last axis, moments over the last axis, variance epsilon 1e-12 for float32);
- `tf.layers.dense` and `tf.layers.dropout`, which Keras 3 no longer provides under tf.compat.v1 (scope `dense` by
  default, variables `kernel` and `bias`, the bias starting at zero, the last axis contracted; dropout only when
  training).
Everything else is the original's source, executed with those bound; the lines that import them (and
`import tensorflow as tf`, which would rebind TF2) are left out, and two data fixes of the repository's head are
applied (see classifier_utils and squad_utils).
"""
import ast
import contextlib
import importlib.util
import os
import types

import numpy as np
import tensorflow as tf

from tests.helpers import random_value

_TF1 = tf.compat.v1


def _layer_norm(inputs, begin_norm_axis=-1, begin_params_axis=-1, scope=None):
    if begin_norm_axis != -1 or begin_params_axis != -1:
        raise NotImplementedError("The oracle's layer_norm covers the last axis only, as modeling.py calls it.")
    with _TF1.variable_scope(scope, default_name="LayerNorm"):
        params_shape = inputs.shape[-1:]
        beta = _TF1.get_variable("beta", shape=params_shape, initializer=_TF1.zeros_initializer())
        gamma = _TF1.get_variable("gamma", shape=params_shape, initializer=_TF1.ones_initializer())
        mean, variance = tf.nn.moments(inputs, [inputs.shape.ndims - 1], keepdims=True)
        return tf.nn.batch_normalization(inputs, mean, variance, offset=beta, scale=gamma, variance_epsilon=1e-12)


def _dense(inputs, units, activation=None, kernel_initializer=None, name=None, use_bias=True):
    with _TF1.variable_scope(name, default_name="dense"):
        kernel = _TF1.get_variable("kernel", shape=[inputs.shape[-1], units], initializer=kernel_initializer)
        outputs = tf.tensordot(inputs, kernel, [[inputs.shape.ndims - 1], [0]])
        if use_bias:
            bias = _TF1.get_variable("bias", shape=[units], initializer=_TF1.zeros_initializer())
            outputs = tf.nn.bias_add(outputs, bias)
        return activation(outputs) if activation is not None else outputs


def _dropout(inputs, rate=0.5, training=False):
    return tf.nn.dropout(inputs, rate=rate) if training and rate else inputs


class _TF1WithDense:
    """tf.compat.v1, with the `layers.dense` and `layers.dropout` Keras 3 took away."""

    layers = types.SimpleNamespace(dense=_dense, dropout=_dropout)

    def __getattr__(self, name):
        return getattr(_TF1, name)


class _TF1WithEstimatorModes(_TF1WithDense):
    """_TF1WithDense with tf.estimator.ModeKeys, whose values the Estimator passed to a model_fn."""

    estimator = types.SimpleNamespace(ModeKeys=types.SimpleNamespace(TRAIN="train", EVAL="eval", PREDICT="infer"))


def _read(directory, module_name):
    path = os.path.join(directory, f"{module_name}.py")
    with open(path, encoding="utf-8") as handle:
        return path, handle.read()


def _source(module_name):
    """A module of the installed albert-tensorflow package: its path and text."""
    return _read(importlib.util.find_spec("albert").submodule_search_locations[0], module_name)


def _replaced(source, old, new, path):
    if source.count(old) != 1:
        raise AssertionError(f"{path} no longer has {old!r} exactly once.")
    return source.replace(old, new)


def _without(source, lines, path):
    for line in lines:
        source = _replaced(source, line, "", path)
    return source


def _execute(module_name, source, path, **names):
    """Runs `source` (text or a parsed module) as a fresh module with `names` bound; `tf` is _TF1WithDense unless
    `names` gives another."""
    module = types.ModuleType(f"original_albert_{module_name}")
    module.__dict__.update({"tf": _TF1WithDense(), **names})
    exec(compile(source, path, "exec"), module.__dict__)
    return module


def modeling():
    """The original modeling.py: AlbertConfig, AlbertModel, layer_norm, get_activation, ..."""
    path, source = _source("modeling")
    left_out = ["import tensorflow as tf\n", "from tensorflow.contrib import layers as contrib_layers\n"]
    source = _without(source, left_out, path)
    return _execute("modeling", source, path, contrib_layers=types.SimpleNamespace(layer_norm=_layer_norm))


def optimization():
    """The original optimization.py (create_optimizer, AdamWeightDecayOptimizer) over its lamb_optimizer.py."""
    lamb_path, lamb_source = _source("lamb_optimizer")
    lamb_optimizer = _execute("lamb_optimizer", _without(lamb_source, ["import tensorflow as tf\n"], lamb_path),
                              lamb_path)
    path, source = _source("optimization")
    source = _without(source, ["import tensorflow as tf\n", "from albert import lamb_optimizer\n",
                               "from tensorflow.contrib import tpu as contrib_tpu\n"], path)
    return _execute("optimization", source, path, lamb_optimizer=lamb_optimizer)


def run_pretraining(original_modeling):
    """run_pretraining.py's model_fn_builder and its head functions (get_masked_lm_output,
    get_sentence_order_output, gather_indexes) over `original_modeling` and optimization().

    Only those functions are executed: the module itself defines TF1 flags and imports tf.contrib. The model_fn
    returns its TPUEstimatorSpec's arguments as a dict, reads FLAGS.init_from_group0 as False, and sees
    tf.estimator's mode keys (TensorFlow 2.21 has no estimator).
    """
    path, source = _source("run_pretraining")
    wanted = {"model_fn_builder", "get_masked_lm_output", "get_sentence_order_output", "gather_indexes"}
    functions = [node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef) and node.name in wanted]
    if {node.name for node in functions} != wanted:
        raise AssertionError(f"{path} no longer defines {sorted(wanted)}.")
    return _execute("run_pretraining", ast.Module(body=functions, type_ignores=[]), path, modeling=original_modeling,
                    optimization=optimization(), FLAGS=types.SimpleNamespace(init_from_group0=False),
                    contrib_tpu=types.SimpleNamespace(TPUEstimatorSpec=dict), tf=_TF1WithEstimatorModes())


def tokenization(digit_comma_rule="keep_added_marker"):
    """The original tokenization module: as is ("keep_added_marker", what its code does), or with its digit-comma
    drop step made to fire ("drop_added_marker", what its code meant and Hugging Face's rule).

    The original compares a str piece with the bytes SPIECE_UNDERLINE, so the drop step never runs; the second
    form compares strs, the one change.
    """
    from albert import tokenization as original

    original.tf = _TF1  # tf.logging and tf.gfile
    if digit_comma_rule == "keep_added_marker":
        return original
    if digit_comma_rule != "drop_added_marker":
        raise ValueError(f"Unknown digit_comma_rule {digit_comma_rule!r}.")
    path, source = _source("tokenization")
    source = _replaced(_without(source, ["import tensorflow as tf\n"], path),
                       "if piece[0] != SPIECE_UNDERLINE and cur_pieces[0][0] == SPIECE_UNDERLINE:",
                       'if piece[0] != u"\\u2581" and cur_pieces[0][0] == u"\\u2581":', path)
    return _execute("tokenization_dropping_the_added_marker", source, path)


def squad_utils(original_tokenization):
    """The original squad_utils over `original_tokenization`: its features and its v1 and v2 heads (with
    modeling()); the optimizer and tf.contrib imports at its top are left out.

    With the repository head's character counting, the other data fix albert-tensorflow 1.1 predates: 1.1 measures
    each paragraph piece in UTF-8 bytes against a text it indexes in characters, which misaligns every answer after
    a character that preprocessing leaves outside ASCII.
    """
    path, source = _source("squad_utils")
    source = _replaced(source, """      new_token = six.ensure_binary(token).replace(
          tokenization.SPIECE_UNDERLINE, b" ")""", """      new_token = six.ensure_text(token).replace(
          tokenization.SPIECE_UNDERLINE.decode("utf-8"), " ")""", path)
    source = _without(source, ["import tensorflow as tf\n", "from albert import modeling\n",
                               "from albert import optimization\n", "from albert import tokenization\n",
                               "from tensorflow.contrib import data as contrib_data\n",
                               "from tensorflow.contrib import layers as contrib_layers\n",
                               "from tensorflow.contrib import tpu as contrib_tpu\n"], path)
    return _execute("squad_utils", source, path, tokenization=original_tokenization, modeling=modeling(),
                    contrib_layers=types.SimpleNamespace(layer_norm=_layer_norm))


def classifier_utils(original_tokenization):
    """The original classifier_utils over `original_tokenization`: the GLUE processors, convert_single_example
    and create_model (with modeling()); the optimizer and tf.contrib imports at its top are left out.

    With the repository's fix 1dcca98 (2020-01-23), one of the two data fixes albert-tensorflow 1.1 predates: its
    processors passed do_lower_case to preprocess_text's second parameter, `remove_space`, and never lowercased.
    create_model reads the hidden size as the repository's head does (TF2 shapes hold ints, not Dimensions).
    """
    path, source = _source("classifier_utils")
    source = _replaced(source, "tokenization.preprocess_text(text, self.do_lower_case)",
                       "tokenization.preprocess_text(text, lower=self.do_lower_case)", path)
    source = _replaced(source, "hidden_size = output_layer.shape[-1].value", "hidden_size = output_layer.shape[-1]",
                       path)
    source = _without(source, ["import tensorflow as tf\n", "from albert import modeling\n",
                               "from albert import optimization\n", "from albert import tokenization\n",
                               "from tensorflow.contrib import data as contrib_data\n",
                               "from tensorflow.contrib import metrics as contrib_metrics\n",
                               "from tensorflow.contrib import tpu as contrib_tpu\n"], path)
    return _execute("classifier_utils", source, path, tokenization=original_tokenization, modeling=modeling())


@contextlib.contextmanager
def session_with_random_weights(checkpoint_prefix, adjust=None):
    """A session of the current TF1 graph: variables initialised, every trainable one set to helpers.random_value
    by its name (then `adjust(name, value)` where given), all saved to `checkpoint_prefix` before it is yielded."""
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        rng = np.random.default_rng(0)
        for variable in tf.compat.v1.trainable_variables():
            value = random_value(variable.op.name, tuple(variable.shape), rng)
            variable.load(adjust(variable.op.name, value) if adjust else value, session)
        tf.compat.v1.train.Saver().save(session, checkpoint_prefix, write_meta_graph=False)
        yield session


# ---- files albert-tensorflow 1.1 does not ship, read from a checkout of the repository -----------------------

CHECKOUT_VARIABLE = "ALBERT_ORIGINAL_CHECKOUT"


def checkout():
    """The google-research/albert checkout that $ALBERT_ORIGINAL_CHECKOUT names (its head, b772393, was checked),
    or None: create_pretraining_data.py and race_utils.py are only there."""
    directory = os.environ.get(CHECKOUT_VARIABLE)
    if directory and not os.path.isfile(os.path.join(directory, "race_utils.py")):
        raise AssertionError(f"${CHECKOUT_VARIABLE}={directory} holds no race_utils.py; it must name a checkout of "
                             "google-research/albert.")
    return directory


def _checkout_source(module_name):
    return _read(checkout(), module_name)


def race_utils(original_tokenization):
    """The repository's race_utils: RaceProcessor, convert_single_example and create_model (1.1's classifier_utils
    and its modeling() beside it). Its fine_tuning_utils.create_albert is given as that file builds a model without a
    hub module, on modeling(), whose AlbertModel in 1.1 has no `use_einsum` (einsum is its only path), and its
    hidden size is read as an int (TF2 shapes)."""
    path, source = _checkout_source("race_utils")
    source = _replaced(source, "hidden_size = output_layer.shape[-1].value", "hidden_size = output_layer.shape[-1]",
                       path)
    original_classifier_utils = classifier_utils(original_tokenization)
    original_modeling = original_classifier_utils.modeling

    def create_albert(albert_config, is_training, input_ids, input_mask, segment_ids, use_one_hot_embeddings,
                      use_einsum, hub_module):
        if hub_module or not use_einsum:
            raise NotImplementedError("The oracle builds the einsum model without a hub module only.")
        model = original_modeling.AlbertModel(config=albert_config, is_training=is_training, input_ids=input_ids,
                                              input_mask=input_mask, token_type_ids=segment_ids,
                                              use_one_hot_embeddings=use_one_hot_embeddings)
        return model.get_pooled_output(), model.get_sequence_output()

    source = _without(source, ["from albert import classifier_utils\n", "from albert import fine_tuning_utils\n",
                               "from albert import modeling\n", "from albert import optimization\n",
                               "from albert import tokenization\n", "import tensorflow.compat.v1 as tf\n",
                               "from tensorflow.compat.v1 import estimator as tf_estimator\n",
                               "from tensorflow.contrib import tpu as contrib_tpu\n"], path)
    return _execute("race_utils", source, path, tokenization=original_tokenization,
                    classifier_utils=original_classifier_utils, modeling=original_modeling,
                    fine_tuning_utils=types.SimpleNamespace(create_albert=create_albert))


def create_pretraining_data(original_tokenization, flags, ngram_uniform):
    """The repository's create_pretraining_data with `flags` as its FLAGS (its flag definitions left out) and
    `np.random.choice` drawing its uniform from `ngram_uniform()` by numpy's own rule (the cumulative sum,
    normalised, searched from the right); every other numpy name is numpy's."""
    path, source = _checkout_source("create_pretraining_data")
    source = _without(source, ["from albert import tokenization\n", "import tensorflow.compat.v1 as tf\n",
                               "import numpy as np\n"], path)
    flag_definitions = source[source.index("flags = tf.flags"):source.index("class TrainingInstance")]
    source = _without(source, [flag_definitions], path)

    def choice(values, p):
        cumulative = np.cumsum(p)
        cumulative /= cumulative[-1]
        return values[int(cumulative.searchsorted(ngram_uniform(), side="right"))]

    numpy_with_choice = types.SimpleNamespace(arange=np.arange, int64=np.int64,
                                              random=types.SimpleNamespace(choice=choice))
    return _execute("create_pretraining_data", source, path, tokenization=original_tokenization, FLAGS=flags,
                    np=numpy_with_choice)
