"""docs/fine-tuning.md's small-data recipe on the built-in small task (data_gen/pretraining/package_pair_task.py):
the original's defaults take 18 steps of its 200 training sentences and stay near the majority baseline; the
recipe (20 epochs in batches of 16) reaches the accuracy the guide states. The model is the demo's shape from
random weights, its vocabulary the demo's, so the test needs no pretraining; sequences of 32 pieces, as the
guide's row says, cost half of the demo's 64."""
import pytest

from albert_tf.config import AlbertConfig
from albert_tf.tasks.finetuning_options import FinetuningOptions
from albert_tf.tasks.quickstart import DEMO_MODEL, QuickstartOptions
from albert_tf.tasks.text_classification import TextClassificationOptions, run_text_classification
from data_gen.pretraining import build_vocab, corpora, package_pair_task

ORIGINAL_DEFAULTS = dict(num_train_epochs=3.0, train_batch_size=32)
SMALL_DATA_RECIPE = dict(num_train_epochs=20.0, train_batch_size=16)
MAX_SEQ_LENGTH = 32


@pytest.mark.slow
def test_the_small_data_recipe_learns_the_built_in_task_where_the_defaults_do_not(tmp_path):
    options = QuickstartOptions()
    corpus = str(tmp_path / "corpus" / "train.txt")
    corpora.write_corpus(corpus, holdout_fraction=options.holdout_fraction,
                         holdout_path=str(tmp_path / "corpus" / "eval.txt"))
    spm_model = build_vocab.train_sentencepiece([corpus], str(tmp_path / "vocab" / "spm"),
                                                vocab_size=options.vocab_size)
    counts = package_pair_task.write_package_pair_task(str(tmp_path / "task"))
    assert counts["train"] == 200 and len(counts["classes"]) == 2
    majority = max(counts["dev_per_class"]) / counts["dev"]
    config_file = tmp_path / "albert_config.json"
    AlbertConfig(vocab_size=options.vocab_size, **DEMO_MODEL).to_json_file(str(config_file))

    def dev_accuracy(name, settings):
        finetuning = FinetuningOptions(
            str(tmp_path / name), albert_config_file=str(config_file), spm_model_file=spm_model,
            max_seq_length=MAX_SEQ_LENGTH, do_train=True, do_eval=True, train_step=None,
            warmup_proportion=0.1, learning_rate=5e-5, eval_batch_size=64, jit_compile=False, **settings)
        results = run_text_classification(TextClassificationOptions(
            finetuning, text_field="sentence", label_field="label", train_file=str(tmp_path / "task" / "train.tsv"),
            eval_file=str(tmp_path / "task" / "dev.tsv")))
        return results["eval"]["accuracy"], results["eval"]["global_step"]

    defaults_accuracy, defaults_steps = dev_accuracy("defaults", ORIGINAL_DEFAULTS)
    recipe_accuracy, recipe_steps = dev_accuracy("recipe", SMALL_DATA_RECIPE)
    assert (defaults_steps, recipe_steps) == (18, 250)
    assert defaults_accuracy < majority + 0.15 and recipe_accuracy > 0.75, (majority, defaults_accuracy,
                                                                            recipe_accuracy)
