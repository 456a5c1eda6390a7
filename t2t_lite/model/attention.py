"""Scaled dot-product attention (§3.2.1, eq. 1) and multi-head attention (§3.2.2).

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V                              (eq. 1)
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
        head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Masks enter as an additive `bias` broadcastable to [batch, heads, q_len, k_len]:
0 where attention is allowed and a large negative number where it is not
(padding keys, future positions), so the softmax gives those keys zero weight.
The projections W^Q, W^K, W^V, W^O have no biases, as in the paper and tensor2tensor.
Self-attention may add relative position representations to the keys and values (Shaw et al.
2018, eq. 3-5, `relative_position.py`).
"""

import keras
from keras import ops

from t2t_lite.model.dropout import Dropout
from t2t_lite.model.relative_position import RelativePositionTables, relative_logits, relative_outputs

# Added to the logits of masked keys. Large enough that exp() underflows to exactly 0
# in float32 (the softmax always runs in float32, see below), small enough not to overflow.
MASKED = -1e9


def padding_bias(mask):
    """[batch, k_len] bool (True = real token) -> additive bias [batch, 1, 1, k_len]."""
    bias = ops.where(mask, 0.0, MASKED)
    return ops.expand_dims(ops.expand_dims(bias, 1), 1)


def causal_bias(length):
    """[1, 1, length, length] bias letting position i attend to positions ≤ i only (§3.2.3)."""
    allowed = ops.tril(ops.ones((length, length), dtype="bool"))
    return ops.expand_dims(ops.expand_dims(ops.where(allowed, 0.0, MASKED), 0), 0)


def scaled_dot_product_attention(
    query, key, value, bias=None, dropout=None, training=False, keys_transposed=False, relations=None
):
    """Eq. 1 on [batch, heads, len, depth] tensors; returns (output, weights), the softmax before dropout.

    `keys_transposed`: `key` is Kᵀ, [batch, heads, depth, len] (a preallocated decoding cache
    keeps its keys so; see `_write_in_place`).
    `relations`: None, or (a^K, a^V) [q_len, k_len, depth] of Shaw et al. (eq. 3 and 4, scaled by
    √d as the keys are, `relative_position.py`).
    The logits and softmax are computed in float32 even under mixed precision: the
    large negative mask and the exponentials do not fit bfloat16/float16 safely.
    """
    depth = ops.shape(query)[-1]
    query = query * ops.cast(ops.rsqrt(ops.cast(depth, "float32")), query.dtype)
    logits = ops.matmul(query, key if keys_transposed else ops.transpose(key, (0, 1, 3, 2)))
    if relations is not None:
        logits = logits + relative_logits(query, relations[0])
    logits = ops.cast(logits, "float32")
    if bias is not None:
        # Keras casts layer arguments to the compute dtype; in float16 MASKED becomes -inf,
        # which would turn a softmax row into NaN, so clamp back to MASKED in float32.
        logits = logits + ops.maximum(ops.cast(bias, "float32"), MASKED)
    probabilities = ops.softmax(logits, axis=-1)
    # Dropout acts on what the values see; the weights returned are the probabilities themselves, which an
    # alignment reads and guided alignment trains (a dropped weight would be a log of zero there).
    weights = probabilities if dropout is None else dropout(probabilities, training=training)
    weights = ops.cast(weights, value.dtype)
    output = ops.matmul(weights, value)
    if relations is not None:
        output = output + relative_outputs(weights, relations[1])
    return output, ops.cast(probabilities, value.dtype)


def _shared_memory_attention(query, key, value, bias, dropout, training, keys_transposed=False, relations=None):
    """Eq. 1 where each key/value row serves `group` consecutive query rows ([batch·group, ...] queries).

    The group's queries become one longer query block of their row, so the keys and values
    are read once per group, and the attention products get `group` query rows instead of 1.
    """
    batch, heads, length, depth = ops.shape(query)
    rows = ops.shape(key)[0]
    grouped = ops.reshape(
        ops.transpose(ops.reshape(query, (rows, -1, heads, length, depth)), (0, 2, 1, 3, 4)), (rows, heads, -1, depth)
    )
    output, weights = scaled_dot_product_attention(
        grouped, key, value, bias, dropout, training, keys_transposed, relations
    )

    def ungroup(x):  # [rows, heads, group·length, n] -> [rows·group, heads, length, n]
        x = ops.transpose(ops.reshape(x, (rows, heads, -1, length, ops.shape(x)[-1])), (0, 2, 1, 3, 4))
        return ops.reshape(x, (batch, heads, length, ops.shape(x)[-1]))

    return ungroup(output), ungroup(weights)


