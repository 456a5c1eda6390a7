"""Products of bfloat16-rounded operands summed in float32: the model's side of bfloat16 decoding.

    y[j] = Σ_i bf16(x[i]) · bf16(W[i, j])        (each product exact in float32)

Not the paper (it trained and decoded in float32). `t2t_lite.decode.quantization` replaces a
trained model's product weights by their bfloat16 rounding for decoding; the layers that own
those weights (`SharedEmbedding`, and the Dense layers it converts) multiply with
`bfloat16_matmul`. Under XLA in TensorFlow the product is one bfloat16 `dot` with float32
output, which runs on the CPU's bfloat16 kernels; elsewhere the same rounded values are
multiplied in float32, the same results up to summation order.
"""

import keras
from keras import ops

from t2t_lite.model.dropout import compiled_by_xla


def bfloat16_matmul(x, weights, transpose_weights=False):
    """x [..., k] · weights ([k, n], or [n, k] with transpose_weights), both rounded to bfloat16, summed in float32.

    Returns float32 [..., n]. Under XLA in TensorFlow it is one bfloat16 `dot` with float32
    output; anywhere else the rounded values are multiplied in float32 (the same products,
    which are exact in float32, summed in another order).
    """
    rounded = ops.cast(x, "bfloat16")
    if keras.backend.backend() == "tensorflow" and compiled_by_xla():
        import tensorflow as tf

        # k from the weights: a trace with an unknown batch may leave x's last dimension unknown too.
        rows = tf.reshape(rounded, [-1, weights.shape[-1 if transpose_weights else 0]])
        products = tf.matmul(rows, ops.cast(weights, "bfloat16"), transpose_b=transpose_weights, output_type=tf.float32)
        leading = [size if size is not None else tf.shape(x)[axis] for axis, size in enumerate(x.shape[:-1])]
        return tf.reshape(products, leading + [products.shape[-1]])
    weights = ops.cast(ops.cast(weights, "bfloat16"), "float32")
    return ops.matmul(ops.cast(rounded, "float32"), ops.transpose(weights) if transpose_weights else weights)


def replace_by_bfloat16(layer, attribute, new_attribute, name):
    """Replaces the float32 variable `layer.<attribute>` by its bfloat16 rounding: `layer.<new_attribute>`, `name`."""
    rounded = ops.convert_to_numpy(ops.cast(getattr(layer, attribute), "bfloat16"))
    layer._tracker.unlock()
    try:
        delattr(layer, attribute)
        # autocast=False: a float32 layer must not cast the bfloat16 variable back to float32 when it reads it.
        variable = layer.add_weight(
            name=name, shape=rounded.shape, initializer="zeros", dtype="bfloat16", trainable=False, autocast=False
        )
        setattr(layer, new_attribute, variable)
    finally:
        layer._tracker.lock()
    variable.assign(rounded)
