"""Relative position representations in self-attention (Shaw, Uszkoreit & Vaswani, NAACL 2018).

The edge from position i to position j carries two learned vectors, one added to the key and
one to the value, chosen by the clipped distance j - i:

    z_i  = Σ_j α_ij (x_j W^V + a^V_ij)                                          (eq. 3)
    e_ij = x_i W^Q (x_j W^K + a^K_ij)ᵀ / √d_z                                   (eq. 4)
    a^K_ij = w^K_clip(j - i, k),  a^V_ij = w^V_clip(j - i, k),
    clip(x, k) = max(-k, min(k, x))                                             (eq. 5)

with α = softmax(e) over j. The tables w^K, w^V hold 2k + 1 rows of one head's width
(k = `hparams.max_relative_position`), one pair per self-attention layer, shared by its heads;
row r is distance r - k (tensor2tensor's `_generate_relative_positions_matrix`, vocabulary 2k + 1,
which CTranslate2's `relative_position_keys` / `relative_position_values` load as they are).
Encoder-decoder attention keeps eq. 1: its queries and keys do not share one sequence.

Incremental decoding attends from the step's position t to keys at positions 0..t, so the
step's distances are j - t ≤ 0, as teacher forcing's row t of the causal matrix.
"""

import keras
from keras import ops


def relation_indices(query_positions, key_positions, max_relative_position):
    """Rows of the tables for each (query, key) pair: clip(j - i, k) + k (eq. 5), int32 [q_len, k_len]."""
    distances = ops.expand_dims(key_positions, 0) - ops.expand_dims(query_positions, 1)
    return ops.clip(distances, -max_relative_position, max_relative_position) + max_relative_position


def relative_logits(query, relations_keys):
    """The a^K term of eq. 4: q_i · a^K_ij for query [batch, heads, q_len, d] and a^K [q_len, k_len, d]."""
    return ops.einsum("bhqd,qkd->bhqk", query, relations_keys)


def relative_outputs(weights, relations_values):
    """The a^V term of eq. 3: Σ_j α_ij a^V_ij for α [batch, heads, q_len, k_len] and a^V [q_len, k_len, d]."""
    return ops.einsum("bhqk,qkd->bhqd", weights, relations_values)


class RelativePositionTables(keras.layers.Layer):
    """w^K and w^V of eq. 5, [2k + 1, d_k] and [2k + 1, d_v], for one self-attention layer.

    Args:
        max_relative_position: k.
        key_depth, value_depth: d_k and d_v of one head (the heads share the tables).

    `relations(query_positions, key_positions)` returns (a^K, a^V), each [q_len, k_len, depth],
    in the compute dtype. Initialised as tensor2tensor's were (uniform unit scaling).
    """

    def __init__(self, max_relative_position, key_depth, value_depth, **kwargs):
        super().__init__(**kwargs)
        self.max_relative_position = max_relative_position
        self.key_depth = key_depth
        self.value_depth = value_depth

    def build(self, input_shape=None):
        rows = 2 * self.max_relative_position + 1
        initializer = keras.initializers.VarianceScaling(1.0, mode="fan_in", distribution="uniform")
        self.keys = self.add_weight(
            name="relative_positions_keys", shape=(rows, self.key_depth), initializer=initializer
        )
        self.values = self.add_weight(
            name="relative_positions_values", shape=(rows, self.value_depth), initializer=initializer
        )

    def relations(self, query_positions, key_positions):
        indices = relation_indices(query_positions, key_positions, self.max_relative_position)
        return tuple(
            ops.take(ops.cast(table, self.compute_dtype), indices, axis=0) for table in (self.keys, self.values)
        )

    def get_config(self):
        return {
            **super().get_config(),
            "max_relative_position": self.max_relative_position,
            "key_depth": self.key_depth,
            "value_depth": self.value_depth,
        }
