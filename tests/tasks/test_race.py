"""RACE: both file layouts, the original's truncation, accuracy by level, and run_race end to end."""
import json

import pytest

from albert_tf.tasks import race as race_finetuning
from data_gen.readers import race
from tests.helpers import run_script
from tests.tasks.task_data import race_article, write_keyword_race, write_race_file


def test_per_article_files_and_merged_all_txt(tmp_path):
    write_race_file(tmp_path / "RACE" / "dev" / "middle" / "1.txt",
                    race_article("middle1.txt", ["Q1?", "Q2 _ ."], ["B", "D"]))
    write_race_file(tmp_path / "RACE" / "dev" / "high" / "all.txt", race_article("high5.txt", ["H1?"], ["A"]),
                    race_article("high6.txt", ["H2?", "H3?"], ["C", "A"]), merged=True)
    # Also in all.txt.
    write_race_file(tmp_path / "RACE" / "dev" / "high" / "5.txt", race_article("high5.txt", ["H1?"], ["A"]))
    examples = race.read_examples(str(tmp_path), "dev")
    assert [(example.example_id, example.level, example.label) for example in examples] == [
        ("middle1.txt-0", "middle", 1), ("middle1.txt-1", "middle", 3),
        ("high5.txt-0", "high", 0), ("high6.txt-0", "high", 2), ("high6.txt-1", "high", 0)]
    assert [example.level for example in race.read_examples(str(tmp_path / "RACE"), "dev", ["high"])] == ["high"] * 3
    assert race.selected_levels(middle_only=True) == ["middle"]
    with pytest.raises(ValueError, match="at most one"):
        race.selected_levels(high_only=True, middle_only=True)


def test_bad_answers_and_options_name_the_file_and_question(tmp_path):
    write_race_file(tmp_path / "RACE" / "train" / "middle" / "7.txt",
                    race_article("middle7.txt", ["Q?", "R?"], ["A", "E"]))
    with pytest.raises(ValueError, match=r"middle/7.txt:1: question 1 of article 'middle7.txt' has answer 'E'"):
        race.read_examples(str(tmp_path), "train", ["middle"])
    write_race_file(tmp_path / "RACE" / "test" / "high" / "8.txt",
           race_article("high8.txt", ["Q?"], ["A"], options=[["yes", "no", "maybe"]]))
    with pytest.raises(ValueError, match=r"high/8.txt:1: question 0 of article 'high8.txt' has 3 options"):
        race.read_examples(str(tmp_path), "test", ["high"])
    with pytest.raises(ValueError, match=r"RACE/test/middle does not exist"):
        race.read_examples(str(tmp_path), "test")


def test_question_with_option_fills_the_blank_or_appends():
    assert race.question_with_option("The cat sat on the _ today.", "mat") == "The cat sat on the mat today."
    assert race.question_with_option("Where did the cat sit?", "on the mat") == "Where did the cat sit? on the mat"


def test_question_and_option_are_normalised_before_the_blank_is_filled(tokenizer):
    def qa_tokens(question, option):
        example = race.RaceExample("a-0", "high", "the model", question, [option] * 4, 0)
        features = race.convert_example(example, 0, tokenizer, max_seq_length=40, max_qa_length=30)
        ids = features["input_word_ids"][0]
        first_sep = ids.index(tokenizer.sep_id)
        return ids[first_sep + 1:ids.index(tokenizer.sep_id, first_sep + 1)]

    # The original's process_text runs on the question and on the option, then fills the blank.
    expected = tokenizer.convert_tokens_to_ids(tokenizer.tokenize("the model learns shared."))
    assert qa_tokens("the model learns _.", "shared ") == expected
    assert qa_tokens("the model learns \uff3f.", "shared") == expected


