"""The building blocks of ALBERT's networks: embeddings, the attention and feed-forward halves of a block,
activations, dropout and block recomputation, the heads (masked LM, classification, SQuAD v2), and the constants
and initializer they share."""
