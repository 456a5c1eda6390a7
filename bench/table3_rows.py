"""The rows of Table 3 (Vaswani et al. 2017): each as the paper ran it and in miniature, with the paper's figures.

A row is the paper's change to its base model, written twice: as `--hparams` overrides of
`transformer_base` (the paper's scale; tests/test_transformer.py counts each one's parameters
against the paper's params column) and as overrides of `transformer_table3_base`, the same change
at the miniature's scale: every width (d_model, d_ff, h·d_k, h·d_v) and the depth N at
`WIDTH_RATIO` and `DEPTH_RATIO` of the paper's, head counts, dropout, label smoothing and positions
as the paper's. `train_steps_factor` is the row's updates over the base row's (the paper trained
"big" 300K steps against base's 100K).

The paper's figures are Table 3's: perplexity per wordpiece and BLEU on newstest2013 (EN-DE dev),
parameters ×10^6; `None` where the paper leaves the cell blank (unchanged from base).

    python bench/table3_rows.py A1 C3     # one line per row: name, miniature overrides, updates factor
    python bench/table3_rows.py all       # every row, in the paper's order
"""

import dataclasses
import sys

MINIATURE_SET = "transformer_table3_base"
PAPER_SET = "transformer_base"
WIDTH_RATIO = 0.5  # transformer_table3_base's d_model 256 / base's 512
DEPTH_RATIO = 0.5  # its N = 3 / base's 6


@dataclasses.dataclass(frozen=True)
class Row:
    name: str  # the row's name in the paper's order: base, A1..A4, B1, B2, C1..C7, D1..D4, E, big
    change: str  # what the row changes, in the paper's symbols
    paper_overrides: str  # of transformer_base
    miniature_overrides: str  # of transformer_table3_base
    paper_ppl: float  # Table 3 "PPL (dev)"
    paper_bleu: float  # Table 3 "BLEU (dev)"
    paper_params_millions: float = None  # Table 3 "params ×10^6"; None where blank
    train_steps_factor: int = 1


ROWS = (
    Row("base", "N 6, d_model 512, d_ff 2048, h 8, d_k 64, P_drop 0.1, ε_ls 0.1", "", "", 4.92, 25.8, 65),
    Row("A1", "h 1, d_k = d_v 512", "num_heads=1", "num_heads=1", 5.29, 24.9),
    Row("A2", "h 4, d_k = d_v 128", "num_heads=4", "num_heads=4", 5.00, 25.5),
    Row("A3", "h 16, d_k = d_v 32", "num_heads=16", "num_heads=16", 4.91, 25.8),
    Row("A4", "h 32, d_k = d_v 16", "num_heads=32", "num_heads=32", 5.01, 25.4),
    Row("B1", "d_k 16", "attention_key_channels=128", "attention_key_channels=64", 5.16, 25.1, 58),
    Row("B2", "d_k 32", "attention_key_channels=256", "attention_key_channels=128", 5.01, 25.4, 60),
    Row("C1", "N 2", "num_hidden_layers=2", "num_hidden_layers=1", 6.11, 23.7, 36),
    Row("C2", "N 4", "num_hidden_layers=4", "num_hidden_layers=2", 5.19, 25.3, 50),
    Row("C3", "N 8", "num_hidden_layers=8", "num_hidden_layers=4", 4.88, 25.5, 80),
    Row("C4", "d_model 256, d_k = d_v 32", "hidden_size=256", "hidden_size=128", 5.75, 24.5, 28),
    Row("C5", "d_model 1024, d_k = d_v 128", "hidden_size=1024", "hidden_size=512", 4.66, 26.0, 168),
    Row("C6", "d_ff 1024", "filter_size=1024", "filter_size=512", 5.12, 25.4, 53),
    Row("C7", "d_ff 4096", "filter_size=4096", "filter_size=2048", 4.75, 26.2, 90),
    Row("D1", "P_drop 0.0", "layer_prepostprocess_dropout=0.0", "layer_prepostprocess_dropout=0.0", 5.77, 24.6),
    Row("D2", "P_drop 0.2", "layer_prepostprocess_dropout=0.2", "layer_prepostprocess_dropout=0.2", 4.95, 25.5),
    Row("D3", "ε_ls 0.0", "label_smoothing=0.0", "label_smoothing=0.0", 4.67, 25.3),
    Row("D4", "ε_ls 0.2", "label_smoothing=0.2", "label_smoothing=0.2", 5.47, 25.7),
    Row("E", "learned positional embedding instead of sinusoids", "pos=emb", "pos=emb", 4.92, 25.7),
    Row(
        "big",
        "d_model 1024, d_ff 4096, h 16, P_drop 0.3, 300K steps",
        "hidden_size=1024,filter_size=4096,num_heads=16,layer_prepostprocess_dropout=0.3",
        "hidden_size=512,filter_size=2048,num_heads=16,layer_prepostprocess_dropout=0.3",
        4.33,
        26.4,
        213,
        train_steps_factor=3,
    ),
)
BY_NAME = {row.name: row for row in ROWS}


class UnknownRow(ValueError):
    """A row name that is not one of Table 3's."""


def selected(names: list) -> list:
    """The rows named (or every row for ["all"]), in the order given; an unknown name raises UnknownRow."""
    if names == ["all"]:
        return list(ROWS)
    unknown = [name for name in names if name not in BY_NAME]
    if unknown or not names:
        raise UnknownRow(
            f"ROWS={' '.join(names)}: {'unknown row ' + ', '.join(unknown) if unknown else 'no row named'}; "
            f"name rows of Table 3 from: {' '.join(BY_NAME)} (or all)"
        )
    return [BY_NAME[name] for name in dict.fromkeys(names)]


def main(argv: list) -> int:
    try:
        rows = selected(argv)
    except UnknownRow as error:
        print(error, file=sys.stderr)
        return 2
    for row in rows:
        # Tab-separated, as the shell reads it; "-" marks no overrides (a shell read drops empty fields).
        print(f"{row.name}\t{row.miniature_overrides or '-'}\t{row.train_steps_factor}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
