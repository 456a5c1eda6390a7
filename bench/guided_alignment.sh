#!/usr/bin/env bash
# Guided alignment on Multi30k (Garg et al. 2019) as one command: eflomal's word links of train and val,
# the Multi30k recipe (bench/multi30k.sh) trained with the links of train at ALIGNMENT_WEIGHT, its val BLEU,
# and the agreement of its alignments of the val pairs with eflomal's (precision, recall, F1, AER).
#
# The measurement, two seeds, guided and unguided (the unguided runs train on the same aligned shards with
# guided_alignment_weight=0, so both sides are measured alike); eflomal aligns once, into ALIGNMENTS:
#
#     .venv/bin/pip install -e ".[align]"
#     for SEED in 1 2; do for W in 0.05 0; do
#       CORPUS=../shared/data/multi30k ALIGNMENTS=guided-eflomal SEED=$SEED ALIGNMENT_WEIGHT=$W \
#         WORK=guided-w$W-s$SEED bash bench/guided_alignment.sh
#     done; done
#     tail -n 3 guided-w*-s*/bleu.txt guided-w*-s*/agreement.txt
#
# What is compared: the model's links of each val pair (source, reference), from t2t-decoder --score_file
# with write_alignment=true (the alignment of the given pair), against eflomal's links of the same pair.
# Links of the model's own translations could not be compared with eflomal's links of the references.
# Each model aligns with its own defaults: a guided model with its supervised layer and heads
# (hparams guided_alignment_layer, guided_alignment_heads), an unguided one with the decoder's
# (the last layer, all heads); ALIGNMENT_DECODE_HPARAMS (e.g. alignment_layer=-2,alignment_heads=1)
# aligns both with the same heads instead.
#
# Knobs (environment): CORPUS (train.en, train.$TARGET, val.en, val.$TARGET), TARGET (de), WORK (must not
# exist), ALIGNMENT_WEIGHT (0.05: hparam guided_alignment_weight, λ of L_ce + λ·L_a; 0: unguided),
# ALIGNMENTS (a directory for eflomal's train.align and val.align, made by bench/eflomal_align.py when they
# are not there yet; default WORK/eflomal), ALIGNMENT_DECODE_HPARAMS (unset). bench/multi30k.sh's knobs
# (HPARAMS_SET, HPARAMS, TRAIN_STEPS, SEED, AVG_N, DECODE_HPARAMS, ...) pass through, but VOCAB_SIZE and
# BPE_DROPOUT (BPE-dropout's segmentations have no links).
set -euo pipefail

: "${CORPUS:?set CORPUS to the directory with train.en, train.de, val.en, val.de (e.g. ../shared/data/multi30k)}"
TARGET=${TARGET:-de}
WORK=${WORK:-./guided-alignment-$TARGET-run}
ALIGNMENT_WEIGHT=${ALIGNMENT_WEIGHT:-0.05}
ALIGNMENT_DECODE_HPARAMS=${ALIGNMENT_DECODE_HPARAMS:-}
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-$HERE/../.venv/bin}
export BIN TARGET

if [ -n "${VOCAB_SIZE:-}${BPE_DROPOUT:-}" ]; then
  echo "guided_alignment.sh: VOCAB_SIZE and BPE_DROPOUT are not passed to an aligned run; leave them unset" >&2; exit 2
fi
if ! [[ "$ALIGNMENT_WEIGHT" =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
  echo "guided_alignment.sh: ALIGNMENT_WEIGHT=$ALIGNMENT_WEIGHT: give λ as a number ≥ 0 (0.05; 0 = unguided)" >&2; exit 2
fi
for name in train.en "train.$TARGET" val.en "val.$TARGET"; do
  [ -f "$CORPUS/$name" ] || { echo "guided_alignment.sh: $CORPUS/$name is missing" >&2; exit 2; }
done
if [ -e "$WORK" ]; then
  echo "guided_alignment.sh: $WORK exists; name a new WORK directory (a run is never overwritten)" >&2; exit 2
fi
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
CORPUS=$(cd "$CORPUS" && pwd)
ALIGNMENTS=${ALIGNMENTS:-$WORK/eflomal}

if [ ! -f "$ALIGNMENTS/train.align" ] || [ ! -f "$ALIGNMENTS/val.align" ]; then
  "$BIN/python" "$HERE/eflomal_align.py" --train_source="$CORPUS/train.en" --train_target="$CORPUS/train.$TARGET" \
    --val_source="$CORPUS/val.en" --val_target="$CORPUS/val.$TARGET" --output_dir="$ALIGNMENTS"
fi
ALIGNMENTS=$(cd "$ALIGNMENTS" && pwd)
echo "== guided alignment: guided_alignment_weight=$ALIGNMENT_WEIGHT, eflomal's links in $ALIGNMENTS"

HPARAMS="guided_alignment_weight=$ALIGNMENT_WEIGHT${HPARAMS:+,$HPARAMS}" TRAIN_ALIGNMENTS="$ALIGNMENTS/train.align" \
  CORPUS="$CORPUS" WORK="$WORK/run" bash "$HERE/multi30k.sh"
cp "$WORK/run/bleu.txt" "$WORK/bleu.txt"

paste "$CORPUS/val.en" "$CORPUS/val.$TARGET" > "$WORK/val.pairs"
"$BIN/t2t-decoder" --problem=translate_files --data_dir="$WORK/run/data" --output_dir="$WORK/run/avg" \
  --score_file="$WORK/val.pairs" --decode_to_file="$WORK/val.pair_alignments" \
  --decode_hparams="write_alignment=true${ALIGNMENT_DECODE_HPARAMS:+,$ALIGNMENT_DECODE_HPARAMS}"
"$BIN/python" "$HERE/alignment_agreement.py" --hypothesis="$WORK/val.pair_alignments" \
  --reference="$ALIGNMENTS/val.align" | tee "$WORK/agreement.txt"
