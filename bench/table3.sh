#!/usr/bin/env bash
# Table 3 of Vaswani et al. 2017 in miniature, on Multi30k EN→DE, as one command:
#
#     CORPUS=../shared/data/multi30k bash bench/table3.sh                  # every row, seed 1
#     CORPUS=../shared/data/multi30k ROWS="base A1 C3" SEEDS="1 2 3" bash bench/table3.sh
#     .venv/bin/python bench/table3.py table WORK                         # the table and its PNG
#
# The rows and their overrides of transformer_table3_base are bench/table3_rows.py's. t2t-datagen
# writes the shared BPE vocabulary and the shards once, into WORK/data; then each row and seed trains
# in its own run directory WORK/<row>/seed<N>/ (so rows can run on separate machines and their
# directories be copied into one WORK): t2t-trainer makes a fixed number of updates with the seed
# (dev perplexity per wordpiece every LOCAL_EVAL_FREQUENCY updates and at the end), t2t-decoder
# translates val with the last checkpoint (beam 4, α 0.6, no averaging: the paper's Table 3 protocol),
# t2t-bleu scores it (sacreBLEU and the paper's tokenized BLEU), and bench/table3.py writes
# result.json, last and atomically. A row with its result.json is not retrained; one interrupted
# before it resumes from its checkpoints (the trainer's) and redoes the decode and the scores. A run
# directory records its recipe (recipe.txt) and WORK/data its corpus: another recipe or corpus in the
# same WORK is refused, so a smoke run is never resumed or counted as a row of the table.
#
# Knobs (environment): CORPUS (the raw Multi30k files train.en, train.de, val.en, val.de), WORK
# (./table3-run), ROWS ("all", or row names of Table 3: base A1..A4 B1 B2 C1..C7 D1..D4 E big),
# SEEDS ("1"), TRAIN_STEPS (1200, the base row's updates; a row trains its train_steps_factor times
# as many; a small number makes a smoke run), HPARAMS (unset; overrides added to every row's, for a smoke
# run's smaller model: a table made with them is not the recipe's, and result.json records them), SAVE_STEPS (200), LOCAL_EVAL_FREQUENCY (200),
# DECODE_HPARAMS (batch_size=64,xla=true: speed only; beam and α are the protocol's, not knobs).
set -euo pipefail

: "${CORPUS:?set CORPUS to the directory with train.en, train.de, val.en, val.de (e.g. ../shared/data/multi30k)}"
WORK=${WORK:-./table3-run}
ROWS=${ROWS:-all}
SEEDS=${SEEDS:-1}
TRAIN_STEPS=${TRAIN_STEPS:-1200}
HPARAMS=${HPARAMS:-}
SAVE_STEPS=${SAVE_STEPS:-200}
LOCAL_EVAL_FREQUENCY=${LOCAL_EVAL_FREQUENCY:-200}
DECODE_HPARAMS=${DECODE_HPARAMS:-batch_size=64,xla=true}
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-$(cd "$HERE/.." && pwd)/.venv/bin}
HPARAMS_SET=transformer_table3_base
PROTOCOL=beam_size=4,alpha=0.6

for name in train.en train.de val.en val.de; do
  [ -f "$CORPUS/$name" ] || { echo "table3.sh: $CORPUS/$name is missing (CORPUS must hold train.en, train.de, val.en, val.de)" >&2; exit 2; }
done
for knob in TRAIN_STEPS SAVE_STEPS LOCAL_EVAL_FREQUENCY; do
  case "${!knob}" in *[!0-9]*|0*|'')
    echo "table3.sh: $knob=${!knob}: give a positive whole number" >&2; exit 2;;
  esac
done
[ -n "${SEEDS// /}" ] || { echo "table3.sh: SEEDS is empty: give seeds as whole numbers, e.g. SEEDS=\"1 2 3\"" >&2; exit 2; }
for seed in $SEEDS; do
  case "$seed" in *[!0-9]*)
    echo "table3.sh: SEEDS=$SEEDS: $seed is not a whole number; give seeds as e.g. SEEDS=\"1 2 3\"" >&2; exit 2;;
  esac
done
case ",$DECODE_HPARAMS," in *,beam_size=*|*,alpha=*)
  echo "table3.sh: DECODE_HPARAMS=$DECODE_HPARAMS: beam_size and alpha are Table 3's protocol ($PROTOCOL); leave them out" >&2; exit 2;;
esac
# The rows come from bench/table3_rows.py, the one place they are defined; an unknown name stops here.
# shellcheck disable=SC2086  # ROWS is a list of names
plan=$("$BIN/python" "$HERE/table3_rows.py" $ROWS 2>&1) || { echo "table3.sh: $(tail -n 1 <<<"$plan")" >&2; exit 2; }
plan=$(grep -P '^\S+\t\S+\t\d+$' <<<"$plan")  # the plan's lines, without any start-up line of Python's

