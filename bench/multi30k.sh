#!/usr/bin/env bash
# The Multi30k recipe, from raw text to a scored decode, as one command:
#
#     CORPUS=../shared/data/multi30k bash bench/multi30k.sh          # EN→DE
#     CORPUS=../shared/data/multi30k TARGET=fr bash bench/multi30k.sh # EN→FR
#
# CORPUS holds the raw (untokenized) Multi30k files train.en, train.$TARGET, val.en, val.$TARGET.
# The steps are the ones a user types (docs/results.md): t2t-datagen learns the shared BPE
# vocabulary and writes the shards, t2t-trainer trains TRAIN_STEPS updates (val is the dev split:
# its perplexity is logged, nothing is chosen on it during the run), t2t-avg-all averages the
# last AVG_N checkpoints, t2t-decoder translates val with beam search and t2t-bleu scores it
# (sacreBLEU with its signature, chrF2, and the paper-style tokenized BLEU). The recipe is
# defined by the hparams set, the update count and the seed, so any host trains the same model;
# how long it takes is the host's (docs/results.md gives it per host type).
#
# Knobs (environment): WORK (default ./multi30k-$TARGET-run; must not hold a run already),
# HPARAMS_SET (transformer_multi30k_small), HPARAMS (overrides, "k=v,..."), TRAIN_STEPS (5841, the
# recipe's; fit: as many as TRAIN_MINUTES holds, chosen from the measured step time so that the set's
# learning_rate_decay_steps decay ends inside it, t2t-trainer's --fit_train_steps_to_minutes, for a user
# with a time budget rather than a figure to reproduce), TRAIN_MINUTES (0: no time bound; with a number
# the run also stops there, and its result then depends on the host's speed), SEED (1), AVG_N (1: the
# last checkpoint, as the recipe's figures are), SAVE_STEPS (250), LOCAL_EVAL_FREQUENCY (1000: dev
# perplexity every this many updates),
# VOCAB_SIZE (unset: translate_files' own, 8,000; a size N trains through a problem the script registers
# in WORK/usr with --t2t_usr_dir, translate_files_vocabN: translate_files with approx_vocab_size N),
# BPE_DROPOUT (unset: deterministic BPE; a probability p writes the training split as BPE_DROPOUT_COPIES (16)
# BPE-dropout segmentations of each pair, t2t_lite/data/bpe_dropout.py, through the same registered problem, whose
# name then ends in _bpe_dropout),
# TRAIN_ALIGNMENTS (unset; a file of Pharaoh word links of train's pairs, one line per pair: t2t-datagen
# --train_alignments stores them for guided alignment, hparam guided_alignment_weight; bench/guided_alignment.sh),
# DECODE_HPARAMS (the set's beam and α, batch 64, XLA). At least 12 checkpoints are kept, so that
# averaging another number of them can be tried afterwards. Each phase prints its wall-clock
# seconds and the total.
set -euo pipefail

: "${CORPUS:?set CORPUS to the directory with train.en, train.de, val.en, val.de (e.g. ../shared/data/multi30k)}"
TARGET=${TARGET:-de}
WORK=${WORK:-./multi30k-$TARGET-run}
HPARAMS_SET=${HPARAMS_SET:-transformer_multi30k_small}
HPARAMS=${HPARAMS:-}
TRAIN_MINUTES=${TRAIN_MINUTES:-0}
TRAIN_STEPS=${TRAIN_STEPS:-5841}
SEED=${SEED:-1}
AVG_N=${AVG_N:-1}
SAVE_STEPS=${SAVE_STEPS:-250}
LOCAL_EVAL_FREQUENCY=${LOCAL_EVAL_FREQUENCY:-1000}
DECODE_HPARAMS=${DECODE_HPARAMS:-batch_size=64,xla=true}
VOCAB_SIZE=${VOCAB_SIZE:-}
BPE_DROPOUT=${BPE_DROPOUT:-}
BPE_DROPOUT_COPIES=${BPE_DROPOUT_COPIES:-16}
TRAIN_ALIGNMENTS=${TRAIN_ALIGNMENTS:-}
BIN=${BIN:-$(cd "$(dirname "$0")/.." && pwd)/.venv/bin}

