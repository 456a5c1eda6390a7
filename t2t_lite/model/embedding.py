"""Embeddings and the pre-softmax projection sharing one matrix (§3.4).

"We share the same weight matrix between the two embedding layers and the
pre-softmax linear transformation ... In the embedding layers, we multiply those
weights by √d_model."

    embed(ids)   = E[ids] · √d_model        (E: [vocab, d_model])
    logits(h)    = h Eᵀ

As in tensor2tensor, the padding id 0 embeds to the zero vector, so the start
symbol of the shifted decoder input (id 0) and padded source positions carry
no token information, only their position.

For decoding only, `quantize("int8")` replaces E by int8 rows and one scale per row
(t2t_lite/decode/quantization.py): the lookup dequantizes the rows it takes, and the
projection quantizes each hidden row on the fly, so `h Eᵀ` is an int8 product.
`use_bfloat16_weights()` replaces E by its bfloat16 rounding instead: the lookup takes
those rows, and `h Eᵀ` is a bfloat16 product summed in float32.
"""

import keras
from keras import ops, quantizers

from t2t_lite.model.bfloat16 import bfloat16_matmul, replace_by_bfloat16


class SharedEmbedding(keras.layers.Layer):
    """A [vocab, d_model] matrix used to embed ids (scaled by √d_model) and to project to logits.

    Args:
        vocab_size: number of subword ids (0 = padding, 1 = EOS).
        hidden_size: d_model.

    Methods: `call(ids)` -> [..., d_model] embeddings; `logits(hidden)` -> [..., vocab] (hidden Eᵀ);
    `quantize("int8")` and `use_bfloat16_weights()` for decoding (see the module docstring).
    The matrix is initialised N(0, d_model^-0.5), tensor2tensor's choice, so embeddings
    scaled by √d_model start at unit variance like the positional encodings they are added to.
    """

    def __init__(self, vocab_size, hidden_size, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.int8 = False  # set by quantize("int8")
        self.bfloat16 = False  # set by use_bfloat16_weights()

    def build(self, input_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.vocab_size, self.hidden_size),
            initializer=keras.initializers.RandomNormal(stddev=self.hidden_size**-0.5),
        )

    def call(self, ids):
        if self.int8:
            rows = ops.moveaxis(ops.take(self.embeddings_int8, ids, axis=1), 0, -1)
            vectors = ops.cast(rows, self.compute_dtype) / ops.take(self.embeddings_scale, ids, axis=0)[..., None]
        elif self.bfloat16:
            vectors = ops.cast(ops.take(self.embeddings_bfloat16, ids, axis=0), self.compute_dtype)
        else:
            vectors = ops.take(ops.cast(self.embeddings, self.compute_dtype), ids, axis=0)
        not_padding = ops.cast(ops.expand_dims(ops.not_equal(ids, 0), -1), self.compute_dtype)
        return vectors * ops.cast(self.hidden_size**0.5, self.compute_dtype) * not_padding

    def logits(self, hidden):
        if self.int8:
            quantized, hidden_scale = quantizers.abs_max_quantize(hidden, axis=-1)
            products = ops.matmul(quantized, self.embeddings_int8)  # int8 x int8 -> int32
            return ops.cast(products, hidden.dtype) / (hidden_scale * ops.cast(self.embeddings_scale, hidden.dtype))
        if self.bfloat16:
            return ops.cast(bfloat16_matmul(hidden, self.embeddings_bfloat16, transpose_weights=True), hidden.dtype)
        return ops.matmul(hidden, ops.transpose(ops.cast(self.embeddings, hidden.dtype)))

    def quantize(self, mode=None, type_check=True, config=None):
        """Replaces E by int8 rows, each with its own scale 127 / max|row| (Keras' AbsMaxQuantizer convention).

        Stored transposed, [d_model, vocab], the right-hand operand of `logits`; `mode` other than "int8"
        raises NotImplementedError, which `keras.Model.quantize` expects of a layer that lacks the mode.
        """
        if mode != "int8":
            raise NotImplementedError(f"SharedEmbedding.quantize: mode {mode!r}; only 'int8' is implemented.")
        self._check_quantize_args(mode, self.compute_dtype)
        quantized, scale = quantizers.abs_max_quantize(self.embeddings, axis=-1, to_numpy=True)
        del self.embeddings
        self.embeddings_int8 = self.add_weight(
            name="embeddings_int8",
            shape=(self.hidden_size, self.vocab_size),
            initializer="zeros",
            dtype="int8",
            trainable=False,
        )
        self.embeddings_scale = self.add_weight(
            name="embeddings_scale", shape=(self.vocab_size,), initializer="ones", trainable=False
        )
        self.embeddings_int8.assign(ops.transpose(quantized))
        self.embeddings_scale.assign(ops.squeeze(scale, axis=-1))
        self._is_quantized = True
        self.int8 = True

    def use_bfloat16_weights(self):
        """Replaces E by its bfloat16 rounding, [vocab, d_model] as before (t2t_lite/decode/quantization.py)."""
        replace_by_bfloat16(self, "embeddings", "embeddings_bfloat16", "embeddings_bfloat16")
        self.bfloat16 = True

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size, "hidden_size": self.hidden_size}
