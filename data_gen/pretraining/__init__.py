"""The pretraining data: raw text -> masked-LM and sentence-order TFRecord shards -> tf.data batches.

The built-in docstring corpus (corpora), SentencePiece vocabulary training (build_vocab), the original's instance
rules (instances), the job that writes the shards on local processes (create_pretraining_data) or with Apache Beam
(beam_pipeline) from the same parts (blocks, block_reader, pass_records, job_summary) with the same bytes, TFRecord
framing without TensorFlow (tfrecord_framing) and the reader that feeds pretraining (input_pipeline).
"""
