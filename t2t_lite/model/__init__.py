"""The Transformer of §3 (Figure 1): attention, the feed-forward network, embeddings, positions and the stacks.

Keras layers written in `keras.ops` only, so they run under any Keras backend. The model knows
nothing of training, decoding or serving: those stages import it, never the reverse.
"""
