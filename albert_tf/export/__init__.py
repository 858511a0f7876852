"""SavedModel exports: the TF-Hub-style encoder and preprocessor, and the serving models."""
