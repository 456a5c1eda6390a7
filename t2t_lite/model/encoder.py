"""The encoder stack (§3.1): N identical layers of self-attention and a feed-forward network.

x = LayerNorm(x + Dropout(MultiHead(x, x, x)))      (padding keys masked)
x = LayerNorm(x + Dropout(FFN(x)))
"""

import keras

from t2t_lite.model.attention import MultiHeadAttention
from t2t_lite.model.feed_forward import FeedForward
from t2t_lite.model.sublayer import ResidualNorm, final_norm


class EncoderLayer(keras.layers.Layer):
    """One encoder layer: self-attention, then the position-wise FFN, each wrapped by `ResidualNorm`.

    Args: `hparams` (HParams). Call arguments: `x` [batch, len, d_model], `bias` (padding bias of
    the source, see `attention.padding_bias`), `return_weights`, `training`.
    Returns `(x, self_attention_weights_or_None)`.
    """

    def __init__(self, hparams, **kwargs):
        super().__init__(**kwargs)
        self.hparams = hparams

    def build(self, x_shape, bias_shape=None):
        dtype = self.dtype_policy
        self.self_attention = MultiHeadAttention.from_hparams(
            self.hparams, "self_attention", dtype, self_attention=True
        )
        self.attention_residual = ResidualNorm.from_hparams(self.hparams, "self_attention_residual", dtype)
        self.feed_forward = FeedForward(
            self.hparams.filter_size,
            self.hparams.hidden_size,
            self.hparams.relu_dropout,
            name="feed_forward",
            dtype=dtype,
        )
        self.feed_forward_residual = ResidualNorm.from_hparams(self.hparams, "feed_forward_residual", dtype)
        for layer in (self.self_attention, self.attention_residual, self.feed_forward, self.feed_forward_residual):
            layer.build(x_shape)

    def call(self, x, bias=None, return_weights=False, training=False):
        attended, weights, _ = self.self_attention(
            self.attention_residual.sublayer_input(x), bias=bias, return_weights=return_weights, training=training
        )
        x = self.attention_residual(x, attended, training=training)
        transformed = self.feed_forward(self.feed_forward_residual.sublayer_input(x), training=training)
        return self.feed_forward_residual(x, transformed, training=training), weights


class Encoder(keras.layers.Layer):
    """N encoder layers (`hparams.encoder_layers`), plus a final LayerNorm when norm_position is "pre".

    Call arguments: `x` embedded source [batch, len, d_model], `bias` padding bias, `return_weights`,
    `training`. Returns `(output, list of per-layer self-attention weights or [])`.
    """

    def __init__(self, hparams, **kwargs):
        super().__init__(**kwargs)
        self.hparams = hparams

    def build(self, x_shape, bias_shape=None):
        self.stack = [
            EncoderLayer(self.hparams, name=f"layer_{index}", dtype=self.dtype_policy)
            for index in range(self.hparams.encoder_layers)
        ]
        for layer in self.stack:
            layer.build(x_shape)
        self.norm = final_norm(self.hparams, "final_layer_norm", self.dtype_policy)
        if self.norm is not None:
            self.norm.build(x_shape)

    def call(self, x, bias=None, return_weights=False, training=False):
        all_weights = []
        for layer in self.stack:
            x, weights = layer(x, bias=bias, return_weights=return_weights, training=training)
            all_weights.append(weights)
        if self.norm is not None:
            x = self.norm(x)
        return x, (all_weights if return_weights else [])
