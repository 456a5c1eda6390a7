"""The position-wise feed-forward network (§3.3, eq. 2).

    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2

applied to each position separately and identically: two linear maps with a ReLU
between them, inner width d_ff (`filter_size`), outer width d_model.
"""

import keras

from t2t_lite.model.dropout import Dropout


class FeedForward(keras.layers.Layer):
    """Eq. 2: Dense(d_ff, ReLU) -> [dropout] -> Dense(d_model).

    Args:
        filter_size: d_ff, the inner width (2048 in the base model).
        hidden_size: d_model, the output width.
        relu_dropout: dropout on the ReLU output (0 in the paper; tensor2tensor's `relu_dropout`).

    Call arguments: `x` [batch, len, d_model], `training`.
    """

    def __init__(self, filter_size, hidden_size, relu_dropout=0.0, **kwargs):
        super().__init__(**kwargs)
        self.filter_size = filter_size
        self.hidden_size = hidden_size
        self.relu_dropout = relu_dropout

    def build(self, input_shape):
        self.inner = keras.layers.Dense(self.filter_size, activation="relu", name="inner", dtype=self.dtype_policy)
        self.outer = keras.layers.Dense(self.hidden_size, name="outer", dtype=self.dtype_policy)
        self.dropout = Dropout(self.relu_dropout, dtype=self.dtype_policy)
        self.inner.build(input_shape)
        self.outer.build(tuple(input_shape[:-1]) + (self.filter_size,))

    def call(self, x, training=False):
        hidden = self.inner(x)
        if self.relu_dropout:
            hidden = self.dropout(hidden, training=training)
        return self.outer(hidden)

    def get_config(self):
        return {
            **super().get_config(),
            "filter_size": self.filter_size,
            "hidden_size": self.hidden_size,
            "relu_dropout": self.relu_dropout,
        }
