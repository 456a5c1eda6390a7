"""The decoder stack (§3.1): N layers of masked self-attention, encoder-decoder attention and an FFN.

    x = LayerNorm(x + Dropout(MultiHead(x, x, x)))            (causal: position i sees ≤ i, §3.2.3)
    x = LayerNorm(x + Dropout(MultiHead(x, memory, memory)))  (source padding masked)
    x = LayerNorm(x + Dropout(FFN(x)))

Incremental decoding (§6.1's beam search) runs one position at a time: each layer
keeps the keys and values of the steps so far in a cache and appends the new
step's, so a step attends over the tokens so far instead of re-running the whole
prefix; the encoder-decoder keys and values are computed once per sentence.
"""

import keras
from keras import ops

from t2t_lite.model.attention import MultiHeadAttention
from t2t_lite.model.feed_forward import FeedForward
from t2t_lite.model.sublayer import ResidualNorm, final_norm


class DecoderLayer(keras.layers.Layer):
    """One decoder layer. Call arguments:

        x: [batch, len, d_model] (len = 1 when decoding step by step).
        memory: encoder output [batch, src_len, d_model] (unused when `cache` holds its keys/values).
        self_bias: causal bias for full sequences; None for one cached step.
        memory_bias: source padding bias.
        cache: None, or {"self": {"k", "v"}, "memory": {"k", "v"}} for incremental decoding
            ({"self": {"k_transposed", "v"}, ...} preallocated, see `Decoder.initial_cache`).
        return_weights, training.
        cache_position: the step's position in a preallocated self-attention cache (see
            `MultiHeadAttention`; `self_bias` then masks the positions after it), or None.

    Returns `(x, (self_weights, memory_weights) or (None, None), new_cache or None)`.
    """

    def __init__(self, hparams, **kwargs):
        super().__init__(**kwargs)
        self.hparams = hparams

    def build(self, x_shape, memory_shape=None):
        dtype = self.dtype_policy
        self.self_attention = MultiHeadAttention.from_hparams(
            self.hparams, "self_attention", dtype, self_attention=True
        )
        self.self_attention_residual = ResidualNorm.from_hparams(self.hparams, "self_attention_residual", dtype)
        self.memory_attention = MultiHeadAttention.from_hparams(self.hparams, "encoder_decoder_attention", dtype)
        self.memory_attention_residual = ResidualNorm.from_hparams(
            self.hparams, "encoder_decoder_attention_residual", dtype
        )
        self.feed_forward = FeedForward(
            self.hparams.filter_size,
            self.hparams.hidden_size,
            self.hparams.relu_dropout,
            name="feed_forward",
            dtype=dtype,
        )
        self.feed_forward_residual = ResidualNorm.from_hparams(self.hparams, "feed_forward_residual", dtype)
        for layer in (
            self.self_attention,
            self.self_attention_residual,
            self.memory_attention_residual,
            self.feed_forward,
            self.feed_forward_residual,
        ):
            layer.build(x_shape)
        self.memory_attention.build(x_shape, memory_shape or x_shape)

    def call(
        self,
        x,
        memory=None,
        self_bias=None,
        memory_bias=None,
        cache=None,
        return_weights=False,
        training=False,
        cache_position=None,
    ):
        attended, self_weights, self_cache = self.self_attention(
            self.self_attention_residual.sublayer_input(x),
            bias=self_bias,
            cache=None if cache is None else cache["self"],
            return_weights=return_weights,
            training=training,
            cache_position=cache_position,
        )
        x = self.self_attention_residual(x, attended, training=training)
        attended, memory_weights, _ = self.memory_attention(
            self.memory_attention_residual.sublayer_input(x),
            memory,
            bias=memory_bias,
            memory_kv=None if cache is None else cache["memory"],
            return_weights=return_weights,
            training=training,
        )
        x = self.memory_attention_residual(x, attended, training=training)
        transformed = self.feed_forward(self.feed_forward_residual.sublayer_input(x), training=training)
        x = self.feed_forward_residual(x, transformed, training=training)
        new_cache = None if cache is None else {"self": self_cache, "memory": cache["memory"]}
        return x, (self_weights, memory_weights), new_cache


