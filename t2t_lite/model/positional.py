"""Positional encodings (§3.5): fixed sinusoids, or learned embeddings (Table 3, row E).

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

The sinusoids are computed from the positions on the fly, so any length works
(decoding may run past the training length: input + 50, or + 300 for parsing).
They interleave sin and cos with frequencies 10000^(-2i/d_model), the formula as
printed; tensor2tensor's `add_timing_signal_1d` instead concatenates [sin | cos]
with frequencies 10000^(-i/(d_model/2 - 1)), so its weights do not port unchanged.
"""

import keras
from keras import ops


def sinusoid_table(positions, depth):
    """PE for float `positions` [len] -> [len, depth], exactly the §3.5 formula (interleaved sin/cos)."""
    dims = ops.arange(depth)
    even_dims = ops.cast(dims - dims % 2, "float32")  # 2i for both the sin (2i) and cos (2i+1) column
    inverse_frequency = ops.power(10000.0, -even_dims / depth)
    angles = ops.expand_dims(ops.cast(positions, "float32"), -1) * inverse_frequency
    return ops.where(dims % 2 == 0, ops.sin(angles), ops.cos(angles))


class PositionEncoding(keras.layers.Layer):
    """Adds positional information to embeddings [batch, len, d_model].

    Args:
        hidden_size: d_model.
        kind: "timing" (sinusoids, §3.5), "emb" (learned, one vector per position) or "none" (x unchanged:
            the model's only positions are relative ones in self-attention, as tensor2tensor's
            transformer_relative sets, `relative_position.py`).
        max_positions: size of the learned table ("emb" only); longer inputs are an error.

    Call arguments: `x` [batch, len, d_model]; `start` the position of x's first step
    (incremental decoding adds the encoding of position `step` to one new token).
    """

    def __init__(self, hidden_size, kind="timing", max_positions=0, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.kind = kind
        self.max_positions = max_positions

    def build(self, input_shape=None):
        if self.kind == "emb":
            self.table = self.add_weight(
                name="position_embeddings",
                shape=(self.max_positions, self.hidden_size),
                initializer=keras.initializers.RandomNormal(stddev=self.hidden_size**-0.5),
            )

    def call(self, x, start=0):
        if self.kind == "none":
            return x
        positions = ops.arange(ops.shape(x)[1]) + start
        if self.kind == "emb":
            encoding = ops.take(ops.cast(self.table, self.compute_dtype), positions, axis=0)
        else:
            encoding = ops.cast(sinusoid_table(positions, self.hidden_size), self.compute_dtype)
        return x + encoding

    def get_config(self):
        return {
            **super().get_config(),
            "hidden_size": self.hidden_size,
            "kind": self.kind,
            "max_positions": self.max_positions,
        }
