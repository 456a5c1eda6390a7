#!/usr/bin/env bash
# README command one: set up, then run the main job on the offline default.
#
# Trains transformer_tiny on English->German message pairs from this machine's gettext
# catalogs (translate_ende_gettext: real human translations, no download), averages the
# last checkpoints, decodes the held-out test split with beam 4 and alpha 0.6 (§6.1),
# scores it with sacreBLEU, exports a SavedModel that takes raw text, and translates
# three sentences through that export.
#
#   QUICKSTART_MINUTES=12   training time bound in minutes (default 12)
#   T2T_WORK=./t2t_work     where data, checkpoints, translations and the export go
#
# Re-running reuses the generated data and resumes training from the latest checkpoint.
set -euo pipefail
cd "$(dirname "$0")"

bash setup.sh
BIN=.venv/bin
MINUTES=${QUICKSTART_MINUTES:-12}
WORK=${T2T_WORK:-$PWD/t2t_work}
PROBLEM=translate_ende_gettext
HPARAMS=transformer_tiny
DATA=$WORK/data
TRAIN=$WORK/train
AVERAGED=$WORK/averaged
DECODES=$WORK/decodes
EXPORT=$WORK/export
mkdir -p "$WORK" "$DECODES"

echo "== 1/6 t2t-datagen: $PROBLEM from /usr/share/locale"
$BIN/t2t-datagen --problem=$PROBLEM --data_dir="$DATA" --tmp_dir="$WORK/tmp"

echo "== 2/6 t2t-trainer: $HPARAMS for about $MINUTES minutes"
$BIN/t2t-trainer --problem=$PROBLEM --hparams_set=$HPARAMS --data_dir="$DATA" --output_dir="$TRAIN" \
  --train_minutes="$MINUTES" --train_steps=1000000 --save_checkpoints_steps=250 --keep_checkpoint_max=5 \
  --local_eval_frequency=1000 --eval_steps=20

echo "== 3/6 t2t-avg-all: the last 5 checkpoints (§6.1)"
# The newest checkpoint's step, from TensorFlow's `checkpoint` list (the export's version number).
STEP=$(sed -n 's/^model_checkpoint_path: ".*ckpt-\([0-9]*\)"$/\1/p' "$TRAIN/checkpoint")
rm -rf "$AVERAGED.tmp"
$BIN/t2t-avg-all --model_dir="$TRAIN" --output_dir="$AVERAGED.tmp" --n=5
rm -rf "$AVERAGED" && mv "$AVERAGED.tmp" "$AVERAGED"

echo "== 4/6 t2t-decoder: the test split, beam 4, alpha 0.6"
$BIN/t2t-decoder --problem=$PROBLEM --data_dir="$DATA" --output_dir="$AVERAGED" --decode_split=test \
  --decode_hparams="beam_size=4,alpha=0.6,extra_length=50,batch_size=64" --decode_to_file="$DECODES/test.decodes"

echo "== 5/6 t2t-bleu"
$BIN/t2t-bleu --translation="$DECODES/test.decodes" --reference="$DECODES/test.targets"

echo "== 6/6 t2t-exporter, then three sentences through the SavedModel"
if [ -d "$EXPORT/$STEP" ]; then
  echo "(export version $STEP exists already; using it)"
else
  $BIN/t2t-exporter --problem=$PROBLEM --data_dir="$DATA" --output_dir="$AVERAGED" --export_dir="$EXPORT" \
    --decode_hparams="beam_size=4,alpha=0.6"
fi
# Only tensorflow and tensorflow_text are needed to serve the export, as in TF Serving. Loaded this
# way, TensorFlow prints its C++ start-up lines (Abseil INFO, no CUDA driver) and the SentencePiece
# op its INFO line on loading the vocabulary, which no setting silences; they are filtered here as
# the t2t-* tools filter them, and any other line passes.
TF_STARTUP='^(I[0-9]{4} |WARNING: All log messages before absl::InitializeLog|E[0-9]{4} .*(cuda_platform\.cc:[0-9]+\] failed call to cuInit|oneDNN supports DT_INT64 only)|[A-Za-z0-9_./-]+\.cc\([0-9]+\) LOG\(INFO\) )'
TF_CPP_MIN_LOG_LEVEL=1 $BIN/python - "$EXPORT/$STEP" 2> >(grep -Ev "$TF_STARTUP" >&2) <<'PY'
import sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

translate = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
sentences = ["Open file", "The file could not be saved.", "Do you want to quit without saving?"]
result = translate(inputs=tf.constant(sentences))
for source, target in zip(sentences, result["outputs"].numpy()):
    print(f"  {source}  ->  {target.decode('utf-8')}")
PY

cat <<EOF

Done.
  data:          $DATA
  checkpoints:   $TRAIN  (averaged: $AVERAGED)
  translations:  $DECODES/test.decodes  (sources: test.inputs, references: test.targets)
  export:        $EXPORT/$STEP  (TF Serving layout; see docs/decoding-and-serving.md, "Serving")

Next, a real corpus in one CPU-hour (docs/results.md, "Multi30k in one CPU-hour"): with Multi30k's
train.en, train.de, val.en, val.de in one directory,
  CORPUS=<that directory> WORK=<a new directory> bash bench/multi30k.sh
trains transformer_multi30k_hour for 50 minutes, averages, decodes val and scores it. If t2t-trainer
warns that the minutes end inside the warm-up (a slower CPU), run instead
  CORPUS=<that directory> WORK=<a new directory> HPARAMS_SET=transformer_multi30k_hour_slow_cpu \\
    TRAIN_STEPS=fit TRAIN_MINUTES=55 AVG_N=1 bash bench/multi30k.sh
(docs/results.md, "Multi30k in one CPU-hour").
EOF
