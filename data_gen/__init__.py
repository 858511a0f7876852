"""Raw text and task files -> tf.train.Example shards and tf.data pipelines.

`pretraining/` holds the pretraining data (corpus, vocabulary, instances, the shard writers and their reader),
`readers/` the task readers and `evaluation/` the official evaluations; `file_io` opens local paths and URLs
alike for them. data_gen imports albert_tf's config and tokenization only.
"""
