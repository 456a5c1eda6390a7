"""t2t-translate-all: translate a file with every checkpoint of a run, as tensor2tensor's t2t-translate-all.

    t2t-translate-all --problem=translate_files --data_dir=D --model_dir=TRAIN --source=val.en \
        --translations_dir=TRAIN/translations --decode_hparams="beam_size=4,alpha=0.6" \
        --min_steps=1000 --wait_minutes=15 --average_last_n=5
    t2t-bleu --translations_dir=TRAIN/translations --reference=val.de --event_dir=TRAIN/translations

One file per step (`val.en-4000`), skipping steps already translated, so it can run
beside t2t-trainer (--wait_minutes) and be restarted at any time. The model and
decoding settings are t2t-decoder's: hparams.json beside the checkpoints unless
--hparams_set is given, and --decode_hparams.
"""

import os

from absl import flags as absl_flags

from t2t_lite.cli import distinct_paths, flags
from t2t_lite.data import text_lines
from t2t_lite.decode import encoded_inputs
from t2t_lite.insights import translate_all

FLAGS = flags.FLAGS

absl_flags.DEFINE_string("source", None, "UTF-8 file of source sentences, one per line.")
absl_flags.DEFINE_float(
    "wait_minutes",
    0,
    "Keep polling for new checkpoints until none has come for this long; 0: one pass over the checkpoints there now.",
)
absl_flags.DEFINE_integer(
    "average_last_n",
    0,
    "Also translate with the average of the last N checkpoints, written to --translations_dir/avg<N>/ (0: no average).",
)


def main(argv):
    del argv
    flags.prepare()
    flags.require("problem", "data_dir", "model_dir", "source", "translations_dir")
    model_dir, source = flags.existing_dir("model_dir"), flags.existing_file("source")
    translations_dir = flags.writable_dir("translations_dir")
    distinct_paths.check_distinct(
        {"--model_dir": model_dir, "--source": source},
        {
            "--translations_dir": translations_dir,
            f"--translations_dir's avg{FLAGS.average_last_n}": FLAGS.average_last_n
            and os.path.join(translations_dir, f"avg{FLAGS.average_last_n}"),
        },
    )
    problem = flags.problem_from_flags()
    flags.check_model_flag()
    if FLAGS.average_last_n < 0 or FLAGS.wait_minutes < 0:
        raise flags.UsageError("--average_last_n and --wait_minutes must be ≥ 0.")
    hparams = flags.trained_hparams(model_dir)
    settings = flags.decode_settings(hparams, problem)
    try:
        lines = text_lines.read_lines(source)
    except ValueError as error:  # not UTF-8: names file and line
        raise flags.UsageError(f"--source: {error}") from None
    try:
        translator = translate_all.CheckpointTranslator(problem, hparams, FLAGS.data_dir, FLAGS.model, settings)
        translate_all.translate_all(
            translator,
            model_dir,
            source,
            lines,
            translations_dir,
            min_steps=max(FLAGS.min_steps, 0),  # -1, the shared default: every checkpoint
            wait_minutes=FLAGS.wait_minutes,
            average_last_n=FLAGS.average_last_n,
        )
    except encoded_inputs.InputTooLongError as error:
        raise flags.UsageError(f"--source={source}: {error}") from None
    except FileNotFoundError as error:  # no checkpoints, a missing vocabulary, a problem.json that disagrees
        raise flags.UsageError(str(error)) from None
