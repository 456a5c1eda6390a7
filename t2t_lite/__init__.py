"""t2t_lite: the Transformer of "Attention Is All You Need", on TensorFlow 2 and Keras 3."""

__version__ = "0.1.0"