for name in train.en "train.$TARGET" val.en "val.$TARGET"; do
  [ -f "$CORPUS/$name" ] || { echo "multi30k.sh: $CORPUS/$name is missing (CORPUS must hold train.en, train.$TARGET, val.en, val.$TARGET)" >&2; exit 2; }
done
if [ -n "$TRAIN_ALIGNMENTS" ] && [ ! -f "$TRAIN_ALIGNMENTS" ]; then
  echo "multi30k.sh: TRAIN_ALIGNMENTS=$TRAIN_ALIGNMENTS: no such file (Pharaoh links of train's pairs, one line per pair)" >&2; exit 2
fi
if [ -e "$WORK" ]; then
  echo "multi30k.sh: $WORK exists; name a new WORK directory (a finished or running run is never overwritten)" >&2
  exit 2
fi
case "$VOCAB_SIZE" in *[!0-9]*|0*)
  echo "multi30k.sh: VOCAB_SIZE=$VOCAB_SIZE: give the vocabulary's size as a positive whole number, or leave it unset" >&2; exit 2;;
esac
if [ -n "$BPE_DROPOUT" ] && ! [[ "$BPE_DROPOUT" =~ ^0\.[0-9]*[1-9][0-9]*$ ]]; then  # the value goes into Python
  echo "multi30k.sh: BPE_DROPOUT=$BPE_DROPOUT: give the probability of skipping a merge as 0.N above 0 (e.g. 0.1), or leave it unset" >&2; exit 2
fi
case "$LOCAL_EVAL_FREQUENCY" in *[!0-9]*|0*|'')
  echo "multi30k.sh: LOCAL_EVAL_FREQUENCY=$LOCAL_EVAL_FREQUENCY: give the updates between dev evaluations as a positive whole number" >&2; exit 2;;
esac
case "$BPE_DROPOUT_COPIES" in *[!0-9]*|0*|'')
  echo "multi30k.sh: BPE_DROPOUT_COPIES=$BPE_DROPOUT_COPIES: give the number of segmented copies as a positive whole number" >&2; exit 2;;
esac
steps_flags=(--train_steps="$TRAIN_STEPS") steps_why="$TRAIN_STEPS updates"
case "$TRAIN_STEPS" in
  fit) steps_flags=(--train_steps=1000000 --fit_train_steps_to_minutes) steps_why="steps fitted to the minutes";;
  ''|*[!0-9]*|0*) echo "multi30k.sh: TRAIN_STEPS=$TRAIN_STEPS: give a positive whole number, or fit" >&2; exit 2;;
esac
if [ "$TRAIN_STEPS" = fit ]; then  # found now, not after the vocabulary and the shards
  awk "BEGIN { exit !($TRAIN_MINUTES > 0) }" || {
    echo "multi30k.sh: TRAIN_STEPS=fit fits the decay to TRAIN_MINUTES: set it above 0 (got $TRAIN_MINUTES)" >&2; exit 2; }
  # TensorFlow's start-up lines go with the answer into $decay; its last line is the answer or the error.
  decay=$("$BIN/python" -c 'import sys; from t2t_lite import registry
print(registry.hparams(sys.argv[1]).override(sys.argv[2]).learning_rate_decay_steps)' "$HPARAMS_SET" "$HPARAMS" 2>&1) || {
    echo "multi30k.sh: HPARAMS_SET=$HPARAMS_SET HPARAMS=$HPARAMS: $(tail -n 1 <<<"$decay")" >&2; exit 2; }
  decay=$(tail -n 1 <<<"$decay")
  [ "$decay" -gt 0 ] || {
    echo "multi30k.sh: TRAIN_STEPS=fit fits the learning rate's decay: set learning_rate_decay_steps in HPARAMS (e.g. learning_rate_decay_steps=2000; $HPARAMS_SET has none)" >&2; exit 2; }