def _write_in_place(cache, step, position, transposed=False):
    """Writes a step's keys or values into a preallocated [batch, heads, len·group, depth] cache.

    `step` is [batch·group, heads, 1, depth]: with beam slots (`Transformer.decode_step`) the
    group is a sentence's beams, which share one cache row and write their entries for
    `position` side by side (slot b at position·group + b), so the update is one contiguous
    block and XLA writes it in place; without, group = 1 and it lands at `position`.
    `transposed`: the cache is [batch, heads, depth, len·group] (the keys, so that QKᵀ is a
    plain product of [.., q, depth] by [.., depth, len] with no transpose of the whole cache
    per step: on a CPU under XLA the transposed operand took twice as long, docs/benchmarks.md).
    """
    sentences, heads = ops.shape(cache)[:2]
    depth = ops.shape(step)[3]
    group = ops.shape(step)[0] // sentences
    block = ops.reshape(step, (sentences, group, heads, depth))
    if transposed:
        return ops.slice_update(cache, (0, 0, 0, position * group), ops.transpose(block, (0, 2, 3, 1)))
    return ops.slice_update(cache, (0, 0, position * group, 0), ops.transpose(block, (0, 2, 1, 3)))


class MultiHeadAttention(keras.layers.Layer):
    """h parallel heads of scaled dot-product attention with an output projection (§3.2.2).

    Args:
        num_heads: h.
        key_channels: h·d_k, the total width of the query and key projections.
        value_channels: h·d_v, the total width of the value projection.
        output_size: d_model, the width of the output projection W^O.
        attention_dropout: dropout rate on the attention weights (0 in the paper's base model).
        max_relative_position: k > 0 gives self-attention relative position representations
            (Shaw et al., `relative_position.py`) for distances clipped to ±k; 0 = eq. 1 alone.

    Call arguments:
        query_input: [batch, q_len, d_model].
        memory_input: [batch, k_len, d_model], or None for self-attention.
        bias: additive mask broadcastable to [batch, heads, q_len, k_len] (see `padding_bias`,
            `causal_bias`).
        cache: self-attention during incremental decoding: {"k", "v"} of shape
            [batch, heads, steps_so_far, depth]; the new step's keys and values are
            appended and the grown dict is returned.
        cache_position: with `cache`, a preallocated cache instead ({"k_transposed":
            [batch, heads, depth, max_length], "v": [batch, heads, max_length, depth]}, static
            shapes for XLA): the new step's keys and values are written at this position,
            and `bias` must mask the positions after it.
        memory_kv: encoder-decoder attention during decoding: {"k", "v"} computed once
            per sentence by `project_memory`, used instead of `memory_input`. It may have
            fewer rows than the queries: each of its rows then serves (query rows ÷ memory
            rows) consecutive query rows (the beams of one sentence), so beam search never
            copies the encoder's keys and values per beam; `bias` has the memory's rows.
        return_weights: also return the attention weights [batch, heads, q_len, k_len].

    Returns `(output, weights_or_None, cache_or_None)`.
    """

    def __init__(
        self,
        num_heads,
        key_channels,
        value_channels,
        output_size,
        attention_dropout=0.0,
        max_relative_position=0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.key_channels = key_channels
        self.value_channels = value_channels
        self.output_size = output_size
        self.attention_dropout = attention_dropout
        self.max_relative_position = max_relative_position

    @classmethod
    def from_hparams(cls, hparams, name, dtype=None, self_attention=False):
        """`self_attention`: the encoder's or decoder's self-attention, which hparams may make relative."""
        return cls(
            hparams.num_heads,
            hparams.key_channels,
            hparams.value_channels,
            hparams.hidden_size,
            hparams.attention_dropout,
            hparams.relative_positions if self_attention else 0,
            name=name,
            dtype=dtype,
        )

    def build(self, query_input_shape, memory_input_shape=None):
        def projection(units, name):
            return keras.layers.Dense(units, use_bias=False, name=name, dtype=self.dtype_policy)

        self.query_projection = projection(self.key_channels, "query")
        self.key_projection = projection(self.key_channels, "key")
        self.value_projection = projection(self.value_channels, "value")
        self.output_projection = projection(self.output_size, "output")
        memory_input_shape = memory_input_shape or query_input_shape
        self.query_projection.build(query_input_shape)
        self.key_projection.build(memory_input_shape)
        self.value_projection.build(memory_input_shape)
        self.output_projection.build(tuple(query_input_shape[:-1]) + (self.value_channels,))
        self.dropout = Dropout(self.attention_dropout, dtype=self.dtype_policy)
        self.relative_positions = None
        if self.max_relative_position:
            self.relative_positions = RelativePositionTables(
                self.max_relative_position,
                self.key_channels // self.num_heads,
                self.value_channels // self.num_heads,
                name="relative_positions",
                dtype=self.dtype_policy,
            )
            self.relative_positions.build()

    def split_heads(self, x):
        """[batch, len, h·d] -> [batch, h, len, d]."""
        batch, length = ops.shape(x)[:2]
        x = ops.reshape(x, (batch, length, self.num_heads, -1))
        return ops.transpose(x, (0, 2, 1, 3))

    def combine_heads(self, x):
        """[batch, h, len, d] -> [batch, len, h·d] (the Concat of §3.2.2)."""
        x = ops.transpose(x, (0, 2, 1, 3))
        batch, length = ops.shape(x)[:2]
        return ops.reshape(x, (batch, length, -1))

    def project_memory(self, memory):
        """Keys and values of the encoder output, computed once per sentence for decoding."""
        return {
            "k": self.split_heads(self.key_projection(memory)),
            "v": self.split_heads(self.value_projection(memory)),
        }

    def call(
        self,
        query_input,
        memory_input=None,
        bias=None,
        cache=None,
        memory_kv=None,
        return_weights=False,
        training=False,
        cache_position=None,
    ):
        # Decoding's queries come in groups that share one row of keys and values (a sentence's beams);
        # training and scoring attend row by row.
        grouped_queries = cache_position is not None or (memory_kv is not None and cache is None)
        query = self.split_heads(self.query_projection(query_input))
        if cache is not None:  # self-attention, one more step: attend over all steps so far
            step = self.project_memory(query_input)
            if cache_position is None:
                cache = {name: ops.concatenate([cache[name], step[name]], axis=2) for name in ("k", "v")}
                key = cache["k"]
            else:
                cache = {
                    "k_transposed": _write_in_place(cache["k_transposed"], step["k"], cache_position, True),
                    "v": _write_in_place(cache["v"], step["v"], cache_position),
                }
                key = cache["k_transposed"]
            value = cache["v"]
        else:
            if memory_kv is None:
                memory_kv = self.project_memory(query_input if memory_input is None else memory_input)
            key, value = memory_kv["k"], memory_kv["v"]
        dropout = self.dropout if self.attention_dropout else None
        relations = None
        if self.relative_positions is not None:
            relations = self._relations(query, value, cache_position)
        if grouped_queries:
            heads, weights = _shared_memory_attention(
                query, key, value, bias, dropout, training, cache_position is not None, relations
            )
        else:
            heads, weights = scaled_dot_product_attention(
                query, key, value, bias, dropout, training, relations=relations
            )
        output = self.output_projection(self.combine_heads(heads))
        return output, (weights if return_weights else None), cache

    def _relations(self, query, value, cache_position):
        """(a^K, a^V) [query rows of one key row, k_len, depth] for self-attention's queries and keys.

        Without a preallocated cache, the queries are the last q_len of the k_len positions (all of
        them in training; the newest one when a growing cache was appended to). A preallocated cache
        holds position t of its `group` beam slots at t·group + slot (`_write_in_place`), and the
        grouped queries of one key row are all at `cache_position`.
        """
        query_length, key_length = ops.shape(query)[2], ops.shape(value)[2]
        if cache_position is None:
            key_positions = ops.arange(key_length)
            query_positions = key_positions[key_length - query_length :]
            return self.relative_positions.relations(query_positions, key_positions)
        group = ops.shape(query)[0] // ops.shape(value)[0]
        key_positions = ops.arange(key_length) // group
        query_positions = ops.tile(ops.arange(query_length) + cache_position, (group,))
        return self.relative_positions.relations(query_positions, key_positions)

    def get_config(self):
        return {
            **super().get_config(),
            "max_relative_position": self.max_relative_position,
            "num_heads": self.num_heads,
            "key_channels": self.key_channels,
            "value_channels": self.value_channels,
            "output_size": self.output_size,
            "attention_dropout": self.attention_dropout,
        }
