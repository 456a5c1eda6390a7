#!/usr/bin/env bash
# Fine-tuning (t2t-trainer --warm_start_from) shown on real text, by updates, as one command:
#
#     CORPUS=../shared/data/multi30k bash bench/fine_tune.sh
#
# A general model is trained on Multi30k EN→DE (image captions) and adapted to the offline default's
# domain, software messages (translate_ende_gettext, this machine's gettext catalogs). Three models are
# scored on the gettext test split, with the same beam search (beam 4, α 0.6) and sacreBLEU:
#   unadapted    PRETRAIN_STEPS updates on Multi30k
#   fine-tuned   the same, then FINE_TUNE_STEPS updates on gettext (a fresh optimizer and eq. 3 schedule)
#   scratch      SCRATCH_STEPS (default FINE_TUNE_STEPS) updates on gettext from random weights
# Both corpora are encoded with Multi30k's vocabulary (t2t-datagen --vocab_from), as a warm start needs.
#
# Knobs (environment): WORK (./fine-tune-run; must not exist), HPARAMS_SET (transformer_tiny),
# PRETRAIN_STEPS (2000), FINE_TUNE_STEPS (400), FINE_TUNE_HPARAMS (fine-tuning's training hparams,
# "k=v,...", default none: the set's warm-up and learning rate), SCRATCH_STEPS (FINE_TUNE_STEPS), SEED (1).
set -euo pipefail

: "${CORPUS:?set CORPUS to the directory with the Multi30k files train.en, train.de, val.en, val.de}"
WORK=${WORK:-./fine-tune-run}
HPARAMS_SET=${HPARAMS_SET:-transformer_tiny}
PRETRAIN_STEPS=${PRETRAIN_STEPS:-2000}
FINE_TUNE_STEPS=${FINE_TUNE_STEPS:-400}
FINE_TUNE_HPARAMS=${FINE_TUNE_HPARAMS:-}
SCRATCH_STEPS=${SCRATCH_STEPS:-$FINE_TUNE_STEPS}
SEED=${SEED:-1}
BIN=${BIN:-$(cd "$(dirname "$0")/.." && pwd)/.venv/bin}
for name in train.en train.de val.en val.de; do
  [ -f "$CORPUS/$name" ] || { echo "fine_tune.sh: $CORPUS/$name is missing" >&2; exit 2; }
done
[ ! -e "$WORK" ] || { echo "fine_tune.sh: $WORK exists; name a new WORK directory" >&2; exit 2; }
CORPUS=$(cd "$CORPUS" && pwd)
mkdir -p "$WORK/general_tmp" "$WORK/domain_tmp" "$WORK/decodes"
WORK=$(cd "$WORK" && pwd)
echo "== fine_tune.sh: $HPARAMS_SET, $PRETRAIN_STEPS updates on Multi30k, then $FINE_TUNE_STEPS on gettext" \
  "${FINE_TUNE_HPARAMS:+($FINE_TUNE_HPARAMS) }seed $SEED; $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs"

ln -s "$CORPUS/train.en" "$WORK/general_tmp/train.src"; ln -s "$CORPUS/train.de" "$WORK/general_tmp/train.tgt"
ln -s "$CORPUS/val.en" "$WORK/general_tmp/dev.src"; ln -s "$CORPUS/val.de" "$WORK/general_tmp/dev.tgt"
"$BIN/t2t-datagen" --problem=translate_files --data_dir="$WORK/general" --tmp_dir="$WORK/general_tmp"
"$BIN/t2t-datagen" --problem=translate_ende_gettext --data_dir="$WORK/domain" --tmp_dir="$WORK/domain_tmp" \
  --vocab_from="$WORK/general/vocab.translate_files.model"

common=(--hparams_set="$HPARAMS_SET" --random_seed="$SEED" --save_checkpoints_steps=200 --keep_checkpoint_max=3
        --eval_steps=20)
"$BIN/t2t-trainer" --problem=translate_files --data_dir="$WORK/general" --output_dir="$WORK/unadapted" \
  --train_steps="$PRETRAIN_STEPS" --local_eval_frequency="$PRETRAIN_STEPS" "${common[@]}"
"$BIN/t2t-trainer" --problem=translate_ende_gettext --data_dir="$WORK/domain" --output_dir="$WORK/fine_tuned" \
  --warm_start_from="$WORK/unadapted" --hparams="$FINE_TUNE_HPARAMS" \
  --train_steps="$FINE_TUNE_STEPS" --local_eval_frequency="$FINE_TUNE_STEPS" "${common[@]}"
"$BIN/t2t-trainer" --problem=translate_ende_gettext --data_dir="$WORK/domain" --output_dir="$WORK/scratch" \
  --hparams="$FINE_TUNE_HPARAMS" --train_steps="$SCRATCH_STEPS" --local_eval_frequency="$SCRATCH_STEPS" \
  "${common[@]}"

decode=(--decode_hparams="beam_size=4,alpha=0.6,extra_length=50,batch_size=64")
for run in fine_tuned scratch; do  # --decode_split=test writes the references as <file>.targets beside
  "$BIN/t2t-decoder" --problem=translate_ende_gettext --data_dir="$WORK/domain" --output_dir="$WORK/$run" \
    --decode_split=test "${decode[@]}" --decode_to_file="$WORK/decodes/$run.decodes"
done
# The unadapted model is Multi30k's translate_files model: it reads the same test sources as text.
"$BIN/t2t-decoder" --problem=translate_files --data_dir="$WORK/general" --output_dir="$WORK/unadapted" \
  "${decode[@]}" --decode_from_file="$WORK/decodes/fine_tuned.inputs" --decode_to_file="$WORK/decodes/unadapted.decodes"
for run in unadapted fine_tuned scratch; do
  echo "== $run"
  "$BIN/t2t-bleu" --translation="$WORK/decodes/$run.decodes" --reference="$WORK/decodes/fine_tuned.targets" \
    | tee "$WORK/decodes/$run.bleu"
done
