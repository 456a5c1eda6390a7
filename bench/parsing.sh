#!/usr/bin/env bash
# The parsing recipe (§6.3, Table 4 in miniature), from treebank files to bracket F1, as one command:
#
#     CORPUS=../shared/data/ptb_sample/combined bash bench/parsing.sh
#
# CORPUS holds Penn Treebank .mrg files: NLTK's 10 % sample of the WSJ (wsj_0001.mrg ... wsj_0199.mrg),
# or the LDC release's parsed/mrg/wsj directory (sections NN/, split 02-21 / 22 / 23 as §6.3).
# The steps are the ones a user types (docs/results.md, Parsing): t2t-datagen linearizes the trees and
# learns the vocabulary (parsing_wsj4k), t2t-trainer trains TRAIN_STEPS updates of
# transformer_parsing_small (dev perplexity logged, nothing chosen on it), t2t-decoder parses the test
# and dev splits with §6.3's search (beam 21, α 0.3, output length input + 300) and, for the test split,
# with beam 4 and greedily too, and t2t-parse-eval scores each as EVALB does against the split's
# gold trees. Two baselines are scored by the same tool on test (bench/parse_baselines.py).
# The recipe is defined by the hparams set, the update count and the seed; the time is the host's.
#
# Knobs (environment): WORK (default ./parsing-run), PROBLEM (parsing_wsj4k; parsing_wsj is §6.3's 16K
# vocabulary), HPARAMS_SET (transformer_parsing_small), HPARAMS (overrides, "k=v,..."), TRAIN_STEPS
# (2000, the recipe's), SEED (1), SAVE_STEPS (500), LOCAL_EVAL_FREQUENCY (500), BEAMS ("21 4 1": the
# test split's beam sizes; the first is also used on dev), DECODE_HPARAMS (batch_size=16,xla=true),
# TRAIN_PERCENT (100; a learning curve's point p < 100 trains on p % of the training trees, spread evenly
# (problems/parsing_wsj.py), through a problem the script registers in WORK/usr with --t2t_usr_dir,
# PROBLEM_trainP; dev, test and the decoding stay the same, and the baselines learn from the same share).
# A WORK that holds a run is resumed: datagen reuses its shards, the trainer continues from its last
# checkpoint (or finds it finished), and each decode or score already written is kept.
# Each phase prints its wall-clock seconds and the total.
set -euo pipefail

: "${CORPUS:?set CORPUS to a directory of Penn Treebank .mrg files (e.g. ../shared/data/ptb_sample/combined)}"
WORK=${WORK:-./parsing-run}
PROBLEM=${PROBLEM:-parsing_wsj4k}
HPARAMS_SET=${HPARAMS_SET:-transformer_parsing_small}
HPARAMS=${HPARAMS:-}
TRAIN_STEPS=${TRAIN_STEPS:-2000}
SEED=${SEED:-1}
SAVE_STEPS=${SAVE_STEPS:-500}
LOCAL_EVAL_FREQUENCY=${LOCAL_EVAL_FREQUENCY:-500}
BEAMS=${BEAMS:-21 4 1}
TRAIN_PERCENT=${TRAIN_PERCENT:-100}
DECODE_HPARAMS=${DECODE_HPARAMS:-batch_size=16,xla=true}
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${BIN:-$HERE/../.venv/bin}

compgen -G "$CORPUS/*.mrg" >/dev/null || compgen -G "$CORPUS/*/*.mrg" >/dev/null || {
  echo "parsing.sh: no .mrg files in $CORPUS or its subdirectories (CORPUS must hold Penn Treebank trees)" >&2; exit 2; }
for knob in TRAIN_STEPS SAVE_STEPS LOCAL_EVAL_FREQUENCY; do
  case "${!knob}" in ''|*[!0-9]*|0*) echo "parsing.sh: $knob=${!knob}: give a positive whole number" >&2; exit 2;; esac
done
[[ "$TRAIN_PERCENT" =~ ^[1-9][0-9]*$ ]] && [ "$TRAIN_PERCENT" -le 100 ] || {
  echo "parsing.sh: TRAIN_PERCENT=$TRAIN_PERCENT: give the share of the training trees as a whole number of percent, 1 to 100" >&2; exit 2; }
for beam in $BEAMS; do
  case "$beam" in ''|*[!0-9]*|0*) echo "parsing.sh: BEAMS=\"$BEAMS\": give positive whole numbers (1 = greedy)" >&2; exit 2;; esac
done
CORPUS=$(cd "$CORPUS" && pwd)
mkdir -p "$WORK/tmp"
WORK=$(cd "$WORK" && pwd)

