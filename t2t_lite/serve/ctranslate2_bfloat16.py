"""bfloat16 weights in a CTranslate2 model, without PyTorch (`t2t-exporter --ct2_quantization=bfloat16`).

CTranslate2's converter rounds float32 to bfloat16 only through PyTorch. bfloat16 is the upper half
of a float32's bits, so the rounding is done here in numpy, to nearest with ties to even as
TensorFlow's `tf.cast(x, tf.bfloat16)`:

    bits16 = (bits32 + 0x7FFF + ((bits32 >> 16) & 1)) >> 16

and each rounded array goes into the spec as a `Variable` that CTranslate2 writes as bfloat16.
"""

import functools

import numpy as np


def rounded_to_bfloat16(array: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16 (ties to even), as the uint16 bit patterns."""
    bits = np.ascontiguousarray(array, np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


@functools.cache
def bfloat16_variable_class():
    """A `ctranslate2.specs.model_spec.Variable` holding bfloat16 bits.

    CTranslate2's own spec converts to bfloat16 only through PyTorch; this one rounds in numpy,
    so `--ct2_quantization=bfloat16` needs no PyTorch.
    """
    from ctranslate2.specs import model_spec

    class Bfloat16Variable(model_spec.Variable):
        def __init__(self, bits):
            self.bits = bits

        shape = property(lambda self: self.bits.shape)
        dtype = property(lambda self: "bfloat16")

        def numpy(self):
            return (self.bits.astype(np.uint32) << 16).view(np.float32)

        def num_bytes(self):
            return self.bits.nbytes

        def to_bytes(self):
            return self.bits.tobytes()

        def _to(self, dtype):
            return model_spec.NumpyVariable(self.numpy()).to(dtype)

        def _equal(self, other):
            return self.bits.shape == other.bits.shape and np.array_equal(self.bits, other.bits)

    return Bfloat16Variable


def with_bfloat16_weights(spec) -> None:
    """Replaces every float32 array of a validated spec by its bfloat16 rounding (scalars stay float32)."""
    from ctranslate2.specs import model_spec

    def convert(layer, name, value):
        if isinstance(value, model_spec.NumpyVariable) and not value.is_scalar() and value.dtype == "float32":
            setattr(layer, name.split("/")[-1], bfloat16_variable_class()(rounded_to_bfloat16(value.array)))

    model_spec.visit_spec(spec, convert)
