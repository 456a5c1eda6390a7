"""The attention and beam page: its data keeps the weights, it needs no network, and a browser draws them."""

import base64
import json
import re
import zlib

import numpy as np
import pytest
from headless_chromium import canvas_geometry, dump_dom, heat_map_cells, needs_chromium, screenshot

from t2t_lite.insights.attention_page import render, sentence_data, write_page
from t2t_lite.insights.attention_plot import AXES

SOURCE = ["▁Die", "▁Katze", "</script><b>", "<eos>"]
TARGET = ["▁The", "▁cat", "▁sat", "<eos>"]


def softmax_weights(heads, queries, keys, seed, sharpness=3.0):
    logits = np.random.default_rng(seed).normal(size=(heads, queries, keys)) * sharpness
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    return weights / weights.sum(-1, keepdims=True)


def attention(layers=2, heads=3, seed=0):
    return {
        "encoder_self": [softmax_weights(heads, len(SOURCE), len(SOURCE), seed + layer) for layer in range(layers)],
        "decoder_self": [
            np.tril(softmax_weights(heads, len(TARGET), len(TARGET), seed + 10 + layer)) for layer in range(layers)
        ],
        "encoder_decoder": [
            softmax_weights(heads, len(TARGET), len(SOURCE), seed + 20 + layer) for layer in range(layers)
        ],
    }


def page_data(page: str) -> dict:
    match = re.search(r'<script type="application/json" id="t2t-data">(.*?)</script>', page, re.S)
    return json.loads(match.group(1))


def page_attention(sentence: dict) -> dict:
    """A page sentence's weights as the module docstring lays them out, in [0, 1]: {kind: [per layer]}."""
    levels = np.frombuffer(zlib.decompress(base64.b64decode(sentence["attention"])), np.uint8) / 255
    lengths = {"source": len(sentence["source_tokens"]), "target": len(sentence["target_tokens"])}
    attention, offset = {}, 0
    for kind, (queries, keys) in AXES.items():
        shape = (sentence["heads"], lengths[queries], lengths[keys])
        attention[kind] = []
        for _ in range(sentence["layers"]):
            attention[kind].append(levels[offset : offset + np.prod(shape)].reshape(shape))
            offset += np.prod(shape)
    assert offset == levels.size
    return attention


def test_the_page_keeps_every_weight_to_within_half_a_level_of_255():
    weights = attention()
    sentence = sentence_data("Die Katze", SOURCE, TARGET, [("The cat sat", -0.5), ("The cat", -0.9)], weights)
    (read,) = page_data(render([sentence], title="t")).get("sentences")
    assert read["source_tokens"] == SOURCE and read["target_tokens"] == TARGET  # "</script>" did not end the data
    assert read["beams"] == [["The cat sat", -0.5], ["The cat", -0.9]] and (read["layers"], read["heads"]) == (2, 3)
    stored = page_attention(read)
    for kind, layers in weights.items():
        for layer, expected in enumerate(layers):
            np.testing.assert_allclose(stored[kind][layer], expected, atol=0.5 / 255 + 1e-9)


def test_the_page_needs_no_network_and_escapes_what_it_shows():
    sentence = sentence_data("<i>x</i>", SOURCE, TARGET, [("y", -1.0)], attention())
    page = render(
        [sentence], title="<b>title</b>", details="a & b", form={"action": "/", "text": "</textarea>", "max_chars": 100}
    )
    assert not re.search(r"(src|href)\s*=|https?://|@import|url\(", page)  # nothing fetched: works offline
    assert "<b>title</b>" not in page and "&lt;b&gt;title&lt;/b&gt;" in page
    assert "</textarea></textarea>" not in page and "&lt;/textarea&gt;" in page


def test_weights_that_do_not_fit_the_tokens_are_refused():
    weights = attention()
    weights["encoder_decoder"][1] = weights["encoder_decoder"][1][:, :, :2]
    with pytest.raises(ValueError, match=r"encoder_decoder layer 1: .* \[heads, 4 query tokens, 4 key tokens\]"):
        sentence_data("x", SOURCE, TARGET, [("y", -1.0)], weights)


@needs_chromium
def test_a_browser_draws_the_chosen_attention_in_viridis(tmp_path):
    """Each cell's colour on screen is viridis of the weights given to the page: first the mean over the heads
    of sentence 1's first encoder layer, then the view the page's address names."""
    from matplotlib import colormaps

    weights = [attention(seed=seed) for seed in (0, 100)]
    sentences = [
        sentence_data(f"sentence {n}", SOURCE, TARGET, [("The cat sat", -0.51), ("A cat", -1.2)], w)
        for n, w in enumerate(weights)
    ]
    path = write_page(str(tmp_path / "attention.html"), sentences, title="two sentences")
    dom = dump_dom(f"file://{path}", tmp_path / "profile")
    assert dom.count("<option value=") == 2 + 3 + 2 + 4  # sentences, kinds, layers, mean + 3 heads
    assert '<span id="translation">The cat sat</span>' in dom and "<td>-1.2000</td>" in dom
    geometry = canvas_geometry(dom)
    assert (geometry["rows"], geometry["columns"]) == (len(SOURCE), len(SOURCE))  # encoder self-attention
    cells = heat_map_cells(screenshot(f"file://{path}", tmp_path / "page.png", tmp_path / "profile"), geometry)
    expected = colormaps["viridis"](weights[0]["encoder_self"][0].mean(0))[..., :3] * 255
    np.testing.assert_allclose(cells, expected, atol=12)  # the page interpolates viridis between 9 stops
    assert cells.reshape(-1, 3).std(0).max() > 10  # not one flat colour

    chosen = f"file://{path}#sentence=2&kind=encoder_decoder&layer=2&head=3"  # a view named in the address
    dom = dump_dom(chosen, tmp_path / "profile")
    assert "encoder-decoder attention, layer 2, head 3: rows are queries" in dom
    assert '<span id="translation">The cat sat</span>' in dom and '<span id="source">sentence 1</span>' in dom
    geometry = canvas_geometry(dom)
    assert (geometry["rows"], geometry["columns"]) == (len(TARGET), len(SOURCE))
    cells = heat_map_cells(screenshot(chosen, tmp_path / "chosen.png", tmp_path / "profile"), geometry)
    np.testing.assert_allclose(cells, colormaps["viridis"](weights[1]["encoder_decoder"][1][2])[..., :3] * 255, atol=12)
