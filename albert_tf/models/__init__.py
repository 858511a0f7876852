"""ALBERT's networks: the sharing plan, the encoder, the pretrainer, the task models and parameter accounting."""