class Decoder(keras.layers.Layer):
    """N decoder layers (`hparams.decoder_layers`), plus a final LayerNorm when norm_position is "pre".

    `call(x, memory, self_bias, memory_bias, cache=None, return_weights=False, training=False,
    cache_position=None)` returns `(output, {"decoder_self": [...], "encoder_decoder": [...]} or {},
    new_cache or None)`; `initial_cache(memory, max_length=0)` builds the per-layer cache for
    incremental decoding.
    """

    def __init__(self, hparams, **kwargs):
        super().__init__(**kwargs)
        self.hparams = hparams

    def build(self, x_shape, memory_shape=None):
        self.stack = [
            DecoderLayer(self.hparams, name=f"layer_{index}", dtype=self.dtype_policy)
            for index in range(self.hparams.decoder_layers)
        ]
        for layer in self.stack:
            layer.build(x_shape, memory_shape)
        self.norm = final_norm(self.hparams, "final_layer_norm", self.dtype_policy)
        if self.norm is not None:
            self.norm.build(x_shape)

    def initial_cache(self, memory, max_length=0, beam_slots=0):
        """Empty self-attention keys/values and the encoder-decoder keys/values of `memory`.

        Every leaf is batch-major ([batch, heads, len, depth]), so beam search can
        reorder the cache with one gather along axis 0. The self-attention keys/values
        start with 0 positions and grow by one per step, or with `max_length` > 0 are
        preallocated zeros that each step writes into (`cache_position`; static shapes), the
        keys then transposed: "k_transposed" [batch, heads, depth, max_length] beside "v"
        [batch, heads, max_length, depth] (see `attention._write_in_place`).
        With `beam_slots` > 0 as well they have max_length·beam_slots positions: one
        slot per beam, never reordered, position t of slot b at t·beam_slots + b (see
        `Transformer.decode_step`).
        """
        batch = ops.shape(memory)[0]
        heads = self.hparams.num_heads
        length = max_length * max(beam_slots, 1)
        cache = {}
        for index, layer in enumerate(self.stack):
            cache[f"layer_{index}"] = {
                "self": self._self_attention_cache(batch, heads, length, memory.dtype, transposed=max_length > 0),
                "memory": layer.memory_attention.project_memory(memory),
            }
        return cache

    def _self_attention_cache(self, batch, heads, length, dtype, transposed):
        key_depth, value_depth = self.hparams.key_channels // heads, self.hparams.value_channels // heads
        keys = (batch, heads, key_depth, length) if transposed else (batch, heads, length, key_depth)
        return {
            "k_transposed" if transposed else "k": ops.zeros(keys, dtype=dtype),
            "v": ops.zeros((batch, heads, length, value_depth), dtype=dtype),
        }

    def call(
        self,
        x,
        memory=None,
        self_bias=None,
        memory_bias=None,
        cache=None,
        return_weights=False,
        training=False,
        cache_position=None,
    ):
        weights = {"decoder_self": [], "encoder_decoder": []}
        new_cache = None if cache is None else {}
        for index, layer in enumerate(self.stack):
            name = f"layer_{index}"
            x, (self_weights, memory_weights), layer_cache = layer(
                x,
                memory,
                self_bias=self_bias,
                memory_bias=memory_bias,
                cache=None if cache is None else cache[name],
                return_weights=return_weights,
                training=training,
                cache_position=cache_position,
            )
            weights["decoder_self"].append(self_weights)
            weights["encoder_decoder"].append(memory_weights)
            if cache is not None:
                new_cache[name] = layer_cache
        if self.norm is not None:
            x = self.norm(x)
        return x, (weights if return_weights else {}), new_cache
