"""Our layers' weights in CTranslate2's layout: one attention, feed-forward or LayerNorm at a time.

Keras kernels are [in, out]; CTranslate2's linear weights are [out, in]. CTranslate2 gives every
head one width, so with d_k != d_v each head's rows (and W^O's columns, and the relative position
tables' columns) are padded with zeros to the larger of the two, and the queries are scaled by
1/sqrt(d_k) (eq. 1) rather than by the padded width: zeros add nothing to any product.
"""

import numpy as np


def numpy_weight(variable) -> np.ndarray:
    return np.asarray(variable.numpy(), np.float32)


def linear_weight(dense) -> np.ndarray:
    """A Keras Dense kernel [in, out] as CTranslate2's linear weight [out, in]."""
    return np.ascontiguousarray(numpy_weight(dense.kernel).T)


def head_widths(hparams) -> tuple:
    """(d_k, d_v, the common head width CTranslate2 uses: the larger of the two)."""
    key_depth = hparams.key_channels // hparams.num_heads
    value_depth = hparams.value_channels // hparams.num_heads
    return key_depth, value_depth, max(key_depth, value_depth)


def padded_heads(weight: np.ndarray, heads: int, width: int) -> np.ndarray:
    """A projection's weight [heads·d, in] with each head's rows followed by zero rows up to `width`."""
    rows = weight.reshape(heads, -1, weight.shape[-1])
    return np.pad(rows, ((0, 0), (0, width - rows.shape[1]), (0, 0))).reshape(heads * width, -1)


def padded_output(weight: np.ndarray, heads: int, width: int) -> np.ndarray:
    """W^O [d_model, heads·d_v] with zero columns after each head's d_v columns, up to `width`."""
    columns = weight.reshape(weight.shape[0], heads, -1)
    return np.pad(columns, ((0, 0), (0, 0), (0, width - columns.shape[2]))).reshape(weight.shape[0], -1)


def set_layer_norm(spec, norm) -> None:
    spec.gamma, spec.beta = numpy_weight(norm.gamma), numpy_weight(norm.beta)


def set_attention(spec, attention, hparams, self_attention: bool) -> None:
    heads, (key_depth, value_depth, width) = hparams.num_heads, head_widths(hparams)
    query = padded_heads(linear_weight(attention.query_projection), heads, width)
    key = padded_heads(linear_weight(attention.key_projection), heads, width)
    value = padded_heads(linear_weight(attention.value_projection), heads, width)
    output = padded_output(linear_weight(attention.output_projection), heads, width)
    if self_attention:
        spec.linear[0].weight = np.concatenate([query, key, value])
        spec.linear[1].weight = output
    else:
        spec.linear[0].weight = query
        spec.linear[1].weight = np.concatenate([key, value])
        spec.linear[2].weight = output
    if key_depth != value_depth:  # eq. 1 scales by d_k, not by the padded head width
        spec.queries_scale = np.float32(1.0 / np.sqrt(key_depth))
    if attention.relative_positions is not None:  # zero columns add nothing to q · a^K, nor reach W^O
        tables = attention.relative_positions
        spec.relative_position_keys = padded_columns(numpy_weight(tables.keys), width)
        spec.relative_position_values = padded_columns(numpy_weight(tables.values), width)


def padded_columns(table: np.ndarray, width: int) -> np.ndarray:
    """A relative position table [2k + 1, d] with zero columns up to the common head width."""
    return np.pad(table, ((0, 0), (0, width - table.shape[1])))


def set_feed_forward(spec, feed_forward) -> None:
    spec.linear_0.weight = linear_weight(feed_forward.inner)
    spec.linear_0.bias = numpy_weight(feed_forward.inner.bias)
    spec.linear_1.weight = linear_weight(feed_forward.outer)
    spec.linear_1.bias = numpy_weight(feed_forward.outer.bias)
