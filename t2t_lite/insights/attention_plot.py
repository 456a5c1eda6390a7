"""Attention heat-maps, as the paper's Figures 3–5 (attention visualizations, appendix).

`plot_attention` writes one PNG per attention kind, layer and head: rows are the
query positions, columns the key positions, each labelled with its token, and the
colour the attention weight (eq. 1's softmax, in [0, 1]).

    logits, attention = model(features, return_attention=True)
    one_sentence = {kind: [layer[0].numpy() for layer in layers] for kind, layers in attention.items()}
    plot_attention(source_tokens, target_tokens, one_sentence, "attention_pngs/")

matplotlib is an optional extra (`pip install matplotlib`); it is imported only here.
"""

import os

import numpy as np

# Which tokens label the queries (rows) and the keys (columns) of each kind of attention.
AXES = {
    "encoder_self": ("source", "source"),
    "decoder_self": ("target", "target"),
    "encoder_decoder": ("target", "source"),
}


def plot_attention(source_tokens, target_tokens, attention, output_dir, kinds=None, layers=None, heads=None):
    """Writes `{kind}_layer{L}_head{H}.png` heat-maps into output_dir; returns their paths.

    Args:
      source_tokens: the input's tokens (subwords), one per encoder position.
      target_tokens: the output's tokens, one per decoder position.
      attention: {"encoder_self", "decoder_self", "encoder_decoder"} -> list per layer of
        [heads, query_len, key_len] numpy arrays for ONE sentence (the model's
        `return_attention=True` output with the batch axis indexed).
      output_dir: created if missing.
      kinds, layers, heads: optional subsets to draw (default: all).
    """
    pyplot = _pyplot()
    os.makedirs(output_dir, exist_ok=True)
    tokens = {"source": list(source_tokens), "target": list(target_tokens)}
    paths = []
    for kind in kinds or sorted(attention):
        if kind not in AXES:
            raise ValueError(f"unknown attention kind {kind!r}; expected one of {sorted(AXES)}.")
        query_tokens, key_tokens = (tokens[axis] for axis in AXES[kind])
        for layer, weights in enumerate(attention[kind]):
            if layers is not None and layer not in layers:
                continue
            weights = np.asarray(weights)
            check_shape(kind, layer, weights, query_tokens, key_tokens)
            for head in range(weights.shape[0]):
                if heads is not None and head not in heads:
                    continue
                path = os.path.join(output_dir, f"{kind}_layer{layer}_head{head}.png")
                _heat_map(pyplot, weights[head], query_tokens, key_tokens, f"{kind}, layer {layer}, head {head}", path)
                paths.append(path)
    return paths


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise ImportError("plot_attention needs matplotlib, an optional extra: pip install matplotlib") from None
    matplotlib.use("Agg")  # files only: works without a display
    from matplotlib import pyplot

    return pyplot


def check_shape(kind, layer, weights, query_tokens, key_tokens):
    """Stops on weights that are not [heads, one query per query token, one key per key token]."""
    expected = (len(query_tokens), len(key_tokens))
    if weights.ndim != 3 or weights.shape[1:] != expected:
        raise ValueError(
            f"{kind} layer {layer}: attention of shape {weights.shape} does not match "
            f"[heads, {expected[0]} query tokens, {expected[1]} key tokens]."
        )


def _heat_map(pyplot, weights, query_tokens, key_tokens, title, path):
    size = 2 + 0.3 * max(len(query_tokens), len(key_tokens))
    figure, axes = pyplot.subplots(figsize=(size, size))
    image = axes.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0)
    axes.set_xticks(range(len(key_tokens)), key_tokens, rotation=90)
    axes.set_yticks(range(len(query_tokens)), query_tokens)
    axes.set_xlabel("keys (attended to)")
    axes.set_ylabel("queries")
    axes.set_title(title)
    figure.colorbar(image, ax=axes, fraction=0.046)
    figure.tight_layout()
    figure.savefig(path)
    pyplot.close(figure)
