"""The datasets only the paper experiments use, written from the held-out text of the pretraining corpus: the
document and package classification sets the arms are fine-tuned on (document_classification,
package_classification) and the pure, balanced SOP and NSP evaluation sets (sentence_pair_eval)."""
