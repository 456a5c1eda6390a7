"""Evaluation (§6.1, §6.3): sacreBLEU, the paper's tokenized BLEU and chrF; labeled bracket F1 for parsing."""
