"""Seeing a model: the attention and beam page (Figures 3–5), attention pictures, `t2t-insights`' local
server, and BLEU over every checkpoint of a run (`t2t-translate-all`)."""
