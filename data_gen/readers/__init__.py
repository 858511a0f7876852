"""The task readers: GLUE, SQuAD, RACE, CoNLL and one's own labeled text (TSV, CSV, JSON lines), in the original
file formats and from tensorflow-datasets, turned into fine-tuning features; the cache those features are kept in
(feature_cache) and the tag schemes of the CoNLL tags (tag_schemes)."""