fi
CORPUS=$(cd "$CORPUS" && pwd)
alignments=()
[ -z "$TRAIN_ALIGNMENTS" ] || alignments=(--train_alignments="$(cd "$(dirname "$TRAIN_ALIGNMENTS")" && pwd)/$(basename "$TRAIN_ALIGNMENTS")")
mkdir -p "$WORK/tmp"
WORK=$(cd "$WORK" && pwd)
PROBLEM=(--problem=translate_files) vocabulary="translate_files' own vocabulary size"
if [ -n "$VOCAB_SIZE$BPE_DROPOUT" ]; then  # both are properties of the problem, as in tensor2tensor: a subclass
  name=translate_files${VOCAB_SIZE:+_vocab$VOCAB_SIZE}${BPE_DROPOUT:+_bpe_dropout}
  mkdir -p "$WORK/usr/multi30k_problem"
  cat > "$WORK/usr/multi30k_problem/__init__.py" <<EOF
from t2t_lite.problems.translate_files import TranslateFiles
from t2t_lite.registry import register_problem


@register_problem(name="$name")
class TranslateFilesVariant(TranslateFiles):
    """translate_files as bench/multi30k.sh's VOCAB_SIZE=$VOCAB_SIZE BPE_DROPOUT=$BPE_DROPOUT set it."""

    approx_vocab_size = ${VOCAB_SIZE:-TranslateFiles.approx_vocab_size}
    bpe_dropout = ${BPE_DROPOUT:-0.0}
    bpe_dropout_copies = $BPE_DROPOUT_COPIES
EOF
  PROBLEM=(--problem="$name" --t2t_usr_dir="$WORK/usr/multi30k_problem")
  [ -z "$VOCAB_SIZE" ] || vocabulary="$VOCAB_SIZE-piece vocabulary"
  [ -z "$BPE_DROPOUT" ] || vocabulary+=", BPE-dropout p=$BPE_DROPOUT on the training pairs, $BPE_DROPOUT_COPIES copies"
fi

started=$(date +%s)
phase_started=$started
phase() {  # phase NAME: print the seconds since the previous phase ended
  local now; now=$(date +%s)
  echo "== $1: $((now - phase_started)) s (total $((now - started)) s)"
  phase_started=$now
}

bound=""
awk "BEGIN { exit !($TRAIN_MINUTES > 0) }" && bound=", at most $TRAIN_MINUTES min"
echo "== Multi30k EN→${TARGET^^}: $HPARAMS_SET ${HPARAMS:+($HPARAMS) }seed $SEED, $steps_why$bound, last $AVG_N averaged, ${PROBLEM[0]#--problem=} ($vocabulary)"
echo "== $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) CPUs"
ln -s "$CORPUS/train.en" "$WORK/tmp/train.src"; ln -s "$CORPUS/train.$TARGET" "$WORK/tmp/train.tgt"
ln -s "$CORPUS/val.en" "$WORK/tmp/dev.src";     ln -s "$CORPUS/val.$TARGET" "$WORK/tmp/dev.tgt"
"$BIN/t2t-datagen" "${PROBLEM[@]}" --data_dir="$WORK/data" --tmp_dir="$WORK/tmp" ${alignments[@]+"${alignments[@]}"}
phase datagen

"$BIN/t2t-trainer" "${PROBLEM[@]}" --hparams_set="$HPARAMS_SET" --hparams="$HPARAMS" \
  --data_dir="$WORK/data" --output_dir="$WORK/train" --train_minutes="$TRAIN_MINUTES" "${steps_flags[@]}" \
  --save_checkpoints_steps="$SAVE_STEPS" --keep_checkpoint_max=$((AVG_N > 10 ? AVG_N + 2 : 12)) --local_eval_frequency="$LOCAL_EVAL_FREQUENCY" \
  --eval_steps=0 --random_seed="$SEED" 2>&1 | tee "$WORK/train.log"
phase training

"$BIN/t2t-avg-all" --model_dir="$WORK/train" --output_dir="$WORK/avg" --n="$AVG_N"
phase averaging

"$BIN/t2t-decoder" "${PROBLEM[@]}" --data_dir="$WORK/data" --output_dir="$WORK/avg" \
  --decode_hparams="$DECODE_HPARAMS" --decode_from_file="$CORPUS/val.en" --decode_to_file="$WORK/val.decodes"
phase decoding

"$BIN/t2t-bleu" --translation="$WORK/val.decodes" --reference="$CORPUS/val.$TARGET" | tee "$WORK/bleu.txt"
phase scoring
