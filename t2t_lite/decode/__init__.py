"""Decoding (§6.1): cached beam search with the length penalty, exact top-k, lower-precision products.

`search_settings` is the one settings object of the search (beam, α, sampling) that travels whole to
`beam_search.decode`; `decode_settings` composes it with a decoding run's own settings (--decode_hparams);
`translation` turns lines of text into translations with a trained model, as `t2t-decoder` does.
"""
