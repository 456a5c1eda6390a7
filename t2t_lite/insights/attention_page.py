"""The attention and beam page: the paper's Figures 3–5 for every decoded sentence, in one HTML file.

`t2t-decoder --attention_dir=DIR` writes DIR/attention.html, and `t2t-insights` serves the
same page for a typed sentence (with a form above it). On the page one chooses the sentence,
the kind of attention (encoder self, decoder self, encoder-decoder: §3.2.3), the layer and
the head or the mean over the heads; the heat-map's rows are the queries and its columns the
keys, each labelled with its subword token, and beside it are the n-best hypotheses of the
beam search with their scores (log P / lp, §6.1).

The page is self-contained, so it opens from disk with no network and no server: its script
(attention_page.js), style (attention_page.css) and data (JSON) are inline. To stay small
and quick for a base model (6 layers × 8 heads × 3 kinds) and 100 sentences, a sentence's
weights are stored as uint8, round(w · 255) (at most 1/510 from the model's value), in the
order encoder self, decoder self, encoder-decoder, layer by layer, each [heads, queries,
keys], zlib-compressed and base64-encoded; the page inflates a sentence (the browser's
DecompressionStream) when it is first shown and draws one heat-map at a time on a canvas.

    sentence = sentence_data(source, source_tokens, target_tokens, [(text, score), ...], attention)
    write_page("attention.html", [sentence], title="newstest2014, beam 4")
"""

import base64
import html
import json
import os
import zlib

import numpy as np

from t2t_lite.insights.attention_plot import AXES, check_shape

HERE = os.path.dirname(os.path.abspath(__file__))

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
<h1>{title}</h1>
<p class="details">{details}</p>
{form}{message}<div id="viewer"{hidden}>
<div class="controls">
<label>Sentence <select id="sentence"></select></label>
<label>Attention <select id="kind"></select></label>
<label>Layer <select id="layer"></select></label>
<label>Head <select id="head"></select></label>
<label><input type="checkbox" id="stretch"> colours up to this map's maximum</label>
</div>
<div class="layout">
<div class="text">
<p>Source: <span id="source"></span></p>
<p>Translation: <span id="translation"></span></p>
<p class="message" id="note"></p>
<table id="beams"><thead><tr><th>Beam</th><th>Hypothesis</th><th>Score</th></tr></thead><tbody></tbody></table>
<p class="hint">The heat-maps are those of beam 1, read back through the model (teacher-forced).
Score = log P / ((5 + length) / 6)^α. Arrow keys: ← → head, ↑ ↓ layer.</p>
<p id="timing"></p>
</div>
<div>
<canvas id="heatmap" width="10" height="10"></canvas>
<p id="caption"></p>
<p id="cell"></p>
</div>
</div>
</div>
<script type="application/json" id="t2t-data">{data}</script>
<script>{script}</script>
</body>
</html>
"""

FORM = """<form method="post" action="{action}" accept-charset="utf-8">
<textarea name="text" maxlength="{max_chars}" autofocus placeholder="Type a sentence to translate">{text}</textarea>
<p><button type="submit">Translate</button> <span class="hint">{hint}</span></p>
</form>
"""


def sentence_data(source: str, source_tokens, target_tokens, beams, attention, note: str = "") -> dict:
    """One sentence of the page.

    Args:
      source: the input text.
      source_tokens, target_tokens: the labels of the encoder and decoder positions.
      beams: [(hypothesis text, score), ...], best first; the attention is that of the first.
      attention: {"encoder_self", "decoder_self", "encoder_decoder"} -> list per layer of
        [heads, queries, keys] weights in [0, 1] (see `attention_readout.attention_weights`).
      note: shown beside the sentence, e.g. that its input was truncated.
    """
    tokens = {"source": list(source_tokens), "target": list(target_tokens)}
    levels = []
    for kind, (query_axis, key_axis) in AXES.items():  # the page reads them in this order
        for layer, weights in enumerate(attention[kind]):
            weights = np.asarray(weights)
            check_shape(kind, layer, weights, tokens[query_axis], tokens[key_axis])
            levels.append(quantize(weights))
    return {
        "source": source,
        "source_tokens": tokens["source"],
        "target_tokens": tokens["target"],
        "beams": [[text, round(float(score), 4)] for text, score in beams],
        "note": note,
        "layers": len(attention["encoder_self"]),
        "heads": int(np.asarray(attention["encoder_self"][0]).shape[0]),
        "attention": base64.b64encode(zlib.compress(b"".join(levels), 9)).decode("ascii"),
    }


def quantize(weights) -> bytes:
    """Weights in [0, 1] as uint8 round(w · 255), row-major."""
    return np.rint(np.clip(np.asarray(weights, np.float64), 0.0, 1.0) * 255).astype(np.uint8).tobytes()


def render(sentences, *, title: str, details: str = "", form: dict = None, message: str = "") -> str:
    """The page's HTML: the viewer of `sentences`, after a sentence form when `form` is given.

    form: {"action": URL, "text": the last input, "max_chars": its limit, "hint": a line beside the
    button}, for t2t-insights; message: a notice shown above the viewer (e.g. why an input was refused).
    """
    form_html = (
        ""
        if form is None
        else FORM.format(
            action=html.escape(form["action"]),
            text=html.escape(form.get("text", "")),
            max_chars=int(form["max_chars"]),
            hint=html.escape(form.get("hint", "")),
        )
    )
    message_html = f'<p class="message" role="alert">{html.escape(message)}</p>\n' if message else ""
    return PAGE.format(
        title=html.escape(title),
        details=html.escape(details),
        form=form_html,
        message=message_html,
        hidden="" if sentences else " hidden",
        style=_asset("attention_page.css"),
        script=_asset("attention_page.js"),
        data=_json_in_html({"sentences": list(sentences)}),
    )


def write_page(path: str, sentences, *, title: str, details: str = "") -> str:
    """Writes the page through a temporary file (an interrupted run leaves no half page); returns path."""
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as file:
        file.write(render(sentences, title=title, details=details))
    os.replace(temporary, path)
    return path


def _asset(name: str) -> str:
    with open(os.path.join(HERE, name), encoding="utf-8") as file:
        return file.read()


def _json_in_html(value) -> str:
    """JSON that cannot end its <script> element early: '<' only occurs inside strings, as \\u003c."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
