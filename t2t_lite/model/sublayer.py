"""Residual connection, dropout and layer normalization around each sub-layer (§3.1, §5.4).

    post (the paper):  LayerNorm(x + Dropout(Sublayer(x)))
    pre  (tensor2tensor's later default):  x + Dropout(Sublayer(LayerNorm(x)))

With "pre", each stack ends with one more LayerNorm (see `final_norm`), since
nothing else normalises the last residual sum.
"""

import keras

from t2t_lite.model.dropout import Dropout


class ResidualNorm(keras.layers.Layer):
    """Wraps one sub-layer: `sublayer_input(x)` feeds it, `call(x, output)` adds and normalises.

    Args:
        norm_position: "post" (paper) or "pre".
        dropout: P_drop, applied to the sub-layer output before the residual sum (§5.4).
        epsilon: LayerNorm epsilon.

    Usage:
        y = sublayer(residual.sublayer_input(x))
        x = residual(x, y, training=training)
    """

    def __init__(self, norm_position="post", dropout=0.1, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.norm_position = norm_position
        self.dropout_rate = dropout
        self.epsilon = epsilon

    @classmethod
    def from_hparams(cls, hparams, name, dtype=None):
        return cls(
            hparams.norm_position,
            hparams.layer_prepostprocess_dropout,
            hparams.layer_norm_epsilon,
            name=name,
            dtype=dtype,
        )

    def build(self, x_shape, output_shape=None):
        self.norm = keras.layers.LayerNormalization(epsilon=self.epsilon, name="layer_norm", dtype=self.dtype_policy)
        self.norm.build(x_shape)
        self.dropout = Dropout(self.dropout_rate, dtype=self.dtype_policy)

    def sublayer_input(self, x):
        return self.norm(x) if self.norm_position == "pre" else x

    def call(self, x, output, training=False):
        summed = x + self.dropout(output, training=training)
        return summed if self.norm_position == "pre" else self.norm(summed)

    def get_config(self):
        return {
            **super().get_config(),
            "norm_position": self.norm_position,
            "dropout": self.dropout_rate,
            "epsilon": self.epsilon,
        }


def final_norm(hparams, name, dtype):
    """The LayerNorm closing a pre-norm stack, or None for the paper's post-norm."""
    if hparams.norm_position != "pre":
        return None
    return keras.layers.LayerNormalization(epsilon=hparams.layer_norm_epsilon, name=name, dtype=dtype)
