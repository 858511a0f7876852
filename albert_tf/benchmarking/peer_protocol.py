"""What the peer comparison (peer_comparison) and the peers' steps it runs in child processes (peers/
pretraining_steps.py, in the repository beside the installed packages) agree on: the peers, the precisions and the
line that carries a step's record.

It imports nothing, so a peer's child process reads it without TensorFlow.

Example:
>>> PEERS, PRECISIONS
(('keras-hub', 'transformers'), ('float32', 'bfloat16'))
"""

PEERS = ("keras-hub", "transformers")
PRECISIONS = ("float32", "bfloat16")
RECORD_MARKER = "PEER_RECORD "
