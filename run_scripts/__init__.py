"""absl entry points, one per job: `python -m run_scripts.<name> --flags` from the repository root."""
import os

# Entry points only: keep TensorFlow's C++ start-up chatter out of the user's terminal.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
