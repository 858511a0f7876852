"""What many test modules share: the repository's paths."""
import os

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOY_SCRIPT = os.path.join(REPO_ROOT, "tests", "_toy_training.py")