started=$(date +%s)
phase_started=$started
phase() {  # phase NAME: print the seconds since the previous phase ended
  local now; now=$(date +%s)
  echo "== $1: $((now - phase_started)) s (total $((now - started)) s)"
  phase_started=$now
}

PROBLEM_FLAGS=(--problem="$PROBLEM")
if [ "$TRAIN_PERCENT" != 100 ]; then  # a share of the training trees is a property of the problem: a subclass
  base=$PROBLEM PROBLEM=${PROBLEM}_train$TRAIN_PERCENT
  mkdir -p "$WORK/usr/parsing_problem"
  cat > "$WORK/usr/parsing_problem/__init__.py" <<EOF
from t2t_lite import registry
from t2t_lite.registry import register_problem


@register_problem(name="$PROBLEM")
class ParsingShare(type(registry.problem("$base"))):
    """$base trained on $TRAIN_PERCENT % of its training trees, as bench/parsing.sh's TRAIN_PERCENT set it."""

    train_percent = $TRAIN_PERCENT
EOF
  PROBLEM_FLAGS=(--problem="$PROBLEM" --t2t_usr_dir="$WORK/usr/parsing_problem")
fi

echo "== Parsing: $PROBLEM, $HPARAMS_SET ${HPARAMS:+($HPARAMS) }seed $SEED, $TRAIN_STEPS updates, test beams $BEAMS"
echo "== $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git -C "$HERE" rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) CPUs"
[ -e "$WORK/tmp/wsj" ] || ln -s "$CORPUS" "$WORK/tmp/wsj"
"$BIN/t2t-datagen" "${PROBLEM_FLAGS[@]}" --data_dir="$WORK/data" --tmp_dir="$WORK/tmp"
phase datagen

"$BIN/t2t-trainer" "${PROBLEM_FLAGS[@]}" --hparams_set="$HPARAMS_SET" --hparams="$HPARAMS" \
  --data_dir="$WORK/data" --output_dir="$WORK/train" --train_steps="$TRAIN_STEPS" \
  --save_checkpoints_steps="$SAVE_STEPS" --local_eval_frequency="$LOCAL_EVAL_FREQUENCY" \
  --eval_steps=0 --random_seed="$SEED" 2>&1 | tee -a "$WORK/train.log"
phase training

decode() {  # decode SPLIT BEAM: parse the split, then score it; both kept when already written
  local split=$1 beam=$2 base="$WORK/$1.beam$2"
  if [ ! -s "$base.decodes" ]; then
    local timed=()  # GNU time adds the decoder's peak memory where it is installed
    [ -x /usr/bin/time ] && timed=(/usr/bin/time -f "peak memory %M KiB" -o "$base.memory")
    local start; start=$(date +%s)
    "${timed[@]}" "$BIN/t2t-decoder" "${PROBLEM_FLAGS[@]}" --data_dir="$WORK/data" --output_dir="$WORK/train" \
      --decode_split="$split" --decode_hparams="beam_size=$beam,$DECODE_HPARAMS" --decode_to_file="$base.decodes"
    echo "$(wc -l <"$base.inputs") sentences in $(($(date +%s) - start)) s${timed[*]:+, $(cat "$base.memory")}" \
      >"$base.speed"
  fi
  echo "== $split, beam $beam: $(cat "$base.speed")"
  [ -s "$base.f1" ] || "$BIN/t2t-parse-eval" --decoded_trees="$base.decodes" --gold_trees="$base.targets" >"$base.f1"
  cat "$base.f1"
}

first_beam=${BEAMS%% *}
for beam in $BEAMS; do decode test "$beam"; phase "test, beam $beam"; done
decode dev "$first_beam"
phase "dev, beam $first_beam"

test_base="$WORK/test.beam$first_beam"
for baseline in right_branching frequent_shape; do
  [ -s "$WORK/test.$baseline.decodes" ] || TF_CPP_MIN_LOG_LEVEL=3 "$BIN/python" "$HERE/parse_baselines.py" --baseline="$baseline" \
    --inputs="$test_base.inputs" --output="$WORK/test.$baseline.decodes" \
    --data_dir="$WORK/data" "${PROBLEM_FLAGS[@]}"
  [ -s "$WORK/test.$baseline.f1" ] || "$BIN/t2t-parse-eval" --decoded_trees="$WORK/test.$baseline.decodes" \
    --gold_trees="$test_base.targets" >"$WORK/test.$baseline.f1"
  echo "== test, $baseline:"; cat "$WORK/test.$baseline.f1"
done
phase baselines
