"""Embeddings and the pre-softmax projection sharing one matrix (§3.4).

"We share the same weight matrix between the two embedding layers and the
pre-softmax linear transformation ... In the embedding layers, we multiply those
weights by √d_model."

    embed(ids)   = E[ids] · √d_model        (E: [vocab, d_model])
    logits(h)    = h Eᵀ

As in tensor2tensor, the padding id 0 embeds to the zero vector, so the start
symbol of the shifted decoder input (id 0) and padded source positions carry
no token information, only their position.
"""

import keras
from keras import ops


class SharedEmbedding(keras.layers.Layer):
    """A [vocab, d_model] matrix used to embed ids (scaled by √d_model) and to project to logits.

    Args:
        vocab_size: number of subword ids (0 = padding, 1 = EOS).
        hidden_size: d_model.

    Methods: `call(ids)` -> [..., d_model] embeddings; `logits(hidden)` -> [..., vocab] (hidden Eᵀ).
    The matrix is initialised N(0, d_model^-0.5), tensor2tensor's choice, so embeddings
    scaled by √d_model start at unit variance like the positional encodings they are added to.
    """

    def __init__(self, vocab_size, hidden_size, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.vocab_size, self.hidden_size),
            initializer=keras.initializers.RandomNormal(stddev=self.hidden_size ** -0.5),
        )

    def call(self, ids):
        vectors = ops.take(ops.cast(self.embeddings, self.compute_dtype), ids, axis=0)
        not_padding = ops.cast(ops.expand_dims(ops.not_equal(ids, 0), -1), self.compute_dtype)
        return vectors * ops.cast(self.hidden_size ** 0.5, self.compute_dtype) * not_padding

    def logits(self, hidden):
        return ops.matmul(hidden, ops.transpose(ops.cast(self.embeddings, hidden.dtype)))

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size, "hidden_size": self.hidden_size}
