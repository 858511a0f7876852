"""ALBERT's networks: the sharing plan, the encoder, the pretrainer and the fine-tuning models on one base
(AlbertTaskModel: built from a config or around an encoder), and parameter accounting."""
