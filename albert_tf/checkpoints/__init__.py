"""Checkpoint interchange: the original's TF1 names, Hugging Face names, TF-Hub modules, and loading, saving and
converting weights in every format."""
