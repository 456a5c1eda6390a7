"""The attention of decoded sentences, read back through the model: the paper's Figures 3–5.

A translation's best hypothesis is fed back to the model teacher-forced, and the model returns
the weights of every attention layer and head (encoder self-attention, decoder self-attention,
encoder-decoder attention). `write_attention_page` puts them, with the beams, on one HTML page
(`attention_page`); `attention_pictures` draws one PNG per kind, layer and head (`attention_plot`).
"""

import os

import numpy as np

from t2t_lite.data.vocabulary import EOS_ID
from t2t_lite.decode import input_notes
from t2t_lite.decode.translation import Translation
from t2t_lite.insights import attention_page


def attention_weights(model, translation: Translation) -> dict:
    """The attention of the best hypothesis, read back through the model (teacher-forced).

    Returns {"encoder_self", "decoder_self", "encoder_decoder"} -> list per layer of
    [heads, queries, keys] numpy arrays: the weights behind the paper's Figures 3–5.
    """
    target_ids = translation.ids or [EOS_ID]
    _, attention = model(
        {"inputs": np.array([translation.source_ids], np.int32), "targets": np.array([target_ids], np.int32)},
        return_attention=True,
    )
    return {kind: [np.asarray(layer, np.float32)[0] for layer in layers] for kind, layers in attention.items()}


def attention_sentences(model, vocabulary, translations) -> list:
    """The sentences of the attention and beam page (t2t_lite.insights.attention_page) for `translations`."""
    return [
        attention_page.sentence_data(
            translation.source,
            *_tokens(vocabulary, translation),
            zip(translation.hypotheses, translation.scores),
            attention_weights(model, translation),
            input_notes.input_note(translation),
        )
        for translation in translations
    ]


def write_attention_page(model, vocabulary, translations, path: str, *, title: str, details: str = "") -> str:
    """Writes the attention and beam page of `translations` to `path`; returns the path."""
    return attention_page.write_page(
        path, attention_sentences(model, vocabulary, translations), title=title, details=details
    )


def attention_pictures(model, vocabulary, translations, directory: str) -> list:
    """One PNG heat-map per kind, layer and head of each decoded sentence (`--attention_pngs`)."""
    from t2t_lite.insights import attention_plot  # matplotlib is optional; imported only when asked for

    written = []
    for index, translation in enumerate(translations):
        written += attention_plot.plot_attention(
            *_tokens(vocabulary, translation),
            attention_weights(model, translation),
            os.path.join(directory, f"sentence_{index:04d}"),
        )
    return written


def _tokens(vocabulary, translation: Translation) -> tuple:
    """The labels of the encoder and decoder positions (one per id) for the attention pictures."""
    return _pieces(vocabulary, translation.source_ids), _pieces(vocabulary, translation.ids or [EOS_ID])


def _pieces(vocabulary, ids) -> list:
    """One readable label per id for the axes of the attention pictures."""
    return ["<eos>" if i == EOS_ID else vocabulary.decode([i]) or f"<{i}>" for i in ids]
