"""Decoding (§6.1): cached beam search with the length penalty, exact top-k, lower-precision products.

`inference` turns lines of text into translations with a trained model, as `t2t-decoder` does.
"""
