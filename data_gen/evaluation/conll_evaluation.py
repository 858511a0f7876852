"""conlleval's entity (chunk) scoring, over tags of any scheme (IOB1, IOB2, BIOES).

Tags are read as chunks by conlleval's rules (data_gen.readers.tag_schemes.chunks), so gold and predicted tags may
use different schemes. Scores are conlleval's: precision = correct chunks / predicted chunks, recall = correct /
gold chunks (a chunk is correct when its type and both boundaries match), F1 their harmonic mean; each is 0 when
its denominator is. Sentences are scored as separate sequences, as the blank lines of conlleval's input keep them.
`accuracy` is conlleval's token accuracy: the fraction of tokens whose tag is exactly the gold tag.

Example:
>>> scores = entity_scores([["B-PER", "I-PER", "O", "B-LOC"]], [["B-PER", "I-PER", "O", "O"]])
>>> scores["precision"], scores["recall"], round(scores["f1"], 4)
(1.0, 0.5, 0.6667)
"""

from typing import Dict, Sequence

from data_gen.readers.tag_schemes import chunks


def entity_scores(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> Dict[str, float]:
    """conlleval's precision, recall and F1 of the chunks, and its token accuracy, over sentences of tags.

    `gold` and `predicted` hold one tag sequence per sentence, of equal lengths; the two may use
    different schemes, since both are read as chunks.
    """
    if len(gold) != len(predicted):
        raise ValueError(f"entity_scores got {len(gold)} gold sentences but {len(predicted)} predicted ones.")
    correct = found_gold = found_predicted = correct_tags = num_tags = 0
    for index, (gold_tags, predicted_tags) in enumerate(zip(gold, predicted)):
        if len(gold_tags) != len(predicted_tags):
            raise ValueError(f"Sentence {index} has {len(gold_tags)} gold tags but {len(predicted_tags)} "
                             f"predicted ones.")
        gold_chunks, predicted_chunks = set(chunks(gold_tags)), set(chunks(predicted_tags))
        correct += len(gold_chunks & predicted_chunks)
        found_gold += len(gold_chunks)
        found_predicted += len(predicted_chunks)
        correct_tags += sum(g == p for g, p in zip(gold_tags, predicted_tags))
        num_tags += len(gold_tags)
    precision = correct / found_predicted if found_predicted else 0.0
    recall = correct / found_gold if found_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1,
            "accuracy": correct_tags / num_tags if num_tags else 0.0}