CORPUS=$(cd "$CORPUS" && pwd)
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
started=$(date +%s)
echo "== Table 3 in miniature: $HPARAMS_SET${HPARAMS:+ (+ $HPARAMS)}, rows $(cut -f1 <<<"$plan" | tr '\n' ' ')seeds $SEEDS, $TRAIN_STEPS updates (× the row's factor)"
echo "== $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git -C "$HERE" rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) CPUs"

if [ -f "$WORK/data/datagen.done" ] && [ "$(cat "$WORK/data/datagen.done")" != "$CORPUS" ]; then
  echo "table3.sh: $WORK/data holds the shards of $(cat "$WORK/data/datagen.done"), not CORPUS=$CORPUS; name another WORK" >&2
  exit 2
fi
if [ ! -f "$WORK/data/datagen.done" ]; then  # written after the shards: a datagen cut short is redone whole
  rm -rf "$WORK/data" "$WORK/tmp"
  mkdir -p "$WORK/tmp"
  ln -s "$CORPUS/train.en" "$WORK/tmp/train.src"; ln -s "$CORPUS/train.de" "$WORK/tmp/train.tgt"
  ln -s "$CORPUS/val.en" "$WORK/tmp/dev.src";     ln -s "$CORPUS/val.de" "$WORK/tmp/dev.tgt"
  "$BIN/t2t-datagen" --problem=translate_files --data_dir="$WORK/data" --tmp_dir="$WORK/tmp"
  echo "$CORPUS" > "$WORK/data/datagen.done"
  echo "== datagen: $(($(date +%s) - started)) s"
fi

# The plan on descriptor 3, so that no tool in the loop can read the rows after its own from standard input.
while IFS=$'\t' read -r -u 3 row overrides factor; do
  [ "$overrides" != - ] || overrides=""
  overrides=$overrides${overrides:+${HPARAMS:+,}}$HPARAMS
  steps=$((TRAIN_STEPS * factor))
  for seed in $SEEDS; do
    run="$WORK/$row/seed$seed"
    recipe="$HPARAMS_SET ${overrides:-(no overrides)}, $steps updates, seed $seed"
    # A directory of another recipe (a smoke run's TRAIN_STEPS or HPARAMS) is neither resumed nor counted as done.
    if [ -f "$run/recipe.txt" ] && [ "$(cat "$run/recipe.txt")" != "$recipe" ]; then
      echo "table3.sh: $run holds a run of $(cat "$run/recipe.txt"), not $recipe; name another WORK (or set TRAIN_STEPS and HPARAMS as that run did)" >&2
      exit 2
    fi
    if [ -f "$run/result.json" ]; then
      echo "== $row seed $seed: finished ($run/result.json), not retrained"
      continue
    fi
    mkdir -p "$run"
    echo "$recipe" > "$run/recipe.txt"
    echo "== $row seed $seed: ${overrides:-no overrides}, $steps updates, in $run"
    row_started=$(date +%s)
    "$BIN/t2t-trainer" --problem=translate_files --hparams_set="$HPARAMS_SET" --hparams="$overrides" \
      --data_dir="$WORK/data" --output_dir="$run/train" --train_steps="$steps" --random_seed="$seed" \
      --save_checkpoints_steps="$SAVE_STEPS" --local_eval_frequency="$LOCAL_EVAL_FREQUENCY" --eval_steps=0 \
      2>&1 | tee -a "$run/train.log"
    echo "$(($(date +%s) - row_started))" >> "$run/train_seconds"  # one line per attempt, summed in result.json
    "$BIN/t2t-decoder" --problem=translate_files --data_dir="$WORK/data" --output_dir="$run/train" \
      --decode_hparams="$PROTOCOL,$DECODE_HPARAMS" --decode_from_file="$CORPUS/val.en" --decode_to_file="$run/val.decodes"
    "$BIN/t2t-bleu" --translation="$run/val.decodes" --reference="$CORPUS/val.de" | tee "$run/bleu.txt"
    "$BIN/python" "$HERE/table3.py" result --row="$row" --seed="$seed" --train_steps="$steps" \
      --hparams_set="$HPARAMS_SET" --hparams="$overrides" --decode_hparams="$PROTOCOL,$DECODE_HPARAMS" "$run"
    echo "== $row seed $seed: $(($(date +%s) - row_started)) s (total $(($(date +%s) - started)) s)"
  done
done 3<<<"$plan"
echo "== done: $(($(date +%s) - started)) s; the table: $BIN/python $HERE/table3.py table $WORK"