def test_features_keep_the_end_of_qa_and_cut_the_article(tokenizer):
    example = race.RaceExample("a-0", "high", "the model learns a shared block of attention and feed forward weights",
                               "which block runs at every depth", ["shared", "feed", "sentence order", "lamb"], 2)
    features = race.convert_example(example, 5, tokenizer, max_seq_length=20, max_qa_length=6)
    article = tokenizer.tokenize(example.article)
    for choice, option in enumerate(example.options):
        qa = tokenizer.tokenize(race.question_with_option(example.question, option))[-6:]
        context = article[:20 - 3 - len(qa)]
        tokens = ["[CLS]"] + context + ["[SEP]"] + qa + ["[SEP]"]
        padding = 20 - len(tokens)
        assert features["input_word_ids"][choice] == tokenizer.convert_tokens_to_ids(tokens) + [0] * padding
        assert features["input_type_ids"][choice] == [0] * (len(context) + 2) + [1] * (len(qa) + 1) + [0] * padding
        assert features["input_mask"][choice] == [1] * len(tokens) + [0] * padding
    assert len(qa) == 6 and len(article) > 20  # both truncations happened
    assert (features["label_ids"], features["example_index"], features["level"]) == (2, 5, 1)
    with pytest.raises(ValueError, match="max_qa_length=30 must be in 1..max_seq_length - 3"):
        race.convert_example(example, 0, tokenizer, max_seq_length=20, max_qa_length=30)


def test_accuracy_by_level():
    results = race_finetuning.compute_metrics([0, 1, 2, 3, 0], [0, 1, 0, 3, 1], [0, 0, 1, 1, 1])
    assert results == {"accuracy": pytest.approx(3 / 5), "accuracy_middle": pytest.approx(1.0),
                       "accuracy_high": pytest.approx(1 / 3)}
    assert set(race_finetuning.compute_metrics([1], [1], [1])) == {"accuracy", "accuracy_high"}


# ---- end to end ------------------------------------------------------------------------------------

def _run_race(*flags):
    completed = run_script("run_race", *flags, CUDA_VISIBLE_DEVICES="")
    assert completed.returncode == 0, completed.stderr[-4000:]


@pytest.mark.slow
def test_run_race_learns_and_restarts_from_its_own_checkpoint(tmp_path, tokenizer):
    write_keyword_race(tmp_path / "data")
    config_file = tmp_path / "albert_config.json"
    config_file.write_text(json.dumps(dict(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                           intermediate_size=64, embedding_size=16, max_position_embeddings=64,
                                           hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)))
    common = [f"--data_dir={tmp_path / 'data'}", f"--albert_config_file={config_file}",
              f"--spm_model_file={tokenizer.spm_model_file}", "--max_seq_length=40", "--max_qa_length=16",
              "--eval_batch_size=64", "--predict_batch_size=64", f"--cached_dir={tmp_path / 'cache'}"]
    _run_race(*common, f"--output_dir={tmp_path / 'run'}", "--do_train", "--do_eval", "--do_predict",
              "--train_step=60", "--warmup_step=6", "--learning_rate=1e-3", "--train_batch_size=16",
              "--save_checkpoints_steps=30", "--steps_per_loop=30", "--dropout_prob=0.0")
    results = json.loads((tmp_path / "run" / "eval_results.json").read_text())
    assert results["global_step"] == 60 and results["accuracy"] > 0.9
    assert results["accuracy_middle"] > 0.8 and results["accuracy_high"] > 0.8
    test_results = json.loads((tmp_path / "run" / "predict_results.json").read_text())
    assert test_results["accuracy"] > 0.8 and test_results["eval_accuracy"] == test_results["accuracy"]
    assert test_results["eval_loss"] == test_results["loss"] > 0.0
    text = dict(line.split(" = ", 1) for line in (tmp_path / "run" / "eval_results.txt").read_text().splitlines()
                if " = " in line)
    assert float(text["eval_accuracy"]) == pytest.approx(results["accuracy"])
    assert float(text["eval_loss"]) == pytest.approx(results["loss"])
    rows = [row.split("\t") for row in (tmp_path / "run" / "test_predictions.tsv").read_text().splitlines()]
    assert rows[0] == ["id", "level", "prediction", "label"] and len(rows) == 1 + 16
    assert {row[2] for row in rows[1:]} <= set("ABCD") and rows[1][0] == "middle0.txt-0"

    # Our own (native) fine-tuned checkpoint as --init_checkpoint, evaluated on the middle level only.
    _run_race(*common, f"--output_dir={tmp_path / 'middle'}", f"--init_checkpoint={tmp_path / 'run' / 'best'}",
              "--nodo_train", "--do_eval", "--middle_only")
    middle = json.loads((tmp_path / "middle" / "eval_results.json").read_text())
    best = json.loads((tmp_path / "run" / "best" / "eval_results.json").read_text())
    assert set(middle) == {"accuracy", "accuracy_middle", "loss", "global_step"}
    assert middle["accuracy"] == pytest.approx(best["accuracy_middle"])
