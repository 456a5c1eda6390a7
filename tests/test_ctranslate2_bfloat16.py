"""The numpy bfloat16 rounding of CTranslate2 exports (serve/ctranslate2_bfloat16.py) against TensorFlow's cast."""

import numpy as np
import tensorflow as tf

from t2t_lite.serve import ctranslate2_bfloat16


def test_bfloat16_rounding_is_tensorflows():
    values = np.random.default_rng(0).normal(0, 3, 10_000).astype(np.float32)
    values[:4] = [0.0, -0.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8]  # ties: to even
    expected = tf.bitcast(tf.cast(values, tf.bfloat16), tf.uint16).numpy()
    np.testing.assert_array_equal(ctranslate2_bfloat16.rounded_to_bfloat16(values), expected)
