"""t2t-bleu: BLEU and chrF of a detokenized translation file against its reference (§6.1).

    t2t-bleu --translation=newstest2014.decoded.de --reference=newstest2014.de
    t2t-bleu --translations_dir=TRAIN/translations --reference=val.de --event_dir=TRAIN/translations

With --translation it prints sacreBLEU with its signature (the figure to report), chrF,
and the BLEU of the paper's tokenized evaluation (`t2t_lite.evaluate.bleu`), which is not
comparable with sacreBLEU. With --translations_dir (the files of t2t-translate-all, one
per checkpoint step) it prints a table step → sacreBLEU, chrF2, writes them as
TensorBoard scalars to --event_dir if given, and plots sacreBLEU against step (PNG).
"""

import os

from absl import flags as absl_flags

from t2t_lite.cli import distinct_paths, flags
from t2t_lite.evaluate import bleu

FLAGS = flags.FLAGS

absl_flags.DEFINE_string("translation", None, "File of detokenized translations, one sentence per line.")
absl_flags.DEFINE_string("reference", None, "File of reference translations, line i translating the same source.")
absl_flags.DEFINE_string(
    "event_dir", None, "With --translations_dir: also write the scores as TensorBoard scalars here."
)
absl_flags.DEFINE_string(
    "plot_file",
    None,
    "With --translations_dir: the PNG of sacreBLEU against step "
    "(default: sacrebleu_by_step.png in --translations_dir).",
)


def main(argv):
    del argv
    flags.prepare()
    flags.require("reference")
    if bool(FLAGS.translation) == bool(FLAGS.translations_dir):
        raise flags.UsageError("Give either --translation (one file) or --translations_dir (a file per step).")
    if FLAGS.translation and (FLAGS.event_dir or FLAGS.plot_file):
        raise flags.UsageError(
            "--event_dir and --plot_file score a --translations_dir by step; with --translation leave them out."
        )
    reference = flags.existing_file("reference")
    try:
        if FLAGS.translation:
            distinct_paths.check_distinct({"--reference": reference, "--translation": FLAGS.translation})
            print(bleu.evaluate_files(flags.existing_file("translation"), reference))
        else:
            _score_steps(reference)
    except (OSError, ValueError) as error:  # unreadable, not UTF-8 (file:line), or line counts differ
        raise flags.UsageError(str(error)) from None


def _score_steps(reference):
    translations_dir = flags.existing_dir("translations_dir")
    event_dir = flags.writable_dir("event_dir") if FLAGS.event_dir else None
    if FLAGS.plot_file:
        plot_file = flags.writable_file("plot_file")
    else:
        plot_file = os.path.join(translations_dir, "sacrebleu_by_step.png")
    plot_flag = "--plot_file" if FLAGS.plot_file else "--translations_dir's sacrebleu_by_step.png"
    read = {f"--translations_dir's {os.path.basename(path)}": path for _, _, path in bleu.step_files(translations_dir)}
    # --event_dir may be --translations_dir: its event files are named apart from translations.
    distinct_paths.check_distinct({"--reference": reference, **read}, {plot_flag: plot_file})
    scores = bleu.evaluate_steps(translations_dir, reference)
    print(bleu.format_table(scores))
    if event_dir:
        bleu.write_events(scores, event_dir)
        print(f"Wrote TensorBoard scalars sacreBLEU and chrF2 to {event_dir}")
    try:
        bleu.plot_steps(scores, plot_file)
        print(f"Wrote the plot of sacreBLEU against step to {plot_file}")
    except ImportError as error:
        print(f"{error}: no plot written.")
